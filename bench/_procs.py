"""Child processes that announce ``... http://HOST:PORT`` on stderr once they serve.

Shared by the benchmarks and the end-to-end tests: start, wait for readiness,
always stop.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_URL = re.compile(r"http://([\d.]+|\[[0-9A-Fa-f:.]+\]):(\d+)")     # IPv4, or IPv6 in brackets


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``, from /proc (a supervisor's workers)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return sorted(out)


class Proc:
    """A subprocess that prints ``... http://HOST:PORT`` on stderr once it serves."""

    def __init__(self, args: list[str], ready: str, env: dict[str, str] | None = None,
                 prefix: list[str] | None = None, cwd: str | Path | None = None) -> None:
        self.args = args
        self.cwd = cwd or ROOT      # ``-m`` imports from here first: another checkout's, for a before/after
        self.prefix = prefix or []  # a command the interpreter runs under (valgrind, for bench.cost)
        self.ready = ready
        self.env = {**os.environ, **(env or {})}
        self.lines: list[str] = []
        self.url = ""
        self.port = 0
        self.popen: subprocess.Popen | None = None

    # Generous: a wait, not a measurement. A router's start (imports, the embedded model) took more
    # than 20 s while the 2-core box ran four test suites and benchmarks at once (load average 26).
    def start(self, timeout: float = 120.0) -> "Proc":
        self.popen = subprocess.Popen(
            [*self.prefix, sys.executable, *self.args], cwd=self.cwd, env=self.env,
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
