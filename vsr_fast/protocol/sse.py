"""Server-sent events: cutting a relayed byte stream at event boundaries (sans I/O)."""
from __future__ import annotations


def _last_boundary(data: bytes) -> int:
    """Where the last complete event in ``data`` ends (past its blank line, LF or CRLF); 0 for none."""
    lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


class EventCutter:
    """Feed raw upstream chunks; get back only whole events, unchanged.

    The relay forwards bytes as they came, but only up to the last complete
    event, so that if the upstream dies mid-event the error event we append
    is not glued onto half a JSON line.

    An event arriving in many reads is kept as its reads, each searched once (with the 3 bytes before it
    that a boundary may straddle) and joined once, when the event ends: joining and searching all that was
    carried at every read cost the square of the event's length (a 20 MB line, seconds of CPU).
    """

    __slots__ = ("_pending", "_tail")

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._tail = b""        # the last 3 bytes carried: where a boundary may begin

    def feed(self, chunk: bytes) -> bytes:
        """The complete events now available (possibly empty)."""
        tail = self._tail
        end = _last_boundary(tail + chunk if tail else chunk) - len(tail)
        if end <= 0:        # no boundary ends in this read
            if chunk:
                self._pending.append(chunk)
                self._tail = chunk[-3:] if len(chunk) >= 3 else (tail + chunk)[-3:]
            return b""
        out = b"".join((*self._pending, chunk[:end])) if self._pending else chunk[:end]
        rest = chunk[end:]
        self._pending, self._tail = ([rest] if rest else []), rest[-3:]
        return out

    def flush(self) -> bytes:
        """Whatever is left when the upstream ended cleanly."""
        rest = b"".join(self._pending)
        self._pending, self._tail = [], b""
        return rest


class MarkedLines:
    """The complete lines that mention ``mark`` in a stream cut anywhere (a usage reader's ``"usage"``).

    Lines without the mark are never split out, so a long answer costs one ``in`` test per chunk;
    the partial last line is kept, up to ``limit`` bytes (past it, that line is dropped: bounded memory).
    """

    __slots__ = ("mark", "tail", "limit")

    def __init__(self, mark: bytes, limit: int = 1 << 20) -> None:
        self.mark, self.limit = mark, limit
        self.tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if len(self.tail) < self.limit:
                self.tail += chunk
            return []
        lines = self.tail + chunk[:cut] if self.tail else chunk[:cut]
        self.tail = chunk[cut + 1:]
        if self.mark not in lines:
            return []
        return [line for line in lines.split(b"\n") if self.mark in line]
