"""Agent libraries and SDKs, as their documentation uses them: one tool round trip each, through the router.

openai-agents, langchain-openai and pydantic-ai run from ``scripts/py_clients.py`` in the clients'
own venv; the ``llm`` CLI registers the router as an OpenAI-compatible model and gets its tool
from ``--functions``; the openai Node SDK runs ``scripts/openai_node.cjs``. Each client API a
library speaks, streamed and whole, against a backend of each ``api_format``.
"""
from __future__ import annotations

import itertools

import pytest

from .harness import (
    CLIENTS, FORMATS, KEY, PROMPT, SCRIPTS, VENV_BIN, Cell, base_env, check_round_trip, run_client,
    throwaway_home,
)

MODEL = "vsr/auto"   # the router's public name; any unclaimed name would reach the same default recipe
APIS = {
    "openai-agents": ("chat", "responses"),
    "langchain-openai": ("chat", "responses"),
    "pydantic-ai": ("chat", "responses", "messages"),
}
LLM_FUNCTIONS = '''
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny in {city}"
'''
LLM_MODELS = """\
- model_id: vsr
  model_name: {model}
  api_base: "{base_url}/v1"
  supports_tools: true
"""


def cells(client: str, apis: tuple[str, ...]) -> list[Cell]:
    return [Cell(client, api, stream, fmt) for api, stream, fmt in itertools.product(apis, (True, False), FORMATS)]


@pytest.mark.parametrize("cell", [c for name, apis in APIS.items() for c in cells(name, apis)], ids=lambda c: c.name)
def test_python_library(cell, installed, agent, routers):
    home = throwaway_home(cell)
    argv = [str(VENV_BIN / "python"), str(SCRIPTS / "py_clients.py"), cell.client, cell.api, cell.mode,
            routers[cell.fmt].url, MODEL]
    check_round_trip(run_client(cell, agent, routers[cell.fmt], argv, base_env(home), home / "work"))


@pytest.mark.parametrize("cell", cells("llm", ("chat",)), ids=lambda c: c.name)
def test_llm_cli(cell, installed, agent, routers):
    """``llm -m vsr --functions ...``: the router as an extra OpenAI-compatible model."""
    home = throwaway_home(cell)
    user_path = home / "llm"
    user_path.mkdir()
    (user_path / "extra-openai-models.yaml").write_text(LLM_MODELS.format(model=MODEL, base_url=routers[cell.fmt].url))
    argv = [str(VENV_BIN / "llm"), "-m", "vsr", "--key", KEY, "-n", "--functions", LLM_FUNCTIONS, PROMPT]
    if not cell.stream:
        argv.insert(1, "--no-stream")
    env = base_env(home, LLM_USER_PATH=str(user_path))
    check_round_trip(run_client(cell, agent, routers[cell.fmt], argv, env, home / "work"))


@pytest.mark.parametrize("cell", cells("openai-node", ("chat", "responses")), ids=lambda c: c.name)
def test_openai_node(cell, installed, agent, routers):
    home = throwaway_home(cell)
    argv = ["node", str(SCRIPTS / "openai_node.cjs"), cell.api, cell.mode, routers[cell.fmt].url, MODEL]
    env = base_env(home, NODE_PATH=str(CLIENTS / "node_modules"))
    check_round_trip(run_client(cell, agent, routers[cell.fmt], argv, env, home / "work"))
