"""OpenAI Chat Completions <-> the neutral forms."""
from __future__ import annotations

import logging
import time
from typing import Any

import msgspec

from .. import chat as wire
from ..error_types import openai_type
from ._common import ENCODER, effort_of_thinking, error_text, native_id, new_id, read_error, unknown_fields
from ._ir import (
    Answer, ArgsDelta, BlockStart, BlockStop, Conversation, Event, Failed, File, Finished,
    GeneratedImage, Image, SignatureDelta, Started, Text, TextDelta, Thinking, ToolCall, ToolChoice, ToolDef,
    ToolResult, Turn, Usage,
)
from ._logprobs import joined, tokens
from ._thinking import block as thinking_block
from ._thinking import of_block
from ._losses import CONVERTED, MOVED, Loss, dropped
from ._sse import data_event

log = logging.getLogger("vsr_fast.translate")

PATH = "/chat/completions"
ID = "chatcmpl-"   # the prefix of an answer's id
# Top-level request fields the neutral form carries; any other is reported dropped.
KNOWN = frozenset({
    "model", "messages", "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls", "functions",
    "function_call",
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "user", "metadata", "n",
    "response_format", "reasoning_effort", "thinking", "top_k", *("verbosity", "prompt_cache_key", "safety_identifier", "service_tier",
                                            "logprobs", "top_logprobs", "store"),
})
# The parameters Responses shares with Chat (the neutral form's ``shared``), read under the same names.
SHARED = ("verbosity", "prompt_cache_key", "safety_identifier", "service_tier", "logprobs", "top_logprobs", "store")
FINISH_IN = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
             "content_filter": "content_filter"}
FINISH_OUT = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter",
              "stop_sequence": "stop"}


# --- request ------------------------------------------------------------------------


def read_request(req: wire.ChatRequest, raw: bytes) -> tuple[Conversation, list[Loss]]:
    losses = unknown_fields(raw, KNOWN)
    conv = Conversation(turns=[], stream=req.stream)
    leading = True
    legacy: dict[str, str] = {}   # a legacy call's function name -> the id made for it, until its result comes
    for i, m in enumerate(req.messages):
        path = f"messages[{i}]"
        if m.name is not None and m.role != "function":
            losses.append(dropped(f"{path}.name"))
        if m.role in ("system", "developer"):
            texts = _marked(m, _texts(m, path, losses), path, losses)
            if leading:
                conv.system += texts
            else:
                conv.turns.append(Turn("system", list(texts), path))
            continue
        leading = False
        if m.role == "user":
            conv.turns.append(Turn("user", _marked(m, _parts(m, path, losses), path, losses), path))
        elif m.role == "assistant":
            parts: list = _thinking(m, path, losses) + _texts(m, path, losses)
            for j, tc in enumerate(m.tool_calls or ()):
                parts.append(ToolCall(tc.id, tc.function.name, tc.function.arguments, f"{path}.tool_calls[{j}]"))
            if m.function_call is not None:
                # A legacy call has no id; the other APIs pair a call and its result by one: made here, and given
                # to the next "function" message of that name.
                call_id = legacy[m.function_call.name] = f"call_fn{i}"
                parts.append(ToolCall(call_id, m.function_call.name, m.function_call.arguments,
                                      f"{path}.function_call"))
            parts = _marked(m, parts, path, losses)
            conv.turns.append(Turn("assistant", parts, path))
        else:
            # A tool message, or a legacy function message (its result, by the function's name). Its images and
            # files too: Anthropic's tool_result and Responses' function_call_output carry them.
            call_id = (m.tool_call_id or "") if m.role == "tool" else legacy.pop(m.name or "", f"call_fn{i}")
            result = ToolResult(call_id, _marked(m, _parts(m, path, losses), path, losses), path=path)
            if conv.turns and conv.turns[-1].role == "tool":
                conv.turns[-1].parts.append(result)
            else:
                conv.turns.append(Turn("tool", [result], path))
    for i, tool in enumerate(req.tools or ()):
        f = tool.function
        if tool.type != "function":
            losses.append(dropped(f"tools[{i}]"))
            continue
        conv.tools.append(ToolDef(f.name, f.description, f.parameters, f.strict, f"tools[{i}]", tool.cache_control))
    for i, f in enumerate(req.functions or ()):
        conv.tools.append(ToolDef(f.name, f.description, f.parameters, f.strict, f"functions[{i}]"))
    conv.tool_choice = _tool_choice(req.tool_choice, losses) or _function_call(req.function_call)
    conv.parallel_tool_calls = req.parallel_tool_calls
    if legacy_functions(req) and conv.parallel_tool_calls is None:
        conv.parallel_tool_calls = False   # a legacy answer carries one call: the backend is asked for one
    conv.max_tokens = req.max_completion_tokens or req.max_tokens
    conv.temperature, conv.top_p = req.temperature, req.top_p
    conv.stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or ())
    conv.user, conv.metadata = req.user, req.metadata
    conv.response_format, conv.reasoning_effort = req.response_format, req.reasoning_effort
    conv.thinking = msgspec.to_builtins(req.thinking) if req.thinking is not None else None
    conv.top_k = req.top_k
    if req.n is not None and req.n > 1:
        losses.append(Loss(CONVERTED, "unsupported", "n"))
    conv.shared = {k: (getattr(req, k), k) for k in SHARED if getattr(req, k) is not None}
    return conv, losses


def _marked(m: wire.Message, parts: list, path: str, losses: list[Loss]) -> list:
    """``parts`` with the message's own cache_control on the last of them, where LiteLLM puts a whole message's
    marker for Anthropic (the cache's prefix ends with the message); dropped, and listed, when that part cannot
    carry one (a tool call) or already has its own."""
    if m.cache_control is None:
        return parts
    last = parts[-1] if parts else None
    if isinstance(last, (Text, Image)) and last.cache_control is None:
        return [*parts[:-1], msgspec.structs.replace(last, cache_control=m.cache_control,
                                                     cache_path=f"{path}.cache_control")]
    losses.append(dropped(f"{path}.cache_control"))
    return parts


def _thinking(m: wire.Message, path: str, losses: list[Loss]) -> list:
    """An assistant message's reasoning: its ``thinking_blocks`` (LiteLLM's, which carry Claude's signatures),
    else its ``reasoning_content`` alone (unsigned: only an OpenAI-format backend could take it, and none does)."""
    if m.thinking_blocks:
        out = []
        for j, b in enumerate(m.thinking_blocks):
            t = of_block(b, f"{path}.thinking_blocks[{j}]")
            if t is None:
                losses.append(dropped(f"{path}.thinking_blocks[{j}]"))
            else:
                out.append(t)
        return out
    return [Thinking(m.reasoning_content, path=f"{path}.reasoning_content")] if m.reasoning_content else []


def _texts(m: wire.Message, path: str, losses: list[Loss]) -> list:
    if m.content is None:
        return []
    if isinstance(m.content, str):
        return [Text(m.content, f"{path}.content")] if m.content else []
    out: list = []
    for j, p in enumerate(m.content):
        where = f"{path}.content[{j}]"
        if isinstance(p, wire.TextPart):
            out.append(Text(p.text, where, cache_control=p.cache_control))
        elif isinstance(p, wire.RefusalPart):
            out.append(Text(p.refusal, where))
        else:
            losses.append(dropped(where))
    return out


def _parts(m: wire.Message, path: str, losses: list[Loss]) -> list:
    if not isinstance(m.content, list):
        return _texts(m, path, losses)
    out: list = []
    for j, p in enumerate(m.content):
        where = f"{path}.content[{j}]"
        if isinstance(p, wire.TextPart):
            out.append(Text(p.text, where, cache_control=p.cache_control))
        elif isinstance(p, wire.ImagePart):
            out.append(Image(p.image_url.url, p.image_url.detail, where, f"{where}.image_url.detail",
                             p.cache_control))
        elif isinstance(p, wire.FilePart):
            f = {k: v for k, v in p.file.items() if isinstance(v, str)}
            out.append(File(data_url=f.get("file_data"), file_id=f.get("file_id"), filename=f.get("filename"),
                            path=where))
        else:
            losses.append(dropped(where))   # input_audio: neither other protocol takes audio
    return out


def legacy_functions(req: wire.ChatRequest) -> bool:
    """Whether the client speaks the legacy functions (``functions``, no ``tools``): its answer's call is then
    ``message.function_call``, as OpenAI answers such a request."""
    return bool(req.functions) and not req.tools


def _function_call(choice: str | wire.NamedFunction | None) -> ToolChoice | None:
    """The legacy ``function_call`` as the tool choice: "auto" and "none" as they are, a named one forcing it."""
    if choice is None:
        return None
    if isinstance(choice, str):
        return ToolChoice(choice, path="function_call")
    return ToolChoice("tool", choice.name, path="function_call")


def _tool_choice(choice: str | wire.ToolChoiceObject | None, losses: list[Loss]) -> ToolChoice | None:
    if choice is None:
        return None
    if isinstance(choice, str):
        return ToolChoice(choice)
    if choice.type == "function" and choice.function is not None:
        return ToolChoice("tool", choice.function.name)
    spec = choice.allowed_tools if choice.type == "allowed_tools" else None
    if isinstance(spec, dict) and spec.get("mode") in ("auto", "required") and isinstance(spec.get("tools"), list):
        names = [(t.get("function") or {}).get("name") if isinstance(t, dict) else None for t in spec["tools"]]
        if all(isinstance(n, str) for n in names):
            return ToolChoice(spec["mode"], allowed=tuple(names))
    losses.append(dropped("tool_choice"))
    return None


# An image-only tool result's tool message: a Chat tool message carries text, its media go in the next message.
MEDIA_FOLLOWS = "(the output of this call follows in the next message)"


def write_request(conv: Conversation, model: str) -> tuple[bytes, list[Loss]]:
    losses: list[Loss] = [dropped(conv.web_search)] if conv.web_search else []   # a Chat model searches nothing
    messages: list[dict] = []
    if conv.system:
        messages.append({"role": "system", "content": _content(conv.system)})
    for turn in conv.turns:
        if turn.role == "tool":
            media: list = []
            for r in turn.parts:
                own: list = []
                text = _result_text(r, losses, own)
                if own:
                    # Which call each result's media belong to, said before them: with parallel calls they share
                    # one user message.
                    media += [Text(f"Output of call {r.call_id}:"), *own]
                    text = text or MEDIA_FOLLOWS
                messages.append({"role": "tool", "tool_call_id": r.call_id, "content": text})
            if media:
                # A tool message carries text only: a result's images (and files) follow the turn's tool messages in
                # a user message, where LiteLLM puts them, so the model still sees them. Before the last tool message
                # they would break the run of answers the assistant's calls need.
                losses += [Loss(MOVED, "position", p.path) for p in media if not isinstance(p, Text)]
                messages.append({"role": "user", "content": _content(media, losses)})
            continue
        if turn.role == "assistant":
            texts = [p for p in turn.parts if isinstance(p, Text)]
            # Several text blocks stay parts, as a user turn's do (Chat takes an array of text parts here too):
            # joined, "Answer one." and "Answer two." read "Answer one.Answer two.".
            msg: dict = {"role": "assistant", "content": _content(texts) if len(texts) > 1 else
                         "".join(p.text for p in texts)}
            # A Chat backend reads no reasoning in its history (DeepSeek asks that none be sent back).
            losses += [dropped(p.path) for p in turn.parts if isinstance(p, Thinking)]
            calls = [p for p in turn.parts if isinstance(p, ToolCall)]
            if calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
                msg["content"] = msg["content"] or None
            messages.append(msg)
            continue
        messages.append({"role": turn.role, "content": _content(turn.parts, losses)})
    body: dict = {"model": model, "messages": messages}
    if conv.tools:
        body["tools"] = [_tool(t) for t in conv.tools]
    # OpenAI refuses a tool_choice and parallel_tool_calls without tools ("... is only allowed when 'tools' are
    # specified"); a Responses client may send either alone (Codex does). Without tools "auto" and "none" say
    # nothing and parallel_tool_calls has nothing to apply to: left out. A choice that forces a tool is sent,
    # for the backend's own 400 to name it.
    c = conv.tool_choice
    if c is not None and (conv.tools or c.kind not in ("auto", "none")):
        body["tool_choice"] = {"type": "function", "function": {"name": c.name}} if c.kind == "tool" else c.kind
        if c.allowed is not None:
            body["tool_choice"] = {"type": "allowed_tools", "allowed_tools": {
                "mode": c.kind, "tools": [{"type": "function", "function": {"name": n}} for n in c.allowed]}}
    if conv.tools:
        _put(body, "parallel_tool_calls", conv.parallel_tool_calls)
    # max_completion_tokens, as LiteLLM and the executors send it: OpenAI deprecated max_tokens and its reasoning
    # models (o-series, gpt-5) refuse it; vLLM, SGLang and llama.cpp read either.
    _put(body, "max_completion_tokens", conv.max_tokens)
    _put(body, "temperature", conv.temperature)
    _put(body, "top_p", conv.top_p)
    if conv.stop:
        # All of them: vLLM, SGLang and Ollama honour more than four, and OpenAI answers its own clear 400.
        body["stop"] = conv.stop
    _put(body, "user", conv.user)
    if conv.metadata:
        # OpenAI takes metadata only with store on ("metadata is only allowed when store is enabled"); turning on
        # storage of the conversation at the provider is not the router's to do for the client.
        losses.append(dropped("metadata", "requires_store"))
    _put(body, "response_format", conv.response_format)
    _put(body, "reasoning_effort", conv.reasoning_effort or effort_of_thinking(conv.thinking, losses))
    if conv.top_k is not None:
        losses.append(dropped("top_k"))   # OpenAI samples by top_p only
    for key, (value, _) in conv.shared.items():
        if key != "store":   # a Responses client's store is the router's to keep (previous_response_id)
            body[key] = value
    if conv.prefill is not None:
        losses.append(Loss(CONVERTED, "prefill", conv.prefill))   # Chat answers a new turn, it does not continue one
    if conv.stream:
        # Usage comes only when asked; the client's protocol reports it either way.
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return ENCODER.encode(body), losses


def _put(body: dict, key: str, value: object) -> None:
    if value is not None:
        body[key] = value


def _tool(t: ToolDef) -> dict:
    f: dict = {"name": t.name}
    _put(f, "description", t.description)
    _put(f, "parameters", t.parameters)
    _put(f, "strict", t.strict)
    return {"type": "function", "function": f}


def _content(parts: list, losses: list[Loss] | None = None) -> str | list[dict]:
    if len(parts) == 1 and isinstance(parts[0], Text):
        return parts[0].text
    if not parts:
        return ""
    out: list[dict] = []
    for p in parts:
        if isinstance(p, Text):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, Image):
            image: dict = {"url": p.url}
            _put(image, "detail", p.detail)
            out.append({"type": "image_url", "image_url": image})
        elif isinstance(p, File) and (p.data_url or p.file_id):
            f: dict = {}
            _put(f, "file_data", p.data_url)
            _put(f, "file_id", p.file_id)
            _put(f, "filename", p.filename)
            out.append({"type": "file", "file": f})
        elif losses is not None:
            losses.append(dropped(p.path))   # a file by URL: Chat takes inline data or ids only
    return out


def _result_text(r: ToolResult, losses: list[Loss], media: list) -> str:
    """The tool message's text; the result's other parts are added to ``media``, for a user message after it."""
    texts = []
    for p in r.content:
        if isinstance(p, Text):
            texts.append(p.text)
        elif isinstance(p, Image) or isinstance(p, File) and (p.data_url or p.file_id):
            media.append(p)
        else:
            losses.append(dropped(p.path))   # a file by URL: Chat takes inline data or ids only
    if r.is_error:
        # A tool message has no error flag: the text says it, as the model reads it.
        losses.append(Loss(CONVERTED, "unsupported", f"{r.path}.is_error"))
        return error_text(texts)
    return "\n".join(texts)


def chat_messages(conv: Conversation) -> list[wire.Message]:
    """The neutral conversation as Chat messages: what CanonicalRequest is built from."""
    out: list[wire.Message] = []
    if conv.system:
        out.append(wire.Message(role="system", content="\n\n".join(t.text for t in conv.system)))
    for turn in conv.turns:
        if turn.role == "tool":
            for r in turn.parts:
                text = "\n".join(p.text for p in r.content if isinstance(p, Text))
                out.append(wire.Message(role="tool", content=text, tool_call_id=r.call_id))
            continue
        parts: list = []
        calls: list[wire.ToolCall] = []
        for p in turn.parts:
            if isinstance(p, Text):
                parts.append(wire.TextPart(p.text))
            elif isinstance(p, Image):
                parts.append(wire.ImagePart(wire.ImageURL(p.url, p.detail)))
            elif isinstance(p, File):
                parts.append(wire.FilePart({"file_data": p.data_url, "file_id": p.file_id, "filename": p.filename}))
            elif isinstance(p, ToolCall):
                calls.append(wire.ToolCall(p.id, wire.FunctionCall(p.name, p.arguments)))
        out.append(wire.Message(role=turn.role, content=parts, tool_calls=calls or None))
    return out


# --- answers --------------------------------------------------------------------------------


# What a backend answers is read leniently where OpenAI's own types allow null (a delta's function name and
# arguments) and where OpenAI-compatible servers are known to send it (ids, counts, a tool call's index): a
# null the router does not need is no reason to fail a good answer.


class _Call(msgspec.Struct, frozen=True):
    name: str | None = ""
    arguments: str | None = ""


class _ToolCall(msgspec.Struct, frozen=True):
    id: str | None = ""
    function: _Call = _Call()
    type: str | None = "function"


class _Msg(msgspec.Struct, frozen=True):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None     # DeepSeek's, vLLM's and SGLang's reasoning models
    reasoning: str | None = None             # the same, as newer vLLM and OpenRouter name it
    tool_calls: list[_ToolCall] | None = None

    @property
    def thought(self) -> tuple[str | None, str]:
        """The model's reasoning, and the field that held it."""
        if self.reasoning_content:
            return self.reasoning_content, "reasoning_content"
        return self.reasoning, "reasoning"


def _logprobs(value: Any) -> list[dict] | None:
    """A choice's ``logprobs`` (kept untyped: some servers write ``[]`` or ``true``) as its tokens, when it is an
    object holding a list of them."""
    return tokens(value.get("content")) if isinstance(value, dict) else None


class _Choice(msgspec.Struct, frozen=True):
    message: _Msg = _Msg()
    finish_reason: str | None = None
    index: int | None = 0
    logprobs: Any = None


class _Response(msgspec.Struct, frozen=True):
    id: str | None = ""
    model: str | None = ""
    created: int | None = 0
    choices: list[_Choice] = []
    usage: wire.Usage | None = None


_RESPONSE = msgspec.json.Decoder(_Response)


def read_answer(body: bytes) -> tuple[Answer, list[Loss]]:
    doc = _RESPONSE.decode(body)
    losses: list[Loss] = [dropped(f"choices[{i}]") for i in range(1, len(doc.choices))]
    parts: list = []
    finish = "stop"
    if doc.choices:
        choice = doc.choices[0]
        thought, field = choice.message.thought
        if thought:
            parts.append(Thinking(thought, path=f"choices[0].message.{field}"))
        if choice.message.content:
            parts.append(Text(choice.message.content, "choices[0].message.content",
                              logprobs=_logprobs(choice.logprobs)))
        if choice.message.refusal:
            parts.append(Text(choice.message.refusal, "choices[0].message.refusal", refusal=True))
        for j, tc in enumerate(choice.message.tool_calls or ()):
            # A call the backend sent without an id: one unique to it, or two turns' calls would share theirs.
            parts.append(ToolCall(tc.id or new_id("call_"), tc.function.name or "", tc.function.arguments or "",
                                  f"choices[0].message.tool_calls[{j}]"))
        finish = FINISH_IN.get(choice.finish_reason or "stop", "stop")
    usage = read_usage(doc.usage) if doc.usage else None
    return Answer(doc.id or "", doc.model or "", parts, finish, usage, doc.created or 0), losses


def write_answer(answer: Answer, legacy: bool = False) -> tuple[bytes, list[Loss]]:
    """The answer as a Chat completion; ``legacy``: for a client of the legacy functions (``legacy_functions``),
    its call as ``message.function_call`` and finish_reason ``function_call``, as OpenAI answers one."""
    losses: list[Loss] = []
    text = "".join(p.text for p in answer.parts if isinstance(p, Text) and not p.refusal)
    refusal = "".join(p.text for p in answer.parts if isinstance(p, Text) and p.refusal)
    calls = [p for p in answer.parts if isinstance(p, ToolCall)]
    for p in answer.parts:
        if isinstance(p, GeneratedImage):
            losses.append(dropped(p.path))   # Chat cannot carry an image answer
    message: dict = {"role": "assistant", "content": text or (None if calls or refusal else ""),
                     "refusal": refusal or None}
    thoughts = [p for p in answer.parts if isinstance(p, Thinking)]
    if thoughts:
        message["reasoning_content"] = "".join(t.text for t in thoughts)
        blocks = [b for b in map(thinking_block, thoughts) if b is not None]
        if blocks:
            message["thinking_blocks"] = blocks
    finish = FINISH_OUT[answer.finish]
    if calls and legacy:
        # One call is all the legacy shape holds (the backend was asked for one: parallel_tool_calls false).
        message["function_call"] = {"name": calls[0].name, "arguments": calls[0].arguments}
        losses += [dropped(c.path) for c in calls[1:]]
        finish = "function_call" if finish == "tool_calls" else finish
    elif calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    logprobs = joined(p for p in answer.parts if isinstance(p, Text) and not p.refusal)
    body: dict = {
        "id": native_id(ID, answer.id), "object": "chat.completion", "created": answer.created or int(time.time()),
        "model": answer.model,
        "choices": [{"index": 0, "message": message,
                     "logprobs": {"content": logprobs, "refusal": None} if logprobs else None,
                     "finish_reason": finish}],
    }
    if answer.usage is not None:
        body["usage"] = write_usage(answer.usage)
    return ENCODER.encode(body), losses



def read_usage(u: wire.Usage) -> Usage:
    """Chat's usage: prompt_tokens hold the cached tokens already."""
    cached = (u.prompt_tokens_details.cached_tokens or 0) if u.prompt_tokens_details is not None else 0
    reasoning = (u.completion_tokens_details.reasoning_tokens or 0) if u.completion_tokens_details is not None else 0
    return Usage(u.prompt_tokens or 0, u.completion_tokens or 0, cached, reasoning=reasoning)


def write_usage(u: Usage) -> dict:
    """Usage in Chat's words; the cached input in prompt_tokens_details and the reasoning in
    completion_tokens_details, as OpenAI reports them, when there is any; input written to a Messages cache as
    prompt_tokens_details.cache_write_tokens (Responses' input_tokens_details name), counted in prompt_tokens."""
    usage: dict = {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                   "total_tokens": u.input_tokens + u.output_tokens}
    if u.cached or u.cache_write:
        usage["prompt_tokens_details"] = {"cached_tokens": u.cached}
        if u.cache_write:
            usage["prompt_tokens_details"]["cache_write_tokens"] = u.cache_write
    if u.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": u.reasoning}
    return usage

# --- streams -----------------------------------------------------------------------------------------


class _DeltaCall(msgspec.Struct, frozen=True):
    index: int | None = None        # left out by some servers: each call then comes whole, with its id
    id: str | None = None
    function: _Call | None = None


class _Delta(msgspec.Struct, frozen=True):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None             # vLLM's and OpenRouter's name for reasoning_content
    tool_calls: list[_DeltaCall] | None = None


class _ChunkChoice(msgspec.Struct, frozen=True):
    delta: _Delta | None = _Delta()
    finish_reason: str | None = None
    index: int | None = 0
    logprobs: Any = None


class _Chunk(msgspec.Struct, frozen=True):
    id: str | None = ""
    model: str | None = ""
    created: int | None = 0
    choices: list[_ChunkChoice] = []
    usage: Any = None       # read apart (``_chunk_usage``): one of the wrong types must not end the answer
    error: Any = None


_CHUNK = msgspec.json.Decoder(_Chunk)


def _chunk_usage(usage: Any) -> Usage | None:
    """A chunk's usage, or None when it is not Chat's (``prompt_tokens: 1e30``, ``-5``, a string): the answer
    it follows is whole, and the client reads usage as unreported rather than an error event ending it."""
    try:
        u = msgspec.convert(usage, wire.Usage)
    except msgspec.ValidationError as exc:
        log.warning("a backend's Chat stream reported usage that is not Chat's, ignored: %s", exc)
        return None
    if min(u.prompt_tokens or 0, u.completion_tokens or 0) < 0:
        log.warning("a backend's Chat stream reported negative usage, ignored: %r", usage)
        return None
    return read_usage(u)
_JSON = msgspec.json.Decoder()
_EMPTY = _Delta()


class StreamReader:
    """Chat chunks -> neutral events. Holds the finish reason until the usage chunk and [DONE].

    Chat never says a tool call is over, and a backend making calls in parallel may alternate their argument
    deltas: a call stays open until it is known whole (its arguments a JSON object and another call begun) or
    the answer ends, so calls overlap here and ``OneBlockAtATime`` lines them up.
    """

    def __init__(self) -> None:
        self.losses: list[Loss] = []
        self._started = False
        self._text_block: int | None = None      # the open text block
        self._text_kind = "text"                 # what it holds: text, refusal or thinking
        self._open_calls: dict[int, list[str]] = {}   # open call blocks, in the order they began -> their arguments
        self._next = 0
        self._calls: dict[int | str, int] = {}  # Chat tool_calls[].index (or id) -> block index
        self._ids: dict[int | str, str] = {}    # Chat tool_calls[].index -> the id of the call it holds now
        self._last_call: int | str | None = None
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._done = False

    def event(self, name: str | None, data: bytes) -> list[Event]:
        if self._done:
            return []
        if data == b"[DONE]":
            # [DONE] with no finish_reason said: the answer's end is unknown (a server that stopped generating),
            # the same as a stream that ends with neither; not a stop the client would take for a whole answer.
            return self.close()
        chunk = _CHUNK.decode(data)
        if chunk.error is not None:
            self._done = True
            # A numeric code is the HTTP status the server would have answered (vLLM's, OpenRouter's {code: 503}).
            error = msgspec.json.decode(data).get("error")
            said = error.get("code") if isinstance(error, dict) else None
            status = said if isinstance(said, int) and 400 <= said < 600 else 500
            err = read_error(status, data)
            return [Failed(err.message, err.status, err.code, err.type)]
        if not chunk.choices and chunk.usage is None:
            return []   # Azure's prompt-filter chunk: no id, no model, nothing to say yet
        out: list[Event] = []
        if not self._started:
            self._started = True
            out.append(Started(chunk.id or "", chunk.model or "", chunk.created or 0))
        if chunk.usage is not None:
            self._usage = _chunk_usage(chunk.usage) or self._usage
        for choice in chunk.choices:
            if choice.index:
                continue
            d = choice.delta or _EMPTY
            for text, kind in ((d.reasoning_content or d.reasoning, "thinking"), (d.content, "text"),
                               (d.refusal, "refusal")):
                if text:
                    logprobs = _logprobs(choice.logprobs) if kind == "text" else None
                    out += self._text(text, kind, logprobs)
            for tc in d.tool_calls or ():
                out += self._call(tc)
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
        return out

    def _text(self, text: str, kind: str = "text", logprobs: list[dict] | None = None) -> list[Event]:
        out: list[Event] = []
        if self._text_block is not None and self._text_kind != kind:
            out += self._stop_text()   # the refusal and the reasoning are blocks of their own
        if self._text_block is None:
            out += self._stop_calls()
            self._text_block = self._next
            self._text_kind = kind
            self._next += 1
            out.append(BlockStart(self._text_block, "thinking" if kind == "thinking" else "text",
                                  refusal=kind == "refusal"))
        out.append(TextDelta(self._text_block, text, logprobs))
        return out

    def _call(self, tc: _DeltaCall) -> list[Event]:
        out: list[Event] = []
        # Without an index, a call with a new id starts another call; one without either continues the last.
        key: int | str = tc.index if tc.index is not None else (
            f"id:{tc.id}" if tc.id else self._last_call if self._last_call is not None else 0)
        self._last_call = key
        block = self._calls.get(key)
        if block is not None and tc.id and self._ids.get(key, tc.id) != tc.id and self._another(block, tc):
            # Another id under the same index is another call: Ollama, SGLang and Gemini's OpenAI endpoint send
            # parallel calls each whole at index 0.
            block = None
        if tc.id and (block is None or key not in self._ids):
            self._ids[key] = tc.id
        if block is None:
            out += self._stop_text()
            # A new call ends those whose arguments are whole: one after another, as most backends send them.
            out += self._stop_calls(whole_only=True)
            block = self._calls[key] = self._next
            self._next += 1
            self._open_calls[block] = []
            name = (tc.function.name if tc.function else None) or ""
            # Some servers leave the id out; the client needs one to send the result back.
            out.append(BlockStart(block, "tool", tc.id or new_id("call_"), name))
        if tc.function and tc.function.arguments:
            out.append(ArgsDelta(block, tc.function.arguments))
            pieces = self._open_calls.get(block)
            if pieces is not None:
                pieces.append(tc.function.arguments)
                # Side by side with another call: ending it as soon as it is whole lets the next one go live.
                if len(self._open_calls) > 1 and _whole(pieces):
                    del self._open_calls[block]
                    out.append(BlockStop(block))
        return out

    def _another(self, block: int, tc: _DeltaCall) -> bool:
        """Whether a delta with a new id under the index of call ``block`` begins another call: only one with a
        name, after a call whose arguments are whole (or none). Some servers (Poolside, mlx-openai-server) send
        each later chunk of one call with another id and no name: its arguments going on."""
        if not (tc.function and tc.function.name):
            return False
        pieces = self._open_calls.get(block)
        return pieces is None or not "".join(pieces).strip() or _whole(pieces)

    def _stop_text(self) -> list[Event]:
        if self._text_block is None:
            return []
        stopped, self._text_block = self._text_block, None
        return [BlockStop(stopped)]

    def _stop_calls(self, whole_only: bool = False) -> list[Event]:
        out: list[Event] = []
        for block, pieces in list(self._open_calls.items()):
            if not whole_only or _whole(pieces):
                del self._open_calls[block]
                out.append(BlockStop(block))
        return out

    def _end(self) -> list[Event]:
        self._done = True
        out: list[Event] = [] if self._started else [Started("", "")]
        out += self._stop_text() + self._stop_calls()
        out.append(Finished(FINISH_IN.get(self._finish or "stop", "stop"), self._usage))
        return out

    def close(self) -> list[Event]:
        if self._done:
            return []
        if self._finish is None:
            self._done = True
            return [Failed("the upstream stream ended before the answer did", 502, "upstream_failed")]
        return self._end()   # a backend that ends without [DONE]


def _whole(pieces: list[str]) -> bool:
    """Whether a call's arguments so far are a whole JSON object (decoded only when they end as one could)."""
    tail = next((t for t in map(str.rstrip, reversed(pieces)) if t), "")
    if not tail.endswith("}"):
        return False
    try:
        return isinstance(_JSON.decode("".join(pieces)), dict)
    except msgspec.DecodeError:
        return False


class StreamWriter:
    """Neutral events -> Chat chunks; a usage chunk only when the client asked for one."""

    def __init__(self, include_usage: bool, legacy: bool = False) -> None:
        self.include_usage = include_usage
        self.legacy = legacy   # the legacy functions' client: its one call as delta.function_call (write_answer)
        self.losses: list[Loss] = []
        self._prefix = b""
        self._tools: dict[int, int] = {}   # block index -> tool_calls[].index
        self._refusals: set[int] = set()   # the blocks of the model's refusal
        self._thinking: dict[int, list] = {}   # thinking block -> [its text so far, its signature]
        self._blocks_sent = 0                  # thinking_blocks[] entries written: the next one's index

    def write(self, ev: Event) -> bytes:
        if isinstance(ev, Started):
            self._prefix = b'{"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":' % (
                ENCODER.encode(native_id(ID, ev.id)), ev.created or int(time.time()), ENCODER.encode(ev.model))
            return self._chunk({"role": "assistant", "content": ""})
        if isinstance(ev, TextDelta):
            thought = self._thinking.get(ev.index)
            if thought is not None:
                thought[0] += ev.text
                return self._chunk({"reasoning_content": ev.text})
            if ev.index in self._refusals:
                return self._chunk({"refusal": ev.text})
            return self._chunk({"content": ev.text}, logprobs=ev.logprobs)
        if isinstance(ev, SignatureDelta):
            if ev.index in self._thinking:
                self._thinking[ev.index][1] = ev.signature
            return b""
        if isinstance(ev, BlockStart):
            if ev.kind == "thinking":
                self._thinking[ev.index] = ["", None, ev.redacted]
                return b""
            if ev.kind == "text":
                if ev.refusal:
                    self._refusals.add(ev.index)
                return b""
            if ev.kind == "image":
                self.losses.append(dropped(f"output[{ev.index}]"))
                return b""
            if self.legacy and self._tools:
                self.losses.append(dropped(f"output[{ev.index}]"))   # a second call: the legacy shape holds one
                return b""
            n = self._tools[ev.index] = len(self._tools)
            if self.legacy:
                return self._chunk({"function_call": {"name": ev.name, "arguments": ""}})
            return self._chunk({"tool_calls": [{"index": n, "id": ev.call_id, "type": "function",
                                                "function": {"name": ev.name, "arguments": ""}}]})
        if isinstance(ev, ArgsDelta):
            if self.legacy:
                return self._chunk({"function_call": {"arguments": ev.json}}) if ev.index in self._tools else b""
            return self._chunk({"tool_calls": [{"index": self._tools[ev.index], "function": {"arguments": ev.json}}]})
        if isinstance(ev, BlockStop):
            thought = self._thinking.pop(ev.index, None)
            block = thinking_block(Thinking(*thought)) if thought is not None else None
            if block is None:
                return b""
            # The signed block whole once its signature is known, as LiteLLM's delta.thinking_blocks carries it;
            # indexed as tool_calls are, or the openai SDK's stream accumulator refuses a second block.
            block["index"] = self._blocks_sent
            self._blocks_sent += 1
            return self._chunk({"thinking_blocks": [block]})
        if isinstance(ev, Finished):
            finish = FINISH_OUT[ev.finish]
            out = self._chunk({}, "function_call" if self.legacy and self._tools and finish == "tool_calls" else finish)
            if self.include_usage:
                usage = write_usage(ev.usage or Usage())
                out += data_event(self._prefix + b'[],"usage":' + ENCODER.encode(usage) + b"}")
            return out + data_event(b"[DONE]")
        return self.fail(ev.message, ev.status, ev.code, ev.type)

    def fail(self, message: str, status: int, code: str | None, kind: str | None = None) -> bytes:
        # Typed by the status, as a whole answer's error is: ``kind`` may be another API's word or the router's.
        return data_event(ENCODER.encode({"error": {"message": message, "type": openai_type(status),
                                                     "param": None, "code": code}}))

    def _chunk(self, delta: dict, finish: str | None = None, logprobs: list[dict] | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": {"content": logprobs, "refusal": None} if logprobs else None,
                  "finish_reason": finish}
        return data_event(self._prefix + ENCODER.encode([choice]) + b"}")


class CallSplitter:
    """A same-protocol Chat stream's ``restate`` (``Passthrough``): a backend that streams parallel calls each under
    index 0 with a new id (Ollama, SGLang, Gemini's OpenAI endpoint) has them re-indexed, as ``StreamReader`` splits
    them for the other protocols; an SDK would join them into one call. Events without tool calls pass as they are.
    """

    def __init__(self) -> None:
        # (choice, backend index) -> (the id of the call it holds, our index, its arguments so far)
        self._calls: dict[tuple[object, int], tuple[str | None, int, list[str]]] = {}
        self._next: dict[object, int] = {}   # choice -> the next index of ours
        # Until a call had to be re-indexed, only a delta naming a call's id can need it: the others (arguments)
        # pass undecoded, and a call whose arguments were not all seen counts as whole when a new id comes.
        self._split = False
        self._unseen = False

    def __call__(self, out: bytes, events: int, head: bytes) -> bytes:
        if b'"tool_calls":[{' not in out and b'"tool_calls": [{' not in out:
            return out   # most chunks, and backends that write "tool_calls": null in every delta
        return b"\n\n".join(self._event(e) for e in out.split(b"\n\n"))   # the bytes of the others kept

    def _event(self, event: bytes) -> bytes:
        at = event.find(b'"tool_calls":[{')
        if at < 0:
            at = event.find(b'"tool_calls": [{')
        if at < 0 or not event.startswith(b"data: ") or b"\n" in event:
            return event
        if not self._split and b'"id"' not in event[at:]:
            self._unseen = True
            return event
        try:
            doc = _JSON.decode(event[6:])
        except msgspec.DecodeError:
            return event
        changed = False
        for choice in doc.get("choices") or () if isinstance(doc, dict) else ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            for tc in (delta.get("tool_calls") or ()) if isinstance(delta, dict) else ():
                if isinstance(tc, dict) and isinstance(tc.get("index"), int):
                    ours = self._index(choice.get("index"), tc)
                    changed |= ours != tc["index"]
                    tc["index"] = ours
        self._unseen = False
        self._split |= changed
        return b"data: " + ENCODER.encode(doc) if changed else event

    def _index(self, choice: object, tc: dict) -> int:
        """Our index for this delta's call: a new one for a call with a new id and a name after whole arguments."""
        function = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        args = function.get("arguments") if isinstance(function.get("arguments"), str) else ""
        key = (choice, tc["index"])
        known = self._calls.get(key)
        call_id = tc.get("id")
        if known is None or (call_id and call_id != known[0] and function.get("name")
                             and (self._unseen or not "".join(known[2]).strip() or _whole(known[2]))):
            known = self._calls[key] = (call_id, self._next.get(choice, 0), [])
            self._next[choice] = known[1] + 1
        known[2].append(args)
        return known[1]
