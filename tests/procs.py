"""Real processes for end-to-end tests: start on free ports, wait for readiness, always stop."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_URL = re.compile(r"http://([\d.]+):(\d+)")


class Proc:
    """A subprocess that prints ``... http://HOST:PORT`` on stderr once it serves."""

    def __init__(self, args: list[str], ready: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.ready = ready
        self.env = {**os.environ, **(env or {})}
        self.lines: list[str] = []
        self.url = ""
        self.port = 0
        self.popen: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> "Proc":
        self.popen = subprocess.Popen(
            [sys.executable, *self.args], cwd=ROOT, env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        found = threading.Event()

        def drain() -> None:
            assert self.popen and self.popen.stderr
            for line in self.popen.stderr:
                self.lines.append(line.rstrip("\n"))
                m = _URL.search(line)
                if not found.is_set() and self.ready in line and m:
                    self.url, self.port = f"http://{m.group(1)}:{m.group(2)}", int(m.group(2))
                    found.set()

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.args} did not start:\n" + "\n".join(self.lines))
        return self

    def signal(self, signum: int = signal.SIGTERM) -> None:
        assert self.popen
        self.popen.send_signal(signum)

    def wait(self, timeout: float = 20.0) -> int:
        assert self.popen
        return self.popen.wait(timeout)

    def stop(self) -> None:
        if self.popen and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)

    def __enter__(self) -> "Proc":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mock_upstream(*flags: str) -> Proc:
    """The bench mock upstream on a free port."""
    return Proc(["-m", "bench.mock_upstream", "--host", "127.0.0.1", "--port", "0", *flags], "listening")


def write_config(doc: dict, directory: str | None = None) -> str:
    """Write a configuration document to a temporary YAML file; returns its path."""
    fd, path = tempfile.mkstemp(suffix=".yaml", dir=directory)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return path


def router(config_path: str, *flags: str, env: dict[str, str] | None = None) -> Proc:
    """The router on a free port."""
    return Proc(["-m", "vsr_fast", "serve", "--config", config_path, "--host", "127.0.0.1", "--port", "0", *flags],
                "vsr-fast: serving on", env=env)


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
