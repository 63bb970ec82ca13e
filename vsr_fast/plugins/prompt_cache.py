"""``prompt_cache``: bounded Anthropic prompt-cache markers, placed after route selection (spec 5.7).

Anthropic caches a prompt prefix up to each ``cache_control`` marker, at most
four markers a request, the caller's own and a top-level (automatic) one
included. The plugin marks, in order, the last tool, the last system block and
the last content block of the last message, skipping what the caller already
marked and never exceeding ``max_markers`` in all. Anthropic reads tools, then
system, then messages, and refuses a longer TTL after a shorter one: a marker
after a caller's shorter one takes that TTL, and none goes before a caller's
longer one. Other formats cache prefixes on their own: the plugin leaves them
alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from ..config.schema_base import Block
from ._merge import merged_fields

TYPE = "prompt_cache"
ANTHROPIC_MAX_MARKERS = 4
TARGETS = ("tools", "system", "messages")
_TTL_SECONDS = {"5m": 300, "1h": 3600}
Target = Literal["tools", "system", "messages"]


class PromptCacheConfig(Block):
    """``{type: prompt_cache, configuration: {enabled, ttl, max_markers, targets}}`` at one layer."""

    enabled: bool | UnsetType = UNSET
    # A marker after the client's shorter one takes its TTL; none goes before the client's longer one.
    ttl: Literal["5m", "1h"] | UnsetType = UNSET
    max_markers: Annotated[int, Meta(ge=1, le=ANTHROPIC_MAX_MARKERS)] | UnsetType = UNSET
    targets: list[Target] | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class PromptCache:
    ttl: str = "5m"
    max_markers: int = ANTHROPIC_MAX_MARKERS
    targets: tuple[str, ...] = TARGETS

    def apply(self, body: dict[str, Any], api_format: str) -> str | None:
        """Mark ``body`` in place (Anthropic only); how many markers were added, for the replay record."""
        if api_format != "anthropic":
            return None
        automatic = body.get("cache_control")
        room = min(self.max_markers, ANTHROPIC_MAX_MARKERS) - _count_markers(body) - (automatic is not None)
        added = []
        for target in self.targets:
            if room <= 0:
                break
            # The automatic marker sits on the last block: another TTL there is a 400, the same one a no-op.
            if target == "messages" and automatic is not None:
                continue
            block = _last_block(body, target)
            if block is None or "cache_control" in block:
                continue
            ttl = _fitting_ttl(body, block, self.ttl)
            if ttl is None:
                continue
            block["cache_control"] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
            added.append(target if ttl == self.ttl else f"{target} ({ttl}, as the client's marker before it)")
            room -= 1
        return f"markers on {', '.join(added)}" if added else None


def resolve(*layers: PromptCacheConfig | None) -> PromptCache | None:
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False:
        return None
    return PromptCache(ttl=values.get("ttl", "5m"), max_markers=values.get("max_markers", ANTHROPIC_MAX_MARKERS),
                       targets=tuple(values.get("targets", TARGETS)))


def _blocks(body: dict) -> list[dict]:
    """Every block that can carry a marker, in the order Anthropic reads them (a tool result's own blocks
    before the result)."""
    found = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if isinstance(body.get("system"), list):
        found += [b for b in body["system"] if isinstance(b, dict)]
    for m in body.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            for b in m["content"]:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                    found += [part for part in b["content"] if isinstance(part, dict)]
                found.append(b)
    return found


def _count_markers(body: dict) -> int:
    return sum(1 for b in _blocks(body) if "cache_control" in b)


def _seconds(marker: Any) -> int | None:
    """A marker's TTL in seconds (none written is 5m); None for one the plugin cannot read."""
    ttl = marker.get("ttl") if isinstance(marker, dict) else None
    return _TTL_SECONDS.get(ttl or "5m")


def _fitting_ttl(body: dict, block: dict, wanted: str) -> str | None:
    """The TTL a marker on ``block`` may have: ``wanted``, shortened to the shortest marker before it; None when
    a longer marker follows it (or one the plugin cannot read is there)."""
    blocks = _blocks(body)
    at = next(i for i, b in enumerate(blocks) if b is block)
    before = [_seconds(b["cache_control"]) for b in blocks[:at] if "cache_control" in b]
    after = [_seconds(b["cache_control"]) for b in blocks[at + 1:] if "cache_control" in b]
    if body.get("cache_control") is not None:
        after.append(_seconds(body["cache_control"]))
    if None in before or None in after:
        return None
    seconds = min([_TTL_SECONDS[wanted], *before])
    if after and seconds < max(after):
        return None
    return next(name for name, s in _TTL_SECONDS.items() if s == seconds)


def _last_block(body: dict, target: str) -> dict | None:
    """The block a marker goes on, turning a plain-string system prompt or message into one text block."""
    if target == "tools":
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        return tools[-1] if tools else None
    if target == "system":
        system = body.get("system")
        if isinstance(system, str) and system:
            body["system"] = [{"type": "text", "text": system}]
            return body["system"][0]
        blocks = [b for b in system or [] if isinstance(b, dict)] if isinstance(system, list) else []
        return blocks[-1] if blocks else None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        return None
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, str) and content:
        last["content"] = [{"type": "text", "text": content}]
        return last["content"][0]
    blocks = [b for b in content or [] if isinstance(b, dict)] if isinstance(content, list) else []
    # Thinking blocks cannot carry a marker.
    blocks = [b for b in blocks if b.get("type") not in ("thinking", "redacted_thinking")]
    return blocks[-1] if blocks else None


def retain_prefix(body: dict[str, Any], api_format: str) -> str | None:
    """``retention.prefer_prefix_retention`` (spec 5.7): ask the provider to keep the prompt's cached prefix
    longer. OpenAI's APIs take ``prompt_cache_retention: 24h`` (a client's own value stays); Anthropic's
    markers (the caller's and this plugin's, placed before) of 5 minutes become 1 hour, all of them, so no
    longer marker follows a shorter one. What changed, or None."""
    if api_format in ("openai", "responses"):
        if "prompt_cache_retention" in body:
            return None
        body["prompt_cache_retention"] = "24h"
        return "prompt_cache_retention 24h"
    if api_format != "anthropic":
        return None
    markers = [b["cache_control"] for b in _blocks(body) if isinstance(b.get("cache_control"), dict)]
    if isinstance(body.get("cache_control"), dict):
        markers.append(body["cache_control"])
    longer = [m for m in markers if m.get("ttl", "5m") == "5m"]
    for m in longer:
        m["ttl"] = "1h"
    return f"{len(longer)} prompt-cache markers kept 1h" if longer else None
