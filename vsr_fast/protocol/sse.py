"""Server-sent events: cutting a relayed byte stream at event boundaries (sans I/O)."""
from __future__ import annotations


class EventCutter:
    """Feed raw upstream chunks; get back only whole events, unchanged.

    The relay forwards bytes as they came, but only up to the last complete
    event, so that if the upstream dies mid-event the error event we append
    is not glued onto half a JSON line.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The complete events now available (possibly empty)."""
        data = self._pending + chunk if self._pending else chunk
        lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
        end = max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)
        self._pending = data[end:]
        return data[:end]

    def flush(self) -> bytes:
        """Whatever is left when the upstream ended cleanly."""
        rest, self._pending = self._pending, b""
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
