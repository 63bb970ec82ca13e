"""A client's request body without its tools, the tool exchange in its history kept as plain text.

The executors that write their own answer (and escalate's self_verify) ask every
model for text, so they leave the client's tools out. The conversation may still
hold a tool exchange: Chat assistant ``tool_calls`` and ``tool`` messages,
Messages ``tool_use`` and ``tool_result`` blocks, Responses ``function_call``
and ``function_call_output`` items. Anthropic refuses those in a request that
declares no tools ("Requests which include tool_use or tool_result blocks must
define tools"), Bedrock too, and a Chat or Responses body may be translated for
either. So each call becomes text in the assistant turn that made it and each
result a user turn of text, both naming the tool, the call and its arguments, so
the model still answers from them. The context plugin meets the same rule from
the other side: its own exchange goes into the system prompt of a request
without tools (``server.pipeline.context.inject``); here the exchange is the
client's, and its place in the conversation matters.

Every helper returns new containers for what it changes and shares the rest:
one executor's calls all start from the same body.
"""
from __future__ import annotations

from typing import Any

import msgspec

from .translate import Loss
from .translate._freeform import qualified
from .translate._losses import CONVERTED, dropped

# The top-level fields that declare or steer tools, per client API (Chat's legacy functions included).
TOOL_FIELDS = {
    "chat": ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"),
    "messages": ("tools", "tool_choice"),
    "responses": ("tools", "tool_choice", "parallel_tool_calls"),
}
_ENCODE = msgspec.json.Encoder()


def without_tools(body: dict, api: str) -> tuple[dict, list[Loss]]:
    """``body`` (the client's, in ``api``) with no tools and its tool exchange as text; what that cost, as
    losses naming the client's fields (``x-vsr-warnings``)."""
    losses = [dropped(key) for key in TOOL_FIELDS.get(api, ()) if key in body]
    doc = {k: v for k, v in body.items() if k not in TOOL_FIELDS.get(api, ())}
    if api == "chat" and isinstance(doc.get("messages"), list):
        doc["messages"] = _chat(doc["messages"], losses)
    elif api == "messages" and isinstance(doc.get("messages"), list):
        doc["messages"] = _messages(doc["messages"], losses)
    elif api == "responses" and isinstance(doc.get("input"), list):
        doc["input"] = _responses(doc["input"], losses)
    return doc, losses


def current_turn(items: list, api: str) -> int | None:
    """The index of the client's last user turn: a Messages user message holding only tool results is the
    tools' answer, not the user's."""
    for i in range(len(items) - 1, -1, -1):
        m = items[i]
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        if api == "messages" and isinstance(m.get("content"), list) and m["content"] and \
                all(_is_result(b) for b in m["content"]):
            continue
        return i
    return None


def tool_results_of(turn: dict, api: str) -> list:
    """The tool results a Messages user turn carries beside the user's words (kept when its words are replaced)."""
    content = turn.get("content")
    if api != "messages" or not isinstance(content, list):
        return []
    return [b for b in content if _is_result(b)]


# --- the text a call and a result become ---------------------------------------------------------------


def call_text(name: str, call_id: str, arguments: str) -> str:
    return f"Called tool {name} (call {call_id}) with arguments: {arguments}"


def result_text(name: str, call_id: str, text: str, error: bool = False) -> str:
    return f"{'Error from' if error else 'Result of'} tool {name} (call {call_id}):\n{text}"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else _ENCODE.encode(value).decode()


def _joined(content: Any, text_types: tuple[str, ...]) -> tuple[str, list]:
    """A result's text, and the parts that are not text (images, files), kept as they are."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts, others = [], []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and part.get("type") in text_types:
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict):
            others.append(part)
    return "\n".join(texts), others


# --- Chat ----------------------------------------------------------------------------------------------


def _chat(messages: list, losses: list[Loss]) -> list:
    names: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            out.append(m)
            continue
        role, path = m.get("role"), f"messages[{i}]"
        if role == "assistant" and (m.get("tool_calls") or m.get("function_call")):
            calls = []
            for j, tc in enumerate(m.get("tool_calls") or ()):
                f = tc.get("function") or {}
                names[tc.get("id", "")] = f.get("name", "")
                calls.append(call_text(f.get("name", ""), tc.get("id", ""), _json(f.get("arguments", ""))))
                losses.append(Loss(CONVERTED, "unsupported", f"{path}.tool_calls[{j}]"))
            legacy = m.get("function_call")
            if isinstance(legacy, dict):
                calls.append(call_text(legacy.get("name", ""), "-", _json(legacy.get("arguments", ""))))
                losses.append(Loss(CONVERTED, "unsupported", f"{path}.function_call"))
            said = {k: v for k, v in m.items() if k not in ("tool_calls", "function_call")}
            said["content"] = _with_text(m.get("content"), "\n\n".join(calls))
            out.append(said)
        elif role in ("tool", "function"):
            call_id = m.get("tool_call_id") or "-"
            name = names.get(call_id, "") if role == "tool" else m.get("name", "")
            text, _ = _joined(m.get("content"), ("text",))
            out.append({"role": "user", "content": result_text(name, call_id, text)})
            losses.append(Loss(CONVERTED, "unsupported", path))
        else:
            out.append(m)
    return out


def _with_text(content: Any, text: str) -> Any:
    """An assistant's content with ``text`` after what it said."""
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}]
    return f"{content}\n\n{text}" if content else text


# --- Messages ------------------------------------------------------------------------------------------


def _is_call(block: Any) -> bool:
    """tool_use and the server tools' calls (server_tool_use, mcp_tool_use)."""
    return isinstance(block, dict) and str(block.get("type", "")).endswith("tool_use")


def _is_result(block: Any) -> bool:
    """tool_result and the server tools' results (web_search_tool_result, mcp_tool_result, ...)."""
    return isinstance(block, dict) and str(block.get("type", "")).endswith("tool_result")


def _messages(messages: list, losses: list[Loss]) -> list:
    names: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list) or not any(_is_call(b) or _is_result(b) for b in content):
            out.append(m)
            continue
        blocks = []
        for j, b in enumerate(content):
            if _is_call(b):
                names[b.get("id", "")] = b.get("name", "")
                blocks.append(_marked(b, call_text(b.get("name", ""), b.get("id", ""), _json(b.get("input", {})))))
            elif _is_result(b):
                call_id = b.get("tool_use_id", "")
                text, others = _joined(b.get("content"), ("text",))
                blocks.append(_marked(b, result_text(names.get(call_id, ""), call_id, text, bool(b.get("is_error")))))
                blocks += others
            else:
                blocks.append(b)
                continue
            losses.append(Loss(CONVERTED, "unsupported", f"messages[{i}].content[{j}]"))
        out.append({**m, "content": blocks})
    return out


def _marked(block: dict, text: str) -> dict:
    """A text block in the place of ``block``, keeping its cache breakpoint."""
    new = {"type": "text", "text": text}
    if "cache_control" in block:
        new["cache_control"] = block["cache_control"]
    return new


# --- Responses -----------------------------------------------------------------------------------------


def _responses(items: list, losses: list[Loss]) -> list:
    names: dict[str, str] = {}
    out: list = []
    reasoning = None        # where the item just before came from, when it is a reasoning item
    for i, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("function_call", "custom_tool_call"):
            name = qualified(item.get("namespace"), item.get("name", ""))
            call_id = item.get("call_id", "")
            names[call_id] = name
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            if reasoning is not None:
                # OpenAI refuses a reasoning item without the call it led to after it; it goes with the call.
                out.pop()
                losses.append(dropped(f"input[{reasoning}]"))
            out.append({"role": "assistant", "content": call_text(name, call_id, _json(arguments or ""))})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id", "")
            text, others = _joined(item.get("output"), ("input_text", "output_text"))
            said = result_text(names.get(call_id, ""), call_id, text)
            out.append({"role": "user", "content": [{"type": "input_text", "text": said}, *others] if others
                        else said})
        elif kind == "additional_tools":
            losses.append(dropped(f"input[{i}]"))
            continue
        else:
            out.append(item)
            reasoning = i if kind == "reasoning" else None
            continue
        reasoning = None
        losses.append(Loss(CONVERTED, "unsupported", f"input[{i}]"))
    return out


__all__ = ["TOOL_FIELDS", "call_text", "current_turn", "result_text", "tool_results_of", "without_tools"]
