"""A progress line on stderr for long runs: shown only on a terminal, or when asked (``--progress``)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done)`` as often as you like; it redraws at most ten times a second."""

    def __init__(self, total: int | None, unit: str, *, enabled: bool | None = None, stream: TextIO | None = None,
                 label: str = "") -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.unit, self.label = total, unit, label
        self.started = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, done: int, count: int | None = None, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        rate = done / max(now - self.started, 1e-9)
        extra = f" {count} requests" if count is not None else ""
        if self.total:
            frac = min(1.0, done / self.total)
            bar = "#" * int(frac * 30)
            line = f"\r{self.label}[{bar:<30}] {frac:6.1%} {_human(done)}/{_human(self.total)} {self.unit}{extra}"
        else:
            line = f"\r{self.label}{_human(done)} {self.unit}{extra} ({_human(int(rate))}/s)"
        self.stream.write(line)
        self.stream.flush()
        self._shown = True

    def close(self, done: int | None = None, count: int | None = None) -> None:
        """Draw the final state (when ``done`` is given) and end the line."""
        if done is not None:
            self.update(done, count, force=True)
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


def _human(n: int) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


__all__ = ["Progress"]
