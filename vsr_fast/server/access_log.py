"""One structured line per inference request (``global.router.access_log``), JSON or logfmt.

Lines are queued in memory and written by a task of their own in a worker thread, so a slow reader of
stderr (or a slow disk) never blocks the trio loop; the queue is bounded and counts what it dropped
(``vsr_access_log_dropped_total{reason="queue_full"}``).

A write that fails (a full disk, stderr's reader gone: ENOSPC, EPIPE) drops its lines, as nginx does: they
are counted (``reason="write_error"``), a warning is logged at most once a minute with the count since the
last one, and the next batch is tried on the same file, so writing resumes once the disk has room (or
after a reopen). Serving never stops for the log.

Rotation, as logrotate does it without ``copytruncate``: rename the file, then have the router reopen its path.
``reopen()`` asks for that (every configuration reload calls it: SIGHUP, ``POST /admin/reload``); and at most
once a second, before it writes, the writer compares the path's inode with the open file's and reopens on a
difference (Python's WatchedFileHandler does so at every line), so a rename is followed with no signal at all.
All of it happens in the writer's thread, between two writes: a line is whole in the old file or the new one.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time

import msgspec
import trio

_MAX_QUEUED = 10_000
# How often the writer reads the path's inode (one stat, in its own thread, before a write).
_CHECK_S = 1.0
# At most one warning this often while writes fail (a line per dropped batch would flood the other log).
_WARN_EVERY_S = 60.0

log = logging.getLogger("vsr_fast.access_log")


# A value is quoted when it holds a space, a quote, an equals sign, a backslash or a control character; inside
# quotes a control character is escaped (\n, \r, \t, else \u00XX), so a client's TAB or \x01 never splits a
# line or a field for the reader (logfmt as Go's go-logfmt writes it).
_NEEDS_QUOTES = re.compile(r'[\x00-\x20"=\\\x7f]')
_ESCAPED = re.compile(r'[\x00-\x1f"\\\x7f]')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    return _ESCAPES.get(c) or f"\\u{ord(c):04x}"


def logfmt(fields: dict) -> str:
    """``key=value`` pairs, a value quoted (and escaped) when it holds a space, a quote, an equals sign, a
    backslash or a control character."""
    parts = []
    for key, value in fields.items():
        if value is None:
            continue
        text = f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
        if not text or _NEEDS_QUOTES.search(text):
            text = '"' + _ESCAPED.sub(_escape, text) + '"'
        parts.append(f"{key}={text}")
    return " ".join(parts)


class AccessLog:
    def __init__(self, config) -> None:
        self.format = config.format
        self.errors_only = config.level == "errors"
        self.path = config.path
        self._lines: list[str] = []
        self._ready = trio.Event()
        self.dropped = 0                # queue full (the trio thread's count)
        self.write_errors = 0           # lines a failed write dropped (the writer thread's count)
        self._failing = False           # the last write failed: the next that succeeds says so
        self._warned = -_WARN_EVERY_S   # time.monotonic() of the last warning
        self._unwarned = 0              # lines dropped since that warning
        self._out = None                # the file (unbuffered, append): one write call per batch
        self._inode: tuple[int, int] | None = None     # (st_dev, st_ino) of the open file
        self._checked = 0.0             # time.monotonic() of the last inode check
        # reopen() counts its asks (the trio thread), the writer the asks it acted on (its thread): no ask lost.
        self._asked = self._done = 0
        self._second = -1               # the whole second last formatted, and its text: one strftime a second
        self._stamp = ""

    def log(self, fields: dict) -> None:
        """Queue one request's line (never blocks)."""
        if self.errors_only and fields["status"] < 400:
            return
        if len(self._lines) >= _MAX_QUEUED:
            self.dropped += 1
            return
        fields = {"time": self._time(), **fields}
        line = msgspec.json.encode({k: v for k, v in fields.items() if v is not None}).decode() \
            if self.format == "json" else logfmt(fields)
        self._lines.append(line)
        self._ready.set()

    def _time(self) -> str:
        """Now in RFC 3339, UTC, with milliseconds: 2026-12-03T09:52:47.123Z."""
        ms = time.time_ns() // 1_000_000
        second, rest = divmod(ms, 1000)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{rest:03d}Z"

    def open(self) -> None:
        """Open the file before the router serves, so a path it cannot write refuses the start (an OSError)
        rather than ending the process once it runs."""
        if self.path and self._out is None:
            self._out, self._inode = self._open()

    def _open(self):
        out = open(self.path, "ab", buffering=0)     # noqa: SIM115 - closed by the writer
        st = os.fstat(out.fileno())
        return out, (st.st_dev, st.st_ino)

    def reopen(self) -> None:
        """Write the next lines to a file opened anew at ``path`` (after a rename by logrotate): the writer does
        it in its thread before its next write, so no line is lost or split between the two files. Returns at
        once; call it from the trio thread. Nothing to do when the log goes to stderr."""
        if self.path:
            self._asked += 1
            self._ready.set()       # the writer reopens now, not at the next request's line

    def prometheus_lines(self) -> list[str]:
        return ["# HELP vsr_access_log_dropped_total Access log lines dropped: the writer's queue was full "
                f"({_MAX_QUEUED} lines), or a write failed (a full disk, stderr's reader gone).",
                "# TYPE vsr_access_log_dropped_total counter",
                f'vsr_access_log_dropped_total{{reason="queue_full"}} {self.dropped}',
                f'vsr_access_log_dropped_total{{reason="write_error"}} {self.write_errors}']

    async def run(self) -> None:
        """Write queued lines until cancelled; what is queued at cancellation is written too."""
        self.open()
        try:
            while True:
                await self._ready.wait()
                self._ready = trio.Event()
                await self._write()
        finally:
            with trio.CancelScope(shield=True):
                await self._write()
                if self._out is not None:
                    self._out.close()
                    self._out = None

    async def _write(self) -> None:
        lines, self._lines = self._lines, []
        if lines or self._asked != self._done:
            text = "".join(line + "\n" for line in lines)
            await trio.to_thread.run_sync(self._emit, text)

    def _emit(self, text: str) -> None:
        """In the writer's thread: follow a rotation if there was one, then write ``text`` whole, or count its
        lines dropped when the write fails."""
        if self.path:
            now = time.monotonic()
            if self._asked != self._done or now - self._checked >= _CHECK_S:
                self._checked = now
                self._follow()
        data = text.encode()
        view = memoryview(data)
        try:
            if not self.path:
                sys.stderr.write(text)
                sys.stderr.flush()
                view = view[len(view):]
            while view:
                view = view[self._out.write(view):]
        except (OSError, ValueError) as exc:     # ValueError: stderr closed
            if self.path and len(view) != len(data):
                self._cut_torn(len(data) - len(view) - (data.rfind(b"\n", 0, len(data) - len(view)) + 1))
            self._dropped_write(view.tobytes().count(b"\n"), exc)
            return
        if self._failing:
            self._failing = False
            log.warning("access log: writing again to %s", self.path or "stderr")

    def _cut_torn(self, partial: int) -> None:
        """Remove the ``partial`` bytes of a line a failed write left at the file's end: the next line starts
        on a line of its own (shrinking a file needs no room on the disk)."""
        if partial:
            fd = self._out.fileno()
            with contextlib.suppress(OSError):
                os.ftruncate(fd, os.fstat(fd).st_size - partial)

    def _dropped_write(self, lines: int, exc: BaseException) -> None:
        """Count ``lines`` a failed write dropped; warn now and then (the first failure, then once a minute)."""
        self.write_errors += lines
        self._unwarned += lines
        self._failing = True
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY_S:
            log.warning("access log: cannot write to %s (%s); %d line(s) dropped since the last warning, "
                        "vsr_access_log_dropped_total{reason=\"write_error\"} counts them",
                        self.path or "stderr", exc, self._unwarned)
            self._warned, self._unwarned = now, 0

    def _follow(self) -> None:
        """Reopen the path when asked to, or when it names another file than the one open (or none)."""
        asked = self._asked
        if asked == self._done:
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    return
            except OSError:
                pass        # renamed and not created again: create it, as a reopen would
        self._done = asked
        try:
            out, inode = self._open()
        except OSError as exc:
            # Keep writing where the lines went so far rather than lose them; tried again at the next check.
            log.error("access log: cannot reopen %s (%s); still writing to the file open before", self.path, exc)
            return
        old, self._out, self._inode = self._out, out, inode
        if old is not None:
            old.close()
