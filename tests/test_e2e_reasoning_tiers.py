"""End to end: reasoning fields reach only a model that declares ``capabilities: [reasoning]``, whoever asked for
them (outside trial with Codex through the quickstart: the ``deep`` tier sent ``reasoning_effort`` and
``chat_template_kwargs`` to a model that does not reason, while ``x-vsr-warnings`` claimed ``reasoning.effort``
dropped; api.openai.com answers 400 to both).

The scripted upstream plays a model that does not reason in each format (400 for any reasoning field or an argument
it does not know, as OpenAI and Anthropic answer), OpenAI reasoning models (which refuse ``chat_template_kwargs``),
Claude with thinking, and a vLLM Qwen3 (which takes the chat template switches). Each decision sends one model its
generation tier; the router runs as a real process and the official SDKs are the clients.
"""
from __future__ import annotations

import json
import threading

import anthropic
import openai
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_protocols import warnings_of
from .test_e2e_reasoning_effort import CHAT, CLAUDE, RESPONSE

# What each backend refuses: a model that does not reason any reasoning field, OpenAI every argument it does not know.
REASONING_FIELDS = ("reasoning_effort", "reasoning", "chat_template_kwargs", "thinking", "output_config")
REFUSES = {"plain": REASONING_FIELDS, "o3": ("chat_template_kwargs",), "qwen": (), "claude": ()}
BODIES: list[tuple[str, dict]] = []
LOCK = threading.Lock()


class Scripted(hostile_upstream.Handler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        backend = self.path.split("/")[1]
        with LOCK:
            BODIES.append((backend, body))
        refused = next((f for f in REFUSES[backend] if f in body), None)
        if refused is not None:
            self.whole(400, json.dumps({"error": {
                "message": f"Unsupported parameter: '{refused}' is not supported with this model.",
                "type": "invalid_request_error", "param": refused, "code": "unsupported_parameter"}}).encode())
        elif self.path.endswith("/messages"):
            self.whole(200, json.dumps(CLAUDE).encode())
        else:
            self.whole(200, json.dumps(RESPONSE if self.path.endswith("/responses") else CHAT).encode())


def sent() -> dict:
    with LOCK:
        return BODIES[-1][1]


DEEP = {"thinking": True, "max_tokens": 4096, "thinking_budget": 2048, "reasoning_effort": "low"}
CASUAL = {"thinking": False, "max_tokens": 512}
# model: (api_format, backend, its facts)
MODELS = {"gpt4o": ("openai", "plain", {}), "gpt4o-r": ("responses", "plain", {}),
          "claude-3": ("anthropic", "plain", {}),
          "o3": ("openai", "o3", {"capabilities": ["reasoning"]}),
          "o3-r": ("responses", "o3", {"capabilities": ["reasoning"]}),
          "claude": ("anthropic", "claude", {"capabilities": ["reasoning"]}),
          "qwen": ("openai", "qwen", {"capabilities": ["reasoning"], "reasoning_family": "chat_template_kwargs"}),
          # A vLLM model that does not declare it reasons: its family takes the switches, it gets none of them.
          "qwen-plain": ("openai", "qwen", {"reasoning_family": "chat_template_kwargs"})}
NOT_REASONING = ["gpt4o", "gpt4o-r", "claude-3", "qwen-plain"]


def ask(tier: str, model: str) -> str:
    """The word that sends a turn to ``model`` on ``tier`` (one word: a keyword matches whole words)."""
    return f"route_{tier}_{model.replace('-', '_')}"


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        models = [{"name": name, "api_format": fmt, "backend_refs": [{"endpoint": f"{url}/{backend}/v1"}], **facts}
                  for name, (fmt, backend, facts) in MODELS.items()]
        keywords, decisions = [], []
        for tier, generation in (("deep", DEEP), ("casual", CASUAL)):
            for name in MODELS:
                keywords.append({"name": f"{tier}-{name}", "keywords": [ask(tier, name)]})
                decisions.append({"name": f"{tier}-{name}", "rules": {"operator": "AND", "conditions": [
                    {"type": "keyword", "name": f"{tier}-{name}"}]}, "modelRefs": [{"model": name}],
                    "plugins": [{"type": "request_params", "configuration": {"generation": generation}}]})
        doc = config(models, decisions, signals={"keywords": keywords})
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}, "headers": {"debug": "any"}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("tiers")))) as proc:
            yield proc


@pytest.fixture
def oa(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)


def claims_only_what_was_dropped(headers, body: dict) -> set[str]:
    """The fields ``x-vsr-warnings`` says were dropped because the model does not reason; every field it says
    was dropped, for any reason, is checked absent from what the backend got."""
    fields = set()
    for w in warnings_of(headers):
        if 'action="dropped"' in w:
            field = w.split('field="')[1].rstrip('"')
            top, _, rest = field.partition(".")
            assert top not in body or (rest and rest not in body[top]), (field, body)
            if 'reason="model_does_not_reason"' in w:
                fields.add(field)
    return fields


def no_reasoning_field(body: dict) -> None:
    assert not any(f in body for f in REASONING_FIELDS), body


@pytest.mark.parametrize("model", NOT_REASONING)
def test_codex_on_the_deep_tier_sends_no_reasoning_field_to_a_model_that_does_not_reason(oa, model):
    """The trial's request: Codex's reasoning and a decision whose tier thinks."""
    raw = oa.responses.with_raw_response.create(model="vsr/auto", input=ask("deep", model),
                                                reasoning={"effort": "low", "summary": "auto"})
    assert raw.parse().output_text == "ok"
    assert raw.headers["x-vsr-selected-model"] == model
    no_reasoning_field(sent())
    # Translated, the summary is one more field the other API lacks (reason="unsupported").
    summary = {"reasoning.summary"} if MODELS[model][0] == "responses" else set()
    assert claims_only_what_was_dropped(raw.headers, sent()) == {"reasoning.effort", *summary}
    assert sent().get("max_completion_tokens", sent().get("max_output_tokens", sent().get("max_tokens"))) == 4096


@pytest.mark.parametrize("tier", ["deep", "casual"])
@pytest.mark.parametrize("model", NOT_REASONING)
def test_a_tier_alone_adds_no_reasoning_field_and_claims_no_drop(oa, model, tier):
    raw = oa.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": ask(tier, model)}])
    assert raw.parse().choices[0].message.content == "ok"
    assert raw.headers["x-vsr-selected-model"] == model
    no_reasoning_field(sent())
    assert claims_only_what_was_dropped(raw.headers, sent()) == set()


@pytest.mark.parametrize("model", NOT_REASONING)
def test_a_chat_clients_own_reasoning_fields_are_dropped_and_listed(oa, model):
    raw = oa.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": ask("deep", model)}],
        reasoning_effort="high", extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert raw.parse().choices[0].message.content == "ok"
    no_reasoning_field(sent())
    fields = claims_only_what_was_dropped(raw.headers, sent())
    assert "reasoning_effort" in fields
    # To an openai-format backend it is dropped for the model; translated, it is one more field the other API lacks.
    assert ("chat_template_kwargs" in fields) is (MODELS[model][0] == "openai")
    assert any('field="chat_template_kwargs"' in w for w in warnings_of(raw.headers))


@pytest.mark.parametrize("model", NOT_REASONING)
def test_a_messages_clients_thinking_is_dropped_and_listed(gw, model):
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="vsr/auto", max_tokens=8000, messages=[{"role": "user", "content": ask("deep", model)}],
        thinking={"type": "enabled", "budget_tokens": 2048})
    assert raw.parse().content[0].text == "ok"
    no_reasoning_field(sent())
    assert claims_only_what_was_dropped(raw.headers, sent()) == {"thinking"}


def test_claude_codes_adaptive_thinking_and_effort_are_dropped_for_an_older_claude(gw):
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="claude-3", max_tokens=8000, messages=[{"role": "user", "content": "hi"}],
        extra_body={"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}})
    assert raw.parse().content[0].text == "ok"
    no_reasoning_field(sent())
    assert claims_only_what_was_dropped(raw.headers, sent()) == {"thinking", "output_config.effort"}


def test_the_deep_tier_reaches_an_openai_reasoning_model_as_its_effort(oa):
    raw = oa.responses.with_raw_response.create(model="vsr/auto", input=ask("deep", "o3"),
                                                reasoning={"effort": "high"})
    assert raw.parse().output_text == "ok"
    assert sent()["reasoning_effort"] == "low" and "chat_template_kwargs" not in sent()
    assert claims_only_what_was_dropped(raw.headers, sent()) == set()
    oa.responses.create(model="vsr/auto", input=ask("deep", "o3-r"))
    assert sent()["reasoning"] == {"effort": "low"} and "chat_template_kwargs" not in sent()


def test_a_chat_clients_template_kwargs_reach_only_a_vllm_model(oa):
    raw = oa.chat.completions.with_raw_response.create(
        model="o3", messages=[{"role": "user", "content": "hi"}],
        extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert raw.parse().choices[0].message.content == "ok"
    assert "chat_template_kwargs" not in sent()
    assert any('field="chat_template_kwargs"' in w for w in warnings_of(raw.headers))
    oa.chat.completions.create(model="qwen", messages=[{"role": "user", "content": "hi"}],
                               extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert sent()["chat_template_kwargs"] == {"enable_thinking": True}


@pytest.mark.parametrize(("tier", "expected"), [
    ("deep", {"chat_template_kwargs": {"enable_thinking": True, "thinking_budget": 2048}, "reasoning_effort": "low"}),
    ("casual", {"chat_template_kwargs": {"enable_thinking": False}})])
def test_a_vllm_model_that_reasons_gets_the_tiers_template_switches(oa, tier, expected):
    oa.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": ask(tier, "qwen")}])
    assert {k: sent()[k] for k in ("chat_template_kwargs", "reasoning_effort") if k in sent()} == expected


def test_claude_that_reasons_gets_the_tiers_thinking(oa):
    oa.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": ask("deep", "claude")}])
    assert sent()["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    oa.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": ask("casual", "claude")}])
    assert sent()["thinking"] == {"type": "disabled"}
