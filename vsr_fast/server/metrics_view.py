"""One view of the metrics across a supervisor's workers.

Each worker keeps its own series (no lock, no shared memory on the hot path: ``metrics``). Under a
supervisor every worker also answers its rendered series on a Unix socket of its own in a directory the
supervisor made; the worker a scrape reaches reads its peers' there and adds them up, so every scrape counts
every worker's requests exactly, whichever worker the kernel handed the connection to. Series are merged by
name and labels: counters, histograms and most gauges add up; the 0/1 gauges are the lowest of the
workers' (a backend one worker ejected shows down); ``vsr_config_reloads_total`` is the highest (each worker
loads the file at each reload: one reload, not one per worker).

A counter must never go down between scrapes (Prometheus takes a lower value for a reset, and ``rate()``
then counts the whole value again). A worker that does not answer in time (stuck, stopped) is counted with
the series it last gave out: each worker writes what it renders to ``worker-<n>.last`` before sending it,
so that file holds at least what any scrape saw of it. ``vsr_workers_stale`` says how many workers' series
a scrape took from there: a scrape still answers (failing it with a 503 would hide every worker's series
for one stuck worker's sake, and leave gaps in every graph) and an alert can watch the gauge.

A worker the supervisor started again after it died (``restarts``) takes up the counters its predecessor
left in ``worker-<n>.last`` (``_carried``: counters and histograms, not gauges, which were that process's
state) and adds them to its own at every render, so the file it writes in place of the old one never goes
lower: the dead worker's counts are kept, once. The supervisor keeps ``vsr_worker_restarts_total`` in a file
of its own there (``keep_restarts``), which every scrape adds.

The same sockets answer the replay API's reads: with the embedded event stream each worker records the
requests it served in its own memory, so ``GET /api/v1/replay[/<id>]`` asks every worker (``replay_get``,
``replay_list``) and answers the same whichever worker the connection reached. With the Redis event stream
every worker reads the one shared store: asking the others would only repeat its records.

An ask a worker cannot answer (a malformed one, a store error) is answered ``!error <reason>`` and logged; the
asker takes it as no answer. It never ends the worker (an exception in the serving nursery would, and the
supervisor then stops every worker). The files (``.last``, the directory's listing) are read and written on a
worker thread, never on the loop that serves requests.
"""
from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable

import msgspec
import trio

from ..events.replay_record import RecordSummary
from . import heap
from .state import AppState

log = logging.getLogger("vsr_fast.metrics")

# Gauges that are a state, not an amount (every 0/1 gauge): merged as the minimum over the workers, so one
# worker's ejected backend or unreachable store shows as down.
MIN_GAUGES = frozenset({"vsr_backend_up", "vsr_events_store_up", "vsr_config_last_reload_success"})
# Counters every worker counts for the same event, and what every worker says alike (the configuration in
# effect, when it was loaded): merged as the maximum (still never lower than before).
MAX_COUNTERS = frozenset({"vsr_config_reloads_total", "vsr_config_info", "vsr_config_last_reload_timestamp_seconds"})
_PEER_TIMEOUT_S = 2.0
_PEER_FILE = re.compile(r"^worker-(\d+)\.(?:sock|last)$")
_SUPERVISOR_FILE = "supervisor.last"
_RESTARTS_META = ("# HELP vsr_worker_restarts_total Worker processes the supervisor started again after one died.\n"
                  "# TYPE vsr_worker_restarts_total counter\n")
# The kinds of series a restarted worker takes up from its predecessor: amounts that only grow.
_CARRIED_KINDS = frozenset({"counter", "histogram"})
_MAX_ASK = 65536


def own_metrics(state: AppState) -> bytes:
    """This process's series in Prometheus' text format."""
    extra = [state.connections.prometheus_lines(), state.upstreams.prometheus_lines(),
             ["# HELP vsr_workers Worker processes whose series this scrape adds up.", "# TYPE vsr_workers gauge",
              "vsr_workers 1"], heap.prometheus_lines(), state.metrics.config_lines(state.loaded.version_hash)]
    if state.systemone_client:
        extra.append(state.systemone_client.metrics.render())
    if state.systemone is not None:
        extra.append(state.systemone.scan_metrics.render())
    if state.events is not None:
        extra.append(state.events.prometheus_lines())
    if state.direct_cache is not None:
        extra.append(state.direct_cache.prometheus_lines())
    if state.access_log is not None:
        extra.append(state.access_log.prometheus_lines())
    return state.metrics.render(*extra)


def merge(texts: list[bytes]) -> bytes:
    """Several processes' expositions as one: the same series (name and labels) added up."""
    families: dict[str, tuple[list[str], dict[str, float]]] = {}
    kinds: dict[str, str] = {}
    for text in texts:
        family = None
        for line in text.decode().splitlines():
            if not line:
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    meta, _ = families.setdefault(family, ([], {}))
                    if line not in meta:
                        meta.append(line)
                    if parts[1] == "TYPE" and len(parts) == 4:
                        kinds[family] = parts[3]
                continue
            key, _, value = line.rpartition(" ")
            name = key.split("{", 1)[0]
            _, samples = families.setdefault(family if family and name.startswith(family) else name, ([], {}))
            number = float(value)
            if key not in samples:
                samples[key] = number
            elif name in MIN_GAUGES:
                samples[key] = min(samples[key], number)
            elif name in MAX_COUNTERS:
                samples[key] = max(samples[key], number)
            else:
                samples[key] += number
    out: list[str] = []
    for meta, samples in families.values():
        out += meta
        out += [f"{key} {_number(v)}" for key, v in samples.items()]
    return ("\n".join(out) + "\n").encode()


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def socket_path(directory: str, worker: int) -> str:
    return os.path.join(directory, f"worker-{worker}.sock")


def _last_path(directory: str, worker: int) -> str:
    return os.path.join(directory, f"worker-{worker}.last")


_ERROR = b"!error "
_keeping: dict[str, trio.Lock] = {}
# Per ``.last`` path: the counters a dead predecessor left there, read at this process's first render.
_carried: dict[str, bytes] = {}


def _keep(path: str, text: bytes) -> None:
    try:
        with open(path + ".tmp", "wb") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    except OSError as exc:
        log.warning("metrics: cannot keep this worker's series in %s: %s", path, exc)


async def _rendered(state: AppState, directory: str, worker: int) -> bytes:
    """This worker's series, kept in its ``.last`` file first (a small file under the supervisor's temporary
    directory, written in place of the old one: a reader never sees half of it), on a worker thread.

    Written at every render, not at most once a second: a series answered but not yet kept would let a counter
    go back if the worker stopped then. One render and write at a time, so a later render is never replaced by
    an earlier one."""
    path = _last_path(directory, worker)
    async with _keeping.setdefault(path, trio.Lock()):
        if path not in _carried:
            _carried[path] = await trio.to_thread.run_sync(_predecessor, path)
        text = own_metrics(state)
        if _carried[path]:
            text = merge([text, _carried[path]])
        await trio.to_thread.run_sync(_keep, path, text)
    return text


def _predecessor(path: str) -> bytes:
    """The counters and histograms in ``path``, left by the worker this one replaces (none at a first start)."""
    try:
        return carried_series(_read(path))
    except FileNotFoundError:
        return b""


def carried_series(text: bytes) -> bytes:
    """The families of ``text`` that only grow (``_CARRIED_KINDS``), their HELP and TYPE lines included."""
    lines = text.decode().splitlines()
    kinds = {parts[2]: parts[3] for line in lines
             if line.startswith("# TYPE ") and len(parts := line.split(None, 3)) == 4}
    kept, family = [], None
    for line in lines:
        if line.startswith("#"):
            parts = line.split(None, 3)
            family = parts[2] if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") else family
        if line and kinds.get(family) in _CARRIED_KINDS:
            kept.append(line)
    return ("\n".join(kept) + "\n").encode() if kept else b""


def keep_restarts(directory: str, count: int) -> None:
    """The supervisor's ``vsr_worker_restarts_total``, kept where every worker's scrape adds it up."""
    text = _RESTARTS_META + f"vsr_worker_restarts_total {count}\n"
    _keep(os.path.join(directory, _SUPERVISOR_FILE), text.encode())


async def serve_peers(current: Callable[[], AppState], directory: str, worker: int,
                      task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Answer this worker's peers (until cancelled): its series, or its replay records. ``current``: the
    generation serving now (a reload's backends, not the first generation's); started once its series are kept."""
    path = socket_path(directory, worker)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.bind(path)
    raw.listen(16)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(raw))
    # Its series kept once now: a worker that stops before any scrape asked it still counts with them.
    await _rendered(current(), directory, worker)
    task_status.started()

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                with trio.move_on_after(_PEER_TIMEOUT_S):
                    ask = await _receive_line(stream)
                    try:
                        reply = await _answer(current(), directory, worker, ask)
                    except Exception as exc:   # a malformed ask, a store error: this ask fails, not the worker
                        log.exception("metrics: cannot answer the ask %r on %s", ask[:100], path)
                        reply = _ERROR + f"{type(exc).__name__}: {exc}".encode(errors="replace")
                    await stream.send_all(reply)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    try:
        await trio.serve_listeners(answer, [listener])
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


async def _receive_line(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < _MAX_ASK:
        chunk = await stream.receive_some(_MAX_ASK)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


async def _answer(state: AppState, directory: str, worker: int, ask: bytes) -> bytes:
    verb, _, arg = ask.partition(b" ")
    if verb == b"metrics":
        return await _rendered(state, directory, worker)
    records = state.events.records if state.events is not None else None
    if verb == b"replay-get" and records is not None:
        record = await records.get_record(arg.decode())
        return msgspec.json.encode(record) if record is not None else b""
    if verb == b"replay-list" and records is not None:
        return msgspec.json.encode(await records.list_records(**msgspec.json.decode(arg)))
    return b""


async def _peers(directory: str, worker: int) -> list[int]:
    """The other workers that answer here now, or did (a ``.last`` file)."""
    names = await trio.to_thread.run_sync(os.listdir, directory)
    found = {int(m.group(1)) for name in names if (m := _PEER_FILE.match(name))}
    return sorted(found - {worker})


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


async def gathered(state: AppState, directory: str | None, worker: int) -> bytes:
    """Every worker's series added up; this worker's alone without a supervisor."""
    if directory is None:
        return own_metrics(state)
    texts = [await _rendered(state, directory, worker)]
    stale = 0
    for peer in await _peers(directory, worker):
        text = await _ask(socket_path(directory, peer), b"metrics")
        if text is None:
            # Its last series (never lower than what a scrape saw of it; each worker keeps one as it starts to
            # answer), or none: stale either way, a worker stopped before any scrape asked it included.
            stale += 1
            try:
                text = await trio.to_thread.run_sync(_read, _last_path(directory, peer))
            except OSError:
                continue
        texts.append(text)
    try:
        texts.append(await trio.to_thread.run_sync(_read, os.path.join(directory, _SUPERVISOR_FILE)))
    except OSError:
        pass
    texts.append(b"# HELP vsr_workers_stale Workers that did not answer this scrape in time: their series are "
                 b"the last they gave out.\n# TYPE vsr_workers_stale gauge\n" + f"vsr_workers_stale {stale}\n".encode())
    return merge(texts)


def _per_worker(state: AppState) -> bool:
    """Whether each worker holds records of its own (the embedded stream's), so the others must be asked too."""
    return state.metrics_dir is not None and state.events is not None and not state.events.records.shared


async def replay_get(state: AppState, replay_id: str) -> bytes | None:
    """``GET /api/v1/replay/<id>``'s record as JSON: this worker's, else the first peer's that holds it."""
    record = await state.events.records.get_record(replay_id) if state.events is not None else None
    if record is not None:
        return msgspec.json.encode(record)
    if not _per_worker(state):
        return None
    for peer in await _peers(state.metrics_dir, state.worker):
        found = await _ask(socket_path(state.metrics_dir, peer), b"replay-get " + replay_id.encode())
        if found:
            return found
    return None


async def replay_list(state: AppState, **query) -> list[RecordSummary]:
    """``GET /api/v1/replay``'s rows: every worker's, newest first, ``limit`` of them."""
    rows = await state.events.records.list_records(**query) if state.events is not None else []
    if not _per_worker(state):
        return rows
    ask = b"replay-list " + msgspec.json.encode(query)
    for peer in await _peers(state.metrics_dir, state.worker):
        found = await _ask(socket_path(state.metrics_dir, peer), ask)
        if found:
            rows += msgspec.json.decode(found, type=list[RecordSummary])
    # One row per record, should two workers hold it.
    unique = list({row.id: row for row in rows}.values())
    return sorted(unique, key=lambda s: s.ts_ms, reverse=True)[:query.get("limit", 50)]


async def _ask(path: str, ask: bytes) -> bytes | None:
    """A peer's answer to ``ask``, or None for a worker gone or stuck."""
    chunks: list[bytes] = []
    with trio.move_on_after(_PEER_TIMEOUT_S):
        try:
            stream = await trio.open_unix_socket(path)
        except OSError as exc:
            log.warning("metrics: worker socket %s does not answer: %s", path, exc)
            return None
        async with stream:
            try:
                await stream.send_all(ask + b"\n")
                while chunk := await stream.receive_some(65536):
                    chunks.append(chunk)
            except (trio.BrokenResourceError, OSError) as exc:
                log.warning("metrics: worker socket %s broke off: %s", path, exc)
                return None
            answer = b"".join(chunks)
            if answer.startswith(_ERROR):
                log.warning("metrics: worker socket %s could not answer %r: %s", path, ask[:100],
                            answer[len(_ERROR):].decode(errors="replace"))
                return None
            return answer
    log.warning("metrics: worker socket %s took over %s s", path, _PEER_TIMEOUT_S)
    return None
