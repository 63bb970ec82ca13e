"""The pure parts of the executors that write an answer of their own (spec 5.6): ``ratings``, ``remom``, ``fusion``
and ``workflows``, as the public vLLM Semantic Router defines them.

Here: how calls are spread over candidates, the prompts that hand earlier answers
to the next call, and the Chat Completions answer (whole or SSE) an executor
returns. The calls themselves are the pipeline's (``server.pipeline.executors``).
An executor's answer is always written in Chat's shape; the client's own
protocol is reached by the ordinary translation, as for any ``openai`` model.
"""
from __future__ import annotations

import json
import math
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from ..config.algorithm import WorkflowFinal, WorkflowRole
from ..protocol import untooled


@dataclass(slots=True)
class Reply:
    """One call's usable result: the model that answered, its answer text, its token counts."""

    model: str
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    agent: str | None = None          # workflows: "step:index:model", what an access list names
    served_as: str | None = None      # the answer's own ``model``, as its provider named it (``provider_model``)


@dataclass(slots=True)
class Answer:
    """What an executor returns: one choice per text (ratings: one per model), the usage of every call (the
    pipeline's sum, planner and judges included)."""

    model: str                       # the model the answer is reported as (x-vsr-selected-model)
    choices: list[tuple[str, str]]   # (text, model) per choice
    # The body's ``model``: the answering call's own, as its provider named it (the rule of every route: a static
    # or escalate answer is relayed with it); the router's name when the provider gave none.
    served_as: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    extension: dict | None = None    # the executor's own trace, under "looper" in the body
    models_used: list[str] = field(default_factory=list)


class _Named(msgspec.Struct):
    model: str | None = None


_NAMED = msgspec.json.Decoder(_Named)


def provider_model(body: bytes) -> str | None:
    """The ``model`` a provider's whole answer names (Chat, Messages and Responses all carry it at the top)."""
    try:
        named = _NAMED.decode(body).model
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return named if isinstance(named, str) and named else None


# --- an executor's own requests -------------------------------------------------------------------------


def plain_body(raw: bytes) -> dict:
    """The client's body without streaming: an executor's calls are whole answers (``with_prompt`` leaves the
    tools out)."""
    body = msgspec.json.decode(raw)
    for key in ("stream", "stream_options"):
        body.pop(key, None)
    return body


def with_prompt(body: dict, api: str, prompt: str | None) -> bytes:
    """The client's body with ``prompt`` (when given) as its last turn, without tools and with its tool exchange
    as text (``protocol.untooled``): an executor answers in text. The prompt is placed before the exchange
    becomes text, so that a tool's result, a user turn once written, is never taken for the user's."""
    doc = dict(body)
    if prompt is not None:
        _last_turn(doc, api, prompt)
    return msgspec.json.encode(untooled.without_tools(doc, api)[0])


def _last_turn(doc: dict, api: str, prompt: str) -> None:
    """``prompt`` after the conversation's last turn: it replaces the client's last user turn when that ends the
    conversation (the prompt quotes the request), else it follows whatever ends it (a tool's result), so the
    model reads the executor's instruction last."""
    turn = {"role": "user", "content": prompt}
    key = "input" if api == "responses" else "messages"
    items = doc.get(key)
    if not isinstance(items, list):
        doc[key] = prompt if api == "responses" else [turn]
        return
    items = list(items)
    end = len(items) - 1
    if items and untooled.current_turn(items, api) == end:
        # A Messages turn answering tool calls beside the user's words keeps the answers.
        results = untooled.tool_results_of(items[end], api)
        items[end] = {"role": "user", "content": [*results, {"type": "text", "text": prompt}]} if results else turn
    elif items and api == "messages" and isinstance(items[end], dict) and items[end].get("role") == "user" \
            and isinstance(items[end].get("content"), list):
        # Messages' tool results, a user turn of their own: the prompt joins it (Messages alternates roles).
        items[end] = {"role": "user", "content": [*items[end]["content"], {"type": "text", "text": prompt}]}
    else:
        items.append(turn)
    doc[key] = items


# --- remom: how a round's calls are spread over the candidates -------------------------------------------


def distribute(n: int, refs: Sequence[tuple[str, float]], strategy: str, seed: int) -> list[str]:
    """``n`` calls over the candidates (name, weight): ``weighted`` in proportion to weight (largest remainders
    first), ``equal`` (the first ones get the remainder), ``round_robin`` in order, ``first_only``; weighted and
    equal are shuffled with ``seed`` so that one model's calls do not all start first."""
    if n <= 0 or not refs:
        return []
    if strategy == "round_robin":
        return [refs[i % len(refs)][0] for i in range(n)]
    if strategy == "first_only":
        return [refs[0][0]] * n
    total = sum(w for _, w in refs if w > 0)
    if strategy == "weighted" and total > 0:
        exact = [(w / total * n if w > 0 else 0.0) for _, w in refs]
        counts = [math.floor(x) for x in exact]
        by_remainder = sorted(range(len(refs)), key=lambda i: (-(exact[i] - counts[i]), i))
        for k in range(n - sum(counts)):
            counts[by_remainder[k % len(refs)]] += 1
    else:
        per, extra = divmod(n, len(refs))
        counts = [per + (1 if i < extra else 0) for i in range(len(refs))]
    calls = [name for (name, _), c in zip(refs, counts) for _ in range(c)]
    random.Random(seed).shuffle(calls)
    return calls


def compact(text: str, strategy: str, tokens: int) -> str:
    """A reference as the next round reads it: whole, or its last ``tokens`` (about 4 characters each)."""
    if strategy == "last_n_tokens" and len(text) > tokens * 4:
        return text[-tokens * 4:]
    return text


def ordered(replies: Sequence[Reply], seed: int) -> list[Reply]:
    """A round's references: longest first, then shuffled with ``seed`` (vLLM Semantic Router's ordering)."""
    out = sorted(replies, key=lambda r: -len(r.text))
    random.Random(seed).shuffle(out)
    return out


REMOM_TEMPLATE = """You are given a problem and a list of reference responses. Your job is to analyze these \
references and provide your own response.

Original Problem:
{original}

Reference Responses:
{references}

Now, based on the original problem and reference responses above, please provide your own comprehensive solution."""


def remom_prompt(template: str | None, original: str, references: Sequence[Reply], strategy: str,
                 tokens: int) -> str:
    """The next round's user turn: the problem and the previous round's answers; a configured template's
    ``{{original}}`` and ``{{references}}`` are replaced."""
    listed = "\n".join(f"\nReference {i} ({r.model}):\n{compact(r.text, strategy, tokens)}"
                       for i, r in enumerate(references, 1))
    if template:
        return template.replace("{{original}}", original).replace("{{references}}", listed.strip())
    return REMOM_TEMPLATE.format(original=original, references=listed.strip())


def longest(rounds: Sequence[Sequence[Reply]]) -> Reply | None:
    """The longest non-blank answer, newer rounds winning ties: what remom returns when its last round failed."""
    best: Reply | None = None
    for replies in reversed(rounds):
        for r in replies:
            if r.text.strip() and (best is None or len(r.text.strip()) > len(best.text.strip())):
                best = r
    return best


# --- fusion -----------------------------------------------------------------------------------------------

ANALYSIS_KEYS = ("consensus", "contradictions", "partial_coverage", "unique_insights", "blind_spots")


def panel_text(replies: Sequence[Reply]) -> str:
    return "\n\n".join(f"Response {i} ({r.model}):\n{r.text}" for i, r in enumerate(replies, 1))


def fusion_analysis_prompt(template: str | None, original: str, replies: Sequence[Reply]) -> str:
    if template:
        return _render(template, original, replies, None)
    return ("You are the Fusion analysis judge. Compare the panel responses and return only valid JSON with these "
            f"keys: {', '.join(ANALYSIS_KEYS)}. Return compact JSON only: no markdown, no code fences, no prose "
            "before or after the JSON. Each value must be an array with at most two concise strings.\n\n"
            f"Original prompt:\n{original}\n\nPanel responses:\n{panel_text(replies)}")


def fusion_final_prompt(template: str | None, original: str, replies: Sequence[Reply],
                        analysis: dict | str | None) -> str:
    """``analysis``: the judge's JSON, or its text when it wrote no JSON (given as it is), or None."""
    if template:
        return _render(template, original, replies, analysis)
    block = (_analysis_text(analysis) if analysis is not None else
             "No structured analysis is available. Synthesize directly from the panel responses.")
    return ("You are the Fusion calling model. Produce the final answer for the user using the panel responses and "
            "structured analysis. Resolve contradictions explicitly and do not mention internal model names unless "
            f"the user asks.\n\nOriginal prompt:\n{original}\n\nStructured analysis:\n{block}\n\n"
            f"Panel responses:\n{panel_text(replies)}\n\nFinal answer:")


def _render(template: str, original: str, replies: Sequence[Reply], analysis: dict | str | None) -> str:
    return (template.replace("{{original}}", original).replace("{{responses}}", panel_text(replies))
            .replace("{{analysis}}", _analysis_text(analysis) if analysis is not None else ""))


def _analysis_text(analysis: dict | str) -> str:
    return analysis if isinstance(analysis, str) else json.dumps(analysis, indent=2)


def parse_analysis(text: str) -> dict | None:
    """The judge's analysis as JSON (code fences and prose around the object tolerated); None if it is not."""
    candidate = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        doc = json.loads(candidate[start:end + 1])
    except ValueError:
        return None
    return {k: doc[k] for k in ANALYSIS_KEYS if k in doc} if isinstance(doc, dict) else None


# --- workflows --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Step:
    """One role's calls and their replies, in order."""

    role: str
    prompt: str | None
    replies: list[Reply] = field(default_factory=list)


def visible(steps: Sequence[Step], access_list: Sequence[str]) -> list[tuple[str, Reply]]:
    """The earlier outputs a role may read: all of them, or those its access list names by role or by agent."""
    out = []
    for step in steps:
        for r in step.replies:
            if not access_list or step.role in access_list or r.agent in access_list:
                out.append((step.role, r))
    return out


def step_prompt(original: str, role: str, prompt: str | None, seen: Sequence[tuple[str, Reply]]) -> str:
    """A role's user turn: its instruction, the request, and the earlier outputs it may read."""
    parts = [f"You are the {role} in a multi-model workflow."]
    if prompt:
        parts.append(f"Your instruction: {prompt}")
    parts.append(f"Original request:\n{original}")
    if seen:
        parts.append("Outputs of earlier steps:\n" + "\n\n".join(f"[{r.agent or role_}] ({role_}):\n{r.text}"
                                                                  for role_, r in seen))
    return "\n\n".join(parts)


def workflow_final_prompt(original: str, prompt: str | None, steps: Sequence[Step]) -> str:
    """The final model's user turn: every step's outputs, merged into the one answer the user receives."""
    outputs = "\n\n".join(f"[{r.agent}] ({s.role}):\n{r.text}" for s in steps for r in s.replies)
    head = prompt or ("Write the final answer to the original request from the workflow's outputs. Preserve any "
                      "constrained output format exactly. Do not reveal hidden reasoning or the workflow itself.")
    return f"{head}\n\nOriginal request:\n{original}\n\nWorkflow outputs:\n{outputs}"


def plan_prompt(original: str, models: Sequence[str], max_steps: int) -> str:
    """The dynamic workflow's planner turn: the request, the models it may use, the JSON plan it must return."""
    return ("You are the workflow planner. Plan how the available models should work on the request, as steps "
            "that run in order; each step's models answer in parallel and read the outputs of earlier steps its "
            "access_list names (by step id), or all of them when it is empty. Return only JSON, no prose: "
            '{"steps": [{"id": "...", "models": ["..."], "prompt": "...", "access_list": []}], '
            '"final": {"model": "...", "prompt": "..."}}. '
            f"Use at most {max_steps} steps and only these models: {', '.join(models)}.\n\n"
            f"Request:\n{original}")


def parse_plan(text: str, allowed: Sequence[str], max_steps: int) -> tuple[list[WorkflowRole], WorkflowFinal]:
    """The planner's JSON plan as roles and a final step; ValueError saying what is wrong with it."""
    candidate = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    start, end = candidate.find("{"), candidate.rfind("}")
    try:
        doc = json.loads(candidate[start:end + 1]) if 0 <= start < end else None
    except ValueError:
        doc = None
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, list) or not steps:
        raise ValueError("the plan is not JSON with a list of steps")
    roles = []
    for i, step in enumerate(steps[:max_steps]):
        try:
            role = msgspec.convert({"name": str(step.get("id") or step.get("role") or f"step{i + 1}"),
                                    "models": step.get("models"), "prompt": step.get("prompt"),
                                    "access_list": step.get("access_list") or []}, WorkflowRole)
        except (AttributeError, msgspec.ValidationError) as exc:
            raise ValueError(f"step {i + 1} is not a step: {exc}") from None
        outside = [m for m in role.models if m not in allowed]
        if outside:
            raise ValueError(f"step {role.name} names {', '.join(outside)}, outside the decision's modelRefs")
        roles.append(role)
    final = doc.get("final") if isinstance(doc.get("final"), dict) else {}
    model = final.get("model") if final.get("model") in allowed else None
    prompt = final.get("prompt") if isinstance(final.get("prompt"), str) else None
    return roles, WorkflowFinal(model=model, prompt=prompt)


# --- the answer an executor returns -------------------------------------------------------------------------

_ENCODE = msgspec.json.Encoder()


def _usage(a: Answer) -> dict:
    return {"prompt_tokens": a.input_tokens, "completion_tokens": a.output_tokens,
            "total_tokens": a.input_tokens + a.output_tokens}


def chat_whole(a: Answer, algorithm: str) -> bytes:
    """The executor's answer as one chat.completion; ``ratings`` puts each choice's model on it."""
    choices = []
    for i, (text, model) in enumerate(a.choices):
        choice = {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if len(a.choices) > 1:
            choice["model"] = model
        choices.append(choice)
    doc = {"id": f"chatcmpl-{algorithm}-{uuid.uuid4().hex[:16]}", "object": "chat.completion",
           "created": int(time.time()), "model": a.served_as or a.model, "choices": choices, "usage": _usage(a)}
    if a.extension is not None:
        doc["looper"] = {"algorithm": algorithm, **a.extension}
    return _ENCODE.encode(doc)


def chat_stream(a: Answer, algorithm: str) -> bytes:
    """The same answer as a chat.completion.chunk stream: a role chunk, one content chunk per choice, the finish,
    the usage, then [DONE]."""
    base = {"id": f"chatcmpl-{algorithm}-{uuid.uuid4().hex[:16]}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": a.served_as or a.model}
    many = len(a.choices) > 1

    def chunk(choices: list[dict], **extra) -> bytes:
        return b"data: " + _ENCODE.encode({**base, "choices": choices, **extra}) + b"\n\n"

    def choice(i: int, model: str, **fields) -> dict:
        return {"index": i, **fields, **({"model": model} if many else {})}

    out = [chunk([choice(i, m, delta={"role": "assistant", "content": ""}) for i, (_, m) in enumerate(a.choices)])]
    out += [chunk([choice(i, m, delta={"content": t})]) for i, (t, m) in enumerate(a.choices)]
    out.append(chunk([choice(i, m, delta={}, finish_reason="stop") for i, (_, m) in enumerate(a.choices)]))
    extra = {"looper": {"algorithm": algorithm, **a.extension}} if a.extension is not None else {}
    out.append(chunk([], usage=_usage(a), **extra))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)
