"""What every real-client cell shares: where the clients live, a clean environment, one run, its checks.

A cell is one client (speaking one client API, streamed or whole) doing one tool round trip
through a router whose only model is the agent model (``bench/agent_model.py``) in one
backend ``api_format``. The client runs as a subprocess with a throwaway HOME and an
environment built from nothing (no key or setting of this machine leaks in); its output, the
agent model's request log and the router's log stay in ``.clients/runs/<cell>/`` and its HOME
in ``$TMPDIR/vsr-clients/<cell>/`` until the cell runs again.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.agent_model import DONE

from ..procs import ROOT, Proc

CLIENTS = ROOT / ".clients"
NODE_BIN = CLIENTS / "node_modules" / ".bin"
VENV_BIN = CLIENTS / "venv" / "bin"
RUNS = CLIENTS / "runs"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
HOMES = Path(tempfile.gettempdir()) / "vsr-clients"
FORMATS = ("openai", "anthropic", "responses")
ROUTE = {"openai": "chat", "anthropic": "messages", "responses": "responses"}   # the agent model's log names
PROMPT = "Use your first tool once, then answer."
CLIENT_TIMEOUT_S = 240
KEY = "sk-vsr-client-test"   # what every client sends; the router never forwards a client's key


@dataclass
class Cell:
    """One matrix cell: client, the API it speaks, streamed or whole, the backend format."""

    client: str
    api: str
    stream: bool
    fmt: str

    @property
    def mode(self) -> str:
        return "stream" if self.stream else "whole"

    @property
    def name(self) -> str:
        return f"{self.client}-{self.api}-{self.mode}-{self.fmt}"


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: PATH (node and the clients' bins first), a throwaway HOME, UTF-8."""
    path = os.pathsep.join([str(NODE_BIN), str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
            "NO_COLOR": "1", **extra}


def throwaway_home(cell: Cell) -> Path:
    """A fresh HOME outside the repository (a client must not find this git checkout around it),
    with an empty working directory ``work`` inside; the cell's previous HOME goes first."""
    home = HOMES / cell.name
    shutil.rmtree(home, ignore_errors=True)
    (home / "work").mkdir(parents=True)
    return home


class Agent:
    """The agent model process: its log, reset between cells."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.url = proc.url

    def reset(self) -> None:
        httpx.post(f"{self.url}/_agent/reset").raise_for_status()

    def log(self) -> list[dict]:
        return httpx.get(f"{self.url}/_agent/log").json()


@dataclass
class Run:
    """What one client run left: its exit status and output, and what the agent model saw."""

    cell: Cell
    returncode: int | None
    stdout: str
    stderr: str
    log: list[dict]

    def said(self) -> str:
        """What the client said last: its first line of output, else its last line of errors."""
        errors = self.stderr.strip().splitlines()
        return first_line(self.stdout) or (first_line(errors[-1]) if errors else "")

    def tail(self, n: int = 1500) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-n:]}\n--- stderr\n{self.stderr[-n:]}"


def run_client(cell: Cell, agent: Agent, router: Proc, argv: list[str], env: dict[str, str], cwd: Path) -> Run:
    """Run one client to its end (or its timeout) and keep everything it left under .clients/runs."""
    agent.reset()
    router_start = len(router.lines)
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=CLIENT_TIMEOUT_S)
        run = Run(cell, done.returncode, done.stdout, done.stderr, agent.log())
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        run = Run(cell, None, out, err + f"\n[timed out after {CLIENT_TIMEOUT_S} s]", agent.log())
    keep(run, router.lines[router_start:])
    return run


def keep(run: Run, router_lines: list[str]) -> None:
    where = RUNS / run.cell.name
    where.mkdir(parents=True, exist_ok=True)
    (where / "stdout.txt").write_text(run.stdout)
    (where / "stderr.txt").write_text(run.stderr)
    (where / "agent_log.json").write_text(json.dumps(run.log, indent=1))
    (where / "router.log").write_text("\n".join(router_lines))


def check_round_trip(run: Run) -> None:
    """The client finished, printed the final answer, and the backend saw one full tool round trip.

    Every request reached the agent model in the backend's own protocol and none was refused
    (a refused beta field or a dropped header shows here even when the client recovers); one
    answer called a tool and a later request carried its result back.
    """
    fmt = run.cell.fmt
    assert run.returncode == 0, f"the client exited {run.returncode}: {run.said()}\n{run.tail()}"
    assert run.log, f"no request reached the agent model\n{run.tail()}"
    refused = [e for e in run.log if e.get("answer", {}).get("status") != 200]
    assert not refused, "the agent model refused: " + "; ".join(
        f"{e['path']}: {e.get('answer', {}).get('error')}" for e in refused)
    wrong = {e["api"] for e in run.log} - {ROUTE[fmt], "count_tokens"}
    assert not wrong, f"requests reached the agent model on {wrong}, not {ROUTE[fmt]}"
    calls = [i for i, e in enumerate(run.log) if e["answer"].get("tool")]
    assert calls, "no request offered the agent model a tool (the tools were lost on the way)\n" + run.tail()
    streamed = bool(run.log[calls[0]]["body"].get("stream"))
    assert streamed == run.cell.stream, f"the backend was asked for stream={streamed}, the cell is {run.cell.mode}"
    finals = [i for i, e in enumerate(run.log) if e["answer"].get("text") == DONE and i > calls[0]]
    assert finals, "no request after the tool call carried the tool's result back\n" + run.tail()
    assert DONE in run.stdout, f"the client did not print the final answer\n{run.tail()}"


def first_line(text: str) -> str:
    """The first non-empty line of a failure message, for the matrix."""
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        if line:
            return line[:140]
    return ""
