"""Request rules providers enforce with a 400 that the mock upstream does not, checked on the body it received.

- A tool exchange (Messages ``tool_use``/``tool_result`` blocks, Chat ``tool_calls`` and ``tool`` messages)
  needs declared ``tools``: Anthropic answers "Requests which include tool_use or tool_result blocks must
  define tools" (anthropics/anthropic-sdk-python#494), Bedrock "The toolConfig field must be defined"; the
  router holds a translated Chat body to the same rule, since it may go on to a Messages or Bedrock backend.
- Messages prompt caching: at most four ``cache_control`` markers, a top-level (automatic) one included,
  and, reading tools, then system, then messages, no longer TTL after a shorter one ("Cache entries with
  longer TTL must appear before shorter TTLs", Anthropic's prompt caching docs).
- Messages extended thinking: with ``thinking`` on, the assistant message of the last tool exchange (the
  ``tool_use`` the final ``tool_result`` answers) must start with a ``thinking`` or ``redacted_thinking`` block
  ("When thinking is enabled, a final assistant message must start with a thinking block (preceeding the
  lastmost set of tool_use and tool_result blocks)", Anthropic's extended thinking docs).
- Messages extended thinking's other rules: a budget of at least 1,024 tokens and below ``max_tokens``
  ("max_tokens must be greater than thinking.budget_tokens"), no tool_choice forcing a tool ("Thinking may not be
  enabled when tool_choice forces tool use"), no ``top_k``, no ``temperature`` but 1 and no ``top_p`` below 0.95
  (Anthropic's extended thinking docs, "Feature compatibility").
- Messages ``tool_choice`` of type ``tool`` names a declared tool ("Tool 'x' not found in provided tools"), and
  any ``tool_choice`` needs declared tools ("tool_choice may only be specified while providing tools").
- Messages content: every message but a final assistant one has content ("all messages must have non-empty
  content except for the optional final assistant message"), no text block is empty ("text content blocks must
  be non-empty"), and no stop sequence is whitespace only ("each stop sequence must contain non-whitespace").
- Chat: ``max_tokens`` is deprecated and OpenAI's reasoning models (o-series, gpt-5) refuse it ("Unsupported
  parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead");
  ``metadata`` needs ``store`` on ("metadata is only allowed when store is enabled").
- Tool names, in all three: ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI: "string does not match pattern", Anthropic's tool
  definition docs the same); Messages tool call ids ``^[a-zA-Z0-9_-]+$`` in ``tool_use.id`` and
  ``tool_result.tool_use_id`` ("String should match pattern"); a user message's ``tool_result`` blocks before any
  other block ("tool_result blocks must come first"); Chat ``tool`` messages right after the assistant message
  with their calls ("messages with role 'tool' must be a response to a preceding message with 'tool_calls'").
- Chat and Responses: a ``tool_choice`` (and Chat's ``parallel_tool_calls``) needs declared tools ("tool_choice
  is only allowed when tools are specified"), and one naming a function names a declared one.
"""
from __future__ import annotations

import re

_SECONDS = {None: 300, "5m": 300, "1h": 3600}
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_CALL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def problems(body: dict, api_format: str) -> list[str]:
    """What a provider of ``api_format`` would refuse in ``body``; empty when it is valid for these rules."""
    found = []
    if _tool_exchange(body, api_format) and not body.get("tools"):
        found.append("a tool exchange without declared tools")
    found += _tool_names(body)
    if api_format in ("openai", "responses"):
        found += _openai_tools(body, api_format)
    if api_format == "responses":
        # A message's content list must hold a part (a string, empty included, is text).
        found += [f"input[{i}] is a message with an empty content list"
                  for i, item in enumerate(body.get("input") or [])
                  if isinstance(item, dict) and item.get("type") == "message" and item.get("content") == []]
    if api_format == "openai":
        found += _chat_tool_order(body)
        if "max_tokens" in body:
            found.append("max_tokens (reasoning models take max_completion_tokens only)")
        if body.get("metadata") is not None and body.get("store") is not True:
            found.append("metadata without store")
    if api_format == "anthropic":
        found += _empty_content(body) + _tool_blocks(body)
        blank = [s for s in body.get("stop_sequences") or [] if not s.strip()]
        if blank:
            found.append(f"whitespace-only stop sequences {blank}")
        markers = [b["cache_control"] for b in _cacheable(body) if "cache_control" in b]
        if body.get("cache_control") is not None:
            markers.append(body["cache_control"])
        if len(markers) > 4:
            found.append(f"{len(markers)} cache_control markers (at most 4)")
        ttls = [_SECONDS[m.get("ttl")] for m in markers]
        if any(later > earlier for earlier, later in zip(ttls, ttls[1:])):
            found.append(f"a longer cache TTL after a shorter one: {[m.get('ttl', '5m') for m in markers]}")
        if _thinking(body) and (opening := _last_tool_use_opening(body)) not in (None, "thinking", "redacted_thinking"):
            found.append(f"thinking on and the last tool exchange's assistant message starts with {opening}, "
                         "not a thinking block")
        found += _thinking_rules(body)
        choice = body.get("tool_choice")
        if choice is not None and not body.get("tools"):
            found.append("tool_choice without tools")
        elif isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in [
                t.get("name") for t in body.get("tools") or []]:
            found.append(f"tool_choice names {choice.get('name')!r}, not a declared tool")
    return found


def _openai_tools(body: dict, api_format: str) -> list[str]:
    """Chat's and Responses' rules on tool_choice without (or naming no) declared tool."""
    tools = body.get("tools") or []
    found = [f"{key} without tools" for key in ("tool_choice", "parallel_tool_calls")
             if key in body and not tools and (key == "tool_choice" or api_format == "openai")]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and tools:
        name = choice.get("name") if api_format == "responses" else (choice.get("function") or {}).get("name")
        names = [t.get("name") if api_format == "responses" else (t.get("function") or {}).get("name") for t in tools]
        if name not in names:
            found.append(f"tool_choice names {name!r}, not a declared tool")
    return found


def _thinking_rules(body: dict) -> list[str]:
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return []
    found = []
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024 or budget >= body.get("max_tokens", 0):
        found.append(f"thinking budget {budget} not in [1024, max_tokens {body.get('max_tokens')})")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        found.append(f"thinking with a tool_choice that forces a tool ({choice['type']})")
    if "top_k" in body:
        found.append("thinking with top_k")
    if body.get("temperature", 1) != 1:
        found.append(f"thinking with temperature {body['temperature']}")
    if body.get("top_p", 1) < 0.95:
        found.append(f"thinking with top_p {body['top_p']}")
    return found


def _empty_content(body: dict) -> list[str]:
    messages = body.get("messages") or []
    if not messages:
        return ["no messages"]
    found = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if not content and not (i == len(messages) - 1 and m.get("role") == "assistant"):
            found.append(f"messages[{i}] without content")
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "text" and not b.get("text"):
                found.append(f"messages[{i}] holds an empty text block")
    return found


def _thinking(body: dict) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") != "disabled"


def _last_tool_use_opening(body: dict) -> str | None:
    """The first block's type of the assistant message whose tool_use the last message's tool_result answers;
    None when the conversation does not end in a tool result."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") != "user" or not isinstance(last.get("content"), list) or not any(
            b.get("type") == "tool_result" for b in last["content"]):
        return None
    before = messages[-2] if len(messages) > 1 else {}
    content = before.get("content")
    if before.get("role") != "assistant" or not isinstance(content, list) or not content:
        return "no assistant message"
    return content[0].get("type")


def _tool_exchange(body: dict, api_format: str) -> bool:
    for m in body.get("messages") or []:
        if api_format == "openai" and (m.get("tool_calls") or m.get("role") == "tool"):
            return True
        if api_format == "anthropic" and isinstance(m.get("content"), list) and any(
                b.get("type") in ("tool_use", "tool_result") for b in m["content"]):
            return True
    return False


def _cacheable(body: dict) -> list[dict]:
    """Every block in Anthropic's reading order: tools, system, messages (a tool result's blocks first)."""
    found = list(body.get("tools") or [])
    if isinstance(body.get("system"), list):
        found += body["system"]
    for m in body.get("messages") or []:
        for b in m["content"] if isinstance(m.get("content"), list) else []:
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                found += b["content"]
            found.append(b)
    return found


def _tool_names(body: dict) -> list[str]:
    names = [(t.get("function") or {}).get("name") if "function" in t else t.get("name")
             for t in body.get("tools") or [] if isinstance(t, dict)]
    return [f"tool name {n!r} outside ^[a-zA-Z0-9_-]{{1,64}}$" for n in names
            if isinstance(n, str) and not _TOOL_NAME.match(n)]


def _tool_blocks(body: dict) -> list[str]:
    """Messages: call ids in Anthropic's pattern, and a user message's tool results before its other blocks."""
    found = []
    for i, m in enumerate(body.get("messages") or []):
        blocks = m.get("content") if isinstance(m.get("content"), list) else []
        for b in blocks:
            key = {"tool_use": "id", "tool_result": "tool_use_id"}.get(b.get("type"))
            if key is not None and not _CALL_ID.match(str(b.get(key, ""))):
                found.append(f"messages[{i}] {b['type']}.{key} {b.get(key)!r} outside ^[a-zA-Z0-9_-]+$")
        kinds = [b.get("type") == "tool_result" for b in blocks]
        if m.get("role") == "user" and kinds != sorted(kinds, reverse=True):
            found.append(f"messages[{i}] has a tool_result after another block")
    return found


def _chat_tool_order(body: dict) -> list[str]:
    """Chat: each tool message follows the assistant message with its call, or another tool message."""
    found, called = [], set()
    for i, m in enumerate(body.get("messages") or []):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in called:
                found.append(f"messages[{i}] answers no call of the assistant message before it")
            continue
        called = {c.get("id") for c in m.get("tool_calls") or []} if m.get("role") == "assistant" else set()
    return found
