"""A scripted agent model: the remote LLM behind the router when real agent clients are tested.

Run it as ``python -m bench.agent_model --host 127.0.0.1 --port 0`` and read the port from the
``agent_model: listening on http://HOST:PORT`` line it prints to stderr.

It answers OpenAI Chat Completions (``POST /v1/chat/completions``), Anthropic Messages
(``POST /v1/messages``, ``POST /v1/messages/count_tokens``) and OpenAI Responses
(``POST /v1/responses``), whole or streamed as each real API streams, and plays one tool round
trip whatever the client:

- a conversation that already holds a tool result gets the final text answer ``DONE``; as at the
  real APIs, a result must answer a call of the turn before it (Responses: of an earlier item);
- otherwise, a request that offers tools gets a short preamble and a call to the first tool the
  client offers (functions, Anthropic client tools, Responses ``custom`` tools and the tools of a
  ``namespace``, top-level or in ``additional_tools`` input items), with arguments made from the
  tool's JSON schema (so they validate: required properties, enums, types);
- any other request (titles, summaries, warm-ups) gets the plain text ``HELLO``.

Like Anthropic's API, ``/v1/messages`` refuses the beta fields of a body whose
``anthropic-beta`` header does not unlock them (400 ``invalid_request_error``, ``"<field>: Extra
inputs are not permitted"``; Claude Code sends ``context_management``): a router that forwards
such a body must forward the header too. Like both real APIs, it refuses ``tool_choice`` without
``tools`` (what a backend sees when a translation lost the tools).

Every request is logged (path, headers, decoded body, what was answered) for the tests:
``GET /_agent/log`` returns the log, ``POST /_agent/reset`` empties it.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass, field

import msgspec
import trio

from bench._http import Reader, Request, Server, chunk, response_bytes, send_all, serve_until_signal

HELLO = "Hello from the agent model."
DONE = "AGENT_MODEL_DONE: the tool result came back."
STRING_VALUE = "vsr-agent-model"   # every free string argument: harmless as a path or a command

ROUTES = {
    b"/v1/chat/completions": "chat", b"/chat/completions": "chat",
    b"/v1/messages": "messages", b"/messages": "messages",
    b"/v1/messages/count_tokens": "count_tokens", b"/messages/count_tokens": "count_tokens",
    b"/v1/responses": "responses", b"/responses": "responses",
}

# Messages fields Anthropic's API accepts only with an anthropic-beta token of this prefix: the
# fields of the beta MessageCreateParams that the stable one lacks (official SDK, anthropic 2.15).
# output_config, adaptive thinking, role "system" messages and a tool's defer_loading are stable
# there, so they pass without a header, as they do at the real API.
BETA_FIELDS = {
    "context_management": "context-management-",
    "mcp_servers": "mcp-client-",
    "fallbacks": "server-side-fallback-",
    "thread": "message-threads-",
}

_enc = msgspec.json.encode


# --- what the client offered and where the conversation stands --------------------------------------


@dataclass
class Tool:
    """One callable tool, whatever the protocol that offered it."""

    name: str
    kind: str = "function"             # "function" (JSON arguments) or "custom" (one free string)
    schema: dict = field(default_factory=dict)
    namespace: str | None = None       # Responses: the namespace tool that holds it


@dataclass
class Turn:
    """The answer the script gives one request."""

    tool: Tool | None = None           # call this tool
    arguments: str = ""                # its arguments: JSON text, or the free string of a custom tool
    text: str = HELLO


class BadRequest(Exception):
    """The request cannot be answered; the message is the API's own wording."""


def example(schema: object) -> object:
    """A value that validates against a JSON schema: required properties, first enum, minimal sizes."""
    if not isinstance(schema, dict):
        return STRING_VALUE
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or () if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            if key == "allOf":
                merged: dict = {}
                for option in options:
                    merged.update(option)
                return example(merged)
            return example(options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        return {key: example(props.get(key, {})) for key in schema.get("required") or ()}
    if kind == "array":
        return [example(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        value = min(max(low, 1) if low >= 0 else low, schema.get("maximum", float("inf")))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return STRING_VALUE


def call_for(tool: Tool) -> Turn:
    """The turn that calls a tool with arguments valid for its schema."""
    if tool.kind == "custom":
        return Turn(tool, STRING_VALUE, f"Calling {tool.name}.")
    return Turn(tool, _enc(example(tool.schema or {"type": "object"})).decode(), f"Calling {tool.name}.")


def script(tools: list[Tool], has_result: bool) -> Turn:
    """The scripted agent: call the first tool once, then answer DONE."""
    if has_result:
        return Turn(text=DONE)
    if tools:
        return call_for(tools[0])
    return Turn()


def chat_turn(body: dict) -> Turn:
    for name in ("tool_choice", "parallel_tool_calls"):
        if name in body and not body.get("tools"):
            raise BadRequest(f"Invalid value for '{name}': '{name}' is only allowed when 'tools' are specified.")
    tools = []
    for t in body.get("tools") or ():
        if t.get("type") == "function":
            fn = t.get("function") or {}
            tools.append(Tool(fn.get("name", ""), schema=fn.get("parameters") or {}))
        elif t.get("type") == "custom":
            tools.append(Tool((t.get("custom") or {}).get("name", ""), kind="custom"))
    calls: set = set()
    has_result = False
    for m in body.get("messages") or ():
        if m.get("role") == "assistant":
            calls = {c.get("id") for c in m.get("tool_calls") or ()}
        elif m.get("role") == "tool":
            if m.get("tool_call_id") not in calls:
                raise BadRequest("Invalid parameter: messages with role 'tool' must be a response to a "
                                 "preceeding message with 'tool_calls'.")
            has_result = True
    return script(tools, has_result)


def messages_turn(body: dict) -> Turn:
    # Server tools (web_search_20250305, bash_20250124, ...) carry a versioned type: skip them.
    tools = [Tool(t.get("name", ""), schema=t.get("input_schema") or {})
             for t in body.get("tools") or () if t.get("type") in (None, "custom")]
    uses: set = set()
    has_result = False
    turns = [m for m in body.get("messages") or () if m.get("role") != "system"]
    for i, m in enumerate(turns):
        blocks = m.get("content") if isinstance(m.get("content"), list) else []
        if m.get("role") == "assistant":
            uses = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
            continue
        for j, b in enumerate(blocks):
            if b.get("type") == "tool_result":
                if b.get("tool_use_id") not in uses:
                    raise BadRequest(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                        "block in the previous message.")
                has_result = True
        uses = set()
    return script(tools, has_result)


def responses_tools(entries: list, namespace: str | None = None) -> list[Tool]:
    """The callable tools of a Responses tools list; a namespace's own tools are named under it."""
    tools: list[Tool] = []
    for t in entries or ():
        kind = t.get("type")
        if kind == "function":
            tools.append(Tool(t.get("name", ""), schema=t.get("parameters") or {}, namespace=namespace))
        elif kind == "custom":
            tools.append(Tool(t.get("name", ""), kind="custom", namespace=namespace))
        elif kind == "namespace":
            tools += responses_tools(t.get("tools") or [], t.get("name"))
    return tools


def responses_turn(body: dict) -> Turn:
    items = body.get("input")
    items = items if isinstance(items, list) else []
    tools = responses_tools(body.get("tools") or [])
    for item in items:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += responses_tools(item.get("tools") or [])
    calls: set = set()
    has_result = False
    for item in items:
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            calls.add(item.get("call_id"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            # With previous_response_id the call may be in the stored conversation, not in input.
            if item.get("call_id") not in calls and not body.get("previous_response_id"):
                raise BadRequest(f"No tool call found for function call output with call_id {item.get('call_id')}.")
            has_result = True
    return script(tools, has_result)


def check_betas(headers: dict[bytes, bytes], body: dict) -> None:
    """Refuse beta fields the anthropic-beta header does not unlock, in Anthropic's words."""
    betas = [b.strip() for b in headers.get(b"anthropic-beta", b"").decode("latin-1").split(",") if b.strip()]
    for name, prefix in BETA_FIELDS.items():
        if name in body and not any(b.startswith(prefix) for b in betas):
            raise BadRequest(f"{name}: Extra inputs are not permitted")
    if "tool_choice" in body and not body.get("tools"):
        raise BadRequest("tool_choice: tool_choice may only be specified while providing tools")


def usage_of(body: bytes, text: str) -> tuple[int, int]:
    """Token counts of a rough 4-bytes-per-token estimate; clients only need them consistent."""
    return max(1, len(body) // 4), max(1, len(text) // 4)


def split(text: str, parts: int = 3) -> list[str]:
    """Text cut into up to `parts` non-empty deltas."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i:i + size] for i in range(0, len(text), size)]


def sse(name: str | None, data: object) -> bytes:
    """One server-sent event; Chat Completions' events carry no name."""
    payload = data if isinstance(data, bytes) else _enc(data)
    return (b"event: %s\ndata: %s\n\n" % (name.encode(), payload)) if name else b"data: %s\n\n" % payload


# --- Chat Completions ----------------------------------------------------------------------------------


def chat_tool_call(turn: Turn, ident: str) -> dict:
    if turn.tool.kind == "custom":
        return {"id": ident, "type": "custom", "custom": {"name": turn.tool.name, "input": turn.arguments}}
    return {"id": ident, "type": "function", "function": {"name": turn.tool.name, "arguments": turn.arguments}}


def chat_usage(inp: int, out: int) -> dict:
    return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def chat_whole(turn: Turn, model: str, n: int, usage: tuple[int, int], body: dict) -> dict:
    message: dict = {"role": "assistant", "content": turn.text, "refusal": None, "annotations": []}
    if turn.tool is not None:
        message["tool_calls"] = [chat_tool_call(turn, f"call_agent_{n}")]
    return {"id": f"chatcmpl-agent-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if turn.tool else "stop"}],
            "usage": chat_usage(*usage), "service_tier": "default", "system_fingerprint": None}


def chat_events(turn: Turn, model: str, n: int, usage: tuple[int, int], body: dict) -> list[bytes]:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    head = {"id": f"chatcmpl-agent-{n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "service_tier": "default", "system_fingerprint": None}
    tail = {"usage": None} if include_usage else {}

    def event(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse(None, {**head, "choices": [choice], **tail})

    events = [event({"role": "assistant", "content": "", "refusal": None})]
    events += [event({"content": piece}) for piece in split(turn.text)]
    if turn.tool is not None:
        # The call opens with its id, type, name and empty arguments; argument deltas follow.
        kind, key = ("custom", "input") if turn.tool.kind == "custom" else ("function", "arguments")
        opened = {"index": 0, "id": f"call_agent_{n}", "type": kind, kind: {"name": turn.tool.name, key: ""}}
        events.append(event({"tool_calls": [opened]}))
        events += [event({"tool_calls": [{"index": 0, kind: {key: piece}}]}) for piece in split(turn.arguments)]
    events.append(event({}, "tool_calls" if turn.tool else "stop"))
    if include_usage:
        events.append(sse(None, {**head, "choices": [], "usage": chat_usage(*usage)}))
    return events + [b"data: [DONE]\n\n"]


# --- Anthropic Messages --------------------------------------------------------------------------------


def messages_content(turn: Turn, n: int) -> list[dict]:
    content = [{"type": "text", "text": turn.text}]
    if turn.tool is not None:
        content.append({"type": "tool_use", "id": f"toolu_agent_{n}", "name": turn.tool.name,
                        "input": msgspec.json.decode(turn.arguments)})
    return content


def messages_usage(inp: int, out: int) -> dict:
    return {"input_tokens": inp, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "output_tokens": out, "service_tier": "standard"}


def messages_whole(turn: Turn, model: str, n: int, usage: tuple[int, int], body: dict) -> dict:
    return {"id": f"msg_agent_{n}", "type": "message", "role": "assistant", "model": model,
            "content": messages_content(turn, n), "stop_reason": "tool_use" if turn.tool else "end_turn",
            "stop_sequence": None, "usage": messages_usage(*usage)}


def messages_events(turn: Turn, model: str, n: int, usage: tuple[int, int], body: dict) -> list[bytes]:
    start = {**messages_whole(turn, model, n, (usage[0], 1), body), "content": [], "stop_reason": None}
    events = [sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(messages_content(turn, n)):
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in split(block["text"])]
        else:
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in ["", *split(turn.arguments)]]
        events.append(sse("content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": opened}))
        if index == 0:
            events.append(sse("ping", {"type": "ping"}))
        events += [sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                   for d in deltas]
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(sse("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use" if turn.tool else "end_turn", "stop_sequence": None},
        "usage": {"input_tokens": usage[0], "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": usage[1]}}))
    events.append(sse("message_stop", {"type": "message_stop"}))
    return events


# --- OpenAI Responses ----------------------------------------------------------------------------------


def responses_output(turn: Turn, n: int) -> list[dict]:
    output = [{"id": f"msg_agent_{n}", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}]}]
    if turn.tool is not None:
        tool = turn.tool
        prefix = "ctc" if tool.kind == "custom" else "fc"
        item: dict = {"id": f"{prefix}_agent_{n}", "call_id": f"call_agent_{n}", "name": tool.name, "status": "completed"}
        if tool.namespace is not None:
            item["namespace"] = tool.namespace
        if tool.kind == "custom":
            output.append({"type": "custom_tool_call", **item, "input": turn.arguments})
        else:
            output.append({"type": "function_call", **item, "arguments": turn.arguments})
    return output


def responses_object(body: dict, model: str, n: int, status: str, output: list, usage: tuple[int, int] | None) -> dict:
    usage_doc = None if usage is None else {
        "input_tokens": usage[0], "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage[1], "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage[0] + usage[1]}
    return {"id": f"resp_agent_{n}", "object": "response", "created_at": int(time.time()), "status": status,
            "background": False, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "model": model, "output": output, "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"), "reasoning": {"effort": None, "summary": None},
            "store": body.get("store", True), "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [], "top_p": 1.0,
            "truncation": "disabled", "usage": usage_doc, "metadata": body.get("metadata") or {}}


def responses_whole(turn: Turn, model: str, n: int, usage: tuple[int, int], body: dict) -> dict:
    return responses_object(body, model, n, "completed", responses_output(turn, n), usage)


def responses_events(turn: Turn, model: str, n: int, usage: tuple[int, int], body: dict) -> list[bytes]:
    seq = itertools.count()

    def event(kind: str, **fields) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    pending = responses_object(body, model, n, "in_progress", [], None)
    events = [event("response.created", response=pending), event("response.in_progress", response=pending)]
    output = responses_output(turn, n)
    for index, item in enumerate(output):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(event("response.output_item.added", output_index=index,
                                item={**item, "status": "in_progress", "content": []}))
            events.append(event("response.content_part.added", **where, content_index=0,
                                part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""}))
            events += [event("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
                       for piece in split(text)]
            events.append(event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]))
            events.append(event("response.content_part.done", **where, content_index=0, part=item["content"][0]))
        else:
            key, kind = (("input", "response.custom_tool_call_input") if item["type"] == "custom_tool_call"
                         else ("arguments", "response.function_call_arguments"))
            events.append(event("response.output_item.added", output_index=index,
                                item={**item, "status": "in_progress", key: ""}))
            events += [event(f"{kind}.delta", **where, delta=piece) for piece in split(item[key])]
            events.append(event(f"{kind}.done", **where, **{key: item[key]}))
        events.append(event("response.output_item.done", output_index=index, item=item))
    events.append(event("response.completed",
                        response=responses_object(body, model, n, "completed", output, usage)))
    return events


TURNS = {"chat": chat_turn, "messages": messages_turn, "responses": responses_turn}
WHOLE = {"chat": chat_whole, "messages": messages_whole, "responses": responses_whole}
EVENTS = {"chat": chat_events, "messages": messages_events, "responses": responses_events}


def error_body(api: str, status: int, message: str) -> bytes:
    """An error in the route's own shape: Anthropic's on the Messages routes, OpenAI's elsewhere."""
    if api in ("messages", "count_tokens"):
        kind = "invalid_request_error" if status == 400 else "not_found_error" if status == 404 else "api_error"
        return _enc({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_agent"})
    return _enc({"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}})


class AgentModel(Server):
    """The server; ``log`` holds one entry per request received."""

    def __init__(self) -> None:
        self.log: list[dict] = []
        self.ids = itertools.count(1)

    def bad_request(self, message: str) -> bytes:
        return error_body("chat", 400, message)

    async def dispatch(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        api = ROUTES.get(req.path)
        if req.path.startswith(b"/_agent/"):
            status, body = self.admin(req)
        elif req.method == b"GET" and req.path in (b"/v1/models", b"/models"):
            status, body = 200, _enc({"object": "list", "data": [
                {"id": "agent-model", "object": "model", "created": 0, "owned_by": "vsr-fast"}]})
        elif req.method == b"POST" and api is not None:
            return await self.generate(sock, req, api)
        else:
            status, body = 404, error_body("chat", 404, f"no route for {req.method.decode()} {req.path.decode()}")
        await send_all(sock, response_bytes(status, body, req.keep_alive))
        return req.keep_alive

    def admin(self, req: Request) -> tuple[int, bytes]:
        if req.path == b"/_agent/log" and req.method == b"GET":
            return 200, _enc(self.log)
        if req.path == b"/_agent/reset" and req.method == b"POST":
            self.log.clear()
            return 200, b'{"ok":true}'
        return 404, error_body("chat", 404, f"no admin route {req.path.decode()}")

    async def generate(self, sock: trio.socket.SocketType, req: Request, api: str) -> bool:
        entry: dict = {"api": api, "path": req.path.decode(),
                       "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in req.headers.items()}}
        self.log.append(entry)
        try:
            body = msgspec.json.decode(req.body)
        except msgspec.DecodeError as exc:
            entry["body"] = req.body.decode("utf-8", "replace")
            return await self.refuse(sock, req, api, entry, f"invalid JSON body: {exc}")
        entry["body"] = body
        if not isinstance(body, dict):
            return await self.refuse(sock, req, api, entry, "the body must be a JSON object")
        try:
            if api in ("messages", "count_tokens"):
                check_betas(req.headers, body)
            if api == "count_tokens":
                entry["answer"] = {"status": 200}
                doc = {"input_tokens": usage_of(req.body, "")[0]}
                await send_all(sock, response_bytes(200, _enc(doc), req.keep_alive))
                return req.keep_alive
            turn = TURNS[api](body)
        except BadRequest as exc:
            return await self.refuse(sock, req, api, entry, str(exc))
        except (AttributeError, TypeError, ValueError, msgspec.DecodeError) as exc:
            return await self.refuse(sock, req, api, entry, f"malformed request: {exc!r}")
        n = next(self.ids)
        model = body.get("model") or "agent-model"
        usage = usage_of(req.body, turn.arguments + turn.text)
        entry["answer"] = {"status": 200, "text": turn.text,
                           "tool": turn.tool and {"name": turn.tool.name, "kind": turn.tool.kind,
                                                  "namespace": turn.tool.namespace, "arguments": turn.arguments}}
        if not body.get("stream"):
            await send_all(sock, response_bytes(200, _enc(WHOLE[api](turn, model, n, usage, body)), req.keep_alive))
            return req.keep_alive
        close = b"" if req.keep_alive else b"Connection: close\r\n"
        await send_all(sock, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                             b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n%s\r\n" % close)
        for event in EVENTS[api](turn, model, n, usage, body):
            await send_all(sock, chunk(event))
        await send_all(sock, b"0\r\n\r\n")
        return req.keep_alive

    async def refuse(self, sock: trio.socket.SocketType, req: Request, api: str, entry: dict, message: str) -> bool:
        entry["answer"] = {"status": 400, "error": message}
        await send_all(sock, response_bytes(400, error_body(api, 400, message), req.keep_alive,
                                            extra_headers=b"request-id: req_agent\r\n"))
        return req.keep_alive


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.agent_model``."""
    p = argparse.ArgumentParser(prog="python -m bench.agent_model", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=8002, help="port to bind; 0 picks a free one (default %(default)s)")
    args = p.parse_args(argv)
    trio.run(serve_until_signal, AgentModel(), "agent_model", args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
