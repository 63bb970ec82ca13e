"""compress over history (spec 5.7): drop whole earlier turns, the least relevant to the latest user message
first, until a request fits its budget.

A turn is a user message and everything after it up to the next user message: the assistant's replies, its tool
calls and their results. Dropping whole turns never splits a tool call from its result and keeps each API's
order (Messages: the first message a user's, user and assistant alternating). The system prompt (a Chat or
Responses system or developer message, the Messages ``system`` field), anything before the first user message,
and the last user message with all after it are never dropped.
"""
from __future__ import annotations

import msgspec

from ..._ext.bm25 import BM25Index, tokenize

_ENCODE = msgspec.json.Encoder()
CHARS_PER_TOKEN = 4     # compress estimates tokens; a count with the model's tokenizer costs a thread
_TEXT_KEYS = ("content", "text", "output", "arguments")


def _items(body: dict, fmt: str) -> list | None:
    items = body.get("input" if fmt == "responses" else "messages")
    return items if isinstance(items, list) else None


def _opens_turn(item: object, fmt: str) -> bool:
    """A user's own message: not a Messages tool_result carrier, not a Responses tool item."""
    if not isinstance(item, dict) or item.get("role") != "user":
        return False
    if fmt == "anthropic" and isinstance(item.get("content"), list):
        return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in item["content"])
    if fmt == "responses":
        return item.get("type", "message") == "message"
    return True


def _system(item: object, fmt: str) -> bool:
    return fmt != "anthropic" and isinstance(item, dict) and item.get("role") in ("system", "developer")


def _turns(items: list, fmt: str) -> list[list[int]]:
    """The droppable turns, oldest first: each a list of indexes into ``items`` (system messages left out)."""
    opens = [i for i, item in enumerate(items) if _opens_turn(item, fmt)]
    if len(opens) < 2:
        return []
    turns: list[list[int]] = []
    for start, end in zip(opens, opens[1:]):
        turns.append([i for i in range(start, end) if not _system(items[i], fmt)])
    return turns


def _text(value: object, out: list[str]) -> list[str]:
    """Every text a message carries (its content, parts, tool arguments and outputs), for ranking."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _text(v, out)
    elif isinstance(value, dict):
        for key in _TEXT_KEYS:
            if key in value:
                _text(value[key], out)
        for call in value.get("tool_calls") or ():
            _text(call.get("function") if isinstance(call, dict) else None, out)
    return out


def _mark(item: dict, fmt: str, dropped: int) -> None:
    """Open the first user message kept after a dropped turn with a note of the turns dropped."""
    note = f"[... {dropped} earlier {'turn' if dropped == 1 else 'turns'} omitted ...]"
    content = item.get("content")
    if isinstance(content, str):
        item["content"] = f"{note}\n\n{content}"
    elif isinstance(content, list):
        content.insert(0, {"type": "input_text" if fmt == "responses" else "text", "text": note})


def fit(body: dict, fmt: str, query: str, budget: int) -> tuple[int, int]:
    """Drop earlier turns from ``body`` until its estimate fits ``budget`` tokens; (turns dropped, tokens now)."""
    size = len(_ENCODE.encode(body)) // CHARS_PER_TOKEN
    items = _items(body, fmt)
    if size <= budget or items is None:
        return 0, size
    turns = _turns(items, fmt)
    if not turns:
        return 0, size
    index = BM25Index([tokenize(" ".join(_text([items[i] for i in turn], []))) for turn in turns])
    relevance = index.scores(tokenize(query))
    # The least relevant first; of equal ones, the older.
    order = sorted(range(len(turns)), key=lambda t: (relevance[t], t))
    gone: set[int] = set()
    dropped = 0
    for t in order:
        if size <= budget:
            break
        # Each item's own encoding, plus its separating comma: what leaving it out takes off the body.
        size -= sum(len(_ENCODE.encode(items[i])) + 1 for i in turns[t]) // CHARS_PER_TOKEN
        gone.update(turns[t])
        dropped += 1
    if not dropped:
        return 0, size
    kept = [item for i, item in enumerate(items) if i not in gone]
    after = min(gone)
    first = next((i for i in range(after, len(items)) if i not in gone and _opens_turn(items[i], fmt)), None)
    if first is not None:
        _mark(items[first], fmt, dropped)
    items[:] = kept
    return dropped, len(_ENCODE.encode(body)) // CHARS_PER_TOKEN


__all__ = ["CHARS_PER_TOKEN", "fit"]
