"""The output limit a translated request carries to an OpenAI-format backend (outside-user trial): OpenAI's
``max_completion_tokens`` by default (its reasoning models refuse ``max_tokens``), ``max_tokens`` for a model that
says so (Ollama and LM Studio ignore the other, and generate unbounded)."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from vsr_fast.errors import ConfigError
from vsr_fast.routing import load_raw

from .procs import config, model, router, write_config


def _sent(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]


@pytest.fixture(scope="module")
def routed(mock, tmp_path_factory):
    doc = config([{**model("ollama-llama", f"{mock.url}/v1"), "max_tokens_field": "max_tokens"},
                  model("gpt-5", f"{mock.url}/v1")],
                 [{"name": "d", "modelRefs": [{"model": "gpt-5"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


@pytest.mark.parametrize("name,field", [("ollama-llama", "max_tokens"), ("gpt-5", "max_completion_tokens")])
def test_an_anthropic_clients_max_tokens_reaches_the_backend_in_the_models_field(routed, mock, name, field):
    client = anthropic.Anthropic(base_url=routed.url, api_key="x", max_retries=0)
    client.messages.create(model=name, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    body = _sent(mock)
    other = {"max_tokens", "max_completion_tokens"} - {field}
    assert body[field] == 64 and not other & set(body), body


def test_a_responses_clients_max_output_tokens_reaches_it_as_max_tokens(routed, mock):
    openai.OpenAI(base_url=f"{routed.url}/v1", api_key="x", max_retries=0).responses.create(
        model="ollama-llama", input="hi", max_output_tokens=32)
    body = _sent(mock)
    assert body["max_tokens"] == 32 and "max_completion_tokens" not in body, body


def test_a_bad_field_name_is_refused_with_its_path():
    doc = config([{**model("m", "http://127.0.0.1:9/v1"), "max_tokens_field": "max_new_tokens"}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with pytest.raises(ConfigError) as info:
        load_raw(doc)
    assert any(line.startswith("providers.models[m].max_tokens_field:") and "max_completion_tokens" in line
               for line in info.value.lines), info.value.lines
