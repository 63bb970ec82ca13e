"""``masking.unmask``: the client reads its own values where the model wrote their placeholders.

Masking numbers its placeholders per request (``[EMAIL_ADDRESS_1]``,
``[EMAIL_ADDRESS_2]``), so each one names one value; this module puts the
values back in the answer as the client's protocol carries it. A whole answer
is one JSON document: every string of it is restored, and a string that holds
JSON itself (tool-call ``arguments``, Messages' ``partial_json``) gets the
value JSON-escaped, so the arguments stay valid JSON. A stream restores each
delta on its own channel (a choice's content, a tool call's arguments, a
content block, a Responses output part) and holds back the end of a delta that
may be the start of a placeholder until the next delta of that channel
completes it or proves it is none; what a channel still holds when it ends is
sent in a delta of its own.

Pure: bytes in, bytes out. The mapping is the request's alone (``Exchange``),
never in an event, a record or the cache: those keep the masked answer.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from ..protocol.words import WORD

_DECODE = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder()
# Keys whose string value is a JSON text: a value restored there is escaped as a JSON string's content.
_JSON_TEXT = frozenset({"arguments", "partial_json"})
_EVENT_END = re.compile(rb"\r?\n\r?\n")
# A word character of a script that spaces its words (``protocol.words``): "EMAIL_1まで" is a placeholder.
_WORD = re.compile(WORD)


# No word character before, or a JSON escape's ("\\nEMAIL_1" in tool-call arguments starts a line).
_START = f"(?:(?<!{WORD})|(?<=\\\\[nrtbf]))"


def placeholders(values) -> re.Pattern[str]:
    """Where one of the placeholders ``values`` stands as a token of its own, the longest first: an edge of
    one that is a word character must not touch another ("EMAIL_10" is no placeholder inside "EMAIL_100" or
    "XEMAIL_10"); a bracketed one ("[EMAIL_ADDRESS_1]") is delimited by its brackets."""
    parts = [(_START if _WORD.match(p[0]) else "") + re.escape(p) + (f"(?!{WORD})" if _WORD.match(p[-1]) else "")
             for p in sorted(values, key=len, reverse=True)]
    return re.compile("|".join(parts)) if parts else re.compile("(?!)")


class Restorer:
    """One request's placeholder -> value mapping, and how to put the values back in text."""

    __slots__ = ("values", "escaped", "_pattern", "_prefixes", "_longest")

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.escaped = {p: _ENCODE.encode(v).decode()[1:-1] for p, v in values.items()}
        self._pattern = placeholders(values)
        # What the end of a delta may be the start of: a placeholder's beginnings, and a whole one that ends in a
        # word character ("EMAIL_1" may yet be "EMAIL_12", or "EMAIL_1x", which is none).
        self._prefixes = frozenset(p[:i] for p in values for i in range(1, len(p))) | {
            p for p in values if _WORD.match(p[-1])}
        self._longest = max(map(len, self._prefixes), default=0)

    def text(self, s: str, escaped: bool = False, before: str = "") -> str:
        """``s`` with its placeholders restored; ``before``: the text that came just before it (a stream's
        earlier delta), read for the boundary only."""
        if not s:
            return s
        table = self.escaped if escaped else self.values
        out, at = [], len(before)
        whole = before + s if before else s
        for m in self._pattern.finditer(whole, at):
            out += [whole[at:m.start()], table[m.group(0)]]
            at = m.end()
        return "".join(out) + whole[at:] if out else s

    def split(self, s: str) -> tuple[str, str]:
        """``s`` as (what may go out now, the end that may still become a placeholder)."""
        for i in range(max(0, len(s) - self._longest), len(s)):
            if s[i:] in self._prefixes:
                return s[:i], s[i:]
        return s, ""

    def tree(self, node: Any, key: str | None = None) -> tuple[Any, bool]:
        """``node`` with every string restored, and whether anything changed."""
        if isinstance(node, str):
            new = self.text(node, key in _JSON_TEXT)
            return new, new != node
        changed = False
        if isinstance(node, list):
            for i, item in enumerate(node):
                new, c = self.tree(item, key)
                if c:
                    node[i], changed = new, True
        elif isinstance(node, dict):
            for k, v in node.items():
                new, c = self.tree(v, k)
                if c:
                    node[k], changed = new, True
        return node, changed

    def whole(self, body: bytes | None) -> bytes | None:
        """A whole JSON answer (or a Responses answer to remember) with its values restored."""
        # Decoded only when a placeholder may be in it (a \u escape may spell one: "<" as \u003c).
        if not body or (b"\\u" not in body and not self._pattern.search(body.decode("utf-8", "replace"))):
            return body
        try:
            doc = _DECODE.decode(body)
        except msgspec.DecodeError:
            return body
        doc, changed = self.tree(doc)
        return _ENCODE.encode(doc) if changed else body

    def sse(self, body: bytes, api_format: str) -> bytes:
        """A whole stream's bytes (held, or cached) with the values restored."""
        stream = StreamRestorer(self, api_format)
        return stream.feed(body) + stream.close()


# A channel's delta field: (channel, the dict holding it, its key, JSON text?, the event that sends a held end).
Delta = tuple[tuple, dict, str, bool, Callable[[str], bytes]]


def _sse(name: str | None, doc: Any) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + _ENCODE.encode(doc) + b"\n\n"


# --- where each protocol streams text ------------------------------------------------------------

_CHAT_TEXT = ("content", "refusal", "reasoning_content", "reasoning")
_CHAT_HEAD = ("id", "object", "created", "model", "system_fingerprint")


def _chat(name: str | None, doc: dict) -> tuple[list[Delta], Callable[[tuple], bool] | None]:
    head = {k: doc[k] for k in _CHAT_HEAD if k in doc}
    out: list[Delta] = []
    ending: set[int] = set()
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices:
        return out, lambda ch: True          # the usage chunk: every choice has ended
    for c in choices:
        if not isinstance(c, dict):
            continue
        i, delta = c.get("index", 0), c.get("delta")
        if c.get("finish_reason") is not None:
            ending.add(i)
        if not isinstance(delta, dict):
            continue
        for field in _CHAT_TEXT:
            if isinstance(delta.get(field), str):
                out.append((("c", i, field), delta, field, False,
                            lambda t, i=i, f=field: _sse(None, {**head, "choices": [
                                {"index": i, "delta": {f: t}, "finish_reason": None}]})))
        for call in delta.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                j = call.get("index", 0)
                out.append((("t", i, j), fn, "arguments", True,
                            lambda t, i=i, j=j: _sse(None, {**head, "choices": [
                                {"index": i, "delta": {"tool_calls": [{"index": j, "function": {"arguments": t}}]},
                                 "finish_reason": None}]})))
    return out, (lambda ch: ch[1] in ending) if ending else None


_MESSAGES_TEXT = {"text_delta": ("text", False), "input_json_delta": ("partial_json", True),
                  "thinking_delta": ("thinking", False)}


def _messages(name: str | None, doc: dict) -> tuple[list[Delta], Callable[[tuple], bool] | None]:
    kind = doc.get("type")
    if kind == "content_block_delta":
        i, delta = doc.get("index", 0), doc.get("delta")
        where = _MESSAGES_TEXT.get(delta.get("type")) if isinstance(delta, dict) else None
        if where is not None and isinstance(delta.get(where[0]), str):
            field, escaped = where
            dtype = delta["type"]
            return [(("b", i), delta, field, escaped,
                     lambda t: _sse(name, {"type": kind, "index": i, "delta": {"type": dtype, field: t}}))], None
        return [], None
    if kind == "content_block_stop":
        i = doc.get("index", 0)
        return [], lambda ch: ch[1] == i
    if kind in ("message_delta", "message_stop", "error"):
        return [], lambda ch: True
    return [], None


def _responses(name: str | None, doc: dict) -> tuple[list[Delta], Callable[[tuple], bool] | None]:
    kind = doc.get("type")
    if isinstance(kind, str) and kind.endswith(".delta") and isinstance(doc.get("delta"), str):
        ch = (kind, doc.get("item_id"), doc.get("output_index"), doc.get("content_index"), doc.get("summary_index"))
        return [(ch, doc, "delta", "arguments" in kind,
                 lambda t: _sse(name, {**doc, "delta": t}))], None
    return [], lambda ch: True               # a part's done event (or any other) ends the parts before it


def _whole_events(name: str | None, doc: dict) -> tuple[list[Delta], None]:
    return [], None


_CHANNELS = {"openai": _chat, "anthropic": _messages, "responses": _responses}


class StreamRestorer:
    """A stream's SSE events in one client protocol, with the values restored; feed bytes, then ``close``."""

    __slots__ = ("restorer", "_channels", "_buf", "_held", "_before")

    def __init__(self, restorer: Restorer, api_format: str) -> None:
        self.restorer = restorer
        self._channels = _CHANNELS.get(api_format, _whole_events)
        self._buf = b""
        self._held: dict[tuple, tuple[str, bool, Callable[[str], bytes]]] = {}
        # Each channel's last two characters sent: whether a placeholder may start right after them.
        self._before: dict[tuple, str] = {}

    def feed(self, chunk: bytes) -> bytes:
        buf = self._buf + chunk if self._buf else chunk
        out, start = [], 0
        for m in _EVENT_END.finditer(buf):
            out.append(self._event(buf[start:m.end()]))
            start = m.end()
        self._buf = buf[start:]
        return b"".join(out)

    def close(self) -> bytes:
        rest, self._buf = self._buf, b""
        return self._flush(lambda ch: True) + (self._event(rest) if rest else b"")

    def _flush(self, ends: Callable[[tuple], bool]) -> bytes:
        out = []
        for ch in [ch for ch in self._held if ends(ch)]:
            text, escaped, send = self._held.pop(ch)
            out.append(send(self.restorer.text(text, escaped, self._before.get(ch, ""))))
        return b"".join(out)

    def _event(self, raw: bytes) -> bytes:
        name, payload = _parse(raw)
        if not payload.startswith(b"{"):
            return self._flush(lambda ch: True) + raw       # [DONE], a comment, a keep-alive
        try:
            doc = _DECODE.decode(payload)
        except msgspec.DecodeError:
            return raw
        if not isinstance(doc, dict):
            return raw
        deltas, ends = self._channels(name, doc)
        before = b""
        if ends is not None:
            # The channels this event ends, but carries no delta of: their held ends go out first.
            carried = {d[0] for d in deltas}
            before = self._flush(lambda ch: ends(ch) and ch not in carried)
        changed = False
        for ch, holder, key, escaped, send in deltas:
            held = self._held.pop(ch, None)
            text = (held[0] if held else "") + holder[key]
            if ends is not None and ends(ch):
                ready, rest = text, ""
            else:
                ready, rest = self.restorer.split(text)
            if rest:
                self._held[ch] = (rest, escaped, send)
            new = self.restorer.text(ready, escaped, self._before.get(ch, ""))
            if ready:
                self._before[ch] = (self._before.get(ch, "") + ready)[-2:]
            if new != holder[key]:
                holder[key], changed = new, True
        if not deltas:
            doc, changed = self.restorer.tree(doc)
        return before + (_sse(name, doc) if changed else raw)


def _parse(raw: bytes) -> tuple[str | None, bytes]:
    """One SSE event's name and data."""
    name, data = None, []
    for line in raw.splitlines():
        if line.startswith(b"event:"):
            name = line[6:].strip().decode()
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
    return name, b"\n".join(data)


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        node = list(node.values())
    return [s for item in node for s in _strings(item)] if isinstance(node, list) else []


def answer_texts(body: bytes, api_format: str | None = None) -> list[str]:
    """The texts of an answer, whole (``api_format`` None: every string of its JSON) or a stream's bytes in
    ``api_format``'s client protocol (each channel's deltas joined, so a placeholder split across them is
    whole again, and the strings of every event that carries no delta)."""
    if api_format is None:
        try:
            return _strings(_DECODE.decode(body))
        except msgspec.DecodeError:
            return [body.decode("utf-8", "replace")]
    channels, joined, other = _CHANNELS.get(api_format, _whole_events), {}, []
    for raw in _EVENT_END.split(body):
        name, payload = _parse(raw)
        try:
            doc = _DECODE.decode(payload) if payload.startswith(b"{") else None
        except msgspec.DecodeError:
            doc = None
        if not isinstance(doc, dict):
            continue
        deltas, _ = channels(name, doc)
        for ch, holder, key, _, _ in deltas:
            joined.setdefault(ch, []).append(holder[key])
        if not deltas:
            other += _strings(doc)
    return ["".join(parts) for parts in joined.values()] + other


__all__ = ["Restorer", "StreamRestorer", "answer_texts", "placeholders"]
