"""The context plugin on the request path (spec 5.7): compress long tool outputs and history, retrieve each source's items,
inject them into the request as the client wrote it (so every candidate's body carries them), and write the
turn to the user's memory after the response.

A source recalls from its store (in a worker thread: embedding and Redis
block), then its judge, if any, keeps what is relevant to the latest user
message (``pipeline.match``: one System One call, ``max_candidates`` read in
recall order). A failed source follows its ``on_failure``. Memory is the
caller's own: the identity the listener or key established, never a name the
request body gives; an anonymous caller has none.
"""
from __future__ import annotations

import logging
import re
import time

import msgspec
import trio

from ...events.redis_client import errors as redis_errors
from ..._ext.bm25 import BM25Index, tokenize
from ...errors import ContextFailed, EmbeddingFailed, MatchFailed
from ...events.capture import AnswerCapture
from ...events.memory_store import MemoryStore
from ...events.vector_store import VectorStore
from ...plugins import context as cp
from ...plugins.system_prompt import SystemPrompt
from ...plugins.unmask import Restorer
from . import history
from .history import CHARS_PER_TOKEN
from .exchange import Exchange
from .match import judge, recalled

log = logging.getLogger("vsr_fast.context")

_DECODE = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder()
_NATIVE = {"chat": "openai", "messages": "anthropic", "responses": "responses"}
TOOL_NAME = "vsr_context"
MEMORY_ANSWER_BYTES = 1 << 20       # the answer text a memory keeps is read from at most this much of it
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class Turn:
    """A turn to write to the user's memory once the answer is sent: its store, user, message and the answer's
    bytes as the record keeps them (masked: ``remember`` puts the request's values back)."""

    __slots__ = ("answer", "store", "text", "user")

    def __init__(self, store: MemoryStore, user: str, text: str) -> None:
        self.store, self.user, self.text = store, user, text
        self.answer = AnswerCapture(MEMORY_ANSWER_BYTES)


async def assemble(ex: Exchange) -> None:
    """Compress the decision's long tool outputs, retrieve and inject its context sources into ``ex.req``; arm
    the memory write."""
    r, req = ex.route, ex.req
    assert r is not None and req is not None
    policy = ex.state.policies.context(r.recipe, r.decision)
    fmt = _NATIVE.get(ex.api)
    if policy is None or fmt is None:
        return
    text = ex.adapter.canonical(req).text
    user = ex.state.identity(ex.scope).user
    body = _DECODE.decode(req.raw)
    if not isinstance(body, dict):
        return
    changes = await _compress(ex, body, fmt, text, policy.compress, len(req.raw)) if policy.compress else []
    found: list[tuple[str, list[str]]] = []
    for source in policy.sources:
        try:
            items = await (_rag(ex, source, text) if source.type == "rag" else _memory(ex, source, text, user))
        except (EmbeddingFailed, MatchFailed, *redis_errors(), OSError) as exc:
            why = exc.message if isinstance(exc, (EmbeddingFailed, MatchFailed)) else f"{type(exc).__name__}: {exc}"
            log.warning("context %s source failed (on_failure: %s): %s", source.type, source.on_failure, why)
            ex.state.metrics.context_sources.inc(source.type, "failed")
            if source.on_failure == "block":
                raise ContextFailed(f"the context {source.type} source failed: {why}") from None
            if source.on_failure == "warn":
                ex.codes.append(f"context_unavailable;source={source.type}")
            continue
        ex.state.metrics.context_sources.inc(source.type, "injected" if items else "empty")
        if items:
            found.append((source.type, items))
    if policy.writes_memory and user is not None and text and ex.state.memories is not None:
        ex.rec.turn = Turn(ex.state.memories, user, text)
    thinking = _thinks(ex, body, fmt) if found else False
    for kind, items in found:
        text = render(kind, items)
        mode = inject(body, fmt, kind, text, policy.injection, thinking=thinking)
        if mode != "tool_role":
            ex.system_context += (text,)
        changes.append(f"context: {len(items)} {kind} items ({mode})")
    if changes:
        ex.req = ex.adapter.with_raw(req, _ENCODE.encode(body))
        ex.rec.plugins_applied(None, changes)


def _thinks(ex: Exchange, body: dict, fmt: str) -> bool:
    """Whether an anthropic-format candidate's request will have extended thinking on: the decision's
    generation says so, or, where it says nothing, a Messages client asked for it (translation from another
    format carries no thinking); only a candidate that reasons gets either."""
    r = ex.route
    assert r is not None
    if not any(c.api_format == "anthropic" and c.reasons for c in r.candidates):
        return False
    shaping = ex.state.policies.shaping(r.recipe, r.decision)
    switch = shaping.thinking() if shaping is not None else None
    if switch is not None:
        return switch
    own = body.get("thinking")
    return fmt == "anthropic" and isinstance(own, dict) and own.get("type") != "disabled"


async def _compress(ex: Exchange, body: dict, fmt: str, text: str, policy: cp.Compression,
                    size: int) -> list[str]:
    """Shrink each long tool output to its sentences most relevant to ``text``, then drop the least relevant
    earlier turns while the request is over its budget; what changed."""
    r = ex.route
    assert r is not None
    budget = policy.budget([c.context_window_size for c in r.candidates if c.context_window_size],
                           _output_limit(body, fmt))
    over = budget is not None and size // CHARS_PER_TOKEN > budget
    if not text or not (policy.always or over):
        return []       # auto: only a request over its known budget is compressed
    changes = await _compress_outputs(ex, body, fmt, text, policy) if policy.tool_outputs is not None else []
    if budget is None:
        return changes
    dropped, tokens = history.fit(body, fmt, text, budget)
    if dropped:
        changes.append(f"context: dropped {dropped} earlier history turns, least relevant first (~{tokens} tokens "
                       f"now, budget {budget})")
    if tokens > budget:
        ex.codes.append(f"context_over_budget;tokens={tokens};budget={budget}")
    return changes


def _output_limit(body: dict, fmt: str) -> int | None:
    """The request's own output limit, in tokens: what ``reserve_output_tokens: auto`` reserves."""
    keys = {"openai": ("max_completion_tokens", "max_tokens"), "anthropic": ("max_tokens",),
            "responses": ("max_output_tokens",)}[fmt]
    return next((v for k in keys if isinstance(v := body.get(k), int) and not isinstance(v, bool)), None)


async def _compress_outputs(ex: Exchange, body: dict, fmt: str, text: str, policy: cp.Compression) -> list[str]:
    target = policy.tool_outputs
    assert target is not None
    changes = []
    for place in tool_outputs(body, fmt):
        output = place.text
        if len(output) // CHARS_PER_TOKEN < target.min_tokens:
            continue
        try:
            kept = await _extract(ex, policy, text, output, target.target_tokens)
        except MatchFailed as exc:
            if policy.fail_closed:
                raise ContextFailed(f"context.compress could not judge a tool output: {exc.message}") from None
            continue
        place.text = kept
        changes.append(f"context: compressed a tool output from ~{len(output) // CHARS_PER_TOKEN} to "
                       f"~{len(kept) // CHARS_PER_TOKEN} tokens")
    return changes


async def _extract(ex: Exchange, policy: cp.Compression, query: str, output: str, budget_tokens: int) -> str:
    """The sentences of ``output`` worth keeping, in their order, within ``budget_tokens``; omissions marked."""
    sentences = [s for s in _SENTENCE.split(output) if s.strip()]
    match = policy.match
    order = list(range(len(sentences)))
    started = time.perf_counter()
    if match.recall is not None:        # bm25: the prefilter for the judge's candidates
        cap = match.judge.cap if match.judge is not None else match.recall.top_k or len(sentences)
        best = BM25Index([tokenize(s) for s in sentences]).top_k(tokenize(query), match.recall.top_k or cap)
        order = [i for i, score in best if match.recall.min_similarity is None or score >= match.recall.min_similarity]
        recalled(ex, cp.COMPRESS, "bm25", len(order), time.perf_counter() - started)
    if match.judge is not None and order:
        order = [order[i] for i in await judge(ex, cp.COMPRESS, match.judge, query, [sentences[i] for i in order])]
    keep, used = set(), 0
    for i in order:
        cost = len(sentences[i]) // CHARS_PER_TOKEN + 1
        if used + cost > budget_tokens:
            continue
        keep.add(i)
        used += cost
    out, dropped = [], 0
    for i, sentence in enumerate(sentences):
        if i in keep:
            if dropped:
                out.append(f"[... {dropped} sentences omitted ...]")
                dropped = 0
            out.append(sentence.strip())
        else:
            dropped += 1
    if dropped:
        out.append(f"[... {dropped} sentences omitted ...]")
    return " ".join(out)


class _Place:
    """One tool output inside the request body, read and written where it sits."""

    __slots__ = ("holder", "key")

    def __init__(self, holder: dict, key: str) -> None:
        self.holder, self.key = holder, key

    @property
    def text(self) -> str:
        return self.holder[self.key]

    @text.setter
    def text(self, value: str) -> None:
        self.holder[self.key] = value


def tool_outputs(body: dict, fmt: str) -> list[_Place]:
    """Every text tool output of the request: Chat tool messages, Messages tool_result blocks (and their text
    parts), Responses function_call_output items."""
    places = []
    if fmt == "responses":
        items = body.get("input")
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
                places.append(_Place(item, "output"))
        return places
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        if fmt == "openai" and message.get("role") == "tool" and isinstance(message.get("content"), str):
            places.append(_Place(message, "content"))
        elif fmt == "anthropic" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                if isinstance(block.get("content"), str):
                    places.append(_Place(block, "content"))
                elif isinstance(block.get("content"), list):
                    places += [_Place(part, "text") for part in block["content"]
                               if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)]
    return places


async def _rag(ex: Exchange, source: cp.Retrieval, text: str) -> list[str]:
    store: VectorStore | None = ex.state.vectors
    if store is None or not text:
        return []
    recall = source.match.recall
    started = time.perf_counter()
    if recall is not None:
        hits = await trio.to_thread.run_sync(store.recall_sync, text, recall.method, recall.top_k,
                                             recall.min_similarity)
        chunks = [h.chunk for h in hits]
        recalled(ex, source.feature, recall.method, len(chunks), time.perf_counter() - started)
    else:       # a judge alone reads the chunks as listed, at most as many as it reads
        cap = source.match.judge.cap if source.match.judge is not None else None
        chunks = await trio.to_thread.run_sync(store.listed_sync, cap + 1 if cap is not None else None)
    texts = [c.text for c in chunks]
    if source.match.judge is not None and texts:
        texts = [texts[i] for i in await judge(ex, source.feature, source.match.judge, text, texts)]
    return texts


async def _memory(ex: Exchange, source: cp.Retrieval, text: str, user: str | None) -> list[str]:
    store: MemoryStore | None = ex.state.memories
    if store is None or user is None or not text:
        return []           # an anonymous caller has no memory: the router cannot tell such callers apart
    recall = source.match.recall
    started = time.perf_counter()
    if recall is not None:
        hits = await trio.to_thread.run_sync(store.recall_sync, user, text, recall.top_k, recall.min_similarity)
        texts = [m.text for _, m in hits]
        recalled(ex, source.feature, recall.method, len(texts), time.perf_counter() - started)
    else:       # newest first, as many as the judge reads (and one more, so a truncation is seen)
        cap = source.match.judge.cap if source.match.judge is not None else None
        texts = [m.text for m in await trio.to_thread.run_sync(store.newest_sync, user,
                                                               cap + 1 if cap is not None else None)]
    if source.match.judge is not None and texts:
        texts = [texts[i] for i in await judge(ex, source.feature, source.match.judge, text, texts)]
    return texts


async def remember(ex: Exchange) -> None:
    """After the answer: write the turn (the user's message and the answer's text, both as the client wrote and
    read them: with its own values where masking sent placeholders) to the user's memory."""
    turn = ex.rec.turn
    if turn is None or ex.status >= 400 or ex.req is None:
        return
    body = turn.answer.body()
    try:
        if ex.adapter.stream(ex.req):
            answer = ex.adapter.held_text(ex.adapter.held_events(body))
        else:
            answer = ex.adapter.answer_text(body)
    except Exception as exc:  # an answer we cannot read leaves the user's message alone worth keeping
        log.info("memory: the answer could not be read (%s); keeping the message alone", type(exc).__name__)
        answer = ""
    if answer and ex.masked_values:
        # The answer with this request's values, like the user's message: placeholders are numbered per request,
        # and masking numbers the memory afresh, with the rest, on each request that injects it.
        answer = Restorer({p: value for value, p in ex.masked_values.items()}).text(answer)
    memory = f"User: {turn.text}\nAssistant: {answer}" if answer else f"User: {turn.text}"
    try:
        await trio.to_thread.run_sync(turn.store.add_sync, turn.user, memory)
    except (EmbeddingFailed, *redis_errors()) as exc:
        log.warning("memory: the turn was not written: %s", exc)
        ex.state.metrics.memory_writes.inc("error")
    else:
        ex.state.metrics.memory_writes.inc("ok")


def render(kind: str, items: list[str]) -> str:
    head = ("Documents retrieved for this request:" if kind == "rag"
            else "What this user told you in earlier conversations (most relevant first):")
    return "\n\n".join([head, *(f"[{i}] {item}" for i, item in enumerate(items, 1))])


def inject(body: dict, fmt: str, kind: str, text: str, mode: str, *, thinking: bool = False) -> str:
    """Put ``text`` in ``body`` (the client's format): a tool exchange after the last user message, or the
    system prompt; how it went in.

    A request that declares no tools gets the system prompt: Anthropic refuses tool_use/tool_result blocks
    in a request that defines no tools, and Bedrock a toolUse without a toolConfig, whatever format the
    client wrote (the body is translated). Declaring vsr_context instead would let the model call a tool
    that no one runs, and ``tool_choice: none``, which would forbid that, is not every backend's.
    A request bound for Anthropic with thinking on (``thinking``) gets it too: the assistant message of the
    last tool exchange must then start with a thinking block, which only the model can write (it is signed).
    """
    if mode == "tool_role" and not body.get("tools"):
        mode = "system_prompt: the request declares no tools"
    elif mode == "tool_role" and thinking:
        mode = "system_prompt: thinking is on for an anthropic-format candidate"
    if mode != "tool_role":
        SystemPrompt("insert", text).apply(body, fmt)
        return mode
    call_id = f"{TOOL_NAME}_{kind}"
    arguments = _ENCODE.encode({"source": kind}).decode()
    if fmt == "openai":
        exchange = [{"role": "assistant", "content": None, "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": text}]
        _after_last_user(body, "messages", exchange, lambda m: m.get("role") == "user")
    elif fmt == "anthropic":
        tool_id = f"toolu_{call_id}"
        exchange = [{"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": TOOL_NAME,
                                                       "input": {"source": kind}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]}]
        _after_last_user(body, "messages", exchange, lambda m: m.get("role") == "user")
    else:
        if isinstance(body.get("input"), str):
            body["input"] = [{"role": "user", "content": body["input"]}]
        exchange = [{"type": "function_call", "call_id": call_id, "name": TOOL_NAME, "arguments": arguments},
                    {"type": "function_call_output", "call_id": call_id, "output": text}]
        _after_last_user(body, "input", exchange,
                         lambda m: m.get("role") == "user" and m.get("type", "message") == "message")
    return mode


def _after_last_user(body: dict, field: str, exchange: list[dict], is_user) -> None:
    items = body.get(field)
    if not isinstance(items, list):
        return
    last = max((i for i, m in enumerate(items) if isinstance(m, dict) and is_user(m)), default=len(items) - 1)
    items[last + 1:last + 1] = exchange


__all__ = ["Turn", "assemble", "inject", "remember", "render", "tool_outputs"]
