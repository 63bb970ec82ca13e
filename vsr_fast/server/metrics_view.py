"""One view of the metrics across a supervisor's workers.

Each worker keeps its own series (no lock, no shared memory on the hot path: ``metrics``). Under a
supervisor every worker also answers its rendered series on a Unix socket of its own in a directory the
supervisor made; the worker a scrape reaches reads its peers' there and adds them up, so every scrape counts
every worker's requests exactly, whichever worker the kernel handed the connection to. Series are merged by
name and labels: counters, histograms and most gauges add up; ``vsr_backend_up`` is the lowest of the
workers' (a backend one worker ejected shows down).
"""
from __future__ import annotations

import logging
import os
import socket

import trio

from . import heap
from .state import AppState

log = logging.getLogger("vsr_fast.metrics")

# Gauges that are a state, not an amount: merged as the minimum over the workers.
MIN_GAUGES = frozenset({"vsr_backend_up"})
_PEER_TIMEOUT_S = 2.0


def own_metrics(state: AppState) -> bytes:
    """This process's series in Prometheus' text format."""
    extra = [state.connections.prometheus_lines(), state.upstreams.prometheus_lines(),
             ["# HELP vsr_workers Worker processes whose series this scrape adds up.", "# TYPE vsr_workers gauge",
              "vsr_workers 1"], heap.prometheus_lines()]
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


async def serve_peers(state: AppState, directory: str, worker: int) -> None:
    """Answer this worker's series to any peer that connects (until cancelled)."""
    path = socket_path(directory, worker)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.bind(path)
    raw.listen(16)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(raw))

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                await stream.send_all(own_metrics(state))
            except trio.BrokenResourceError:
                pass

    try:
        await trio.serve_listeners(answer, [listener])
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


async def gathered(state: AppState, directory: str | None, worker: int) -> bytes:
    """Every worker's series added up; this worker's alone without a supervisor."""
    own = own_metrics(state)
    if directory is None:
        return own
    texts = [own]
    mine = socket_path(directory, worker)
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.endswith(".sock") or path == mine:
            continue
        text = await _read_peer(path)
        if text is not None:
            texts.append(text)
    return merge(texts)


async def _read_peer(path: str) -> bytes | None:
    """A peer's series, or None for a worker gone or stuck (its share is then missing from this scrape)."""
    chunks: list[bytes] = []
    with trio.move_on_after(_PEER_TIMEOUT_S):
        try:
            stream = await trio.open_unix_socket(path)
        except OSError as exc:
            log.warning("metrics: worker socket %s does not answer: %s", path, exc)
            return None
        async with stream:
            while chunk := await stream.receive_some(65536):
                chunks.append(chunk)
            return b"".join(chunks)
    log.warning("metrics: worker socket %s took over %s s", path, _PEER_TIMEOUT_S)
    return None
