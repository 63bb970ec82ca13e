"""Fixtures of the real-clients suite (``make test-clients``), and the matrix it prints.

One agent model process, and one router per backend ``api_format`` whose default entrypoint
sends every model name (so each client keeps its own default) to the agent model in that format.
"""
from __future__ import annotations

import pytest

from ..procs import Proc, config, model, router, write_config
from .harness import CLIENTS, FORMATS, RUNS, Agent, Cell, first_line

# Cells a client does not let its user choose: reported as such, never run.
NOT_CHOOSABLE = {
    ("claude-code", "messages", "whole"): "n/a: claude -p always streams",
    ("codex", "responses", "whole"): "n/a: codex exec always streams",
}
ORDER = ["claude-code", "codex", "openai-agents", "langchain-openai", "pydantic-ai", "llm", "openai-node"]

_results: dict[tuple[str, str, str, str], str] = {}


@pytest.fixture(scope="session")
def installed():
    """The clients ``make test-clients`` installs; a clear failure when they are missing."""
    if not (CLIENTS / "node_modules").is_dir() or not (CLIENTS / "venv").is_dir():
        pytest.fail("the clients are not installed: run `make test-clients`", pytrace=False)
    return CLIENTS


@pytest.fixture(scope="session")
def agent():
    with Proc(["-m", "bench.agent_model", "--host", "127.0.0.1", "--port", "0"], "listening") as proc:
        yield Agent(proc)


@pytest.fixture(scope="session")
def routers(agent, tmp_path_factory):
    """One router per backend api_format, each with the agent model as its only model."""
    procs = {}
    try:
        for fmt in FORMATS:
            doc = config([{**model(f"agent-{fmt}", f"{agent.url}/v1"), "api_format": fmt}],
                         [{"name": "all", "modelRefs": [{"model": f"agent-{fmt}"}]}])
            procs[fmt] = router(write_config(doc, str(tmp_path_factory.mktemp(f"cfg-{fmt}")))).start()
        yield procs
    finally:
        for proc in procs.values():
            proc.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell = getattr(item, "callspec", None) and item.callspec.params.get("cell")
    if not isinstance(cell, Cell) or (report.when != "call" and report.passed):
        return
    key = (cell.client, cell.api, cell.mode, cell.fmt)
    if report.passed:
        _results[key] = "PASS"
    elif report.skipped:
        _results[key] = "SKIP"
    else:
        message = str(call.excinfo.value) if call.excinfo else report.longreprtext
        _results.setdefault(key, f"FAIL: {first_line(message)}")


def matrix() -> str:
    """Every cell run or not choosable: a row per client, API and mode, a column per backend format."""
    rows = {(c, a, m) for (c, a, m, _f) in _results} | set(NOT_CHOOSABLE)
    rank = {name: i for i, name in enumerate(ORDER)}
    head = f"| client | client API | mode | {' | '.join(FORMATS)} |"
    lines = [head, "|" + "---|" * (3 + len(FORMATS))]
    for client, api, mode in sorted(rows, key=lambda r: (rank.get(r[0], 99), r[1], r[2])):
        if (client, api, mode) in NOT_CHOOSABLE:
            cells = [NOT_CHOOSABLE[(client, api, mode)]] * len(FORMATS)
        else:
            cells = [_results.get((client, api, mode, f), "not run") for f in FORMATS]
        lines.append(f"| {client} | {api} | {mode} | {' | '.join(cells)} |")
    passed = sum(v == "PASS" for v in _results.values())
    lines.append(f"\n{passed} of {len(_results)} cells passed; each cell's output is under {RUNS}/<cell>/")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    text = matrix()
    RUNS.mkdir(parents=True, exist_ok=True)
    (CLIENTS / "matrix.md").write_text(text + "\n")
    terminalreporter.write_sep("=", "real clients through the router (also in .clients/matrix.md)")
    terminalreporter.write_line(text)
