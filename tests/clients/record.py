"""Record what Claude Code and Codex CLI really send, as fixtures for ``tests/test_client_fixtures.py``.

    .venv/bin/python -m tests.clients.record      # after `make test-clients` installed the clients

Each agent talks straight to the agent model (no router in between, so the bodies are the
clients' own), does its tool round trip, and the requests it sent are written to
``tests/fixtures/clients/<agent>.<turn>.json`` as ``{"api", "client", "headers", "body"}``:
the first turn (tools offered, no result yet) and the main thread's last turn (the tool's
result back). What is host- or run-specific is replaced (temporary paths, session and
device ids, dates, the kernel version) and long texts (system prompts, tool descriptions,
a freeform tool's grammar) are cut to their first 160 characters: the shapes stay whole,
the vendors' prompts stay out of this repository. Keys and auth headers are never kept.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from ..procs import ROOT, Proc
from .harness import Agent, Cell, run_client, throwaway_home
from .test_agents import claude_code, codex

FIXTURES = ROOT / "tests" / "fixtures" / "clients"
KEEP_HEADERS = ("anthropic-beta", "anthropic-version", "openai-beta", "x-openai-internal-codex-responses-lite",
                "content-type", "accept")
LONG = 240     # strings longer than this are cut ...
KEPT = 160     # ... to this many characters
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")
DATE = re.compile(r"(?<=<current_date>)20\d\d-\d\d-\d\d|(?<=[Tt]oday's date is )20\d\d-\d\d-\d\d")
KERNEL = re.compile(r"Linux \d+\.\d+[\w.+-]*")


class Scrubber:
    """Replaces run-specific values, the same value by the same placeholder across one recording."""

    def __init__(self, home: Path) -> None:
        self.home = str(home)
        self.uuids: dict[str, str] = {}

    def _uuid(self, m: re.Match) -> str:
        return self.uuids.setdefault(m.group(0), f"00000000-0000-4000-8000-{len(self.uuids) + 1:012d}")

    def text(self, s: str) -> str:
        s = s.replace(self.home, "/home/user")
        s = UUID.sub(self._uuid, s)
        s = HEX64.sub("0" * 64, s)
        s = DATE.sub("2026-01-01", s)
        s = KERNEL.sub("Linux 6.1.0", s)
        if len(s) > LONG:
            s = s[:KEPT] + f" [... {len(s) - KEPT} characters cut]"
        return s

    def value(self, v: object) -> object:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v


def save(name: str, client: str, entry: dict, scrub: Scrubber) -> None:
    headers = {k: v for k, v in entry["headers"].items() if k in KEEP_HEADERS}
    doc = {"api": entry["api"], "client": client, "headers": headers, "body": scrub.value(entry["body"])}
    path = FIXTURES / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


def record(agent: Agent, direct: Proc) -> None:
    """Both agents straight to the agent model process ``direct``: their requests reach it unchanged."""
    cell = Cell("claude-code", "messages", True, "anthropic")
    home = throwaway_home(cell)
    run = run_client(cell, agent, direct, *claude_code(home, direct.url), home / "work")
    scrub = Scrubber(home)
    client = run.log[0]["headers"].get("user-agent", "claude-cli").split(" ")[0]
    # The Agent tool runs a sub-agent with its own, smaller tool list: the main thread's last
    # request is the last one offering as many tools as the first.
    main = [e for e in run.log if len(e["body"].get("tools") or ()) == len(run.log[0]["body"]["tools"])]
    save("claude_code.first", client, run.log[0], scrub)
    save("claude_code.tool_result", client, main[-1], scrub)
    shutil.rmtree(home, ignore_errors=True)

    cell = Cell("codex", "responses", True, "responses")
    home = throwaway_home(cell)
    run = run_client(cell, agent, direct, *codex(home, direct.url), home / "work")
    scrub = Scrubber(home)
    client = run.log[0]["headers"].get("user-agent", "codex").split(" ")[0]
    save("codex.first", client, run.log[0], scrub)
    save("codex.tool_result", client, run.log[-1], scrub)
    shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with Proc(["-m", "bench.agent_model", "--host", "127.0.0.1", "--port", "0"], "listening") as proc:
        record(Agent(proc), proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
