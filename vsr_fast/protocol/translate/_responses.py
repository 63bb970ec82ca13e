"""OpenAI Responses <-> the neutral forms."""
from __future__ import annotations

import re
import time
from typing import Any

import msgspec

from ...errors import RequestError
from .. import responses as wire
from ..error_types import openai_type
from ._common import (
    ENCODER, ERROR_MARK, NewId, cache_losses, effort_of_thinking, error_text, new_id, upstream_error,
    unknown_fields,
)
# declared_tool_count is read as RESPONSES.declared_tool_count by the adapter: a re-export, not unused.
from ._freeform import (  # noqa: F401
    ToolNames, custom_arguments, custom_input, declared_tool_count, function_defs, qualified, tool_names,
)
from ._ir import (
    Answer, ArgsDelta, BlockStart, BlockStop, Conversation, Event, Failed, File, Finished,
    GeneratedImage, Image, SignatureDelta, Started, Text, TextDelta, Thinking, ToolCall, ToolChoice, ToolResult,
    Turn, Usage,
)
from ._logprobs import tokens
from ._thinking import OPENAI, encrypted, of_reasoning, seal, unseal
from ._losses import CONVERTED, MOVED, Loss, dropped
from ._sse import SSEParser, named_event

MIN_OUTPUT_TOKENS = 16   # Responses' least max_output_tokens

PATH = "/responses"
KNOWN = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
    "temperature", "top_p", "stream", "previous_response_id", "store", "metadata", "user", "text", "reasoning",
    "prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs", "include",
})
LOGPROBS = "message.output_text.logprobs"   # the include that asks for Chat's logprobs
WEB_SEARCH = ("web_search", "web_search_preview", "web_search_2025_08_26")   # OpenAI's hosted web search tools
# Asks for reasoning items' encrypted_content: a translated answer's always carry Claude's signed thinking; the
# router asks it of a Responses backend's reasoning model (write_request's ``reasons``).
ENCRYPTED_REASONING = "reasoning.encrypted_content"
REASONING = -2   # a reasoning item's block key: (output_index, REASONING)
INCOMPLETE_IN = {"max_output_tokens": "length", "content_filter": "content_filter"}
INCOMPLETE_OUT = {"length": "max_output_tokens", "content_filter": "content_filter"}


# --- request -------------------------------------------------------------------------


def read_request(req: wire.ResponsesRequest, raw: bytes) -> tuple[Conversation, list[Loss]]:
    """The neutral form; a RequestError naming the path of an item missing a field it needs."""
    losses = unknown_fields(raw, KNOWN)
    conv = Conversation(turns=[], stream=req.stream, max_tokens=req.max_output_tokens,
                        temperature=req.temperature, top_p=req.top_p, user=req.user, metadata=req.metadata,
                        parallel_tool_calls=req.parallel_tool_calls)
    if req.instructions:
        conv.system.append(Text(req.instructions, "instructions"))
    if isinstance(req.input, str):
        conv.turns.append(Turn("user", [Text(req.input, "input")], "input"))
    else:
        for i, item in enumerate(req.input):
            _read_item(item, f"input[{i}]", conv, losses)
    conv.tools[:0] = function_defs(list(req.tools or ()), "tools", losses)
    search = next((f"tools[{i}]" for i, t in enumerate(req.tools or ()) if t.type in WEB_SEARCH), None)
    if search is not None:     # carried to Anthropic (its writer), listed by the others'
        conv.web_search = search
        losses.remove(dropped(search))
    conv.tool_choice = _tool_choice(req.tool_choice, losses, tool_names(req))
    fmt = (req.text or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        if fmt["type"] == "json_object":
            conv.response_format = {"type": "json_object"}
        else:
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            conv.response_format = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, dict) and fmt.get("type") != "text":
        losses.append(dropped("text.format"))   # a type of another server's (vLLM's structural_tag)
    effort = (req.reasoning or {}).get("effort")
    if isinstance(effort, str):
        conv.reasoning_effort = effort
    _read_shared(req, conv, losses)
    return conv, losses


def _read_shared(req: wire.ResponsesRequest, conv: Conversation, losses: list[Loss]) -> None:
    """The parameters Chat shares, under its names; what of ``text``, ``reasoning`` and ``include`` no other
    protocol carries (reasoning.summary among them) reported dropped."""
    text, shared = req.text or {}, conv.shared
    losses += [dropped(f"text.{k}") for k in text if k not in ("format", "verbosity")]
    losses += [dropped(f"reasoning.{k}") for k in req.reasoning or {} if k != "effort"]
    if text.get("verbosity") is not None:
        shared["verbosity"] = (text["verbosity"], "text.verbosity")
    for key in ("prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs"):
        if getattr(req, key) is not None:
            shared[key] = (getattr(req, key), key)
    for i, name in enumerate(req.include or ()):
        if name == LOGPROBS:
            shared["logprobs"] = (True, f"include[{i}]")
        elif name != ENCRYPTED_REASONING:
            losses.append(dropped(f"include[{i}]"))
    if "top_logprobs" in shared and "logprobs" not in shared:
        shared["logprobs"] = (True, "top_logprobs")   # Chat gives top_logprobs only with logprobs on


def _need(value: str | None, path: str) -> str:
    if value is None:
        field = path.rsplit(".", 1)[-1]
        raise RequestError(f"Invalid request body: Object missing required field `{field}` at `{path}`", param=path)
    return value


def _read_item(item: wire.Item, path: str, conv: Conversation, losses: list[Loss]) -> None:
    last = conv.turns[-1] if conv.turns else None
    if item.type == "additional_tools":
        # Tools declared at this point of the conversation: the other protocols declare
        # tools for the whole request, which moves them only if turns came before.
        conv.tools += function_defs(list(item.tools or ()), f"{path}.tools", losses)
        if conv.turns:
            losses.append(Loss(MOVED, "position", path))
        return
    if item.type == "message":
        role = _need(item.role, f"{path}.role")
        parts = _parts(item.content, f"{path}.content", losses)
        if role in ("system", "developer"):
            if last is None:
                conv.system += [p for p in parts if isinstance(p, Text)]
            else:
                conv.turns.append(Turn("system", parts, path))
        elif role == "assistant" and last is not None and last.role == "assistant":
            last.parts += parts
        elif role in ("user", "assistant"):
            conv.turns.append(Turn(role, parts, path))
        else:
            losses.append(dropped(f"{path}.role"))
    elif item.type in ("function_call", "custom_tool_call"):
        name = qualified(item.namespace, _need(item.name, f"{path}.name"))
        if item.type == "custom_tool_call":
            arguments = custom_arguments(_need(item.input, f"{path}.input"))
        else:
            arguments = item.arguments or ""
        call = ToolCall(_need(item.call_id, f"{path}.call_id"), name, arguments, path)
        if last is not None and last.role == "assistant":
            last.parts.append(call)
        else:
            conv.turns.append(Turn("assistant", [call], path))
    elif item.type in ("function_call_output", "custom_tool_call_output"):
        output = item.output if item.output is not None else ""
        result = ToolResult(_need(item.call_id, f"{path}.call_id"), _parts(output, f"{path}.output", losses),
                            path=path)
        at = _answered_at(conv.turns, result.call_id)
        if at < len(conv.turns):
            # The user spoke between the call and its result (Codex, as the user types on): the result goes
            # right after its call, as Chat and Messages need it (a tool message after the call, Anthropic's
            # tool_result blocks first in the user turn), the words after it.
            losses.append(Loss(MOVED, "position", path))
        before = conv.turns[at - 1] if at else None
        if before is not None and before.role == "tool":
            before.parts.append(result)
        else:
            conv.turns.insert(at, Turn("tool", [result], path))
    elif item.type == "reasoning":
        _read_reasoning(item, path, conv, losses)
    else:
        losses.append(dropped(path))   # hosted tool calls, item references


def _read_reasoning(item: wire.Item, path: str, conv: Conversation, losses: list[Loss]) -> None:
    """A reasoning item: Claude's thinking block again when the router sealed it (``unseal``), else its summary
    as unsigned reasoning (OpenAI's own encrypted reasoning means nothing to another provider)."""
    thought = unseal(item.encrypted_content, f"{path}.encrypted_content")
    if thought is None:
        summary = "".join(s.text for s in item.summary or ())
        if not summary:
            losses.append(dropped(path))
            return
        thought = Thinking(summary, path=path)
    last = conv.turns[-1] if conv.turns else None
    if last is not None and last.role == "assistant":
        last.parts.append(thought)
    else:
        conv.turns.append(Turn("assistant", [thought], path))


def _answered_at(turns: list[Turn], call_id: str) -> int:
    """Where the result of call ``call_id`` goes: at the end, unless only user or system turns follow the
    assistant turn (and its results) that made the call; then before those."""
    k = len(turns)
    while k and turns[k - 1].role in ("user", "system"):
        k -= 1
    if k == len(turns):
        return k
    j = k
    while j and turns[j - 1].role == "tool":
        j -= 1
    made = j and turns[j - 1].role == "assistant" and any(
        isinstance(p, ToolCall) and p.id == call_id for p in turns[j - 1].parts)
    return k if made else len(turns)


def _parts(content, path: str, losses: list[Loss]) -> list:
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content, path)]
    out: list = []
    for j, p in enumerate(content):
        where = f"{path}[{j}]"
        if isinstance(p, (wire.InputText, wire.OutputText)):
            out.append(Text(p.text, where))
        elif isinstance(p, wire.Refusal):
            out.append(Text(p.refusal, where))
        elif isinstance(p, wire.InputImage) and p.image_url:
            out.append(Image(p.image_url, p.detail, where))
        elif isinstance(p, wire.InputFile) and (p.file_data or p.file_url or p.file_id):
            out.append(File(p.file_data, p.file_url, p.file_id, p.filename, where))
        else:
            losses.append(dropped(where))   # an image by OpenAI file id, reasoning text
    return out


def _tool_choice(choice: str | dict | None, losses: list[Loss], names: ToolNames) -> ToolChoice | None:
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        return ToolChoice(choice)
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom") and isinstance(choice.get("name"), str):
        namespace = choice.get("namespace")
        return ToolChoice("tool", names.function_of(choice["name"], namespace if isinstance(namespace, str) else None))
    tools = choice.get("tools") if isinstance(choice, dict) and choice.get("type") == "allowed_tools" else None
    if isinstance(tools, list) and choice.get("mode") in ("auto", "required"):
        named = [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
        if len(named) == len(tools):
            return ToolChoice(choice["mode"], allowed=tuple(names.function_of(t["name"], None) for t in named))
    losses.append(dropped("tool_choice"))
    return None


def write_request(conv: Conversation, model: str, *, reasons: bool = False) -> tuple[bytes, list[Loss]]:
    """``reasons``: the model reasons (``capabilities: [reasoning]``); with nothing stored, its reasoning is asked
    for encrypted, for the client's next turn to send back (``_reasoning_input``)."""
    losses: list[Loss] = []
    items: list[dict] = []
    for turn in conv.turns:
        if turn.role == "tool":
            for r in turn.parts:
                items.append({"type": "function_call_output", "call_id": r.call_id,
                              "output": _result_output(r, losses)})
        elif turn.role == "assistant":
            texts = [p.text for p in turn.parts if isinstance(p, Text)]
            text = "".join(texts)
            items += _reasoning_input(turn, losses)
            if text or not any(isinstance(p, ToolCall) for p in turn.parts):
                # An empty answer stays a turn: dropped, it would leave the user speaking twice in a row. Several
                # text blocks stay parts (output_text, an assistant message's), not glued together.
                items.append({"type": "message", "role": "assistant", "content": text if len(texts) < 2 else
                              [{"type": "output_text", "text": t} for t in texts]})
            for c in turn.parts:
                if isinstance(c, ToolCall):
                    items.append({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments})
        else:
            # An empty message stays text: a content list must hold a part.
            items.append({"type": "message", "role": turn.role, "content": _content(turn.parts, losses) or ""})
    # store false: the Router keeps the conversation (previous_response_id), not the backend.
    body: dict = {"model": model, "input": items, "store": False}
    if conv.system:
        body["instructions"] = "\n\n".join(t.text for t in conv.system)
    if conv.tools:
        # strict defaults to true on Responses and false elsewhere: say it.
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.parameters or {"type": "object", "properties": {}},
                          "strict": bool(t.strict)} for t in conv.tools]
        for tool in body["tools"]:
            if tool["description"] is None:
                del tool["description"]
    c = conv.tool_choice
    # As on Chat: a tool_choice needs tools; without any, "auto" and "none" say nothing and are left out.
    if c is not None and (conv.tools or c.kind not in ("auto", "none")):
        body["tool_choice"] = {"type": "function", "name": c.name} if c.kind == "tool" else c.kind
        if c.allowed is not None:
            body["tool_choice"] = {"type": "allowed_tools", "mode": c.kind,
                                   "tools": [{"type": "function", "name": n} for n in c.allowed]}
    max_tokens = conv.max_tokens
    if max_tokens is not None and max_tokens < MIN_OUTPUT_TOKENS:
        # OpenAI's Responses refuses less ("integer below minimum value"); a Chat or Messages client may ask for 1.
        losses.append(Loss(CONVERTED, "below_minimum", "max_tokens"))
        max_tokens = MIN_OUTPUT_TOKENS
    for key, value in (("parallel_tool_calls", conv.parallel_tool_calls), ("max_output_tokens", max_tokens),
                       ("temperature", conv.temperature), ("top_p", conv.top_p), ("user", conv.user),
                       ("metadata", conv.metadata)):
        if value is not None:
            body[key] = value
    if conv.stop:
        losses.append(dropped("stop"))
    losses += cache_losses(conv)
    rf = conv.response_format
    schema = rf.get("json_schema") if rf is not None else None
    if rf is not None and rf.get("type") == "json_schema" and isinstance(schema, dict):
        body["text"] = {"format": {"type": "json_schema", **schema}}
    elif rf is not None and rf.get("type") == "json_object":
        body["text"] = {"format": {"type": "json_object"}}
    elif rf is not None and rf.get("type") != "text":
        losses.append(dropped("response_format"))   # a json_schema without its schema, or a type Responses lacks
    effort = conv.reasoning_effort or effort_of_thinking(conv.thinking, losses)
    if effort is not None:
        body["reasoning"] = {"effort": effort}
    if conv.top_k is not None:
        losses.append(dropped("top_k"))   # OpenAI samples by top_p only
    _write_shared(conv, body)
    if reasons and body["store"] is False:
        # Unstored, the model's reasoning survives a tool loop only as the encrypted item the next turn sends back
        # before the call it led to (OpenAI's rule for reasoning models); without it the model starts over.
        body.setdefault("include", []).append(ENCRYPTED_REASONING)
    if conv.prefill is not None:
        losses.append(Loss(CONVERTED, "prefill", conv.prefill))   # Responses answers a new turn, never continues one
    if conv.stream:
        body["stream"] = True
    return ENCODER.encode(body), losses


def _reasoning_input(turn: Turn, losses: list[Loss]) -> list[dict]:
    """An assistant turn's reasoning as input items, ahead of its message and calls, as the model made them: only a
    Responses backend's own (its ``encrypted_content``, carried back in the client's thinking) means anything to it;
    Claude's or another backend's reasoning is dropped."""
    items: list[dict] = []
    for p in turn.parts:
        if not isinstance(p, Thinking):
            continue
        content = encrypted(p)
        if content is None:
            losses.append(dropped(p.path))
        else:
            # No id: with nothing stored there is nothing for one to name (Codex sends none either).
            items.append({"type": "reasoning", "summary": [_summary(p.text)] if p.text else [],
                          "encrypted_content": content})
    return items


def _write_shared(conv: Conversation, body: dict) -> None:
    for key, (value, _) in conv.shared.items():
        if key == "verbosity":
            body.setdefault("text", {})["verbosity"] = value
        elif key == "logprobs":
            if value:
                body["include"] = [LOGPROBS]
        else:
            body[key] = value   # store included: the client's choice over the router's default


def _content(parts: list, losses: list[Loss]) -> list[dict]:
    out: list[dict] = []
    for p in parts:
        if isinstance(p, Text):
            out.append({"type": "input_text", "text": p.text})
        elif isinstance(p, Image):
            image: dict = {"type": "input_image", "image_url": p.url, "detail": p.detail or "auto"}
            out.append(image)
        elif isinstance(p, File):
            f: dict = {"type": "input_file"}
            for key, value in (("file_data", p.data_url), ("file_url", p.url), ("file_id", p.file_id),
                               ("filename", p.filename)):
                if value is not None:
                    f[key] = value
            out.append(f)
        else:
            losses.append(dropped(p.path))
    return out


def _result_output(r: ToolResult, losses: list[Loss]) -> str | list[dict]:
    if r.is_error:
        # No error flag on a function_call_output: the output says it, as the model reads it.
        losses.append(Loss(CONVERTED, "unsupported", f"{r.path}.is_error"))
    if all(isinstance(p, Text) for p in r.content):
        texts = [p.text for p in r.content]
        return error_text(texts) if r.is_error else "\n".join(texts)
    content = _content(r.content, losses)
    if r.is_error:
        content.insert(0, {"type": "input_text", "text": ERROR_MARK})
    return content


# --- answers -------------------------------------------------------------------------------------


def read_answer(body: bytes) -> tuple[Answer, list[Loss]]:
    doc = wire.RESPONSE_DECODER.decode(body)
    if doc.status == "failed":
        err = doc.error or wire.ResponseError()
        raise upstream_error(502, err.message or "the upstream response failed", err.code, "upstream_error")
    losses: list[Loss] = []
    parts: list = _read_output(doc.output, losses)
    usage = read_usage(doc.usage) if doc.usage else None
    return Answer(doc.id, doc.model or "", parts, _finish(doc, parts), usage, int(doc.created_at or 0)), losses


def _read_output(output: list[wire.OutItem], losses: list[Loss]) -> list:
    parts: list = []
    for i, item in enumerate(output):
        where = f"output[{i}]"
        if item.type == "message":
            for j, p in enumerate(item.content or ()):
                if p.type == "output_text":
                    parts.append(Text(p.text or "", f"{where}.content[{j}]", logprobs=tokens(p.logprobs)))
                elif p.type == "refusal":
                    parts.append(Text(p.refusal or "", f"{where}.content[{j}]", refusal=True))
                else:
                    losses.append(dropped(f"{where}.content[{j}]"))
        elif item.type == "function_call":
            parts.append(ToolCall(item.call_id or "", item.name or "", item.arguments or "", where))
        elif item.type == "image_generation_call" and item.result:
            parts.append(GeneratedImage(b64=item.result, path=where))
        elif item.type == "reasoning" and (item.summary or item.encrypted_content):
            parts.append(of_reasoning(summary_text(item.summary), item.encrypted_content, where))
        else:
            losses.append(dropped(where))   # hosted tool calls, reasoning with nothing to show or send back
    return parts


def summary_text(parts: list[wire.OutPart] | None) -> str:
    """A reasoning item's summary as one text: its parts (each a paragraph, headed in bold) a blank line apart."""
    return "\n\n".join(p.text or "" for p in parts or ())


def _finish(doc: wire.Response, parts: list) -> str:
    if doc.status == "incomplete":
        reason = doc.incomplete_details.reason if doc.incomplete_details else None
        return INCOMPLETE_IN.get(reason or "", "length")
    return "tool_calls" if any(isinstance(p, ToolCall) for p in parts) else "stop"


def read_usage(u: wire.Usage) -> Usage:
    """Responses' usage: input_tokens hold the cached tokens already, output_tokens the reasoning."""
    d, o = u.input_tokens_details, u.output_tokens_details
    return Usage(u.input_tokens or 0, u.output_tokens or 0, (d.cached_tokens or 0) if d else 0,
                 (d.cache_write_tokens or 0) if d else 0, (o.reasoning_tokens or 0) if o else 0)


def _usage(u: Usage | None) -> dict:
    u = u or Usage()
    return {"input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cached, "cache_write_tokens": u.cache_write},
            "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": u.reasoning},
            "total_tokens": u.input_tokens + u.output_tokens}


class Echo:
    """The request fields a response object repeats back to the client."""

    __slots__ = ("fields", "names")

    def __init__(self, req: wire.ResponsesRequest | None) -> None:
        self.names: ToolNames = tool_names(req)   # function calls back to the client's tool kinds
        req = req or wire.ResponsesRequest()
        self.fields: dict[str, Any] = {
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "metadata": req.metadata or {},
            "parallel_tool_calls": True if req.parallel_tool_calls is None else req.parallel_tool_calls,
            "previous_response_id": req.previous_response_id,
            "store": True if req.store is None else req.store,
            "temperature": 1.0 if req.temperature is None else req.temperature,
            "tool_choice": req.tool_choice or "auto",
            "tools": [msgspec.Raw(ENCODER.encode(t)) for t in req.tools or ()],
            "top_p": 1.0 if req.top_p is None else req.top_p,
            "user": req.user,
            # As OpenAI's Response object repeats them, with its defaults for those the request left out.
            "text": req.text or {"format": {"type": "text"}},
            "truncation": req.truncation or "disabled",
            "service_tier": req.service_tier or "default",
            "top_logprobs": req.top_logprobs or 0,
            "safety_identifier": req.safety_identifier,
            "prompt_cache_key": req.prompt_cache_key,
        }

    def response(self, id: str, model: str, created: int, status: str, output: list,
                 usage: dict | None, finish: str | None = None) -> dict:
        incomplete = {"reason": INCOMPLETE_OUT[finish]} if status == "incomplete" and finish else None
        return {"id": id, "object": "response", "created_at": created, "status": status, "error": None,
                "incomplete_details": incomplete, "model": model, "output": output, "usage": usage,
                **self.fields}


def output_items(parts: list, new_id: NewId, losses: list[Loss], names: ToolNames | None = None) -> list[dict]:
    """An answer's parts as output items: consecutive texts share one message item; a call of a
    custom or namespaced tool is the client's kind of call again (``names``)."""
    items: list[dict] = []
    for p in parts:
        if isinstance(p, Text):
            part = _text_part(p.refusal, p.text, p.logprobs)
            if items and items[-1]["type"] == "message":
                items[-1]["content"].append(part)
            else:
                items.append({"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                              "content": [part]})
        elif isinstance(p, ToolCall):
            item = call_item(p.id, p.name, names or ToolNames(), new_id)
            _set_call_arguments(item, p.arguments, p.path, losses)
            items.append(item)
        elif isinstance(p, Thinking):
            items.append(reasoning_item(new_id("rs_"), p))
        elif p.b64:
            items.append(_image_item(new_id("ig_"), p))
        else:
            losses.append(dropped(p.path, "url_only"))   # image_generation_call carries base64 only
    return items


def reasoning_item(item_id: str, t: Thinking) -> dict:
    """The reasoning item of ``t``: its text as the summary, Claude's signed block sealed in ``encrypted_content``
    for the client to send back (None for unsigned reasoning: there is nothing to send back)."""
    return {"type": "reasoning", "id": item_id, "summary": [_summary(t.text)] if t.text else [],
            "encrypted_content": seal(t), "status": "completed"}


def _summary(text: str) -> dict:
    return {"type": "summary_text", "text": text}


def _text_part(refusal: bool, text: str, logprobs: list[dict] | None = None) -> dict:
    """A message's content part: the model's refusal is a part of its own kind."""
    if refusal:
        return {"type": "refusal", "refusal": text}
    part: dict = {"type": "output_text", "text": text, "annotations": []}
    if logprobs:
        part["logprobs"] = logprobs
    return part


def call_item(call_id: str, function: str, names: ToolNames, new_id: NewId) -> dict:
    """An in-progress call item for a call of ``function``, as the client declared that tool."""
    tool = names.client_tool(function)
    if tool.custom:
        item = {"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": call_id, "name": tool.name,
                "input": "", "status": "in_progress"}
    else:
        item = {"type": "function_call", "id": new_id("fc_"), "call_id": call_id, "name": tool.name,
                "arguments": "", "status": "in_progress"}
    if tool.namespace is not None:
        item["namespace"] = tool.namespace
    return item


def _set_call_arguments(item: dict, arguments: str, where: str, losses: list[Loss]) -> None:
    """Complete a call item with the model's arguments (a custom call's: its input string)."""
    if item["type"] == "custom_tool_call":
        item["input"] = custom_input(arguments, where, losses)
    else:
        item["arguments"] = arguments
    item["status"] = "completed"


def _image_item(item_id: str, p: GeneratedImage) -> dict:
    item = {"type": "image_generation_call", "id": item_id, "status": "completed", "result": p.b64}
    if p.revised_prompt:
        item["revised_prompt"] = p.revised_prompt
    return item


def write_answer(answer: Answer, echo: Echo, new_id: NewId = new_id) -> tuple[bytes, list[Loss]]:
    losses: list[Loss] = []
    output = output_items(answer.parts, new_id, losses, echo.names)
    status = "incomplete" if answer.finish in INCOMPLETE_OUT else "completed"
    if status == "incomplete" and output and output[-1]["type"] == "message":
        output[-1]["status"] = "incomplete"   # the message the answer was cut short in
    body = echo.response(new_id("resp_"), answer.model, answer.created or int(time.time()), status, output,
                         _usage(answer.usage), answer.finish)
    return ENCODER.encode(body), losses


# --- streams ----------------------------------------------------------------------------------------


class StreamReader:
    """Responses events -> neutral events; an item type nothing else carries is skipped."""

    def __init__(self) -> None:
        self.losses: list[Loss] = []
        self._blocks: dict[tuple[int, int], int] = {}   # (output_index, content_index) -> block
        self._sent: dict[int, int] = {}                  # block -> characters sent so far
        self._open: int | None = None                    # the open text block
        # Function calls stay open until their item is done: a backend may stream calls side by side.
        self._open_calls: list[int] = []
        self._next = 0
        self._tools = False
        self._done = False
        self._summary: dict[int, tuple[int, int]] = {}   # thinking block -> (its summary part, characters sent)
        self._reasoning: set[int] = set()   # the reasoning items begun whose block has not

    def event(self, name: str | None, data: bytes) -> list[Event]:
        if self._done:
            return []
        ev = wire.EVENT_DECODER.decode(data)
        t = ev.type
        if t == "response.created" and ev.response is not None:
            r = ev.response
            return [Started(r.id, r.model or "", int(r.created_at or 0))]
        if t == "response.output_item.added" and ev.item is not None:
            return self._item_added(ev)
        if t == "response.content_part.added" and ev.part is not None:
            if ev.part.type not in ("output_text", "refusal"):
                return []
            return self._start((ev.output_index, ev.content_index),
                               BlockStart(self._next, "text", refusal=ev.part.type == "refusal"))
        if t in ("response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta"):
            key = (ev.output_index, ev.content_index if t != "response.function_call_arguments.delta" else -1)
            return self._delta(key, ev.delta or "", t.endswith("arguments.delta"), tokens(ev.logprobs))
        if t in ("response.output_text.done", "response.refusal.done"):
            return self._catch_up((ev.output_index, ev.content_index), ev.text or "", False)
        if t == "response.function_call_arguments.done":
            return self._catch_up((ev.output_index, -1), ev.arguments or "", True)
        if t == "response.content_part.done":
            return self._stop((ev.output_index, ev.content_index))
        if t == "response.reasoning_summary_text.delta":
            return self._summary_delta(ev.output_index, ev.summary_index, ev.delta or "")
        if t == "response.reasoning_summary_text.done":
            return self._summary_done(ev.output_index, ev.summary_index, ev.text or "")
        if t == "response.output_item.done" and ev.item is not None:
            return self._item_done(ev)
        if t in ("response.completed", "response.incomplete") and ev.response is not None:
            self._done = True
            r = ev.response
            usage = read_usage(r.usage) if r.usage else None
            finish = _finish(r, [ToolCall("", "", "")] if self._tools else [])
            return [*self._stop_open(), Finished(finish, usage)]
        if t in ("response.failed", "error"):
            self._done = True
            return [_failure(ev)]
        return []   # in_progress, reasoning text (the summary is what shows) and image partials: nothing to carry

    def _item_added(self, ev: wire.Event) -> list[Event]:
        item = ev.item
        if item.type == "function_call":
            self._tools = True
            out = self._start((ev.output_index, -1), BlockStart(self._next, "tool", item.call_id or "", item.name or ""))
            if item.arguments:
                out += self._delta((ev.output_index, -1), item.arguments, True)
            return out
        if item.type == "reasoning":
            self._reasoning.add(ev.output_index)   # its block begins with its first text or its encrypted_content
            return []
        if item.type not in ("message", "image_generation_call"):
            self.losses.append(dropped(f"output[{ev.output_index}]"))
        return []

    def _summary_delta(self, n: int, k: int, delta: str) -> list[Event]:
        """A piece of part ``k`` of reasoning item ``n``'s summary; a new part begins a blank line on, as
        ``summary_text`` joins them."""
        if not delta:
            return []
        block, out = self._thought(n)
        if block is None or block != self._open:
            return out
        at = self._summary.get(block)
        out += [TextDelta(block, "\n\n")] if at is not None and at[0] != k else []
        self._summary[block] = (k, (at[1] if at is not None and at[0] == k else 0) + len(delta))
        return out + [TextDelta(block, delta)]

    def _thought(self, n: int) -> tuple[int | None, list[Event]]:
        """The thinking block of reasoning item ``n``, begun now if it has not been (and the events that begin
        it); None for an item that is not one begun."""
        block = self._blocks.get((n, REASONING))
        if block is not None or n not in self._reasoning:
            return block, []
        self._reasoning.discard(n)
        start = BlockStart(self._next, "thinking")
        return start.index, self._start((n, REASONING), start)

    def _summary_done(self, n: int, k: int, text: str) -> list[Event]:
        """Part ``k`` of the summary whole: what of it no delta brought (a backend that sends only ``.done``)."""
        at = self._summary.get(self._blocks.get((n, REASONING), -1))
        if at is not None and at[0] > k:
            return []   # a part gone by
        return self._summary_delta(n, k, text[at[1] if at is not None and at[0] == k else 0:])

    def _item_done(self, ev: wire.Event) -> list[Event]:
        item = ev.item
        if item.type == "reasoning":
            # Its encrypted_content comes whole here, at its end: the block's signature, then the block ends.
            out = [e for k, part in enumerate(item.summary or ())
                   for e in self._summary_done(ev.output_index, k, part.text or "")]
            signature = OPENAI + item.encrypted_content if item.encrypted_content else None
            if signature is None and (ev.output_index, REASONING) not in self._blocks:
                if ev.output_index in self._reasoning:   # nothing to show or send back, as read_answer drops it
                    self._reasoning.discard(ev.output_index)
                    self.losses.append(dropped(f"output[{ev.output_index}]"))
                return out
            block, started = self._thought(ev.output_index)
            if block is None or block != self._open:
                return out + started
            return out + started + ([SignatureDelta(block, signature)] if signature else []) + self._stop_text()
        if item.type == "function_call":
            out = self._catch_up((ev.output_index, -1), item.arguments or "", True)
            return out + self._stop((ev.output_index, -1))
        if item.type == "image_generation_call" and item.result:
            out = self._stop_text()
            block = self._next
            self._next += 1
            return out + [BlockStart(block, "image", image=GeneratedImage(b64=item.result)), BlockStop(block)]
        return []

    def _start(self, key: tuple[int, int], start: BlockStart) -> list[Event]:
        out = self._stop_text()
        self._blocks[key] = start.index
        if start.kind == "tool":
            self._open_calls.append(start.index)
        else:
            self._open = start.index
        self._sent[start.index] = 0
        self._next += 1
        return out + [start]

    def _delta(self, key: tuple[int, int], delta: str, args: bool, logprobs: list[dict] | None = None) -> list[Event]:
        block = self._blocks.get(key)
        if block is None or not delta:
            return []
        self._sent[block] += len(delta)
        return [ArgsDelta(block, delta) if args else TextDelta(block, delta, logprobs)]

    def _catch_up(self, key: tuple[int, int], full: str, args: bool) -> list[Event]:
        """A backend that sends only ``.done`` events (no deltas) still gets its text through."""
        block = self._blocks.get(key)
        if block is None:
            return []
        rest = full[self._sent[block]:]
        return self._delta(key, rest, args) if rest else []

    def _stop(self, key: tuple[int, int]) -> list[Event]:
        block = self._blocks.get(key)
        if block is not None and block in self._open_calls:
            self._open_calls.remove(block)
            return [BlockStop(block)]
        return self._stop_text() if block is not None and block == self._open else []

    def _stop_text(self) -> list[Event]:
        if self._open is None:
            return []
        block, self._open = self._open, None
        return [BlockStop(block)]

    def _stop_open(self) -> list[Event]:
        out, self._open_calls = [BlockStop(block) for block in self._open_calls], []
        return self._stop_text() + out

    def close(self) -> list[Event]:
        if self._done:
            return []
        self._done = True
        return [Failed("the upstream stream ended before the answer did", 502, "upstream_failed")]


class StreamWriter:
    """Neutral events -> Responses events, numbered; keeps the output for the final response object."""

    def __init__(self, echo: Echo, new_id: NewId = new_id, first_sequence: int = 0) -> None:
        self.losses: list[Loss] = []
        self.final: bytes | None = None   # the response object of response.completed/incomplete
        self._echo = echo
        self._new_id = new_id
        self._seq = first_sequence
        self._id = ""
        self._model = ""
        self._created = 0
        self._output: list[dict] = []
        self._items: dict[int, int] = {}    # block -> output index
        self._open: int | None = None
        self._message: int | None = None    # the output index of the message item texts go into
        self._custom: dict[int, str] = {}   # output index of a custom tool call -> its JSON arguments so far
        self._thoughts: dict[int, Thinking] = {}   # output index of a reasoning item -> its thinking so far

    def _event(self, kind: str, fields: dict) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return named_event(kind.encode(), ENCODER.encode(data))

    def _response(self, status: str, usage: dict | None = None, finish: str | None = None) -> dict:
        return self._echo.response(self._id, self._model, self._created, status, self._output, usage, finish)

    def write(self, ev: Event) -> bytes:
        if isinstance(ev, Started):
            self._id, self._model = self._new_id("resp_"), ev.model
            self._created = ev.created or int(time.time())
            r = self._response("in_progress")
            return self._event("response.created", {"response": r}) + self._event("response.in_progress", {"response": r})
        if isinstance(ev, BlockStart):
            return self._start(ev)
        if isinstance(ev, TextDelta):
            return self._text(ev)
        if isinstance(ev, ArgsDelta):
            if ev.index != self._open:
                self.losses.append(dropped(f"output[{self._items.get(ev.index, -1)}]", "interleaved"))
                return b""
            n = self._items[ev.index]
            if n in self._custom:
                # A custom call's input is a string inside these JSON arguments: sent whole at its end.
                self._custom[n] += ev.json
                return b""
            self._output[n]["arguments"] += ev.json
            return self._event("response.function_call_arguments.delta",
                               {"item_id": self._output[n]["id"], "output_index": n, "delta": ev.json})
        if isinstance(ev, SignatureDelta):
            return self.signature(ev)
        if isinstance(ev, BlockStop):
            return self._stop(ev.index) if ev.index == self._open else b""
        if isinstance(ev, Finished):
            return self._finish(ev)
        return self.fail(ev.message, ev.status, ev.code, ev.type)

    def _start(self, ev: BlockStart) -> bytes:
        out = self._stop(self._open) if self._open is not None else b""
        if ev.kind == "image":
            if ev.image is None or not ev.image.b64:
                self.losses.append(dropped(f"output[{len(self._output)}]", "url_only"))
                return out
            out += self._close_message()
            item = _image_item(self._new_id("ig_"), ev.image)
            n = len(self._output)
            self._output.append(item)
            pending = {**item, "status": "in_progress", "result": None}
            return (out + self._event("response.output_item.added", {"output_index": n, "item": pending})
                    + self._event("response.output_item.done", {"output_index": n, "item": item}))
        self._open = ev.index
        if ev.kind == "thinking":
            out += self._close_message()
            n = self._items[ev.index] = len(self._output)
            self._output.append(reasoning_item(self._new_id("rs_"), Thinking(redacted=ev.redacted)))
            self._thoughts[n] = Thinking(redacted=ev.redacted)
            pending = {**self._output[n], "status": "in_progress", "encrypted_content": None}
            return out + self._event("response.output_item.added", {"output_index": n, "item": pending})
        if ev.kind == "tool":
            out += self._close_message()
            n = self._items[ev.index] = len(self._output)
            item = call_item(ev.call_id, ev.name, self._echo.names, self._new_id)
            if item["type"] == "custom_tool_call":
                self._custom[n] = ""
            self._output.append(item)
            return out + self._event("response.output_item.added", {"output_index": n, "item": dict(item)})
        if self._message is None:
            self._message = len(self._output)
            item = {"type": "message", "id": self._new_id("msg_"), "status": "in_progress", "role": "assistant",
                    "content": []}
            self._output.append(item)
            out += self._event("response.output_item.added", {"output_index": self._message, "item": dict(item, content=[])})
        n = self._items[ev.index] = self._message
        message = self._output[n]
        part = _text_part(ev.refusal, "")
        message["content"].append(part)
        return out + self._event("response.content_part.added", {
            "item_id": message["id"], "output_index": n, "content_index": len(message["content"]) - 1,
            "part": dict(part)})

    def _text(self, ev: TextDelta) -> bytes:
        if ev.index != self._open:
            self.losses.append(dropped(f"output[{self._items.get(ev.index, -1)}]", "interleaved"))
            return b""
        n = self._items[ev.index]
        message = self._output[n]
        if message["type"] == "reasoning":
            return self._reasoning_text(n, ev.text)
        part = message["content"][-1]
        if part["type"] == "refusal":
            part["refusal"] += ev.text
            return self._event("response.refusal.delta", {
                "item_id": message["id"], "output_index": n, "content_index": len(message["content"]) - 1,
                "delta": ev.text})
        part["text"] += ev.text
        if ev.logprobs:
            part.setdefault("logprobs", []).extend(ev.logprobs)
        return self._event("response.output_text.delta", {
            "item_id": message["id"], "output_index": n, "content_index": len(message["content"]) - 1,
            "delta": ev.text, "logprobs": ev.logprobs or []})

    def _reasoning_text(self, n: int, text: str) -> bytes:
        """Reasoning text, streamed as its item's summary (one summary part, opened at the first text)."""
        item, thought = self._output[n], self._thoughts[n]
        self._thoughts[n] = msgspec.structs.replace(thought, text=thought.text + text)
        ids = {"item_id": item["id"], "output_index": n, "summary_index": 0}
        out = b""
        if not item["summary"]:
            item["summary"].append(_summary(""))
            out = self._event("response.reasoning_summary_part.added", {**ids, "part": _summary("")})
        item["summary"][0]["text"] += text
        return out + self._event("response.reasoning_summary_text.delta", {**ids, "delta": text})

    def signature(self, ev: SignatureDelta) -> bytes:
        n = self._items.get(ev.index)
        if ev.index == self._open and n in self._thoughts:
            self._thoughts[n] = msgspec.structs.replace(self._thoughts[n], signature=ev.signature)
        return b""

    def _stop_reasoning(self, n: int) -> bytes:
        item = self._output[n]
        item["encrypted_content"] = seal(self._thoughts.pop(n))
        out = b""
        if item["summary"]:
            ids = {"item_id": item["id"], "output_index": n, "summary_index": 0}
            part = item["summary"][0]
            out = (self._event("response.reasoning_summary_text.done", {**ids, "text": part["text"]})
                   + self._event("response.reasoning_summary_part.done", {**ids, "part": part}))
        return out + self._event("response.output_item.done", {"output_index": n, "item": item})

    def _stop(self, block: int) -> bytes:
        self._open = None
        n = self._items[block]
        item = self._output[n]
        if item["type"] == "reasoning":
            return self._stop_reasoning(n)
        if item["type"] == "custom_tool_call":
            _set_call_arguments(item, self._custom.pop(n), f"output[{n}]", self.losses)
            ids = {"item_id": item["id"], "output_index": n}
            return (self._event("response.custom_tool_call_input.delta", {**ids, "delta": item["input"]})
                    + self._event("response.custom_tool_call_input.done", {**ids, "input": item["input"]})
                    + self._event("response.output_item.done", {"output_index": n, "item": item}))
        if item["type"] == "function_call":
            item["status"] = "completed"
            return (self._event("response.function_call_arguments.done",
                                {"item_id": item["id"], "output_index": n, "arguments": item["arguments"]})
                    + self._event("response.output_item.done", {"output_index": n, "item": item}))
        k = len(item["content"]) - 1
        part = item["content"][k]
        if part["type"] == "refusal":
            return (self._event("response.refusal.done", {"item_id": item["id"], "output_index": n,
                                                          "content_index": k, "refusal": part["refusal"]})
                    + self._event("response.content_part.done", {"item_id": item["id"], "output_index": n,
                                                                 "content_index": k, "part": part}))
        return (self._event("response.output_text.done", {"item_id": item["id"], "output_index": n,
                                                          "content_index": k, "text": part["text"],
                                                          "logprobs": part.get("logprobs", [])})
                + self._event("response.content_part.done", {"item_id": item["id"], "output_index": n,
                                                             "content_index": k, "part": part}))

    def _close_message(self, status: str = "completed") -> bytes:
        if self._message is None:
            return b""
        n, self._message = self._message, None
        item = self._output[n]
        item["status"] = status
        return self._event("response.output_item.done", {"output_index": n, "item": item})

    def _finish(self, ev: Finished) -> bytes:
        out = self._stop(self._open) if self._open is not None else b""
        status = "incomplete" if ev.finish in INCOMPLETE_OUT else "completed"
        # A message item stays open across its text blocks; a tool or image item, or the end, closes it: the end
        # of an answer cut short leaves the message it was cut in incomplete.
        last = self._message is not None and self._message == len(self._output) - 1
        out += self._close_message(status if last else "completed")
        r = self._response(status, _usage(ev.usage), ev.finish)
        self.final = ENCODER.encode(r)
        return out + self._event(f"response.{status}", {"response": r})

    def opened(self, data: bytes) -> None:
        """Continue the response a backend's ``response.created`` (``data``) opened, for a stream relayed as it
        came: a failure then ends that response, not another one."""
        try:
            ev = wire.EVENT_DECODER.decode(data)
        except msgspec.DecodeError:
            return
        if ev.type == "response.created" and ev.response is not None:
            r = ev.response
            self._id, self._model, self._created = r.id, r.model or "", int(r.created_at or 0)

    def fail(self, message: str, status: int, code: str | None, kind: str | None = None) -> bytes:
        """The failure as OpenAI ends a streamed response: ``response.failed`` (status failed, the error in it),
        then the ``error`` event. Its ``responses.stream()`` helper needs a response opened before: one that none
        opened yet (a held stream refused whole) is opened here, with nothing of the answer in it."""
        out = b""
        if not self._id:
            self._id, self._created = self._new_id("resp_"), int(time.time())
            out = self._event("response.created", {"response": self._response("in_progress")})
        failed = self._response("failed")
        failed["error"] = {"code": _code(status, code), "message": message}
        return out + self._event("response.failed", {"response": failed}) + self.error(message, status, code, kind)

    def error(self, message: str, status: int, code: str | None, kind: str | None = None) -> bytes:
        """The ``error`` event alone. The openai SDK raises its ``APIError`` on one whose fields are nested under
        ``error``, as the live API sends them (the flat ones are the documented shape; both go)."""
        code = _code(status, code)
        # Typed by the status, as every error of the client's API is: ``kind`` (the failure's own word) may be
        # another API's (Anthropic's overloaded_error) or the router's.
        error = {"type": openai_type(status), "code": code, "message": message, "param": None}
        return self._event("error", {"code": code, "message": message, "param": None, "error": error})


def _code(status: int, code: str | None) -> str:
    return code or ("server_error" if status >= 500 else "invalid_request")


def _failure(ev: wire.Event) -> Failed:
    """A ``response.failed`` or ``error`` event's failure: its fields flat (the documented error event), nested
    under ``error`` (the live API's), or in the failed response."""
    err = ev.error or (ev.response.error if ev.response and ev.response.error else None)
    message = ev.message or (err.message if err else "") or "the upstream response failed"
    code = ev.code or (err.code if err else None)
    return Failed(message, 529 if code == "overloaded" else 500, code, err.type if err else None)


def passthrough_fail(message: str, status: int, code: str | None, kind: str | None, events: int, head: bytes,
                     *, alone: bool = False) -> bytes:
    """The failure ending a relayed Responses stream of ``events`` events whose first is ``head``: the response
    the backend opened ends failed, numbered on; ``alone``: the error event only (a response.failed has gone)."""
    writer = StreamWriter(Echo(None), first_sequence=events)
    for _, data in SSEParser().feed(head):
        writer.opened(data)
    if alone:
        return writer.error(message, status, code, kind)
    return writer.fail(message, status, code, kind)


_EVENT_END = re.compile(rb"(\r?\n\r?\n)")


class ErrorRestater:
    """A Responses backend's own ``error`` events, relayed as the router's own failures end a stream (``fail``):
    ``response.failed`` ending the response the backend opened, then the error event, its fields flat and nested,
    with the backend's message, code and type. Relayed as it came, the documented flat event was one the openai
    SDK yields and does not raise on, and ``responses.stream()`` never saw the response fail. A ``response.failed``
    of the backend's before its error is kept (the error then restated alone); one after it is dropped: the
    response has ended. Called with the whole events a passthrough releases, the count before them and the
    first event of the stream; one ``in`` test for events that name neither."""

    __slots__ = ("_failed",)

    def __init__(self) -> None:
        self._failed = False       # a response.failed has reached the client

    def __call__(self, out: bytes, events: int, head: bytes) -> bytes:
        if b"error" not in out and b"failed" not in out:
            return out
        parts = _EVENT_END.split(out)   # event, its end, event, its end, ..., what follows the last end
        kept: list[bytes] = []
        for i in range(0, len(parts), 2):
            event, end = parts[i], parts[i + 1] if i + 1 < len(parts) else b""
            kind = _event_type(event)
            if kind == "response.failed":
                if self._failed:
                    continue
                self._failed = True
            elif kind == "error":
                f = _failure(wire.EVENT_DECODER.decode(_event_data(event)))
                sequence = events + sum(x.count(b"\n\n") for x in kept)
                kept.append(passthrough_fail(f.message, f.status, f.code, f.type, sequence, head, alone=self._failed))
                self._failed = True
                continue
            kept += (event, end)
        return b"".join(kept)


def _event_data(event: bytes) -> bytes:
    found = SSEParser().feed(event + b"\n\n")
    return found[0][1] if found else b""


def _event_type(event: bytes) -> str | None:
    try:
        return wire.EVENT_DECODER.decode(_event_data(event)).type
    except msgspec.DecodeError:     # not one of the protocol's events: the backend's check refuses it
        return None
