"""The event sink: the request path enqueues, one writer thread sends in batches.

``EventSink.record`` encodes the event once (msgpack) and appends it to a
bounded deque: no await, no lock, a few hundred nanoseconds. A dedicated
thread drains the deque and hands batches to a ``Transport`` (a Redis stream,
or the embedded journal).

When the store is slow or down, events wait in the deque; past its bound,
``record`` appends them to the spill journal instead, and from then on every
event goes there, behind them, until the writer has re-sent the journal in
order and emptied it. Nothing is dropped silently: the only losses are a full
or failing spill disk and events recorded after ``close``, each counted in
``vsr_events_lost_total{reason}``.

Exactly once on the stream. Every event gets a delivery id ``(space, index)``
that does not depend on the stream: ``space`` is 16 random bytes naming one
ordered sequence, ``index`` its position in it. Events from the deque take
the writer's space, numbered as the writer takes them (so in sending order);
events spilled by ``record`` take the journal's space, numbered under the
journal's lock (so in file order). The store keeps, per space, the highest
index it appended, and skips anything at or below it, in the same atomic step
as the append (a Lua script for Redis). So a batch whose reply was lost, or a
journal re-sent from a stale offset after a crash, lands once. Rejected: a
Redis SET of sent ids (one key per event: gigabytes at 50k events/s for any
useful TTL), and explicit XADD ids (they must grow across every router
writing the stream, so clock skew between hosts turns into refused events).
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .._ext.framing import pack_many
from .journal import Journal, pack, write_atomic
from .types import Event, encode_event

_encode = encode_event

log = logging.getLogger("vsr_fast.events")

Item = tuple[bytes, int, bytes]   # (space, index, payload)
# The writer's poll while busy: at most this much added latency to the stream. Each
# poll takes the GIL from the request path; 1 ms cost ~0.5 ms of CPU a request at
# a few hundred requests a second (bench/compare.py), 5 ms a tenth of that.
POLL_S = 0.02
IDLE_AFTER_S = 0.1      # quiet this long, it sleeps until record() wakes it
# The same, counted in empty polls: no clock read per poll or per batch.
IDLE_POLLS = max(1, round(IDLE_AFTER_S / POLL_S))
# Asleep, the writer still looks once in this long: a net under the doorbell, which rings on every event
# that finds it asleep (record, the spill, close), not a poll.
IDLE_CHECK_S = 1.0


def _name_os_thread(name: bytes) -> None:
    """Name the calling thread for the OS (``top -H``, /proc/PID/task/TID/comm): what bench.events_cost reads."""
    try:
        ctypes.CDLL(None).prctl(15, name, 0, 0, 0)   # PR_SET_NAME; Linux only, harmless to miss elsewhere
    except (OSError, AttributeError):
        pass


SPILL_JOURNAL, SPILL_OFFSET = "spill.journal", "spill.offset"


def spill_backlog(spill_dir: Path) -> bool:
    """Whether the spill journal in ``spill_dir`` holds events past its sent offset (no sink need have it open)."""
    try:
        size = (spill_dir / SPILL_JOURNAL).stat().st_size
    except OSError:
        return False
    try:
        sent = int((spill_dir / SPILL_OFFSET).read_text().strip() or 0)
    except (OSError, ValueError):
        sent = 0               # as EventSink reads it: the whole journal again (dedup skips what landed)
    return size > sent


class TransportDown(Exception):
    """The store did not take a batch; whether some of it landed is unknown. Retry it as it is."""


class Transport(Protocol):
    """Where the writer thread sends batches. Called from that thread only."""

    def send(self, items: list[Item]) -> int:
        """Append each item whose index is above its space's mark, in order; returns how many were new."""
        ...

    def close(self) -> None:
        ...


class Borrowed:
    """A transport lent to one more sink (an adopted spill slot's) by the stream that owns it: the sink's ``close``
    leaves it open for its owner (the router's own embedded log, which its consumers still read)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def send(self, items: list[Item]) -> int:
        return self._transport.send(items)

    def close(self) -> None:
        pass


@dataclass
class SinkStats:
    """Counters of one sink; each is written by one thread only."""

    queued: int = 0        # record(): into the deque
    spilled: int = 0       # record(): into the spill journal
    sent: int = 0          # appended to the stream
    resent: int = 0        # of ``sent``: from the journal, or retried after a failure
    deduplicated: int = 0  # re-sent but already on the stream: skipped by the store
    failures: int = 0      # batches the store did not take
    lost: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))


class EventSink:
    """The request path's handle on the event stream; ``start`` it, ``close`` it."""

    def __init__(self, transport: Transport, spill_dir: str | Path, *, queue: int = 65_536, batch: int = 128,
                 spill_max_bytes: int = 1 << 30, close_timeout_s: float = 5.0, adopted: bool = False) -> None:
        self._transport = transport
        self._bound = queue
        self._batch = batch
        self._spill_max = spill_max_bytes
        self._close_timeout = close_timeout_s
        self.stats = SinkStats()
        self._queue: collections.deque[bytes] = collections.deque()
        # The doorbell: a lock held while nobody rang. ``_ring`` releases it (a C call, and a futex wake only
        # when the writer sleeps on it), the writer's wait acquires it. A threading.Event costs a Condition's
        # Python code on both sides (a lock allocated per wait, a deque of waiters).
        self._bell = threading.Lock()
        self._bell.acquire()
        self._idle = False
        # Whether the store took the last write: None until the writer thread's first probe (an empty send)
        # answers. Unknown is not up: vsr_events_store_up says 0 until then, never 1 for a store not reached.
        self._connected: bool | None = None
        self._stopping = False
        self._closed = False
        self._abandoned = False
        self._take_lock = threading.Lock()   # writer's take vs close's final spill, never the hot path
        self._space = os.urandom(16)         # the deque's delivery space
        self._next = 0
        # The batch taken and not yet on the stream, in three plain attributes, not an object a batch: its items,
        # the spill journal's offset after them when it came from there, and whether it failed once.
        self._inflight: list[Item] | None = None
        self._inflight_end: int | None = None
        self._retried = False
        self._backoff = 0.05                 # the writer's wait after a failed batch, doubled up to 1 s
        self._deadline: float | None = None  # closing: when the writer gives up on the store
        # The spill journal: ``_spilling`` is set by record() and cleared by the writer, both under _jlock.
        self._dir = Path(spill_dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._jlock = threading.Lock()
        self._journal = Journal(self._dir / SPILL_JOURNAL)
        self._state = self._dir / SPILL_OFFSET
        self._jspace = os.urandom(16)
        self._jnext = 0
        self._jread = self._load_offset()
        self._offset_failures = 0
        self._journal.repair(self._jread)
        # Events a previous process left in the journal go first; new ones queue behind them.
        self._spilling = self._journal.end > self._jread
        if self._spilling and not adopted:     # the adopter says it, with the count
            log.warning("event stream: %d bytes of spilled events from an earlier run to re-send",
                        self._journal.end - self._jread)
        self._thread = threading.Thread(target=self._run, name="vsr-events-writer", daemon=True)

    def backlog_events(self) -> int:
        """How many spilled events wait to be re-sent (reads the journal: for a log line, not the request path)."""
        n, offset = 0, self._jread
        while frames := self._journal.read(offset, 4096):
            n, offset = n + len(frames), frames[-1].end
        return n

    # --- the request path ---------------------------------------------------------

    def record(self, event: Event) -> None:
        """Enqueue one event; never blocks on the store. Spills to disk past the queue's bound."""
        # ``record_encoded`` spelled out: one Python call less per event on the request path.
        payload = _encode(event)
        if self._spilling or len(self._queue) >= self._bound or self._closed:
            self._spill(payload)
            return
        self._queue.append(payload)
        self.stats.queued += 1
        if self._idle:
            self._ring()

    def record_many(self, events: tuple[Event, ...] | list[Event]) -> None:
        """``record`` each of ``events``, in order (what routing recorded at once)."""
        for event in events:
            payload = _encode(event)
            if self._spilling or len(self._queue) >= self._bound or self._closed:
                self._spill(payload)
                continue
            self._queue.append(payload)
            self.stats.queued += 1
        if self._idle:
            self._ring()

    def record_encoded(self, payload: bytes) -> None:
        """Enqueue an event already encoded with ``encode_event``."""
        if self._spilling or len(self._queue) >= self._bound or self._closed:
            self._spill(payload)
            return
        self._queue.append(payload)
        self.stats.queued += 1
        if self._idle:
            self._ring()

    def _spill(self, payload: bytes) -> None:
        with self._jlock:
            if self._closed:
                self._lose("closed")
                return
            if self._journal.end + len(payload) + 32 > self._spill_max:
                self._lose("spill_full")
                return
            self._spilling = True
            self._jnext += 1
            try:
                self._journal.append(pack(self._jspace, self._jnext, payload))
            except OSError as exc:
                self._jnext -= 1
                self._lose("spill_error", exc)
                return
            self.stats.spilled += 1
        if self._idle:
            self._ring()

    def _ring(self) -> None:
        """Wake the writer from its idle wait (or its wait after a failed batch)."""
        try:
            self._bell.release()
        except RuntimeError:       # already rung, not yet answered
            pass

    def _lose(self, reason: str, exc: BaseException | None = None, count: int = 1) -> None:
        if not count:
            return
        self.stats.lost[reason] += count
        n = self.stats.lost[reason]
        if count > 1 or n & (n - 1) == 0:   # 1, 2, 4, 8...: loud, not a log line per event
            log.error("event stream: %d event(s) lost (%s)%s", n, reason, f": {exc!r}" if exc else "")

    # --- lifetime -----------------------------------------------------------------

    def start(self) -> EventSink:
        self._thread.start()
        return self

    def close(self) -> None:
        """Send what is pending within the close timeout; spill the rest to disk for the next start.

        Blocking: call it from a worker thread (``open_event_stream`` does).
        """
        deadline = time.monotonic() + self._close_timeout
        self._stopping = True
        self._ring()
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()) + 0.5)
        with self._take_lock:
            self._abandoned = True           # a send still running may land; dedup covers it
            leftover = list(self._inflight) if self._inflight and self._inflight_end is None else []
            self._inflight = self._inflight_end = None
        with self._jlock:
            self._closed = True
            while self._queue:
                self._next += 1
                leftover.append((self._space, self._next, self._queue.popleft()))
            try:
                if leftover:
                    self._prepend(leftover)
                elif self._journal.end == self._jread and self._jread:
                    self._journal.truncate(0)        # everything spilled was sent
                    self._jread = 0
                    self._save_offset()
                self._journal.sync()
            except OSError as exc:                   # a full disk: the journal as it was, without these
                with contextlib.suppress(OSError):
                    os.unlink(self._journal.path.with_name(self._journal.path.name + ".tmp"))
                self._lose("spill_error", exc, len(leftover))
            self._journal.close()
        self._transport.close()

    def _prepend(self, items: list[Item]) -> None:
        """Put unsent deque events in front of the journal's unsent ones: their order is older."""
        rest = pack_many((f.space, f.index, f.payload) for f in self._journal.read(self._jread, 1 << 62))
        head = pack_many(items)
        write_atomic(self._journal.path, head + rest, durable=True)
        self._jread = 0
        self._save_offset()
        self.stats.spilled += len(items)
        log.warning("event stream: %d unsent event(s) kept in %s for the next start", len(items), self._journal.path)
        reopened = Journal(self._journal.path)
        self._journal.close()
        self._journal = reopened

    # --- the writer thread --------------------------------------------------------

    def _run(self) -> None:
        _name_os_thread(b"vsr-events")
        try:
            # Appends nothing: whether the store answers, before the first event (a quiet router's gauge).
            self._transport.send([])
            self._connected = True
        except TransportDown as exc:
            log.warning("event stream: store unavailable at start, keeping events (%s)", exc)
            self._connected = False
        turn = self._pass
        while turn():
            pass

    def _pass(self) -> bool:
        """One turn of the writer thread: a batch sent (or kept, the store down), or a wait for events.
        False: the thread ends.

        The batch's turn is one Python frame besides the transport's: taking the batch (``_take``) and finishing
        it run in line, and a turn that finds nothing looks at the deque and the journal before any call. Under
        a few thousand requests a second each batch holds one request's events or less, so what a batch costs
        beside its events is what the stream costs a request (bench/RESULTS.md, issue 14)."""
        if self._stopping and self._deadline is None:
            self._deadline = time.monotonic() + self._close_timeout
        with self._take_lock:
            items = self._inflight
            if items is None and not self._abandoned and (self._queue or self._journal.end > self._jread):
                items = self._inflight = self._take()
        if self._abandoned:
            return False
        if items is None:
            if self._stopping:
                return False
            if not (self._spilling and self._leave_spill()):
                self._sleep()
            return True
        try:
            added = self._transport.send(items)
        except TransportDown as exc:
            return self._failed(exc)
        if self._connected is not True:
            if self._connected is False:
                log.warning("event stream: store back; re-sending")
            self._connected = True
        self._backoff = 0.05
        st = self.stats
        st.sent += added
        st.deduplicated += len(items) - added
        end = self._inflight_end
        if self._retried or end is not None:
            st.resent += added
        with self._take_lock:
            if self._abandoned:
                return True                  # the next turn ends the thread
            if end is not None:
                self._jread = end
                self._save_offset()
            self._inflight, self._inflight_end, self._retried = None, None, False
        return True

    def _failed(self, exc: TransportDown) -> bool:
        """The store did not take the batch in flight: keep it, and wait before it goes again (close cuts the
        wait short)."""
        self.stats.failures += 1
        if self._connected is not False or self.stats.failures & (self.stats.failures - 1) == 0:
            log.warning("event stream: store unavailable, keeping events (%s)", exc)
        self._connected = False
        self._retried = True
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(self._backoff, left))
        else:
            self._bell.acquire(timeout=self._backoff)      # close() rings
        self._backoff = min(self._backoff * 2, 1.0)
        return True

    def _take(self) -> list[Item] | None:
        """The next batch (under ``_take_lock``): the deque first (older), then the spill journal, whose end
        after the batch goes in ``_inflight_end``."""
        q = self._queue
        if q:
            first, space, take = self._next + 1, self._space, q.popleft
            self._next += min(self._batch, len(q))
            return [(space, i, take()) for i in range(first, self._next + 1)]
        if self._journal.end > self._jread:
            frames = self._journal.read(self._jread, self._batch)
            if frames:
                self._inflight_end = frames[-1].end
                return [(f.space, f.index, f.payload) for f in frames]
        return None

    def _leave_spill(self) -> bool:
        """Everything spilled is on the stream: empty the journal and let record() use the deque again."""
        if not self._spilling:
            return False
        with self._jlock:
            if self._journal.end > self._jread or self._closed:
                return False
            self._journal.truncate(0)
            self._jread = 0
            self._save_offset()
            self._spilling = False
        return True

    def _sleep(self) -> None:
        """Wait for events. While traffic is recent (``IDLE_POLLS`` polls), poll: then record() never pays a
        wake-up (a futex call, the tail of its cost). After a quiet spell, sleep until record() rings."""
        q, sleep = self._queue, time.sleep
        for _ in range(IDLE_POLLS):
            sleep(POLL_S)
            if q or self._stopping or self._journal.end > self._jread:
                return
        # Idle from here: record() sees ``_idle`` after its append, so either it rings or this check sees
        # its event (one thread at a time under the GIL, and ``_idle`` is set before the check).
        self._idle = True
        while not (q or self._stopping or self._journal.end > self._jread):
            self._bell.acquire(timeout=IDLE_CHECK_S)
        self._idle = False

    def _load_offset(self) -> int:
        try:
            return int(self._state.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _save_offset(self) -> None:
        """Write the sent offset. When the disk refuses, it stays in memory: a restart re-sends from the older
        one, and the store's marks skip what had landed. Offset 0 is a missing file, which needs no room."""
        try:
            if self._jread == 0:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._state)
            else:
                write_atomic(self._state, str(self._jread).encode())
        except OSError as exc:
            self._offset_failures += 1
            if self._offset_failures & (self._offset_failures - 1) == 0:
                log.warning("event stream: cannot save %s (%s); re-sent events land once", self._state, exc)

    # --- what the sink reports ----------------------------------------------------

    def drained(self) -> bool:
        """Nothing waits: the deque, the batch in flight and the spill journal are all empty."""
        return not self._queue and self._inflight is None and not (self._journal.end > self._jread)

    def wait_drained(self, timeout: float, sleep: Callable[[float], None] = time.sleep) -> bool:
        """Block until ``drained()`` (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while not self.drained():
            if time.monotonic() >= deadline:
                return False
            sleep(0.005)
        return True

    def prometheus_lines(self) -> list[str]:
        st = self.stats
        out: list[str] = []
        for name, doc, value in (
            ("vsr_events_queued_total", "Routing events enqueued in memory.", st.queued),
            ("vsr_events_spilled_total", "Routing events written to the spill journal.", st.spilled),
            ("vsr_events_sent_total", "Routing events appended to the event stream.", st.sent),
            ("vsr_events_resent_total", "Events appended from the spill journal or after a failed batch.", st.resent),
            ("vsr_events_deduplicated_total", "Re-sent events the stream already held, skipped.", st.deduplicated),
            ("vsr_events_store_failures_total", "Batches the event store did not take.", st.failures),
            # The spill's offset and, for the embedded journal, its consumers' offsets: kept in memory and
            # written at the next try, so nothing is lost, but a restart meanwhile re-delivers.
            ("vsr_events_offset_write_failures_total", "Offset writes the disk refused (kept in memory, retried).",
             self._offset_failures + getattr(self._transport, "offset_failures", 0)),
        ):
            out += [f"# HELP {name} {doc}", f"# TYPE {name} counter", f"{name} {value}"]
        out += ["# HELP vsr_events_lost_total Routing events lost, by reason.", "# TYPE vsr_events_lost_total counter"]
        out += [f'vsr_events_lost_total{{reason="{r}"}} {n}' for r, n in sorted(st.lost.items())]
        for name, doc, value in (
            ("vsr_events_queue_depth", "Routing events waiting in memory.", len(self._queue)),
            ("vsr_events_spill_backlog_bytes", "Bytes of spilled events not yet re-sent.", self._journal.end - self._jread),
            ("vsr_events_store_up", "1 when the last write to the event store succeeded (0 before the first "
             "answer).", int(bool(self._connected))),
        ):
            out += [f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name} {value}"]
        return out


__all__ = ["SPILL_JOURNAL", "SPILL_OFFSET", "Borrowed", "EventSink", "Item", "SinkStats", "Transport", "TransportDown", "spill_backlog"]
