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
"""
from __future__ import annotations

_SECONDS = {None: 300, "5m": 300, "1h": 3600}


def problems(body: dict, api_format: str) -> list[str]:
    """What a provider of ``api_format`` would refuse in ``body``; empty when it is valid for these rules."""
    found = []
    if _tool_exchange(body, api_format) and not body.get("tools"):
        found.append("a tool exchange without declared tools")
    if api_format == "anthropic":
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
