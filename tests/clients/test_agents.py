"""The two coding agents, unmodified, with their default model names: Claude Code and Codex CLI.

Both always stream (neither lets its user ask for a whole answer), so each gets a cell per
backend ``api_format``: its first offered tool is called (Claude Code's ``Agent``, which runs a
sub-agent of its own; Codex's freeform ``exec`` in the ``functions`` namespace of an
``additional_tools`` item), the result goes back, and the agent prints the final answer.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from .harness import FORMATS, KEY, NODE_BIN, PROMPT, Cell, base_env, check_round_trip, run_client, throwaway_home

CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": KEY,
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",        # a failure shows at once instead of after ten backoffs
    "API_TIMEOUT_MS": "60000",
}

CODEX_CONFIG = """\
model_provider = "vsr"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.vsr]
name = "vsr-fast"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "VSR_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""


def claude_code(home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
    """``claude -p`` with ANTHROPIC_BASE_URL on base_url, default model, default tools."""
    return [str(NODE_BIN / "claude"), "-p", PROMPT], base_env(home, ANTHROPIC_BASE_URL=base_url, **CLAUDE_ENV)


def codex(home: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
    """``codex exec`` with a custom provider over /v1/responses on base_url, default model."""
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(CODEX_CONFIG.format(base_url=base_url))
    env = base_env(home, CODEX_HOME=str(codex_home), VSR_API_KEY=KEY)
    return [str(NODE_BIN / "codex"), "exec", "--skip-git-repo-check", PROMPT], env


AGENTS = {"claude-code": claude_code, "codex": codex}
CELLS = [Cell("claude-code", "messages", True, f) for f in FORMATS] + [Cell("codex", "responses", True, f) for f in FORMATS]


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.name)
def test_agent(cell, installed, agent, routers):
    home = throwaway_home(cell)
    argv, env = AGENTS[cell.client](home, routers[cell.fmt].url)
    check_round_trip(run_client(cell, agent, routers[cell.fmt], argv, env, home / "work"))
