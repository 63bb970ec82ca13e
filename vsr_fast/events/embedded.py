"""The embedded event stream: a journal file instead of Redis, for one router process.

The same two faces as Redis: the writer's transport (``send``) and the
readers' source (consumer groups). Entry ids are the frames' byte offsets.

Delivery marks (the highest index appended per space) make re-sends land
once, as the Redis script does; they are saved with the journal size they
cover, and on open the frames past that size are read back into them, so a
crash between an append and its marks costs nothing.

A consumer group is an offset file: every entry before ``committed`` is
acknowledged, and ``acked`` lists the acknowledged entries after it (a
consumer may finish entries out of order). A consumer that restarts reads
again from ``committed``, skipping ``acked``.

Retention (``maxlen`` events and ``max_age_s``, as the Redis stream's trim)
drops whole segments of the journal (``segments``), the oldest first and only
those every consumer group running here has acknowledged: a group that lags
keeps its unread entries, whatever the bounds.

Those small files are written in place (a temporary file renamed over the old one). When the disk refuses
one (full, or the directory removed and not creatable), nothing stops: a group's offset stays in memory
and is written again at its next acknowledgement (until then, a restart delivers the entries after the
last saved offset again: at least once); the marks only shorten the scan on open.

One process only: two routers appending to one journal would interleave
their marks and their groups' offsets.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from .._ext.framing import pack_fresh
from .journal import write_atomic
from .segments import Segments
from .source import Entry, entry
from .writer import Item, TransportDown

log = logging.getLogger("vsr_fast.events")
_GROUP_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class _Marks(msgspec.Struct):
    end: int = 0
    marks: dict[str, int] = {}
    live: int = 0          # events in the live segment before ``end``


@dataclass
class _Group:
    path: Path
    committed: int = 0
    acked: set[int] = field(default_factory=set)
    cursor: int = 0
    ends: dict[int, int] = field(default_factory=dict)   # delivered offset -> the next frame's offset
    unsaved: bool = False                                # the last offset write failed: write it again


MARKS_EVERY_S = 1.0
# A segment holds an eighth of maxlen (and spans an eighth of max_age_s): what is kept stays within an eighth
# of the bounds, and a roll, an fsync and a file create, comes once per so many events.
SEGMENTS_PER_BOUND = 8
UNBOUNDED_SEGMENT = 1 << 20


class EmbeddedLog:
    """One journal directory: ``stream.<base>.journal`` segments, ``stream.marks`` and ``groups/<name>.offset``."""

    def __init__(self, directory: str | Path, *, maxlen: int | None = None, max_age_s: float | None = None) -> None:
        self.dir = Path(directory)
        (self.dir / "groups").mkdir(parents=True, exist_ok=True)
        self.journal = Segments(self.dir)
        self.maxlen, self.max_age_s = maxlen, max_age_s
        self._segment_entries = max(1, maxlen // SEGMENTS_PER_BOUND) if maxlen else UNBOUNDED_SEGMENT
        self._roll_after_s = max_age_s / SEGMENTS_PER_BOUND if max_age_s else None
        self._marks_path = self.dir / "stream.marks"
        # The send takes the lock itself (an RLock's enter and exit are C calls; a Condition's are Python).
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._groups: dict[str, _Group] = {}
        self._readers = 0          # readers waiting on _cond: a batch notifies only when some wait
        self._closed = False
        self._marks_saved = 0.0
        self.offset_failures = 0     # group offset writes the disk refused (each retried at the next ack)
        self._marks_failures = 0
        saved = self._load_marks()
        live_base = self.journal.bases[-1]
        # The saved marks cover the frames before saved.end; those after it (a crash between an append and
        # the marks) are read back into them, and into the live segment's count.
        valid = self.journal.first <= saved.end <= self.journal.end
        start = saved.end if valid else self.journal.first
        self.journal.repair(start)
        self._marks = {bytes.fromhex(k): v for k, v in saved.marks.items()} if valid else {}
        self._live = saved.live if valid and saved.end >= live_base else 0
        for frames in self._chunks(start):
            for f in frames:
                if f.index > self._marks.get(f.space, 0):
                    self._marks[f.space] = f.index
                if f.offset >= live_base:
                    self._live += 1
        # The live segment's age is unknown across a restart: it counts from now.
        self._live_started = time.monotonic()

    def _chunks(self, offset: int):
        while True:
            frames = self.journal.read(offset, 4096)
            if not frames:
                return
            yield frames
            offset = frames[-1].end

    def _load_marks(self) -> _Marks:
        try:
            return msgspec.json.decode(self._marks_path.read_bytes(), type=_Marks)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return _Marks()

    def _save_marks(self, now: float) -> None:
        # The marks file only shortens the scan on open, which rebuilds every mark from
        # the frames after the saved ``end``: writing it once a second, not once a batch,
        # loses nothing and saves a file create and rename (~180 us) per batch, which
        # cost ~0.2 ms of CPU per routed request at a few hundred requests a second.
        self._marks_saved = now
        doc = _Marks(end=self.journal.end, marks={k.hex(): v for k, v in self._marks.items()}, live=self._live)
        try:
            write_atomic(self._marks_path, msgspec.json.encode(doc))
        except OSError as exc:       # the append landed; a stale marks file only lengthens the next open's scan
            self._marks_failures += 1
            if self._marks_failures & (self._marks_failures - 1) == 0:
                log.warning("event stream: cannot save %s (%s); retried in a second", self._marks_path, exc)

    # --- the transport ------------------------------------------------------------------

    def send(self, items: list[Item]) -> int:
        with self._lock:
            # The frames of the items above their space's mark, in C (``journal.pack_fresh`` is the same in
            # Python); the marks move only once the append landed.
            data, fresh, advanced = pack_fresh(items, self._marks)
            if fresh:
                now = time.monotonic()
                try:
                    if self._live >= self._segment_entries or self._roll_after_s is not None:
                        self._roll_if_due(now)
                    # The live segment's own append: ``Segments.append`` and its ``live`` are two Python frames more
                    # a batch, for an offset nobody reads here.
                    self.journal.files[-1].append(data)
                except OSError as exc:
                    raise TransportDown(f"embedded journal: {exc}") from exc
                self._live += fresh
                self._marks.update(advanced)
                if now - self._marks_saved >= MARKS_EVERY_S:
                    self._save_marks(now)
                if self._readers:
                    self._cond.notify_all()
            return fresh

    # --- retention ----------------------------------------------------------------------

    def _roll_if_due(self, now: float) -> None:
        """Start a new segment when the live one is full or old enough, then drop what retention lets go."""
        full = self._live >= self._segment_entries
        old = self._roll_after_s is not None and now - self._live_started >= self._roll_after_s
        if not (full or old) or not self._live:
            return
        self.journal.roll(self._live)
        self._live, self._live_started = 0, now
        self._save_marks(now)            # the marks' ``live`` count now belongs to the new segment
        self._trim()

    def _trim(self) -> None:
        # Every group's first unacknowledged entry: nothing at or past it may go.
        keep_from = min((g.committed for g in self._groups.values()), default=self.journal.end)
        self.journal.trim(maxlen=self.maxlen, live_count=self._live, max_age_s=self.max_age_s, now=time.time(),
                          keep_from=keep_from)

    def stats(self) -> dict[str, int]:
        """Events held, bytes on disk and segments (for tests and the soak)."""
        with self._cond:
            held = self._live + sum(self.journal.closed_count(i) for i in range(len(self.journal.files) - 1))
            return {"events": held, "bytes": self.journal.disk_bytes(), "segments": len(self.journal.files)}

    # --- the source ---------------------------------------------------------------------

    def _group(self, name: str) -> _Group:
        group = self._groups.get(name)
        if group is None:
            raise KeyError(f"consumer group {name!r} does not exist: ensure_group first")
        return group

    def ensure_group(self, group: str, start: str = "0") -> None:
        if not _GROUP_NAME.match(group):
            raise ValueError(f"consumer group name {group!r}: letters, digits and _.:- only")
        with self._cond:
            if group in self._groups:
                return
            path = self.dir / "groups" / f"{group}.offset"
            state = _Group(path)
            try:
                doc = json.loads(path.read_text())
                state.committed, state.acked = int(doc["committed"]), set(doc.get("acked", ()))
            except (OSError, ValueError, KeyError):
                state.committed = self.journal.end if start == "$" else self.journal.first
                self._save_group(state)
            if state.committed < self.journal.first:
                # Trimmed while this group was not running here (nothing pinned it): it resumes at the oldest.
                state.committed, state.acked = self.journal.first, set()
                self._save_group(state)
            state.cursor = state.committed
            self._groups[group] = state

    def reset_consumer(self, group: str, consumer: str) -> None:
        with self._cond:
            g = self._group(group)
            g.cursor, g.ends = g.committed, {}

    def read(self, group: str, consumer: str, count: int, block_ms: int, after: str | None = None) -> list[Entry]:
        if after is not None:
            return []              # unacknowledged entries come back through reset_consumer and plain reads
        with self._cond:
            if self._closed:
                return []
            g = self._group(group)
            cursor = g.cursor
            out = self._take(g, count)
            # A read that only scanned a corrupt stretch returns at once: the consumer reads on from its end.
            if not out and g.cursor == cursor and block_ms > 0 and not self._closed:
                self._readers += 1
                try:
                    self._cond.wait(block_ms / 1000)
                finally:
                    self._readers -= 1
                out = self._take(g, count)
            return out

    def _take(self, g: _Group, count: int) -> list[Entry]:
        out: list[Entry] = []
        while len(out) < count and not self._closed:
            frames, gaps = self.journal.read_past(g.cursor, count - len(out))
            for start, resume in gaps:
                # A corrupt stretch holds no entry to deliver: passed as acknowledged, or the group's offset
                # would stay at its start for good (and pin every segment after it against retention).
                g.ends[start] = resume
                g.acked.add(start)
                g.cursor = resume
            if not frames:
                break
            for f in frames:
                g.ends[f.offset] = f.end
                if f.offset not in g.acked:
                    out.append(entry(str(f.offset), f.payload))
            g.cursor = frames[-1].end
        if self._advance(g) or g.unsaved:
            self._save_group(g)
        return out

    def claim(self, group: str, consumer: str, min_idle_ms: int, count: int) -> list[Entry]:
        return []                  # one process: nobody else holds entries

    def ack(self, group: str, ids: list[str]) -> None:
        if not ids:
            return
        with self._cond:
            g = self._group(group)
            g.acked.update(int(i) for i in ids if int(i) >= g.committed)
            if self._advance(g) and len(self.journal.files) > 1:
                try:
                    self._trim()     # a group that caught up may free the segments it held
                except OSError as exc:   # its index file refused (a full disk): trimmed again at the next ack
                    log.warning("event stream: retention could not save the segment index (%s)", exc)
            self._save_group(g)

    @staticmethod
    def _advance(g: _Group) -> bool:
        moved = False
        while g.committed in g.acked and g.committed in g.ends:
            g.acked.discard(g.committed)
            g.committed = g.ends.pop(g.committed)
            moved = True
        return moved

    def _save_group(self, g: _Group) -> None:
        try:
            write_atomic(g.path, json.dumps({"committed": g.committed, "acked": sorted(g.acked)}).encode())
        except OSError as exc:
            g.unsaved = True
            self.offset_failures += 1
            if self.offset_failures & (self.offset_failures - 1) == 0:      # 1, 2, 4...: not one a batch
                log.warning("event stream: cannot save the consumer offset %s (%s, %d failure(s)); kept in memory "
                            "and written at the next acknowledgement", g.path, exc, self.offset_failures)
            return
        if g.unsaved:
            g.unsaved = False
            log.warning("event stream: consumer offset %s saved again", g.path)

    def unread(self, group: str) -> int:
        """Entries from ``group``'s first unacknowledged one to the end (acknowledged ones after it included)."""
        with self._cond:
            start = self._group(group).committed
        return sum(len(frames) for frames in self._chunks(start))

    def caught_up(self, groups: list[str]) -> bool:
        """Every one of ``groups`` has acknowledged every entry."""
        with self._cond:
            return all(self._group(g).committed >= self.journal.end for g in groups)

    def range(self, start: str | None, end: str | None, count: int) -> list[Entry]:
        offset = int(start) if start else self.journal.first
        last = int(end) if end else None
        out: list[Entry] = []
        resync = not start          # an id a user typed may not be a frame start: no frame there reads nothing
        while len(out) < count:
            frames = self.journal.read(offset, count - len(out) + 1, resync=resync)
            resync = True
            if not frames:
                break
            for f in frames:
                if start and f.offset == int(start):
                    continue       # exclusive start
                if last is not None and f.offset > last:
                    return out
                out.append(entry(str(f.offset), f.payload))
                if len(out) == count:
                    break
            offset = frames[-1].end
        return out

    def length(self) -> int:
        return sum(len(frames) for frames in self._chunks(self.journal.first))

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            self.journal.close()


__all__ = ["EmbeddedLog"]
