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
