"""Real processes for end-to-end tests: start on free ports, wait for readiness, always stop."""
from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import tempfile
import traceback
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import redis
import yaml

from bench._procs import ROOT, Proc

__all__ = ["ROOT", "Proc", "cli", "cli_process", "config", "free_port", "mock_upstream", "model", "redis_prefix",
           "refused_port", "replay_record", "router", "run_main", "wait_until", "write_config"]
REDIS_URL = "redis://127.0.0.1:6379/0"


def mock_upstream(*flags: str) -> Proc:
    """The bench mock upstream on a free port."""
    return Proc(["-m", "bench.mock_upstream", "--host", "127.0.0.1", "--port", "0", *flags], "listening")


@contextmanager
def redis_prefix(tag: str) -> Iterator[str]:
    """A key prefix of the local Redis that is this caller's own; every key under it is removed afterwards."""
    p = f"vsr-test-{tag}-{uuid.uuid4().hex[:12]}:"
    try:
        yield p
    finally:
        r = redis.Redis.from_url(REDIS_URL)
        for k in r.scan_iter(match=p + "*"):
            r.delete(k)
        r.close()


def cli_process(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m vsr_fast ARGS``, the command a user runs, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "vsr_fast", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def run_main(main, args: tuple[str, ...], name: str, thread: bool = False) -> subprocess.CompletedProcess:
    """A command's ``main(argv)`` run in this process, as the process would show it: stdout and stderr captured,
    argparse's SystemExit as the code, an escaping exception as its traceback on stderr and code 1. ``thread``:
    in a thread of its own, so a command that calls trio.run may be run from an async test."""
    out, err = io.StringIO(), io.StringIO()
    done: list[int] = []

    def call() -> None:
        try:
            done.append(main(list(args)))
        except SystemExit as exc:
            done.append(exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            done.append(1)

    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        if thread:
            import threading

            worker = threading.Thread(target=call)
            worker.start()
            worker.join()
        else:
            call()
    return subprocess.CompletedProcess([name, *args], done[0], out.getvalue(), err.getvalue())


def cli(*args: str) -> subprocess.CompletedProcess:
    """``vsr-fast ARGS`` run in this process (``run_main``). A CLI process costs a second of imports and the suite
    ran about sixty; each command keeps one test that runs it as a process (``cli_process``). Serving never happens
    here: ``serve`` past its checks (its arguments, its configuration) is code 99, the process's signal handling
    untouched."""
    from vsr_fast.cli import _main
    from vsr_fast.server import process, serve

    run, exiting = serve.run, process.exiting
    serve.run, process.exiting = (lambda *_: 99), (lambda: None)
    try:
        return run_main(_main.main, args, "vsr-fast")
    finally:
        serve.run, process.exiting = run, exiting


def write_config(doc: dict, directory: str | None = None) -> str:
    """Write a configuration document to a temporary YAML file; returns its path."""
    fd, path = tempfile.mkstemp(suffix=".yaml", dir=directory)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return path


def router(config_path: str, *flags: str, env: dict[str, str] | None = None) -> Proc:
    """The router on a free port; its embedded event journal in a directory of its own."""
    state_dir = tempfile.mkdtemp(prefix="vsr-state-")
    return Proc(["-m", "vsr_fast", "serve", "--config", config_path, "--host", "127.0.0.1", "--port", "0", *flags],
                "vsr-fast: serving on", env={"VSR_STATE_DIR": state_dir, **(env or {})})


def model(name: str, *endpoints: str, upstream_name: str | None = None, **ref_extra) -> dict:
    """A providers.models[] entry."""
    entry: dict = {"name": name, "backend_refs": [{"endpoint": e, **ref_extra} for e in endpoints]}
    if upstream_name:
        entry["provider_model_id"] = upstream_name
    return entry


def config(models: list[dict], decisions: list[dict], **recipe_extra) -> dict:
    """A one-recipe v0.5 configuration with an entrypoint ``vsr/auto``."""
    return {
        "version": "v0.5",
        "providers": {"models": models},
        "recipes": [{"name": "default", "decisions": decisions, **recipe_extra}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
    }


def _bound() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def free_port() -> int:
    with _bound() as s:
        return s.getsockname()[1]


_HELD: list[socket.socket] = []


def refused_port() -> int:
    """A loopback port that refuses every connection for this process's life: bound, never listening. A port
    from ``free_port`` for a dead backend was free only until another test's mock took it (a 200 from the
    'dead' backend)."""
    _HELD.append(_bound())
    return _HELD[-1].getsockname()[1]


def wait_until(predicate, what: str, timeout: float = 20.0) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` at the deadline (a bound, never a measurement)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def wait_for_value(fn, what: str, timeout: float = 15.0):
    """``fn()`` once it is truthy (polled); fails naming ``what`` at the deadline."""
    found: list = []
    wait_until(lambda: bool(found.append(fn()) or found[-1]), what, timeout)
    return found[-1]


def replay_record(proc: Proc, replay_id: str, headers: dict | None = None, timeout: float = 20.0,
                  answered: bool = False) -> dict:
    """A request's replay record once it is whole: a consumer of the event stream builds it after the answer has
    gone, so reading it right after the answer races that consumer (it lost once in a make test loop).
    ``answered``: also wait for the answer's own event (``complete``); a mid-stream error's event sets the status
    before it, and under load the record was read between the two."""
    def whole() -> dict | None:
        r = httpx.get(f"{proc.url}/api/v1/replay/{replay_id}", headers=headers, timeout=10)
        if r.status_code != 200 or not r.json().get("status"):
            return None
        return None if answered and r.json().get("complete") is None else r.json()
    return wait_for_value(whole, f"the replay record {replay_id}", timeout)
