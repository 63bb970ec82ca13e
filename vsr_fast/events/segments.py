"""The embedded stream's journal in segments, so that retention drops whole files and never copies one.

A segment is a journal file ``stream.<base>.journal`` whose frames have global
offsets ``base + position``: an entry keeps its id while older segments go.
Appends go to the last segment (the live one); it is closed and a new one
started once it holds ``segment_entries`` events or is older than
``roll_after_s``. A closed segment's event count is kept in
``stream.segments`` (written at each roll; a segment missing there is counted
by reading it), its age is its file's modification time.

A corrupt stretch inside a closed segment (a disk error, a stray write) is
read past: reads resume at the next intact frame (its crc checks), and the
stretch is logged once and kept in ``unreadable``.

``trim`` drops the oldest closed segments while the rest still hold ``maxlen``
events (or while they are older than ``max_age_s``), never past ``keep_from``:
the embedded stream passes the lowest offset a consumer group has not
acknowledged, so compaction keeps what consumers have not read.

A journal written before segments (``stream.journal``) is taken as the segment
at base 0.
"""
from __future__ import annotations

import bisect
import contextlib
import json
import logging
import os
import re
from pathlib import Path

from .journal import Frame, Journal, write_atomic

log = logging.getLogger("vsr_fast.events")
_NAME = re.compile(r"^stream\.(\d{20})\.journal$")
LEGACY = "stream.journal"
INDEX = "stream.segments"


def segment_name(base: int) -> str:
    return f"stream.{base:020d}.journal"


def segment_paths(directory: Path) -> list[tuple[int, Path]]:
    """``(base, path)`` of every segment in ``directory``, oldest first."""
    found = []
    for path in directory.glob("stream.*.journal"):
        m = _NAME.match(path.name)
        if m:
            found.append((int(m.group(1)), path))
    return sorted(found)


class Segments:
    """The ordered segments of one directory; thread safety is the caller's (EmbeddedLog holds its lock)."""

    def __init__(self, directory: str | Path, *, readonly: bool = False) -> None:
        self.dir = Path(directory)
        self.readonly = readonly
        legacy = self.dir / LEGACY
        if not readonly and legacy.exists() and not segment_paths(self.dir):
            os.replace(legacy, self.dir / segment_name(0))
        paths = segment_paths(self.dir)
        if readonly and not paths and legacy.exists():
            paths = [(0, legacy)]
        if not paths:
            if readonly:
                raise FileNotFoundError(f"{self.dir}: no embedded stream journal here")
            paths = [(0, self.dir / segment_name(0))]
        self.bases = [base for base, _ in paths]
        self.files = [Journal(path, readonly=readonly) for _, path in paths]
        self.counts: dict[int, int] = self._load_index()
        # Corrupt stretches of closed segments read past: (segment base, offset in it) -> bytes.
        self.unreadable: dict[tuple[int, int], int] = {}
        self._scanning: dict[int, tuple[int, int]] = {}    # where a scan stopped -> the start of its stretch

    # --- sizes --------------------------------------------------------------------------

    @property
    def live(self) -> Journal:
        return self.files[-1]

    @property
    def first(self) -> int:
        """The lowest offset still held."""
        return self.bases[0]

    @property
    def end(self) -> int:
        """The offset the next append lands at."""
        return self.bases[-1] + self.live.end

    def disk_bytes(self) -> int:
        return sum(f.end for f in self.files)

    def refresh(self) -> int:
        """A read-only view's end, after the router appended (segments it rolled to are picked up)."""
        known = set(self.bases)
        for base, path in segment_paths(self.dir):
            if base not in known and base > self.bases[-1]:
                self.bases.append(base)
                self.files.append(Journal(path, readonly=True))
        for f in self.files:
            f.refresh()
        return self.end

    def _load_index(self) -> dict[int, int]:
        try:
            doc = json.loads((self.dir / INDEX).read_text())
            return {int(k): int(v) for k, v in doc.items()}
        except (OSError, ValueError, AttributeError):
            return {}

    def closed_count(self, i: int) -> int:
        """Events in the closed segment ``i`` (counted once by reading it if the index lacks it)."""
        base = self.bases[i]
        if base not in self.counts:
            self.counts[base] = sum(len(frames) for frames in self._chunks_of(self.files[i]))
        return self.counts[base]

    @staticmethod
    def _chunks_of(journal: Journal):
        offset = 0
        while frames := journal.read(offset, 4096):
            yield frames
            offset = frames[-1].end

    # --- appends and reads --------------------------------------------------------------

    def append(self, data: bytes) -> int:
        return self.bases[-1] + self.live.append(data)

    def roll(self, live_count: int) -> None:
        """Close the live segment (holding ``live_count`` events) and start the next one."""
        if self.live.end == 0:
            return
        self.counts[self.bases[-1]] = live_count
        self.live.sync()
        base = self.end
        self.bases.append(base)
        self.files.append(Journal(self.dir / segment_name(base)))
        self._save_index()

    def _save_index(self) -> None:
        doc = {str(b): self.counts[b] for b in self.bases if b in self.counts}
        write_atomic(self.dir / INDEX, json.dumps(doc).encode())

    def read(self, offset: int, max_frames: int, *, resync: bool = True) -> list[Frame]:
        """Up to ``max_frames`` whole frames from ``offset`` on, in one segment (the caller continues from the
        last one's ``end``), corrupt stretches read past; an offset already trimmed reads from the first segment
        held. ``resync=False``: ``offset`` may not be a frame start (an id a user typed), so a frame that does
        not check there ends the read, as the end of the stream does."""
        while True:
            frames, gaps = self.read_past(offset, max_frames, resync=resync)
            if frames or not gaps:
                return frames
            offset, resync = gaps[-1][1], True

    def read_past(self, offset: int, max_frames: int, *,
                  resync: bool = True) -> tuple[list[Frame], list[tuple[int, int]]]:
        """``read``, and the corrupt stretches it read past as ``(start, where reading resumed)``: a consumer
        group passes them as acknowledged. At most one budgeted scan a call: with no frames, the caller reads
        on from the last stretch's end (a lock held around the call is let go between scans)."""
        if offset < self.first:
            offset, resync = self.first, True
        i = bisect.bisect_right(self.bases, offset) - 1
        gaps: list[tuple[int, int]] = []
        while i < len(self.files):
            base = self.bases[i]
            frames = self.files[i].read(offset - base, max_frames)
            if frames:
                return [Frame(f.offset + base, f.end + base, f.space, f.index, f.payload) for f in frames], gaps
            if i + 1 == len(self.files):
                return [], gaps     # the live segment's end (a torn tail is ``repair``'s)
            if offset - base < self.files[i].end:
                # A closed segment stopped short of its end: a corrupt stretch. Read on past it.
                if not resync or gaps:
                    return [], gaps
                resume = self._scan(i, offset)
                gaps.append((offset, resume))
                if resume < base + self.files[i].end:
                    offset = resume
                    continue
            i += 1                  # the end of a closed segment: the next starts at its base
            offset = self.bases[i]
        return [], gaps

    def _scan(self, i: int, offset: int) -> int:
        """Where reading resumes after the corrupt stretch at global ``offset`` of closed segment ``i``."""
        base, journal = self.bases[i], self.files[i]
        start = self._scanning.get(offset, (base, offset - base))
        resume, done = journal.next_frame(offset - base)
        if not done:
            self._scanning[base + resume] = start     # one stretch, however many scans it takes
        elif start not in self.unreadable:
            size = self.unreadable[start] = resume - start[1]
            log.warning("event stream: %d unreadable bytes at %d of %s, read past", size, start[1], journal.path)
        return base + resume

    def repair(self, offset: int) -> int:
        """Cut a torn tail of the live segment after global ``offset``."""
        return self.live.repair(max(0, offset - self.bases[-1]))

    # --- retention ----------------------------------------------------------------------

    def trim(self, *, maxlen: int | None, live_count: int, max_age_s: float | None, now: float,
             keep_from: int) -> int:
        """Drop the oldest closed segments that retention lets go; returns how many were dropped."""
        dropped = 0
        while len(self.files) > 1:
            end = self.bases[1]
            if end > keep_from:
                break                           # a consumer group has not acknowledged all of it
            newer = live_count + sum(self.closed_count(i) for i in range(1, len(self.files) - 1))
            too_many = maxlen is not None and newer >= maxlen
            too_old = max_age_s is not None and now - self.files[0].modified() > max_age_s
            if not (too_many or too_old):
                break
            base, journal = self.bases.pop(0), self.files.pop(0)
            journal.close()
            with contextlib.suppress(FileNotFoundError):    # the directory was removed under the router
                os.unlink(journal.path)
            self.counts.pop(base, None)
            dropped += 1
        if dropped:
            self._save_index()
        return dropped

    def close(self) -> None:
        for f in self.files:
            f.close()


__all__ = ["LEGACY", "Segments", "segment_name", "segment_paths"]
