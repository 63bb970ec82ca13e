"""Anthropic Messages <-> the neutral forms."""
from __future__ import annotations

from typing import Any

import msgspec

from .. import anthropic as wire
from ._common import (
    EFFORT_BUDGET, ENCODER, data_url, dumps, native_id, parse_arguments, read_error, safe_token, split_data_url,
    unknown_fields,
)
from ._ir import (
    Answer, ArgsDelta, BlockStart, BlockStop, Conversation, Event, Failed, File, Finished,
    Image, NoTurns, SignatureDelta, Started, Text, TextDelta, Thinking, ToolCall, ToolChoice, ToolDef, ToolResult,
    Turn, Usage,
)
from ._thinking import OPENAI, anthropic_block
from ._losses import CONVERTED, DEFAULTED, MOVED, Loss, dropped
from ._sse import named_event

PATH = "/messages"
WEB_SEARCH_TOOL = "web_search_20250305"
ID = "msg_"   # the prefix of an answer's id
# Anthropic requires max_tokens; a Chat or Responses client that leaves it out gets this,
# recorded as a "defaulted" loss. 4096 is what every current Claude model can produce.
DEFAULT_MAX_TOKENS = 4096
KNOWN = frozenset({
    "model", "messages", "max_tokens", "system", "stop_sequences", "temperature", "top_p", "tools",
    "tool_choice", "metadata", "stream", "thinking", "top_k", "output_config", "output_format",
})
# A Chat or Responses client's structured output (response_format json_schema or json_object, text.format) reaches
# Claude as LiteLLM carries it: one more tool, of this name, whose input schema is the client's schema, and which
# the model is made to call; its call comes back to the client as the answer's text (``unwrap_json``).
JSON_TOOL = "json_tool_call"
JSON_OBJECT = {"type": "object", "additionalProperties": True}   # json_object: any JSON object
JSON_INSTRUCTION = (f"Give your final answer by calling the {JSON_TOOL} tool, its input being the answer as a JSON "
                    "object; do not answer in text.")
FINISH_IN = {"end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop_sequence",
             "tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop",
             "model_context_window_exceeded": "length"}
FINISH_OUT = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
              "stop_sequence": "stop_sequence", "content_filter": "refusal"}
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_MEDIA_ALIASES = {"image/jpg": "image/jpeg"}   # what clients write for JPEG, that Anthropic refuses


# --- request -------------------------------------------------------------------------


def read_request(req: wire.MessagesRequest, raw: bytes) -> tuple[Conversation, list[Loss]]:
    losses = unknown_fields(raw, KNOWN)
    conv = Conversation(turns=[], stream=req.stream, max_tokens=req.max_tokens, temperature=req.temperature,
                        top_p=req.top_p, stop=list(req.stop_sequences or ()), stop_path="stop_sequences")
    if isinstance(req.system, str):
        conv.system = [Text(req.system, "system")] if req.system else []
    elif req.system:
        conv.system = [Text(b.text, f"system[{i}]") for i, b in enumerate(req.system)]
    for i, m in enumerate(req.messages):
        _read_message(m, f"messages[{i}]", conv, losses)
    last = conv.turns[-1] if conv.turns else None
    if last is not None and last.role == "assistant" and not any(isinstance(p, ToolCall) for p in last.parts):
        conv.prefill = last.path   # the answer continues this turn: only Messages does that
    for i, tool in enumerate(req.tools or ()):
        if tool.is_client_tool:
            conv.tools.append(ToolDef(tool.name, tool.description, tool.input_schema, tool.strict, f"tools[{i}]"))
        else:
            losses.append(dropped(f"tools[{i}]"))   # a server tool runs at Anthropic only
    c = req.tool_choice
    if c is not None:
        name = c.name if isinstance(c, wire.ToolChoiceTool) else None
        if not conv.tools or (name is not None and all(t.name != name for t in conv.tools)):
            # Its tools dropped (server tools), a choice would name or require what the provider was not given:
            # OpenAI refuses a tool_choice, and parallel_tool_calls, without tools.
            losses.append(dropped("tool_choice"))
        else:
            conv.tool_choice = ToolChoice({"any": "required"}.get(c.kind, c.kind), name)
            if c.disable_parallel_tool_use is not None:
                conv.parallel_tool_calls = not c.disable_parallel_tool_use
    meta = req.metadata or {}
    if isinstance(meta.get("user_id"), str):
        conv.user = meta["user_id"]
    conv.thinking = msgspec.to_builtins(req.thinking) if req.thinking is not None else None
    conv.top_k = req.top_k
    _read_output_config(raw, conv, losses)
    return conv, losses


class _OutputConfig(msgspec.Struct):
    output_config: dict | None = None
    output_format: Any = None    # structured output's beta spelling, before output_config.format


_OUTPUT_CONFIG = msgspec.json.Decoder(_OutputConfig)
# The name an OpenAI-format backend's json_schema requires, which Anthropic's structured output has not.
SCHEMA_NAME = "output"


def _read_output_config(raw: bytes, conv: Conversation, losses: list[Loss]) -> None:
    """Claude Code's adaptive thinking (``thinking: {type: adaptive}``) takes its depth from
    ``output_config.effort``: an OpenAI-format backend's reasoning effort. Structured output (``output_config.format``,
    or the beta's ``output_format``) is the neutral ``response_format``, strict, as Anthropic holds Claude to it."""
    try:
        doc = _OUTPUT_CONFIG.decode(raw)
    except msgspec.DecodeError:
        return
    if doc.output_format is not None:
        _read_format(doc.output_format, "output_format", conv, losses)
    config = doc.output_config
    if config is None:
        return
    effort = config.get("effort")
    adaptive = (conv.thinking or {}).get("type") == "adaptive"
    for key in config:
        if key == "format":
            _read_format(config["format"], "output_config.format", conv, losses)
        elif key != "effort" or not adaptive or not isinstance(effort, str):
            losses.append(dropped(f"output_config.{key}"))
    if adaptive and isinstance(effort, str):
        conv.thinking = {**conv.thinking, "effort": effort}


def _read_format(fmt: object, path: str, conv: Conversation, losses: list[Loss]) -> None:
    schema = fmt.get("schema") if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None
    if isinstance(schema, dict):
        conv.response_format = {"type": "json_schema",
                                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True}}
    else:
        losses.append(dropped(path))


def _read_message(m: wire.Message, path: str, conv: Conversation, losses: list[Loss]) -> None:
    if m.role == "system":
        _read_system(m, path, conv, losses)
        return
    if isinstance(m.content, str):
        conv.turns.append(Turn(m.role, [Text(m.content, f"{path}.content")], path))
        return
    turn: Turn | None = None
    for j, block in enumerate(m.content):
        where = f"{path}.content[{j}]"
        if isinstance(block, wire.ToolResultBlock):
            part = ToolResult(block.tool_use_id, _result_content(block, where, losses), block.is_error, where)
            role = "tool"
        else:
            part = _part(block, where, losses)
            role = m.role
            if isinstance(part, Thinking) and role != "assistant":
                losses.append(dropped(where))   # only the model's own turn holds its thinking
                continue
            if part is None:
                continue
        # A user message mixing tool results and text becomes a tool turn then a user turn.
        if turn is None or turn.role != role:
            turn = Turn(role, [], path)
            conv.turns.append(turn)
        turn.parts.append(part)


def _read_system(m: wire.Message, path: str, conv: Conversation, losses: list[Loss]) -> None:
    """A system message in ``messages`` (Claude Code's mid-conversation instructions): before
    any turn it joins the system prompt; later it is a system turn, which Chat and Responses
    carry in place and a translated Messages body moves into its system prompt."""
    if isinstance(m.content, str):
        texts = [Text(m.content, f"{path}.content")]
    else:
        texts = []
        for j, block in enumerate(m.content):
            if isinstance(block, wire.TextBlock):
                texts.append(Text(block.text, f"{path}.content[{j}]"))
            else:
                losses.append(dropped(f"{path}.content[{j}]"))   # instructions are text
    if not conv.turns:
        conv.system += texts
    else:
        conv.turns.append(Turn("system", list(texts), path))


def _part(block, where: str, losses: list[Loss]):
    if isinstance(block, wire.TextBlock):
        return Text(block.text, where)
    if isinstance(block, wire.ImageBlock):
        return _image(block.source, where, losses)
    if isinstance(block, wire.DocumentBlock):
        return _document(block, where, losses)
    if isinstance(block, wire.ToolUseBlock):
        return ToolCall(block.id, block.name, dumps(block.input), where)
    if isinstance(block, wire.ThinkingBlock):
        return Thinking(block.thinking, block.signature or None, path=where)
    if isinstance(block, wire.RedactedThinkingBlock):
        return Thinking(redacted=block.data, path=where)
    if isinstance(block, wire.SearchResultBlock):
        # What the model is to cite, as text: the citations themselves only Anthropic makes.
        losses.append(Loss(CONVERTED, "unsupported", where))
        return Text("\n".join([f"{block.title} ({block.source})", *(b.text for b in block.content)]), where)
    if isinstance(block, wire.ToolReferenceBlock):
        # A tool search's find (Claude Code's ToolSearch): the tool is among those the translation sends
        # anyway (every tool, deferred or not), so the model is told it by name.
        losses.append(Loss(CONVERTED, "unsupported", where))
        return Text(f"Tool loaded: {block.tool_name}", where)
    losses.append(dropped(where))   # server tool blocks, and block types nothing else carries
    return None


def _image(source, where: str, losses: list[Loss]) -> Image | None:
    if isinstance(source, wire.Base64Source):
        return Image(data_url(source.media_type, source.data), path=where)
    if isinstance(source, wire.URLSource):
        return Image(source.url, path=where)
    losses.append(dropped(f"{where}.source"))   # an Anthropic file id means nothing elsewhere
    return None


def _document(block: wire.DocumentBlock, where: str, losses: list[Loss]):
    s = block.source
    if isinstance(s, wire.Base64Source):
        return File(data_url=data_url(s.media_type, s.data), filename=block.title, path=where)
    if isinstance(s, wire.URLSource):
        return File(url=s.url, filename=block.title, path=where)
    if isinstance(s, wire.TextSource):
        return Text(s.data, where)
    losses.append(dropped(f"{where}.source"))
    return None


def _result_content(block: wire.ToolResultBlock, where: str, losses: list[Loss]) -> list:
    if block.content is None:
        return []
    if isinstance(block.content, str):
        return [Text(block.content, f"{where}.content")]
    parts = [_part(b, f"{where}.content[{k}]", losses) for k, b in enumerate(block.content)]
    return [p for p in parts if p is not None]


def signed_only(req: wire.MessagesRequest, raw: bytes) -> tuple[bytes, list[Loss]]:
    """A Messages client's body (``raw``) for an Anthropic backend, without the thinking blocks no Anthropic model
    signed (an empty or absent signature: an OpenAI-format backend's reasoning, as the router wrote it, or the
    client's own; a Responses backend's encrypted reasoning, ``OPENAI``), which Anthropic refuses ("Invalid
    signature in thinking block"), each listed as a translation drops them; then thinking left off where the tool loop lost its block (``_thinking_history``'s rule). ``raw``
    itself when there is none: the client's bytes go unchanged."""
    unsigned = [(i, j) for i, m in enumerate(req.messages) if not isinstance(m.content, str)
                for j, b in enumerate(m.content)
                if isinstance(b, wire.ThinkingBlock) and (not b.signature or b.signature.startswith(OPENAI))]
    if not unsigned:
        return raw, []
    body = msgspec.json.decode(raw)
    for i, j in reversed(unsigned):
        del body["messages"][i]["content"][j]
    losses = [dropped(f"messages[{i}].content[{j}]", "unsigned") for i, j in unsigned]
    # A turn of nothing else is refused ("all messages must have non-empty content"): it goes, and Anthropic joins
    # the turns of one role it leaves side by side.
    emptied = {i for i, m in enumerate(body["messages"]) if m.get("content") == []}
    losses += [dropped(f"messages[{i}]", "empty") for i in sorted(emptied)]
    body["messages"] = [m for i, m in enumerate(body["messages"]) if i not in emptied]
    if (body.get("thinking") or {}).get("type") not in (None, "disabled") and wire.thinking_block_missing(body):
        del body["thinking"]
        losses.append(dropped("thinking", "no_thinking_block"))
    return ENCODER.encode(body), losses


def without_reasoning(raw: bytes) -> tuple[bytes, list[Loss]]:
    """A Messages body (``raw``) for a model that does not reason, without its ``thinking`` and Claude Code's
    ``output_config.effort`` (Claude's older models refuse both), each listed; ``raw`` itself when it has none."""
    if b'"thinking"' not in raw and b'"effort"' not in raw:
        return raw, []
    body = msgspec.json.decode(raw)
    losses = []
    if "thinking" in body:
        del body["thinking"]
        losses.append(dropped("thinking", "model_does_not_reason"))
    config = body.get("output_config")
    if isinstance(config, dict) and "effort" in config:
        rest = {k: v for k, v in config.items() if k != "effort"}
        if rest:
            body["output_config"] = rest
        else:
            del body["output_config"]
        losses.append(dropped("output_config.effort", "model_does_not_reason"))
    return (ENCODER.encode(body), losses) if losses else (raw, [])


def write_request(conv: Conversation, model: str) -> tuple[bytes, list[Loss]]:
    losses: list[Loss] = []
    system = [_block(t, losses) for t in conv.system]
    messages: list[dict] = []
    for turn in conv.turns:
        if turn.role == "system":
            # Anthropic has one system prompt, before the conversation.
            system += [_marker({"type": "text", "text": p.text}, p) for p in turn.parts]
            losses.append(Loss(MOVED, "position", turn.path))
            continue
        role = "assistant" if turn.role == "assistant" else "user"
        blocks = [b for b in (_block(p, losses) for p in turn.parts) if b is not None]
        if not blocks:
            # Anthropic refuses a message without content ("all messages must have non-empty content").
            losses.append(dropped(turn.path, "empty"))
            continue
        if messages and messages[-1]["role"] == role:
            # Tool results and the user's next words share a turn, the results first: Anthropic refuses a
            # tool_result after another block.
            merged = messages[-1]["content"] + blocks
            messages[-1]["content"] = [b for b in merged if b["type"] == "tool_result"] + \
                [b for b in merged if b["type"] != "tool_result"]
        else:
            messages.append({"role": role, "content": blocks})
    if not messages:
        raise NoTurns
    body: dict = {"model": model, "messages": messages}
    if conv.max_tokens is None:
        losses.append(Loss(DEFAULTED, "required", "max_tokens"))
    body["max_tokens"] = conv.max_tokens or DEFAULT_MAX_TOKENS
    if system:
        body["system"] = system
    if conv.tools:
        allowed = conv.tool_choice.allowed if conv.tool_choice is not None else None
        # Anthropic has no allowed_tools: the model is offered the allowed tools alone.
        tools = [_tool(t) for t in conv.tools if allowed is None or t.name in allowed]
        if tools:
            body["tools"] = tools
        if allowed is not None:
            losses.append(Loss(CONVERTED, "allowed_tools", conv.tool_choice.path))
    if conv.web_search:
        # Anthropic's own web search, as LiteLLM maps OpenAI's: the answer's text comes back with what it found
        # (its server_tool_use and web_search_tool_result blocks are Anthropic's alone: dropped, listed).
        body["tools"] = [*body.get("tools", ()), {"type": WEB_SEARCH_TOOL, "name": "web_search"}]
    choice = _tool_choice(conv, losses)
    if choice is not None:
        body["tool_choice"] = choice
    if conv.temperature is not None:
        body["temperature"] = min(conv.temperature, 1.0)
        if conv.temperature > 1.0:
            losses.append(Loss(CONVERTED, "out_of_range", "temperature"))
    if conv.top_p is not None:
        body["top_p"] = conv.top_p
    # Anthropic refuses a stop sequence of whitespace only ("each stop sequence must contain non-whitespace").
    stop = [s for s in conv.stop if s.strip()]
    losses += [dropped("stop" if len(conv.stop) == 1 else f"stop[{i}]", "whitespace")
               for i, s in enumerate(conv.stop) if not s.strip()]
    if stop:
        body["stop_sequences"] = stop
    if conv.user:
        body["metadata"] = {"user_id": conv.user}
    if conv.metadata:
        losses.append(dropped("metadata"))
    if conv.top_k is not None:
        body["top_k"] = conv.top_k
    _thinking(conv, body, losses)
    _thinking_history(conv, body, losses)
    _json_tool(conv, body, losses)
    losses += [dropped(where) for _, where in conv.shared.values()]
    if conv.stream:
        body["stream"] = True
    return ENCODER.encode(body), losses


def _thinking(conv: Conversation, body: dict, losses: list[Loss]) -> None:
    """Extended thinking: the client's own (Messages', or a Chat client's in Anthropic's shape), else its reasoning
    effort as a budget (``EFFORT_BUDGET``), made valid beside the rest of the body as request_params' generation
    tiers make it (``anthropic.enable_thinking``): what that changes of the client's request is reported."""
    thinking, effort = conv.thinking, conv.reasoning_effort
    if thinking is None and effort is not None:
        if effort == "none":
            thinking = {"type": "disabled"}
        elif effort in EFFORT_BUDGET:
            thinking = {"type": "enabled", "budget_tokens": EFFORT_BUDGET[effort]}
        else:
            losses.append(dropped("reasoning_effort", "out_of_range"))
    if thinking is None:
        return
    where = "thinking" if conv.thinking is not None else "reasoning_effort"
    choice = body.get("tool_choice")
    if thinking.get("type") != "disabled" and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        # Anthropic refuses thinking with a forced tool; the client's forced tool is the more specific ask.
        losses.append(dropped(where, "tool_choice"))
        return
    if thinking.get("type") != "enabled":
        body["thinking"] = thinking
        return
    for change in wire.enable_thinking(body, thinking["budget_tokens"]):
        name = change.removeprefix("-").split(" ")[0].split("=")[0]
        if change.startswith("-"):
            losses.append(dropped(name, "thinking"))
        elif conv.max_tokens is not None:
            losses.append(Loss(CONVERTED, "thinking", "max_tokens"))   # raised above the client's: see README
    body["thinking"] = thinking   # the client's own, its other fields (display) kept


def _thinking_history(conv: Conversation, body: dict, losses: list[Loss]) -> None:
    """With thinking on, Anthropic refuses a tool loop whose last assistant turn does not start with its signed
    thinking block (``wire.thinking_block_missing``): thinking is then left off, rather than send a body Anthropic
    refuses. With it off, a final assistant turn (a prefill) may hold no thinking."""
    on = (body.get("thinking") or {}).get("type") not in (None, "disabled")
    if on and wire.thinking_block_missing(body):
        del body["thinking"]
        losses.append(dropped("thinking" if conv.thinking is not None else "reasoning_effort", "no_thinking_block"))
        return
    last = body["messages"][-1]
    if on or last["role"] != "assistant" or last["content"][0]["type"] not in wire.THINKING_BLOCKS:
        return
    kept = [b for b in last["content"] if b["type"] not in wire.THINKING_BLOCKS]
    if kept:
        last["content"] = kept
        losses += [dropped(p.path, "thinking_off") for p in conv.turns[-1].parts if isinstance(p, Thinking)]


def _json_tool(conv: Conversation, body: dict, losses: list[Loss]) -> None:
    """The client's structured output as a tool the model is made to call (``JSON_TOOL``). Beside the client's own
    tools it is one more: with none of them forced the model must call a tool (``any``): one of the client's, or
    this one to answer; one of theirs forced stays forced; ``none`` (none of the client's) forces this one. With
    thinking on, which Anthropic refuses beside a forced tool, the tool is offered (``auto``) and the system
    prompt asks for it."""
    schema = json_schema(conv.response_format)
    if schema is None:
        if conv.response_format is not None and conv.response_format.get("type") != "text":
            losses.append(dropped("response_format"))   # a json_schema without its schema, or a type of no one's
        return
    spec = conv.response_format.get("json_schema") or {}
    description = spec.get("description") if isinstance(spec.get("description"), str) else \
        "Your answer, as a JSON object its input schema describes."
    body["tools"] = [*body.get("tools", ()), {"name": JSON_TOOL, "description": description, "input_schema": schema}]
    choice = body.get("tool_choice") or {"type": "auto"}
    kind = choice["type"]
    thinking = (body.get("thinking") or {}).get("type") not in (None, "disabled")
    if thinking:
        body["tool_choice"] = {k: v for k, v in choice.items() if k != "name"} | {"type": "auto"}
        body.setdefault("system", []).append({"type": "text", "text": JSON_INSTRUCTION})
        return
    if kind == "none" or (kind in ("auto", "any") and not conv.tools):
        body["tool_choice"] = {**{k: v for k, v in choice.items() if k != "type"}, "type": "tool", "name": JSON_TOOL}
    elif kind == "auto":
        body["tool_choice"] = {**choice, "type": "any"}


def json_schema(response_format: dict | None) -> dict | None:
    """The input schema of the tool that carries ``response_format`` to Claude; None when there is nothing to
    carry (no format, ``text``) or it cannot be carried (a json_schema without its schema)."""
    kind = (response_format or {}).get("type")
    if kind == "json_object":
        return JSON_OBJECT
    spec = response_format.get("json_schema") if kind == "json_schema" else None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


def unwrap_json(answer: Answer) -> tuple[Answer, list[Loss]]:
    """Claude's answer to a request that carried structured output (``JSON_TOOL``) as the client asked for it: the
    tool's input is the answer's text, and without another tool's call the answer stopped, not for tools. Once the
    tool is called its input is the only text: Claude's words around it (a preamble, which thinking's ``auto``
    choice allows) are left out, and listed, as LiteLLM leaves them."""
    answered = any(isinstance(p, ToolCall) and p.name == JSON_TOOL for p in answer.parts)
    calls = any(isinstance(p, ToolCall) and p.name != JSON_TOOL for p in answer.parts)
    losses: list[Loss] = []
    parts: list = []
    for p in answer.parts:
        if isinstance(p, ToolCall) and p.name == JSON_TOOL:
            parts.append(Text(p.arguments, p.path))
        elif isinstance(p, Text) and answered and not calls:
            losses.append(dropped(p.path, PREAMBLE))
        else:
            parts.append(p)
    finish = answer.finish
    if finish == "tool_calls" and not calls:
        finish = "stop"
    return msgspec.structs.replace(answer, parts=parts, finish=finish), losses


PREAMBLE = "preamble"   # the reason Claude's text beside its JSON tool's call is left out


class JsonUnwrapping:
    """``unwrap_json`` on a stream: wraps a Messages ``StreamReader``, the JSON tool's block a text block, its
    input_json_delta text deltas. A text block is held, and what follows it, until the answer says what the text
    is: the answer's own at another tool's call, or at the end unless the JSON tool was called and no other."""

    def __init__(self, reader) -> None:
        self._reader = reader
        self._json: set[int] = set()
        self._calls = False   # another tool's call went out
        self._held: list[Event] | None = None   # from the first text block on, while it is not known what it is
        self._texts: dict[int, str] = {}        # text block held -> its path in Claude's stream
        self._own_losses: list[Loss] = []

    @property
    def losses(self) -> list[Loss]:
        return self._reader.losses + self._own_losses

    def event(self, name: str | None, data: bytes) -> list[Event]:
        return self._unwrapped(self._reader.event(name, data))

    def close(self) -> list[Event]:
        return self._unwrapped(self._reader.close())

    def release(self) -> list[Event]:
        """The events held, settled as though the answer ended here (the backend broke off)."""
        return self._settle(keep_text=self._calls or not self._json)

    def _unwrapped(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for ev in events:
            if isinstance(ev, BlockStart) and ev.kind == "tool":
                if ev.name == JSON_TOOL:
                    # Not yet known: a call of another tool later keeps the text, as ``unwrap_json`` does.
                    self._json.add(ev.index)
                    ev = BlockStart(ev.index, "text")
                else:
                    self._calls = True
                    out += self._settle(keep_text=True)
            elif isinstance(ev, BlockStart) and ev.kind == "text" and not self._calls:
                self._texts[ev.index] = f"content[{ev.index}]"
                if self._held is None:
                    self._held = []
            elif isinstance(ev, ArgsDelta) and ev.index in self._json:
                ev = TextDelta(ev.index, ev.json)
            elif isinstance(ev, (Finished, Failed)):
                if isinstance(ev, Finished) and ev.finish == "tool_calls" and not self._calls:
                    ev = msgspec.structs.replace(ev, finish="stop")
                out += self.release()
            if self._held is not None:
                self._held.append(ev)
            else:
                out.append(ev)
        return out

    def _settle(self, keep_text: bool) -> list[Event]:
        """The events held, now that it is known whether their text blocks are the answer's."""
        held, self._held = self._held or [], None
        texts, self._texts = self._texts, {}
        if keep_text:
            return held
        self._own_losses += [dropped(path, PREAMBLE) for path in texts.values()]
        return [ev for ev in held if getattr(ev, "index", None) not in texts]


def _block(p, losses: list[Loss]) -> dict | None:
    if isinstance(p, (Text, Image)) and p.cache_control is not None:
        block = _block(msgspec.structs.replace(p, cache_control=None), losses)
        return None if block is None else _marker(block, p)
    if isinstance(p, Thinking):
        b = anthropic_block(p)
        if b is None:
            # Anthropic takes back only the thinking it signed: not a Responses backend's encrypted reasoning.
            losses.append(dropped(p.path, "unsigned"))
        return b
    if isinstance(p, Text):
        # An empty text block is refused ("text content blocks must be non-empty") and says nothing.
        return {"type": "text", "text": p.text} if p.text else None
    if isinstance(p, ToolCall):
        args = parse_arguments(p.arguments)
        if args is None:
            losses.append(Loss(CONVERTED, "invalid_json", p.path))
            args = {}
        return {"type": "tool_use", "id": call_id(p.id), "name": p.name, "input": args}
    if isinstance(p, ToolResult):
        content = [b for b in (_block(c, losses) for c in p.content) if b is not None]
        block: dict = {"type": "tool_result", "tool_use_id": call_id(p.call_id), "content": content}
        if p.is_error:
            block["is_error"] = True
        return block
    if isinstance(p, Image):
        if p.detail not in (None, "auto"):
            losses.append(dropped(p.detail_path or f"{p.path}.detail"))
        inline = split_data_url(p.url)
        if inline is not None:
            media_type = _MEDIA_ALIASES.get(inline[0], inline[0])
            if media_type not in _IMAGE_TYPES:
                losses.append(dropped(p.path, "unsupported_media_type"))
                return None
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": inline[1]}}
        return {"type": "image", "source": {"type": "url", "url": p.url}}
    if isinstance(p, File):
        inline = split_data_url(p.data_url) if p.data_url else None
        if inline is not None and inline[0] == "application/pdf":
            return {"type": "document", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
        if p.url:
            return {"type": "document", "source": {"type": "url", "url": p.url}}
        losses.append(dropped(p.path))   # a file id, or a document type Anthropic does not read
        return None
    losses.append(dropped(p.path))
    return None


def call_id(given: str) -> str:
    """A tool call's id as Anthropic takes it (``^[a-zA-Z0-9_-]+$``): another provider's (Kimi's
    ``functions.get_weather:0``, a client's ``call 2``) made valid, the same in a call and in its result, in a
    request to Anthropic and in an answer to a Messages client, which sends it back."""
    return safe_token(given)


def _tool(t: ToolDef) -> dict:
    tool: dict = {"name": t.name, "input_schema": t.parameters or {"type": "object", "properties": {}}}
    if t.description is not None:
        tool["description"] = t.description
    if t.strict:
        tool["strict"] = True
    return _marker(tool, t)


def _marker(block: dict, source: Text | Image | ToolDef) -> dict:
    """``block`` with its source's prompt-caching marker, as LiteLLM sends a Chat client's to Anthropic."""
    if source.cache_control is not None:
        block["cache_control"] = source.cache_control
    return block


def _tool_choice(conv: Conversation, losses: list[Loss]) -> dict | None:
    c = conv.tool_choice
    if c is None and conv.parallel_tool_calls is not False:
        return None
    offered = {t.name for t in conv.tools if c is None or c.allowed is None or t.name in c.allowed}
    if json_schema(conv.response_format) is not None:
        offered.add(JSON_TOOL)      # ``_json_tool`` adds it, and rewrites the choice around it
    if not offered or c is not None and c.kind == "tool" and c.name not in offered:
        # Anthropic refuses a choice without its tools ("tool_choice may only be specified while providing
        # tools") or naming one it was not given, as OpenAI does; parallel_tool_calls is carried in the choice.
        losses.append(dropped("parallel_tool_calls" if c is None else c.path))
        return None
    kind = "auto" if c is None else {"required": "any"}.get(c.kind, c.kind)
    out: dict = {"type": kind}
    if kind == "tool":
        out["name"] = c.name
    if conv.parallel_tool_calls is False and kind != "none":
        out["disable_parallel_tool_use"] = True
    return out


# --- answers ----------------------------------------------------------------------------------


def read_answer(body: bytes) -> tuple[Answer, list[Loss]]:
    doc = wire.RESPONSE_DECODER.decode(body)
    losses: list[Loss] = []
    parts: list = []
    for i, b in enumerate(doc.content):
        if b.type == "text":
            parts.append(Text(b.text or "", f"content[{i}]"))
        elif b.type == "tool_use":
            parts.append(ToolCall(b.id or "", b.name or "", dumps(b.input or {}), f"content[{i}]"))
        elif b.type == "thinking":
            parts.append(Thinking(b.thinking or "", b.signature or None, path=f"content[{i}]"))
        elif b.type == "redacted_thinking":
            parts.append(Thinking(redacted=b.data or "", path=f"content[{i}]"))
        else:
            losses.append(dropped(f"content[{i}]"))
    if doc.stop_reason == "pause_turn":
        losses.append(Loss(CONVERTED, "unsupported", "stop_reason"))
    usage = read_usage(doc.usage)
    finish = FINISH_IN.get(doc.stop_reason or "end_turn", "stop")
    return Answer(doc.id, doc.model or "", parts, finish, usage, 0, doc.stop_sequence), losses


def read_usage(u: wire.Usage | None) -> Usage:
    """Messages' usage: input_tokens leave out the input read from and written to the cache; ours hold them."""
    if u is None:
        return Usage()
    read, write = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
    return Usage((u.input_tokens or 0) + read + write, u.output_tokens or 0, read, write)


def write_usage(u: Usage) -> wire.OutUsage:
    """Usage in Messages' words: the cache's reads and writes apart from input_tokens."""
    fresh = max(0, u.input_tokens - u.cached - u.cache_write)
    return wire.OutUsage(fresh, u.output_tokens, u.cache_write, u.cached)


def write_answer(answer: Answer) -> tuple[bytes, list[Loss]]:
    losses: list[Loss] = []
    content: list = []
    for p in answer.parts:
        if isinstance(p, Text):
            content.append(wire.OutText(p.text))
        elif isinstance(p, ToolCall):
            args = parse_arguments(p.arguments)
            if args is None:
                losses.append(Loss(CONVERTED, "invalid_json", p.path))
            content.append(wire.OutToolUse(call_id(p.id), p.name, args or {}))
        elif isinstance(p, Thinking):
            content.append(wire.OutThinking(p.text, p.signature or "") if p.redacted is None
                           else wire.OutRedactedThinking(p.redacted))
        else:
            losses.append(dropped(p.path))   # Messages cannot carry an image answer
    stop = FINISH_OUT[answer.finish]
    if stop == "end_turn" and any(isinstance(p, Text) and p.refusal for p in answer.parts):
        stop = "refusal"   # a Chat or Responses backend's refusal, in Messages' words
    msg = wire.OutMessage(native_id(ID, answer.id), answer.model, content, stop, answer.stop_sequence,
                          write_usage(answer.usage or Usage()))
    return ENCODER.encode(msg), losses


# --- streams ---------------------------------------------------------------------------------------


class StreamReader:
    """Messages events -> neutral events; skips blocks nothing else carries (server tools)."""

    def __init__(self) -> None:
        self.losses: list[Loss] = []
        self._blocks: dict[int, int] = {}   # Anthropic index -> block index; skipped ones absent
        self._no_input: set[int] = set()    # tool blocks no argument has reached yet
        self._next = 0
        self._stop: str | None = None
        self._stop_sequence: str | None = None
        self._usage = Usage()
        self._done = False
        self._started = False

    def event(self, name: str | None, data: bytes) -> list[Event]:
        decoder = wire.EVENT_DECODERS.get(name or "")
        if decoder is None or self._done:
            return []   # ping, message_stop handled at close, and event types added later
        ev = decoder.decode(data)
        if isinstance(ev, wire.MessageStart):
            self._started = True
            self._usage = read_usage(ev.message.usage)
            u = self._usage
            return [Started(ev.message.id, ev.message.model or "", 0, u.input_tokens, u.cached, u.cache_write)]
        if isinstance(ev, wire.ContentBlockStart):
            return self._start(ev)
        if isinstance(ev, wire.ContentBlockDelta):
            block = self._blocks.get(ev.index)
            if block is None:
                return []
            if ev.delta.type == "text_delta" and ev.delta.text:
                return [TextDelta(block, ev.delta.text)]
            if ev.delta.type == "input_json_delta" and ev.delta.partial_json:
                self._no_input.discard(block)
                return [ArgsDelta(block, ev.delta.partial_json)]
            if ev.delta.type == "thinking_delta" and ev.delta.thinking:
                return [TextDelta(block, ev.delta.thinking)]
            if ev.delta.type == "signature_delta" and ev.delta.signature:
                return [SignatureDelta(block, ev.delta.signature)]
            return []
        if isinstance(ev, wire.ContentBlockStop):
            block = self._blocks.get(ev.index)
            if block is None:
                return []
            if block in self._no_input:
                # A call without arguments is input {}: Chat and Responses say it "{}", which json.loads reads.
                self._no_input.discard(block)
                return [ArgsDelta(block, "{}"), BlockStop(block)]
            return [BlockStop(block)]
        if isinstance(ev, wire.MessageDelta):
            self._stop, self._stop_sequence = ev.delta.stop_reason, ev.delta.stop_sequence
            # message_delta's counts are cumulative: where it repeats the input's, they replace message_start's.
            d, was = ev.usage or wire.DeltaUsage(), self._usage
            fresh = d.input_tokens if d.input_tokens is not None else was.input_tokens - was.cached - was.cache_write
            read = d.cache_read_input_tokens if d.cache_read_input_tokens is not None else was.cached
            write = d.cache_creation_input_tokens if d.cache_creation_input_tokens is not None else was.cache_write
            # Finish here rather than at message_stop: everything is known.
            self._done = True
            return [Finished(FINISH_IN.get(self._stop or "end_turn", "stop"),
                             Usage(fresh + read + write, d.output_tokens or 0, read, write), self._stop_sequence)]
        self._done = True   # an error event
        status = wire.STATUS_OF_TYPE.get(ev.error.type, 500)
        err = read_error(status, data)
        return [Failed(err.message, err.status, err.code)]

    def _start(self, ev: wire.ContentBlockStart) -> list[Event]:
        b = ev.content_block
        if b.type not in ("text", "tool_use", "thinking", "redacted_thinking"):
            self.losses.append(dropped(f"content[{ev.index}]"))
            return []
        block = self._blocks[ev.index] = self._next
        self._next += 1
        if b.type == "redacted_thinking":
            return [BlockStart(block, "thinking", redacted=b.data or "")]
        if b.type == "thinking":
            out = [BlockStart(block, "thinking")]
            out += [TextDelta(block, b.thinking)] if b.thinking else []
            return out + ([SignatureDelta(block, b.signature)] if b.signature else [])
        if b.type == "text":
            out: list[Event] = [BlockStart(block, "text")]
            if b.text:
                out.append(TextDelta(block, b.text))
            return out
        out = [BlockStart(block, "tool", b.id or "", b.name or "")]
        if b.input:
            out.append(ArgsDelta(block, dumps(b.input)))
        else:
            self._no_input.add(block)
        return out

    def close(self) -> list[Event]:
        if self._done:
            return []
        self._done = True
        return [Failed("the upstream stream ended before the answer did", 502, "upstream_failed")]


_DELTA_TEXT = b'{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}'
_DELTA_JSON = b'{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}'
_DELTA_THINKING = b'{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}'
_DELTA_SIGNATURE = b'{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}'


class StreamWriter:
    """Neutral events -> Messages events; one block open at a time, as Anthropic streams them."""

    def __init__(self) -> None:
        self.losses: list[Loss] = []
        self._index: dict[int, int] = {}   # block index -> Anthropic content index
        self._open: int | None = None
        self._input = Usage()
        self._refused = False   # a block of the model's refusal went out: the answer stops for "refusal"
        self._thinking: set[int] = set()   # the thinking blocks

    def write(self, ev: Event) -> bytes:
        if isinstance(ev, Started):
            self._input = Usage(ev.input_tokens or 0, 0, ev.cached, ev.cache_write)
            message = wire.OutMessage(native_id(ID, ev.id), ev.model, [], None, None, write_usage(self._input))
            return named_event(b"message_start", b'{"type":"message_start","message":%s}' % ENCODER.encode(message))
        if isinstance(ev, BlockStart):
            if ev.kind == "image":
                self.losses.append(dropped(f"output[{ev.index}]"))
                return b""
            out = self._close_open()
            self._refused = self._refused or ev.refusal
            n = self._index[ev.index] = len(self._index)
            self._open = ev.index
            if ev.kind == "thinking":
                # Unsigned (an OpenAI-format backend's reasoning) unless a signature_delta follows.
                block = ({"type": "thinking", "thinking": "", "signature": ""} if ev.redacted is None
                         else {"type": "redacted_thinking", "data": ev.redacted})
                self._thinking.add(ev.index)
            elif ev.kind == "text":
                block = {"type": "text", "text": ""}
            else:
                block = {"type": "tool_use", "id": call_id(ev.call_id), "name": ev.name, "input": {}}
            return out + named_event(b"content_block_start", ENCODER.encode(
                {"type": "content_block_start", "index": n, "content_block": block}))
        if isinstance(ev, (TextDelta, ArgsDelta, SignatureDelta)):
            if ev.index != self._open:
                if ev.index in self._index:
                    self.losses.append(dropped(f"content[{self._index[ev.index]}]", "interleaved"))
                return b""
            n = self._index[ev.index]
            if isinstance(ev, SignatureDelta):
                return named_event(b"content_block_delta", _DELTA_SIGNATURE % (n, ENCODER.encode(ev.signature)))
            if isinstance(ev, TextDelta) and ev.index in self._thinking:
                return named_event(b"content_block_delta", _DELTA_THINKING % (n, ENCODER.encode(ev.text)))
            if isinstance(ev, TextDelta):
                return named_event(b"content_block_delta", _DELTA_TEXT % (n, ENCODER.encode(ev.text)))
            return named_event(b"content_block_delta", _DELTA_JSON % (n, ENCODER.encode(ev.json)))
        if isinstance(ev, BlockStop):
            return self._close_open() if ev.index == self._open else b""
        if isinstance(ev, Finished):
            u = ev.usage if ev.usage is not None and ev.usage.input_tokens else \
                Usage(self._input.input_tokens, ev.usage.output_tokens if ev.usage else 0, self._input.cached,
                      self._input.cache_write)
            # The input count often arrives only now (a Chat backend reports usage last):
            # message_delta carries it, as Anthropic's does, for clients that add usage up.
            usage = write_usage(u)
            delta = {"type": "message_delta",
                     "delta": {"stop_reason": "refusal" if self._refused and ev.finish == "stop"
                               else FINISH_OUT[ev.finish], "stop_sequence": ev.stop_sequence},
                     "usage": usage}
            return (self._close_open() + named_event(b"message_delta", ENCODER.encode(delta))
                    + named_event(b"message_stop", b'{"type":"message_stop"}'))
        return self.fail(ev.message, ev.status, ev.code)

    def fail(self, message: str, status: int, code: str | None, kind: str | None = None) -> bytes:
        # Anthropic's type follows the status, as a whole answer's does: ``kind`` is an OpenAI word.
        _, anthropic_type = wire.error_status_and_type(status, code)
        return named_event(b"error", wire.error_body(message, anthropic_type))

    def _close_open(self) -> bytes:
        if self._open is None:
            return b""
        n, self._open = self._index[self._open], None
        return named_event(b"content_block_stop", b'{"type":"content_block_stop","index":%d}' % n)
