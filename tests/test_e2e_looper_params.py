"""An executor's own sampling settings (remom's ``temperature`` and ``max_completion_tokens``) reach each model through
the decision's request_params constraints and within the model's API range, as a client's own values do (spec 5.6,
5.7): a real router, one mock upstream per model (an openai-format and an anthropic-format one), the official SDKs.

The mocks and the router are shared across the module: one recipe with the request_params plugin (vsr/auto), one
without (vsr/free); each test reads the last request the mocks received (their counters reset before it)."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from .procs import model
from .test_e2e_looper import fresh, shared_mock, shared_router

REMOM = {"type": "remom", "remom": {"breadth_schedule": [2], "model_distribution": "equal",
                                    "temperature": 1.5, "max_completion_tokens": 500}}
LIMITS = {"type": "request_params", "configuration": {"max_tokens_limit": 20, "temperature": {"max": 0.5}}}


openai_mock = shared_mock()
anthropic_mock = shared_mock()
ollama_mock = shared_mock()


@pytest.fixture(scope="module")
def _routed(openai_mock, anthropic_mock, ollama_mock, tmp_path_factory):
    mocks = {"openai": openai_mock, "anthropic": anthropic_mock}
    models = [{**model(fmt, f"{mock.url}/v1"), "api_format": fmt} for fmt, mock in mocks.items()]
    # An OpenAI-format backend that reads only max_tokens (Ollama, LM Studio): the model's max_tokens_field.
    models.append({**model("ollama", f"{ollama_mock.url}/v1"), "max_tokens_field": "max_tokens"})
    refs = [{"model": fmt} for fmt in mocks]
    local = {"type": "remom", "remom": {**REMOM["remom"], "breadth_schedule": [1]}}
    decisions = {"auto": (refs, REMOM), "free": (refs, REMOM), "local": ([{"model": "ollama"}], local)}
    with shared_router(tmp_path_factory, models, decisions, plugins={"auto": [LIMITS]}) as proc:
        yield proc


@pytest.fixture
def mocks(openai_mock, anthropic_mock, ollama_mock):
    fresh(openai_mock, anthropic_mock, ollama_mock)
    return {"openai": openai_mock, "anthropic": anthropic_mock, "ollama": ollama_mock}


def sent(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]


def ask(proc, api: str, name: str = "vsr/auto") -> None:
    turn = [{"role": "user", "content": "Say hello"}]
    if api == "messages":
        client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
        assert client.messages.create(model=name, max_tokens=64, messages=turn).content
    elif api == "responses":
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
        assert client.responses.create(model=name, input="Say hello").output
    else:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
        assert client.chat.completions.create(model=name, messages=turn).choices


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_request_params_bound_the_executors_own_temperature_and_token_budget(_routed, mocks, api):
    # vsr/auto: REMOM, its decision with the LIMITS plugin
    ask(_routed, api)
    chat, messages = sent(mocks["openai"]), sent(mocks["anthropic"])
    assert chat["temperature"] == 0.5 and messages["temperature"] == 0.5, (chat, messages)
    budget = [chat[k] for k in ("max_tokens", "max_completion_tokens") if k in chat]
    assert budget and max(budget) <= 20, chat
    assert messages["max_tokens"] <= 20, messages


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_an_executors_temperature_reaches_an_anthropic_model_within_its_range(_routed, mocks, api):
    """Anthropic's temperature is 0-1: remom's 1.5 is clamped to 1 for it, as a Chat client's own 1.5 is."""
    # vsr/free: REMOM, no plugin
    ask(_routed, api, "vsr/free")
    assert sent(mocks["anthropic"])["temperature"] == 1.0
    assert sent(mocks["openai"])["temperature"] == 1.5


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_an_executors_token_budget_reaches_a_model_in_its_own_field(_routed, mocks, api):
    """remom's 500 reaches a model whose ``max_tokens_field`` is max_tokens in that field alone, as a translated
    client's limit does: Ollama would ignore max_completion_tokens and generate unbounded."""
    # vsr/local: REMOM over the ollama model alone, no plugin
    ask(_routed, api, "vsr/local")
    body = sent(mocks["ollama"])
    assert body["max_tokens"] == 500 and "max_completion_tokens" not in body, body
