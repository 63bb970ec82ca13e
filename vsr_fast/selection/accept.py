"""escalate's accept checks, read from one answer's bytes as the upstream sent them (whole or SSE).

``confidence`` reads Chat's token logprobs (``choices[0].logprobs.content``, in a
whole answer or across a stream's chunks): ``avg_logprob`` is their mean,
``margin`` the mean gap between each chosen token and its runner-up in
``top_logprobs``. An answer without logprobs fails the check, so the next
candidate is asked. ``refusal: false`` accepts an answer that does not refuse: none the model marked as a
refusal (Chat's ``refusal``, message or delta, or a ``content_filter`` finish, Messages' ``refusal`` stop
reason, a Responses ``refusal`` content part), nor one whose text opens with a refusal
(``selection.refusal``: "I'm sorry, but I can't help with that").
``systemone`` is the decision model's ``answer_check``, asked by the Looper about
a readable answer's text (``answer_text``); here it only requires a readable answer.
"""
from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from ..config.algorithm import Accept
from ..errors import VsrError
from ..protocol.translate import BY_FORMAT, GUARDED
from .refusal import refusal_text

_DECODE = msgspec.json.Decoder()


def _docs(body: bytes, streamed: bool) -> list[Any]:
    if not streamed:
        try:
            return [_DECODE.decode(body)]
        except msgspec.DecodeError:
            return []
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data and data != b"[DONE]":
                try:
                    out.append(_DECODE.decode(data))
                except msgspec.DecodeError:
                    continue
    return out


def _choices(doc: Any) -> list[Any]:
    choices = doc.get("choices") if isinstance(doc, dict) else None
    return choices if isinstance(choices, list) else []


def token_logprobs(docs: list[Any]) -> list[dict]:
    tokens: list[dict] = []
    for doc in docs:
        for choice in _choices(doc)[:1]:
            lp = choice.get("logprobs") if isinstance(choice, dict) else None
            content = lp.get("content") if isinstance(lp, dict) else None
            if isinstance(content, list):
                tokens += [t for t in content if isinstance(t, dict) and isinstance(t.get("logprob"), (int, float))]
    return tokens


def confidence(tokens: list[dict], method: str, weights: tuple[float, float] = (0.5, 0.5)) -> float | None:
    """The answer's confidence by ``method`` from its token logprobs; None without logprobs."""
    if not tokens:
        return None
    if method == "avg_logprob":
        return sum(t["logprob"] for t in tokens) / len(tokens)
    if method == "hybrid":
        lp = min(1.0, max(0.0, (confidence(tokens, "avg_logprob") + 3.0) / 3.0))
        gap = confidence(tokens, "margin")
        margin = 1.0 - math.exp(-gap / 3.0) if gap > 0 else 0.0
        return weights[0] * lp + weights[1] * margin
    gaps = []
    for t in tokens:
        others = [a["logprob"] for a in t.get("top_logprobs") or []
                  if isinstance(a, dict) and a.get("token") != t.get("token") and isinstance(a.get("logprob"), (int, float))]
        gaps.append(t["logprob"] - max(others) if others else 0.0)
    return sum(gaps) / len(gaps)


def _calls_only(docs: list[Any]) -> bool:
    """Whether a Chat answer (whole or streamed) is tool calls with no text."""
    calls = False
    for doc in docs:
        for choice in _choices(doc)[:1] if isinstance(doc, dict) else ():
            part = (choice.get("message") or choice.get("delta") or {}) if isinstance(choice, dict) else {}
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("content"), str) and part["content"].strip():
                return False
            calls = calls or bool(part.get("tool_calls"))
    return calls


def refused(docs: list[Any]) -> bool:
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        for choice in _choices(doc):
            if not isinstance(choice, dict):
                continue
            part = choice.get("message") or choice.get("delta") or {}
            if isinstance(part, dict) and part.get("refusal"):
                return True
            if choice.get("finish_reason") == "content_filter":
                return True
        if doc.get("stop_reason") == "refusal" or (doc.get("delta") or {}).get("stop_reason") == "refusal":
            return True
        response = doc.get("response") if isinstance(doc.get("response"), dict) else doc
        for item in response.get("output") or []:
            for part in (item.get("content") or []) if isinstance(item, dict) else []:
                if isinstance(part, dict) and part.get("type") == "refusal":
                    return True
    return False


def defect(docs: list[Any]) -> str | None:
    """Why an answer cannot stand whatever its check says: ``malformed`` (nothing readable, or a stream with no
    finish), ``truncated`` (length or content_filter; Messages' max_tokens; an incomplete Response) or
    ``blank`` (a Chat answer with no text, tool call or refusal: e.g. one that only reasoned)."""
    if not docs:
        return "malformed"
    finish, text, other = None, "", False
    for doc in docs:
        if not isinstance(doc, dict):
            return "malformed"
        if doc.get("stop_reason") == "max_tokens" or (doc.get("delta") or {}).get("stop_reason") == "max_tokens":
            return "truncated"
        response = doc.get("response") if isinstance(doc.get("response"), dict) else doc
        if response.get("status") == "incomplete":
            return "truncated"
        for choice in _choices(doc)[:1]:
            if not isinstance(choice, dict):
                return "malformed"
            finish = choice.get("finish_reason") or finish
            part = choice.get("message") or choice.get("delta") or {}
            if isinstance(part, dict):
                text += part.get("content") or "" if isinstance(part.get("content"), str) else ""
                other = other or bool(part.get("tool_calls") or part.get("refusal"))
    chat = any(_choices(d) for d in docs)
    if not chat:
        return None
    if finish in ("length", "content_filter"):
        return "truncated"
    if finish is None:
        return "malformed"
    if not text.strip() and not other:
        return "blank"
    return None


def accepted(accept: Accept, body: bytes, streamed: bool, api_format: str) -> tuple[bool, str]:
    """Whether the answer passes the check, and why (for the trace and the record); ``api_format`` is the
    answering model's, to read the answer's text."""
    docs = _docs(body, streamed)
    broken = defect(docs)
    if broken is not None:
        return False, broken
    if accept.confidence is not None and accept.confidence.method == "self_verify":
        return True, "readable"            # the model's own rating follows (the Looper asks it)
    if accept.confidence is not None:
        c = accept.confidence
        value = confidence(token_logprobs(docs), c.method, (c.logprob_weight, c.margin_weight))
        if value is None:
            if _calls_only(docs):
                # OpenAI rates no token of a tool call: nothing says the call is unsure, and rejecting it would
                # call every candidate on each of an agent's tool-call turns.
                return True, f"{c.method}: a tool call, no token rated"
            return False, f"{c.method}: no logprobs"
        return value >= c.gte, f"{c.method}={value:.3f}"
    if accept.systemone is not None:
        return True, "readable"
    if refused(docs):
        return False, "refusal"
    phrase = refusal_text(answer_text(body, api_format, streamed))
    if phrase is not None:
        return False, f"refusal text ({phrase})"
    return True, "no refusal"


def answer_text(body: bytes, api_format: str, streamed: bool) -> str | None:
    """The text of one answer as its backend wrote it (api_format), whole or streamed; None when unreadable."""
    fmt = BY_FORMAT.get(api_format)
    if fmt is None:
        return None
    try:
        if streamed:
            return GUARDED.stream_text(GUARDED.stream_events(fmt, body))
        return GUARDED.answer_text(fmt, body)
    except (msgspec.DecodeError, msgspec.ValidationError, VsrError):   # unreadable, or a failure answer
        return None


SELF_VERIFY = """Rate how well an AI assistant answered a question.

Question: {question}

Answer: {answer}

Give a score from 0.0 (wrong, irrelevant or harmful) to 1.0 (correct, complete and clear); 0.8 for mostly
correct with small gaps, 0.6 for partly correct, 0.4 for significant errors, 0.2 for mostly wrong.
Reply with only a JSON object: {{"confidence": <score>, "reason": "<a few words>"}}"""
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def self_rating(text: str) -> float | None:
    """The confidence a model gave its own answer: the JSON's ``confidence`` (clamped to 0..1), else a bare
    number in 0..1; None when the reply holds neither."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            value = msgspec.json.decode(text[start:end + 1].encode()).get("confidence")
        except (msgspec.DecodeError, AttributeError):
            value = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return min(1.0, max(0.0, float(value)))
    found = _NUMBER.search(text)
    if found is not None and 0.0 <= float(found.group()) <= 1.0:
        return float(found.group())
    return None
