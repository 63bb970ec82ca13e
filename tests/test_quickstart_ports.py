"""``make run PORT=... MOCK_PORT=...``: the quickstart on other ports than 8080 and 8001.

The quickstart (``python -m bench.quickstart``, what ``make run`` runs) is started as a user starts it, on two free
ports: the mock upstream listens on the one asked for and the router's models reach it there (config/quickstart.yaml
names 8001; the quickstart rewrites its mock endpoints for the router, the file untouched). ``make -n`` shows the
variables reach the command, and that ``make run`` with none is the command it always was.
"""
from __future__ import annotations

import subprocess

import httpx

from bench._procs import Proc
from .procs import ROOT, free_port


def test_the_quickstart_serves_on_the_ports_asked_for(tmp_path):
    before = (ROOT / "config" / "quickstart.yaml").read_bytes()
    port, mock_port = free_port(), free_port()
    with Proc(["-m", "bench.quickstart", "--port", str(port), "--mock-port", str(mock_port)],
              "vsr-fast: serving on") as proc:
        assert proc.port == port
        assert httpx.get(f"http://127.0.0.1:{mock_port}/v1/models", timeout=10).status_code == 200
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=30,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hello there"}]})
        assert r.status_code == 200, r.text
        assert r.headers["x-vsr-selected-model"] == "general-model"
    assert (ROOT / "config" / "quickstart.yaml").read_bytes() == before


def make_run(*variables: str) -> str:
    done = subprocess.run(["make", "-n", "--no-print-directory", "run", *variables], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if "bench.quickstart" in line][0]


def test_make_run_passes_its_port_variables_and_is_unchanged_without_them():
    assert make_run().endswith("-m bench.quickstart --config config/quickstart.yaml")
    assert make_run("PORT=9090", "MOCK_PORT=9001").endswith(
        "-m bench.quickstart --config config/quickstart.yaml --port 9090 --mock-port 9001")
