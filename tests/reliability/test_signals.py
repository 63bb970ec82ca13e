"""Signals as process managers send them (trial 7a): a repeated SIGTERM, the process group's as well as the
supervisor's copy, is the same request and the drain goes on; SIGHUP while starting is held, not fatal;
SIGUSR1 ends nothing; workers die with a supervisor killed outright; ``--drain-delay`` keeps serving, /ready
503, before the listener closes."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from bench._procs import children
from ..procs import ROOT, Proc, config, free_port, mock_upstream, model, router, wait_until, write_config
from .test_drain import CHAT, InFlight, refused


@pytest.fixture(scope="module")
def slow_stream():
    """A stream of 30 chunks, one each 50 ms: long enough to signal the router twice while it runs."""
    with mock_upstream("--chunks", "30", "--chunk-interval-ms", "50") as proc:
        yield proc


def _config(tmp_path, upstream) -> str:
    doc = config([model("m", f"{upstream.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    return write_config(doc, str(tmp_path))


def _serving(proc: Proc, workers: int) -> None:
    wait_until(lambda: sum("vsr-fast: serving on" in x for x in proc.lines) == workers, f"{workers} serving")


def _said(proc: Proc, text: str) -> int:
    return sum(text in x for x in proc.lines)


def _repeat(pgid: int) -> None:
    """SIGTERM to the process group each 20 ms while any of it is left."""
    try:
        while True:
            os.killpg(pgid, signal.SIGTERM)
            time.sleep(0.02)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize("workers", [1, 2])
def test_a_repeated_sigterm_to_the_process_group_keeps_draining_and_exits_0(tmp_path, slow_stream, workers):
    # setsid: the router leads a process group of its own, signalled whole as systemd's control group is.
    flags = ["--workers", str(workers)] if workers > 1 else []
    proc = router(_config(tmp_path, slow_stream), *flags)
    proc.prefix = ["setsid"]
    with proc:
        _serving(proc, workers)
        stream = InFlight(proc.url, "vsr/auto", True)
        stream.start()
        wait_until(lambda: stream.body, "the stream's first chunk")
        os.killpg(proc.popen.pid, signal.SIGTERM)
        wait_until(lambda: _said(proc, "SIGTERM: draining"), "the drain said")
        # Then again and again until every process has exited: a repeat finds each in every phase of its end.
        repeating = threading.Thread(target=_repeat, args=(proc.popen.pid,), daemon=True)
        repeating.start()
        wait_until(lambda: _said(proc, "SIGTERM again: already draining"), "the repeat said")
        stream.join(30)
        assert stream.status == 200 and stream.body.rstrip().endswith(b"data: [DONE]"), stream.body[-300:]
        assert proc.wait(20) == 0, proc.lines
        if workers > 1:
            assert _said(proc, "vsr-fast: supervisor: SIGTERM: draining 2 workers") == 1
            assert _said(proc, "vsr-fast: supervisor exiting with code 0") == 1


def test_sigint_then_sigterm_to_one_process_is_one_drain(tmp_path, slow_stream):
    with router(_config(tmp_path, slow_stream)) as proc:
        stream = InFlight(proc.url, "vsr/auto", True)
        stream.start()
        wait_until(lambda: stream.body, "the stream's first chunk")
        proc.signal(signal.SIGINT)
        wait_until(lambda: _said(proc, "SIGINT: draining"), "the drain said")
        proc.signal(signal.SIGTERM)
        wait_until(lambda: _said(proc, "SIGTERM again: already draining"), "the repeat said")
        stream.join(30)
        assert stream.body.rstrip().endswith(b"data: [DONE]"), stream.body[-300:]
        assert proc.wait(20) == 0, proc.lines


def test_workers_die_with_a_killed_supervisor_and_free_the_port(tmp_path, slow_stream):
    with router(_config(tmp_path, slow_stream), "--workers", "2") as proc:
        _serving(proc, 2)
        workers = children(proc.popen.pid)
        assert len(workers) == 2
        argv = open(f"/proc/{workers[0]}/cmdline").read().split("\0")
        metrics_dir = argv[argv.index("--metrics-dir") + 1]
        assert os.path.isdir(metrics_dir)
        # "serving on" comes a moment before a worker's SIGTERM handler; until then the signal ends it at once.
        wait_until(lambda: all(_caught(w, signal.SIGTERM) for w in workers), "the workers' SIGTERM handlers")
        proc.popen.kill()
        proc.popen.wait(10)
        wait_until(lambda: not any(os.path.exists(f"/proc/{w}") for w in workers), "the workers gone")
        # The parent-death signal comes once per supervisor thread that ends (the first while the worker is still
        # its child): each worker says why it drains once, and the workers' directory goes with them.
        wait_until(lambda: _said(proc, "draining, then up to 30 s for requests in flight (the supervisor is gone)")
                   == 2, "each worker's line")
        assert _said(proc, "again: already draining") == 0, proc.lines
        assert not os.path.exists(metrics_dir)
        assert refused(proc.port)
        with socket.create_server(("127.0.0.1", proc.port)):
            pass
    shutil.rmtree(metrics_dir, ignore_errors=True)


def test_a_supervisor_removes_its_workers_directory_when_it_exits(tmp_path, slow_stream):
    with router(_config(tmp_path, slow_stream), "--workers", "2") as proc:
        _serving(proc, 2)
        argv = open(f"/proc/{children(proc.popen.pid)[0]}/cmdline").read().split("\0")
        metrics_dir = argv[argv.index("--metrics-dir") + 1]
        proc.signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert not os.path.exists(metrics_dir)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigusr1_ends_nothing(tmp_path, slow_stream, workers):
    flags = ["--workers", str(workers)] if workers > 1 else []
    with router(_config(tmp_path, slow_stream), *flags) as proc:
        _serving(proc, workers)
        pids = children(proc.popen.pid)
        proc.signal(signal.SIGUSR1)
        wait_until(lambda: _said(proc, "SIGUSR1: reopening the access log") == workers, "every process's line")
        assert proc.popen.poll() is None and children(proc.popen.pid) == pids
        assert httpx.get(f"{proc.url}/health", timeout=20).status_code == 200


def _caught(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(int(x.split()[1], 16) for x in f if x.startswith("SigCgt:"))
    return bool(caught & (1 << (signum - 1)))


def _hup_caught(pid: int) -> bool:
    return _caught(pid, signal.SIGHUP)


def _started(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _lines_until(popen: subprocess.Popen, done) -> list[str]:
    """stderr's lines until ``done(lines)`` holds (a bound on a hang: the caller's timeout on the process)."""
    lines: list[str] = []
    for line in popen.stderr:
        lines.append(line.rstrip("\n"))
        if done(lines):
            return lines
    raise AssertionError(f"stderr ended first: {lines}")


def test_sighup_while_starting_is_held_until_serving(tmp_path, slow_stream):
    args = ["-m", "vsr_fast", "serve", "--config", _config(tmp_path, slow_stream), "--port", "0"]
    popen = _started(args, {"VSR_STATE_DIR": str(tmp_path / "state")})
    try:
        # Its handler is set before the CLI's imports (seconds): the signal comes while they run.
        wait_until(lambda: _hup_caught(popen.pid), "SIGHUP's handler")
        popen.send_signal(signal.SIGHUP)
        lines = _lines_until(popen, lambda seen: "reload done" in seen[-1])
        # Lifecycle lines carry a time and a level before their words.
        held = next(i for i, x in enumerate(lines)
                    if x.endswith("vsr-fast: SIGHUP while starting: the configuration is reloaded once the router serves"))
        serving = next(i for i, x in enumerate(lines) if "vsr-fast: serving on" in x)
        assert held < serving, lines
        assert "(SIGHUP received while starting)" in lines[-1], lines
        assert popen.poll() is None
    finally:
        popen.terminate()
        assert popen.wait(20) == 0


def test_sighup_to_a_starting_supervisor_reaches_every_worker_once_it_serves(tmp_path, slow_stream):
    args = ["-m", "vsr_fast", "serve", "--config", _config(tmp_path, slow_stream), "--port", "0", "--workers", "2"]
    popen = _started(args, {"VSR_STATE_DIR": str(tmp_path / "state")})
    try:
        _lines_until(popen, lambda seen: "supervisor of 2 workers" in seen[-1])
        # The workers were just started: neither has set its handlers yet, and the signal sent on waits for them.
        popen.send_signal(signal.SIGHUP)
        lines = _lines_until(popen, lambda seen: sum("reload done" in x for x in seen) == 2)
        assert sum("vsr-fast: serving on" in x for x in lines) == 2, lines
        assert popen.poll() is None and len(children(popen.pid)) == 2
    finally:
        popen.terminate()
        assert popen.wait(20) == 0


def test_drain_delay_keeps_serving_with_ready_503_then_closes_the_listener(tmp_path, slow_stream):
    # --drain-delay 3: long enough for the checks below (each a few ms), a bound only on how long they may take.
    with router(_config(tmp_path, slow_stream), "--workers", "2", "--drain-delay", "3") as proc:
        _serving(proc, 2)
        assert httpx.get(f"{proc.url}/ready", timeout=20).status_code == 200
        proc.signal(signal.SIGTERM)
        wait_until(lambda: httpx.get(f"{proc.url}/ready", timeout=20).status_code == 503, "/ready 503")
        with httpx.Client(timeout=20) as client:
            r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
            assert r.status_code == 200, r.text
            # Envoy's drain: the answer closes its keep-alive connection, so the client's next one goes elsewhere.
            assert r.headers.get("connection") == "close", r.headers
            ready = client.get(f"{proc.url}/ready")
            assert ready.status_code == 503 and ready.headers.get("connection") == "close"
        assert not refused(proc.port)
        wait_until(lambda: refused(proc.port), "the listener closed after the delay")
        assert proc.wait(20) == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_while_starting_exits_0(tmp_path, slow_stream, workers):
    # README: SIGTERM exits 0. Sent while the router is still starting (its imports take seconds): one process
    # once its start-up handlers are set, a supervisor once it has started its workers (which may not have set
    # theirs yet). Before, the signal's default action ended them: 143, or "supervisor exiting with code 15".
    args = ["-m", "vsr_fast", "serve", "--config", _config(tmp_path, slow_stream), "--port", "0"]
    if workers > 1:
        args += ["--workers", str(workers)]
    popen = _started(args, {"VSR_STATE_DIR": str(tmp_path / "state")})
    try:
        if workers > 1:
            _lines_until(popen, lambda seen: "supervisor of 2 workers" in seen[-1])
        else:
            wait_until(lambda: _caught(popen.pid, signal.SIGTERM), "SIGTERM's start-up handler")
        popen.send_signal(signal.SIGTERM)
        assert popen.wait(60) == 0, popen.stderr.read()
        rest = popen.stderr.read()
        assert "serving on" not in rest and "exiting with code 15" not in rest, rest
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait(10)
