"""``vsr-fast serve --workers``: a count, or ``auto`` for one worker per core the process may run on."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vsr_fast.cli._parser import parser as _parser

from .procs import cli, config, model, refused_port, write_config


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    """One model, one decision, no signal: no worker loads the decision model the quickstart's rules read (CPU
    each start spent on what these tests of binding and supervision never ask)."""
    doc = config([model("m", f"http://127.0.0.1:{refused_port()}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    return write_config(doc, str(tmp_path_factory.mktemp("plain")))


def test_auto_is_one_worker_per_usable_core():
    args = _parser().parse_args(["serve", "--config", "c.yaml", "--workers", "auto"])
    assert args.workers == len(os.sched_getaffinity(0))
    assert _parser().parse_args(["serve", "--config", "c.yaml", "--workers", "3"]).workers == 3


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_bad_count_is_a_usage_error_naming_it(value):
    out = cli("serve", "--config", "c.yaml", "--workers", value)
    assert out.returncode == 2
    assert "--workers" in out.stderr and ("at least 1" in out.stderr or "'many'" in out.stderr)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_busy_port_is_one_line_and_exit_2(plain, workers):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "vsr_fast", "serve", "--config", plain,
                              "--port", str(port), "--workers", workers],
                             capture_output=True, text=True, timeout=120)
    lines = [x for x in out.stderr.splitlines() if not x.startswith("warning:")]
    assert out.returncode == 2
    assert lines == [f"vsr-fast: refusing to start: cannot listen on 127.0.0.1:{port}: Address already in use"]


def test_version():
    out = cli("--version")         # in this process: every serve test here starts ``python -m vsr_fast`` itself
    assert out.returncode == 0 and out.stdout.startswith("vsr-fast ")


def test_workers_sharing_one_embedded_stream_are_refused_before_any_starts(tmp_path):
    import yaml

    from .procs import free_port

    doc = yaml.safe_load(open("config/quickstart.yaml"))
    doc.setdefault("global", {}).setdefault("stores", {})["event_stream"] = {
        "backend": "embedded", "path": str(tmp_path / "events")}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run([sys.executable, "-m", "vsr_fast", "serve", "--config", str(path), "--port", str(free_port()),
                          "--workers", "2"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "error: global.stores.event_stream.path: invalid_value: 2 workers cannot share one embedded stream" \
        in out.stderr
    assert "supervisor of" not in out.stderr


def test_a_worker_that_refuses_to_start_stops_the_supervisor(plain, tmp_path):
    """Serving on fewer workers than asked, silently, is worse than exiting: the process manager restarts. (A
    worker that dies after it served is started again: test_e2e_worker_restart.)"""
    import socket

    import yaml

    from .procs import router

    doc = yaml.safe_load(open(plain))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        # Worker 0 alone binds the admin listener: taken, it refuses to start.
        doc["listeners"] = [{"name": "admin", "role": "admin", "port": taken.getsockname()[1]}]
        proc = router(write_config(doc, str(tmp_path)), "--workers", "2")
        try:
            proc.start()        # worker 1 may serve first
        except RuntimeError:
            pass
        try:
            assert proc.popen.wait(120) == 2
        finally:
            proc.stop()
    assert any("ERROR vsr-fast: worker 0 exited with code 2 before it served; stopping the others" in x
               for x in proc.lines), proc.lines
    assert not any("restart" in x for x in proc.lines)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_ipv6_is_served_by_one_worker_or_many(plain, workers, host):
    """The supervisor binds the address's own family (getaddrinfo), as one worker does; the bracketed form a URL
    writes is accepted; every line names the address as a URL does, ``[::1]:PORT``."""
    import httpx

    from bench._procs import Proc

    with Proc(["-m", "vsr_fast", "serve", "--config", plain, "--host", host, "--port", "0",
               "--workers", workers], "vsr-fast: serving on") as proc:
        assert proc.url.startswith("http://[::1]:"), proc.lines
        assert httpx.get(f"{proc.url}/health").json() == {"status": "ok"}
        if workers == "2":
            assert any(f"supervisor of 2 workers on {proc.url}" in x for x in proc.lines), proc.lines


def test_a_second_router_on_a_busy_port_from_the_same_directory_is_told_the_port_is_busy(plain, tmp_path):
    """The first router holds the port and its journal (``$VSR_STATE_DIR/events/<port>``): the second one, same
    port, same state directory, is refused for the port, not for the journal it would never have used."""
    from bench._procs import Proc
    from .procs import free_port

    port, env = free_port(), {"VSR_STATE_DIR": str(tmp_path / "state")}
    args = ["-m", "vsr_fast", "serve", "--config", plain, "--port", str(port)]
    with Proc(args, "vsr-fast: serving on", env=env):
        out = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                             env={**os.environ, **env})
    lines = [x for x in out.stderr.splitlines() if not x.startswith("warning:")]
    assert out.returncode == 2
    assert lines == [f"vsr-fast: refusing to start: cannot listen on 127.0.0.1:{port}: Address already in use"]
