"""Masking's leaks found by an outside trial (a data-protection officer): every spelling of a masked value,
structured values written the ways people write them, every field the provider reads, attached files and URLs,
the error paths. Real router and mock upstream processes, the official SDKs as clients; each test asserts the
planted values are absent from what the provider received."""
from __future__ import annotations

import base64
import json

import anthropic
import httpx
import openai
import pytest

from .procs import mock_upstream, model, router, write_config

FORMATS = ("openai", "anthropic", "responses")
PII = {"pii": [{"name": "personal", "on_unknown": "match", "input": {"history": True, "tool_results": True}}]}
PLUGINS = [{"type": "masking", "configuration": {"enabled": True, "signal": "personal"}},
           {"type": "router_replay", "configuration": {"capture_request_body": True,
                                                       "capture_response_body": True}}]


@pytest.fixture(scope="module")
def leaks(tmp_path_factory):
    with mock_upstream() as upstream:
        doc = {
            "version": "v0.5",
            "providers": {"models": [{**model(f"m-{f}", f"{upstream.url}/v1"), "api_format": f} for f in FORMATS]},
            "recipes": [{"name": f"r-{f}", "signals": PII, "decisions": [
                {"name": "support", "rules": {"operator": "AND", "conditions": []},
                 "modelRefs": [{"model": f"m-{f}"}], "plugins": PLUGINS}]} for f in FORMATS],
            "entrypoints": [{"api": "chat", "model_names": [f"vsr/{f}"], "recipe": f"r-{f}", "default": f == "openai"}
                            for f in FORMATS],
        }
        with router(write_config(doc, str(tmp_path_factory.mktemp("leaks")))) as proc:
            yield proc, upstream


def last(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]


def sent(upstream) -> str:
    """The provider-bound body as the mock upstream received it, as one JSON text (non-ASCII kept)."""
    return json.dumps(last(upstream)["body"], ensure_ascii=False)


def assert_absent(text: str, *values: str) -> None:
    for value in values:
        assert value not in text, f"{value!r} reached the provider: {text}"


def chat(proc):
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)


def messages(proc):
    return anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)


# --- 1. every spelling of a masked value ------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_other_spellings_of_a_masked_name_are_masked_too(leaks, fmt):
    proc, upstream = leaks
    text = ("I'm Maria Gonzalez from Madrid. Please cc MARIA GONZALEZ and maria gonzalez on the reply. "
            "My colleague Jürgen Müller agrees; write JÜRGEN MÜLLER and jürgen müller and Jurgen Muller too.")
    chat(proc).chat.completions.create(model=f"vsr/{fmt}", messages=[{"role": "user", "content": text}])
    body = sent(upstream)
    assert_absent(body, "Maria Gonzalez", "MARIA GONZALEZ", "maria gonzalez", "Jürgen Müller", "JÜRGEN MÜLLER",
                  "jürgen müller", "Jurgen Muller")
