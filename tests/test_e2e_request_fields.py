"""What of a client's request body reaches a backend, for each backend api_format, over real sockets.

- Chat ``metadata`` without ``store: true`` and LiteLLM's proxy-only fields (``fallbacks``, ``guardrails``...) reach
  an openai-format backend as the client sent them (it may be a LiteLLM proxy that enforces them); where the body
  is translated (Anthropic) they are dropped with a warning.
- A malformed ``response_format`` (Chat) or ``text.format`` (Responses) of OpenAI's types is a 400 naming it, as
  OpenAI's is; another type (vLLM's ``structural_tag``) passes to a backend of the client's format, and is dropped
  with a warning where the body is translated.
- A ``max_tokens`` below 16 toward a Responses backend is raised to its least, 16, and said so.
"""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from .procs import config, model, router, write_config

BACKENDS = ("openai", "anthropic", "responses")


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    doc = config([{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in BACKENDS],
                 [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-fields")))) as proc:
        yield proc


def last_body(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]


def warnings(response) -> set[str]:
    value = response.headers.get("x-vsr-warnings")
    return set() if value is None else {m.strip() for m in value.split(", ")}


def loss(action: str, reason: str, field_: str) -> str:
    return f'translation_loss;action="{action}";reason="{reason}";field="{field_}"'


def chat(url: str, backend: str, **extra):
    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    return sdk.chat.completions.with_raw_response.create(
        model=f"m-{backend}", messages=[{"role": "user", "content": "hello"}], extra_body=extra)


def test_chat_metadata_without_store_reaches_an_openai_backend_unchanged(gw, mock):
    """A LiteLLM proxy behind reads ``metadata`` whatever ``store``; OpenAI itself answers its own 400."""
    r = chat(gw.url, "openai", metadata={"team": "a"})
    assert last_body(mock)["metadata"] == {"team": "a"}
    assert not any('field="metadata"' in w for w in warnings(r)), r.headers.get("x-vsr-warnings")


def test_chat_metadata_is_dropped_with_a_warning_toward_anthropic(gw, mock):
    """Anthropic has no such field (only ``metadata.user_id``): dropped whatever ``store``."""
    r = chat(gw.url, "anthropic", metadata={"team": "a"})
    assert "metadata" not in last_body(mock)
    assert loss("dropped", "unsupported", "metadata") in warnings(r), r.headers.get("x-vsr-warnings")


def test_chat_metadata_with_store_reaches_an_openai_backend(gw, mock):
    r = chat(gw.url, "openai", metadata={"team": "a"}, store=True)
    body = last_body(mock)
    assert body["metadata"] == {"team": "a"} and body["store"] is True
    assert not any('field="metadata"' in w for w in warnings(r))


LITELLM = {"fallbacks": ["gpt-4o"], "num_retries": 2, "context_window_fallbacks": [{"a": ["b"]}],
           "mock_testing_fallbacks": True, "guardrails": ["pii"], "tags": ["team-a"], "caching": True}


def test_litellms_proxy_fields_reach_an_openai_backend_unchanged(gw, mock):
    """vsr-fast in front of a LiteLLM proxy: a guardrail dropped here would silently go unenforced."""
    r = chat(gw.url, "openai", **LITELLM)
    body = last_body(mock)
    assert {k: body.get(k) for k in LITELLM} == LITELLM, body
    assert not any(f'field="{name}"' in w for name in LITELLM for w in warnings(r)), r.headers.get("x-vsr-warnings")


def test_litellms_proxy_fields_are_dropped_with_a_warning_toward_anthropic(gw, mock):
    r = chat(gw.url, "anthropic", **LITELLM)
    body = last_body(mock)
    assert not set(LITELLM) & set(body), body
    assert {loss("dropped", "unsupported", name) for name in LITELLM} <= warnings(r), r.headers.get("x-vsr-warnings")


BAD_FORMATS = [{"type": "json_schema"}, {"type": "json_schema", "json_schema": "x"}, {}]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", BAD_FORMATS, ids=["no-schema", "schema-not-object", "no-type"])
def test_a_malformed_response_format_is_a_400(gw, mock, backend, fmt):
    before = httpx.get(f"{mock.url}/_mock/stats").json()["requests"]
    with pytest.raises(openai.BadRequestError) as info:
        chat(gw.url, backend, response_format=fmt)
    assert info.value.body["param"].startswith("response_format"), info.value.body
    assert info.value.body["type"] == "invalid_request_error"
    assert httpx.get(f"{mock.url}/_mock/stats").json()["requests"] == before   # refused before any backend


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", [{"type": "json_schema"}, {"type": "json_schema", "name": "x", "schema": 3}],
                         ids=["no-schema", "schema-not-object"])
def test_a_malformed_text_format_is_a_400(gw, mock, backend, fmt):
    sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.responses.create(model=f"m-{backend}", input="hello", extra_body={"text": {"format": fmt}})
    assert info.value.body["param"].startswith("text.format"), info.value.body


STRUCTURAL_TAG = {"type": "structural_tag", "structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}],
                  "triggers": ["<f>"]}   # vLLM's


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_response_format_of_another_type_passes_to_an_openai_backend_and_is_dropped_elsewhere(gw, mock, backend):
    r = chat(gw.url, backend, response_format=STRUCTURAL_TAG)
    body = last_body(mock)
    if backend == "openai":
        assert body["response_format"] == STRUCTURAL_TAG
        assert not any("response_format" in w for w in warnings(r)), r.headers.get("x-vsr-warnings")
    else:
        assert "structural_tag" not in str(body), body
        assert loss("dropped", "unsupported", "response_format") in warnings(r), r.headers.get("x-vsr-warnings")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_text_format_of_another_type_passes_to_a_responses_backend_and_is_dropped_elsewhere(gw, mock, backend):
    sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    r = sdk.responses.with_raw_response.create(model=f"m-{backend}", input="hello",
                                               extra_body={"text": {"format": STRUCTURAL_TAG}})
    body = last_body(mock)
    if backend == "responses":
        assert body["text"]["format"] == STRUCTURAL_TAG
    else:
        assert "structural_tag" not in str(body), body
        assert loss("dropped", "unsupported", "text.format") in warnings(r), r.headers.get("x-vsr-warnings")


@pytest.mark.parametrize("client_api", ["chat", "messages"])
def test_a_max_tokens_below_16_reaches_a_responses_backend_as_16(gw, mock, client_api):
    if client_api == "chat":
        r = chat(gw.url, "responses", max_tokens=5)
    else:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
        r = sdk.messages.with_raw_response.create(model="m-responses", max_tokens=5,
                                                  messages=[{"role": "user", "content": "hello"}])
    assert last_body(mock)["max_output_tokens"] == 16
    assert loss("converted", "below_minimum", "max_tokens") in warnings(r), r.headers.get("x-vsr-warnings")
