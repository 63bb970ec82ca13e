"""One structured line per inference request (``global.router.access_log``), JSON or logfmt.

Lines are queued in memory and written by a task of their own in a worker thread, so a slow reader of
stderr (or a slow disk) never blocks the trio loop; the queue is bounded and counts what it dropped.
"""
from __future__ import annotations

import sys
import time

import msgspec
import trio

_MAX_QUEUED = 10_000


def logfmt(fields: dict) -> str:
    """``key=value`` pairs, a value quoted when it holds a space, a quote or an equals sign."""
    parts = []
    for key, value in fields.items():
        if value is None:
            continue
        text = f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
        if not text or any(c in text for c in ' "=\\\n'):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        parts.append(f"{key}={text}")
    return " ".join(parts)


class AccessLog:
    def __init__(self, config) -> None:
        self.format = config.format
        self.errors_only = config.level == "errors"
        self.path = config.path
        self._lines: list[str] = []
        self._ready = trio.Event()
        self.dropped = 0
        self._out = None

    def log(self, fields: dict) -> None:
        """Queue one request's line (never blocks)."""
        if self.errors_only and fields["status"] < 400:
            return
        if len(self._lines) >= _MAX_QUEUED:
            self.dropped += 1
            return
        fields = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z", **fields}
        line = msgspec.json.encode({k: v for k, v in fields.items() if v is not None}).decode() \
            if self.format == "json" else logfmt(fields)
        self._lines.append(line)
        self._ready.set()

    def open(self) -> None:
        """Open the file before the router serves, so a path it cannot write refuses the start (an OSError)
        rather than ending the process once it runs."""
        if self.path and self._out is None:
            self._out = open(self.path, "a", encoding="utf-8")

    async def run(self) -> None:
        """Write queued lines until cancelled; what is queued at cancellation is written too."""
        self.open()
        out = self._out or sys.stderr
        try:
            while True:
                await self._ready.wait()
                self._ready = trio.Event()
                await self._write(out)
        finally:
            with trio.CancelScope(shield=True):
                await self._write(out)
                if self.path:
                    out.close()

    async def _write(self, out) -> None:
        lines, self._lines = self._lines, []
        if lines:
            text = "".join(line + "\n" for line in lines)
            await trio.to_thread.run_sync(lambda: (out.write(text), out.flush()))
