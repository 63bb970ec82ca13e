"""Append-only journal files of framed events: the spill journal and the embedded stream.

A frame is a 32-byte header and the event's msgpack bytes::

    u32 payload length | u32 crc32(space, index, payload) | u64 index | 16 bytes space | payload

``(space, index)`` is the event's delivery id (see ``writer``): a store that
has seen index ``i`` of a space skips every frame of that space up to ``i``,
which is what makes a re-send land once.

``pack``, ``pack_many`` and ``pack_fresh`` here are the format's definition in Python; the writer frames its
batches with their C equal (``vsr_fast._ext.framing``), pinned to these byte for byte by a test.

Appends are one ``os.write`` of whole frames, and the in-memory ``end`` moves
only after it, so a reader that stops at ``end`` never sees half a frame. A
crash can still leave a torn tail; ``repair`` cuts it on open. No fsync per
append: the journal survives the process, not the machine (``sync`` on close).
"""
from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np

HEADER = struct.Struct("<IIQ16s")
MAX_PAYLOAD = 256 << 20
_READ_CHUNK = 1 << 20
# What one ``next_frame`` call reads and checks at most: a scan under the embedded log's lock lets it go
# this often (a stretch of zeros is one candidate frame a byte, each ~1 us of crc and Python). It reads in
# smaller chunks than ``read``, so that a call that stops early has not read and sifted much for nothing.
SCAN_BUDGET = 1 << 20
_SCAN_CHUNK = 64 << 10


class Frame(NamedTuple):
    offset: int          # where the frame starts: the embedded stream's entry id
    end: int             # where the next one starts
    space: bytes
    index: int
    payload: bytes


_ID = struct.Struct("<16sQ")      # what the crc covers before the payload: space, then index


def pack(space: bytes, index: int, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(_ID.pack(space, index)))
    return HEADER.pack(len(payload), crc, index, space) + payload


def pack_many(items: Iterable[tuple[bytes, int, bytes]]) -> bytes:
    """The frames of ``(space, index, payload)`` items, back to back: ``pack`` without a copy per frame."""
    parts: list[bytes] = []
    add, id_pack, header, crc32 = parts.append, _ID.pack, HEADER.pack, zlib.crc32
    for space, index, payload in items:
        add(header(len(payload), crc32(payload, crc32(id_pack(space, index))), index, space))
        add(payload)
    return b"".join(parts)


def pack_fresh(items: Iterable[tuple[bytes, int, bytes]],
               marks: dict[bytes, int]) -> tuple[bytes, int, dict[bytes, int]]:
    """``(frames, count, advanced)``: the frames of the items whose index is above their space's mark (``marks``
    as it would be after each earlier item), their count, and each space's new mark where one moved. ``marks``
    itself is left as it is: the embedded journal applies ``advanced`` once the append landed."""
    advanced: dict[bytes, int] = {}
    fresh = []
    for space, index, payload in items:
        if index > advanced.get(space, marks.get(space, 0)):
            fresh.append((space, index, payload))
            advanced[space] = index
    return pack_many(fresh), len(fresh), advanced


def _check(data: bytes | memoryview, at: int) -> tuple[int, int, bytes, int] | None:
    """``(index, payload_start, space, payload_end)`` of a whole, intact frame at ``at``, else None."""
    if len(data) - at < HEADER.size:
        return None
    length, crc, index, space = HEADER.unpack_from(data, at)
    start, stop = at + HEADER.size, at + HEADER.size + length
    if length > MAX_PAYLOAD or stop > len(data):
        return None
    if zlib.crc32(data[start:stop], zlib.crc32(_ID.pack(space, index))) != crc:
        return None
    return index, start, space, stop


class Journal:
    """One journal file, opened for appends from any thread and positional reads."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly:
            self._fd = os.open(self.path, os.O_RDONLY)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        self.end = os.fstat(self._fd).st_size
        self._lock = threading.Lock()

    def append(self, data: bytes) -> int:
        """Append whole frames; returns where they start. On OSError nothing is left behind."""
        with self._lock:
            start = self.end
            try:
                written = os.write(self._fd, data)
                while written < len(data):
                    written += os.write(self._fd, data[written:])
            except OSError:
                os.ftruncate(self._fd, start)   # a partial frame would corrupt the tail
                raise
            self.end = start + len(data)
            return start

    def read(self, offset: int, max_frames: int, limit: int | None = None) -> list[Frame]:
        """Up to ``max_frames`` whole frames from ``offset`` up to ``limit`` (default: the current end)."""
        stop = self.end if limit is None else min(limit, self.end)
        frames: list[Frame] = []
        while offset < stop and len(frames) < max_frames:
            chunk = os.pread(self._fd, min(_READ_CHUNK, stop - offset), offset)
            at = 0
            while len(frames) < max_frames:
                found = _check(chunk, at)
                if found is None:
                    break
                index, start, space, payload_end = found
                frames.append(Frame(offset + at, offset + payload_end, space, index, bytes(chunk[start:payload_end])))
                at = payload_end
            if at == 0:
                big = self._read_big(offset, stop)
                if big is None:
                    break                   # torn or corrupt: ``repair`` deals with it on open
                frames.append(big)
                at = big.end - offset
            offset += at
        return frames

    def _read_big(self, offset: int, stop: int) -> Frame | None:
        """A frame larger than one read chunk."""
        head = os.pread(self._fd, HEADER.size, offset)
        if len(head) < HEADER.size:
            return None
        length = HEADER.unpack_from(head)[0]
        if offset + HEADER.size + length > stop or length > MAX_PAYLOAD:
            return None
        data = os.pread(self._fd, HEADER.size + length, offset)
        found = _check(data, 0)
        if found is None:
            return None
        index, start, space, payload_end = found
        return Frame(offset, offset + payload_end, space, index, data[start:payload_end])

    def next_frame(self, offset: int) -> tuple[int, bool]:
        """Where to read on after a corrupt stretch at ``offset``: ``(position, True)`` for the first intact
        frame after it or the file's end, ``(position, False)`` where this call's scan stopped (positions
        before it hold no frame: scan on from there).

        A frame's crc covers its id and payload, so a stretch that only looks like a header is not taken. One
        call reads and checks about ``SCAN_BUDGET`` bytes (one frame larger than a read chunk may add its own
        size), so a caller holding a lock lets it go between calls."""
        at, spent = offset + 1, 0
        while self.end - at >= HEADER.size:
            if spent >= SCAN_BUDGET:
                return at, False
            chunk = os.pread(self._fd, min(_SCAN_CHUNK, self.end - at), at)
            n = len(chunk) - HEADER.size + 1
            if n <= 0:
                break
            spent += len(chunk)
            b = np.frombuffer(chunk, np.uint8).astype(np.int64)
            lengths = b[:n] | b[1:n + 1] << 8 | b[2:n + 2] << 16 | b[3:n + 3] << 24
            fits = (lengths <= MAX_PAYLOAD) & (np.arange(at, at + n) + HEADER.size + lengths <= self.end)
            for k in np.flatnonzero(fits).tolist():
                size = HEADER.size + int(lengths[k])
                spent += size
                if k + size <= len(chunk):
                    # Wholly in the chunk: checked there, never read again from disk.
                    if _check(chunk, k) is not None:
                        return at + k, True
                elif self._read_big(at + k, self.end) is not None:
                    return at + k, True
                if spent >= SCAN_BUDGET:
                    return at + k + 1, False
            at += n
        return self.end, True

    def repair(self, offset: int = 0) -> int:
        """Cut a torn or corrupt tail after ``offset``; returns how many bytes were cut."""
        with self._lock:
            good = offset
            while True:
                frames = self.read(good, 4096)
                if not frames:
                    break
                good = frames[-1].end
            cut = self.end - good
            if cut:
                os.ftruncate(self._fd, good)
                self.end = good
            return cut

    def refresh(self) -> int:
        """A read-only journal's size, after another process appended to it."""
        self.end = os.fstat(self._fd).st_size
        return self.end

    def truncate(self, size: int = 0) -> None:
        with self._lock:
            os.ftruncate(self._fd, size)
            self.end = size

    def sync(self) -> None:
        os.fsync(self._fd)

    def modified(self) -> float:
        """When the last append landed (the file's mtime, wall clock)."""
        return os.fstat(self._fd).st_mtime

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def write_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file, never half of one. A removed
    directory is created again; other OSErrors (a full disk) are the caller's."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        f = open(tmp, "wb")     # noqa: SIM115 - closed below
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)      # the directory was removed under a running router
        f = open(tmp, "wb")     # noqa: SIM115
    with f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


__all__ = ["Frame", "HEADER", "Journal", "pack", "pack_fresh", "pack_many", "write_atomic"]
