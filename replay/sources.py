"""Where recorded events come from: an export file, a Redis stream, or an embedded journal.

Each source yields ``(entry id, event)`` in stream order and says how far it
has got (``done``, ``total``) for the progress bar. An export is JSON lines,
``{"id": ..., "event": {...}}``, the event as ``vsr_fast.events.types``
spells it.
"""
from __future__ import annotations

import abc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import msgspec

from vsr_fast.config.stores import EventStreamStore, default_events_dir
from vsr_fast.events.segments import LEGACY, Segments, segment_name, segment_paths
from vsr_fast.events.redis_stream import RedisSource
from vsr_fast.events.source import entry
from vsr_fast.events.types import Event
from vsr_fast.routing import load_file


class ExportLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    event: Event


LINE = msgspec.json.Decoder(ExportLine)
LINE_ENCODER = msgspec.json.Encoder()


class Source(abc.ABC):
    """A readable range of events; ``done``/``total`` are in ``unit`` (events or bytes)."""

    unit = "events"
    total: int | None = None
    done = 0
    undecodable = 0
    unreadable: dict[str, int] = {}     # corrupt stretches of a journal read past: "segment@offset" -> bytes

    @abc.abstractmethod
    def __iter__(self) -> Iterator[tuple[str, Event]]:
        """(entry id, event) in stream order."""

    def _decoded(self, e) -> Iterator[tuple[str, Event]]:
        """The entry's event, or nothing (counted) when it did not decode."""
        if e.event is None:
            self.undecodable += 1
        else:
            yield e.id, e.event


class ExportFile(Source):
    unit = "bytes"

    def __init__(self, path: str) -> None:
        self.path = path
        self.total = Path(path).stat().st_size if path != "-" else None

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        import sys

        f: IO[bytes] = sys.stdin.buffer if self.path == "-" else open(self.path, "rb")
        try:
            for line in f:
                self.done += len(line)
                if not line.strip():
                    continue
                try:
                    item = LINE.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    self.undecodable += 1
                    continue
                yield item.id, item.event
        finally:
            if f is not sys.stdin.buffer:
                f.close()


def _shown(url: str) -> str:
    """``url`` without its password, to print."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class RedisStream(Source):
    def __init__(self, url: str, stream: str, *, start: str | None = None, end: str | None = None,
                 page: int = 1000) -> None:
        self.source = RedisSource(url, stream)
        self.start, self.end, self.page = start, end, page
        if not self.source.exists():
            # A mistyped --stream read as an empty one would report "compared 0" and pass a gate: cannot run (2).
            self.source.close()
            raise ValueError(f"stream {stream} does not exist on {_shown(url)}")
        self.total = self.source.length()
        if start is not None:
            last = self.source.last_id()
            if last is None or stream_id_key(start) >= stream_id_key(last):
                # Not an error (a range may be read before it fills), but "compared 0" alone would not say why.
                print(f"vsr-replay: warning: --start {start} is at or past the last entry of {stream} "
                      f"({last or 'none'}): nothing to read", file=sys.stderr)

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        after = self.start
        try:
            while True:
                entries = self.source.range(after, self.end, self.page)
                if not entries:
                    return
                for e in entries:
                    self.done += 1
                    yield from self._decoded(e)
                after = entries[-1].id
        finally:
            self.source.close()


def stream_id_key(entry_id: str) -> tuple[int, int]:
    """A Redis stream id (``ms`` or ``ms-seq``, as ``stream_id`` admits) as the pair Redis orders by."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class EmbeddedJournal(Source):
    """An embedded stream's journal, read-only (the router may be appending to it)."""

    unit = "bytes"

    def __init__(self, path: str, *, start: str | None = None, end: str | None = None) -> None:
        for option, value in (("--start", start), ("--end", end)):
            if value is not None and not value.isdigit():
                raise ValueError(f"{option} {value}: an embedded journal's positions are byte offsets (an integer)")
        self.journal = Segments(journal_dir(Path(path)), readonly=True)
        self.start, self.end = start, end
        self.total = self.journal.end

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        offset = int(self.start) if self.start else self.journal.first
        last = int(self.end) if self.end else None
        resync = not self.start     # --start may not be a frame start: no frame there reads nothing
        try:
            while True:
                frames = self.journal.read(offset, 1000, resync=resync)
                resync = True
                if not frames:
                    return
                for f in frames:
                    self.done = f.end
                    if self.start and f.offset == int(self.start):
                        continue
                    if last is not None and f.offset > last:
                        return
                    yield from self._decoded(entry(str(f.offset), f.payload))
                offset = frames[-1].end
        finally:
            self.unreadable = {f"{self.journal.dir / segment_name(base)}@{at}": size
                               for (base, at), size in self.journal.unreadable.items()}
            self.journal.close()


def journal_dir(p: Path) -> Path:
    """The directory holding an embedded stream's segments: ``p`` itself, its ``stream`` below it, or the one
    of a segment (or of a journal written before segments) named directly."""
    if p.is_file():
        return p.parent
    for candidate in (p, p / "stream"):
        if segment_paths(candidate) or (candidate / LEGACY).is_file():
            return candidate
    raise FileNotFoundError(f"{p}: no embedded stream journal here (stream/stream.*.journal)")


class EmbeddedJournals(Source):
    """Several routers' journals read one after the other (every port and worker of a host that
    ran the default path); entry ids are ``<directory>/<offset>``. A request's events all sit in
    the journal of the process that served it, so reading them in turn keeps them together."""

    unit = "bytes"

    def __init__(self, paths: list[Path]) -> None:
        self.parts = [(p.parent.name, EmbeddedJournal(str(p))) for p in paths]
        self.total = sum(j.total or 0 for _, j in self.parts)

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        before = 0
        for name, journal in self.parts:
            for entry_id, ev in journal:
                self.done = before + journal.done
                yield f"{name}/{entry_id}", ev
            before += journal.total or 0
            self.undecodable += journal.undecodable
            self.unreadable = {**self.unreadable, **journal.unreadable}


def default_journals(start: str | None, end: str | None) -> Source:
    """The embedded journals a router left under ``$VSR_STATE_DIR/events`` with no ``path`` set."""
    base = Path(default_events_dir())
    found = sorted(d for d in base.glob("*/stream") if segment_paths(d) or (d / LEGACY).is_file())
    if not found:
        raise FileNotFoundError(f"{base}: no embedded stream journal here (run the router with this configuration "
                                "from this directory first, or set VSR_STATE_DIR to where it ran)")
    if len(found) == 1:
        return EmbeddedJournal(str(found[0]), start=start, end=end)
    if start or end:
        raise ValueError(f"{base} holds {len(found)} journals ({', '.join(p.parent.name for p in found)}): "
                         "name one with --journal DIR to read a range of it")
    return EmbeddedJournals(found)


def stream_config(config_path: str) -> EventStreamStore:
    """``global.stores.event_stream`` of a configuration file (the default embedded stream when absent).

    The file loads as ``--config`` does: one that does not (bad YAML, empty, not v0.5) raises ConfigError."""
    return load_file(config_path).config.global_.stores.event_stream


def open_source(*, input: str | None = None, redis_url: str | None = None, stream: str | None = None,
                journal: str | None = None, from_config: str | None = None, start: str | None = None,
                end: str | None = None) -> Source:
    """Exactly one of: an export file, a Redis stream, an embedded journal, or the stream a config names."""
    if input:
        return ExportFile(input)
    if redis_url or stream:
        return RedisStream(redis_url or "redis://127.0.0.1:6379/0", stream or "vsr:events", start=start, end=end)
    if journal:
        return EmbeddedJournal(journal, start=start, end=end)
    if from_config:
        cfg = stream_config(from_config)
        if cfg.backend == "redis":
            return RedisStream(cfg.url, cfg.stream, start=start, end=end)
        if cfg.backend == "none":
            raise ValueError(f"{from_config}: global.stores.event_stream.backend is none: nothing was recorded")
        if cfg.path is None:
            return default_journals(start, end)
        return EmbeddedJournal(str(Path(cfg.path) / "stream"), start=start, end=end)
    raise ValueError("name the events: --input FILE, --redis URL [--stream KEY], --journal DIR or --from-config FILE")


__all__ = ["EmbeddedJournal", "EmbeddedJournals", "ExportFile", "ExportLine", "LINE", "LINE_ENCODER", "RedisStream",
           "Source", "default_journals", "open_source", "stream_config"]
