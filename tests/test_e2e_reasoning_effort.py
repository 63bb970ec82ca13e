"""End to end: a reasoning effort, from every client protocol (outside trial 10a: Codex's ``reasoning.effort`` and a
Chat client's ``reasoning_effort`` reached gpt-4o, which refuses them, while a Messages client's thinking was
dropped; ``xhigh`` turned Claude's thinking off; ``banana`` was forwarded).

The scripted upstream plays gpt-4o on Chat and Responses (400 ``unsupported_parameter`` for any reasoning field, as
OpenAI answers), a reasoning model on both (which takes them) and Claude. The router runs as a real process and the
official openai and anthropic SDKs are the clients.
"""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_protocols import warnings_of
from .test_e2e_thinking import BODIES, LOCK, sent

CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
            "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}}
CLAUDE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "stop_reason": "end_turn",
          "content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 5, "output_tokens": 1}}


class Scripted(hostile_upstream.Handler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        with LOCK:
            BODIES.append(body)
        if self.path.startswith("/claude"):
            self.whole(200, json.dumps(CLAUDE).encode())
            return
        asked = "reasoning_effort" if "reasoning_effort" in body else "reasoning" if "reasoning" in body else None
        if self.path.startswith("/gpt4o") and asked:
            self.whole(400, json.dumps({"error": {
                "message": f"Unsupported parameter: '{asked}' is not supported with this model.",
                "type": "invalid_request_error", "param": asked, "code": "unsupported_parameter"}}).encode())
            return
        self.whole(200, json.dumps(RESPONSE if self.path.endswith("/responses") else CHAT).encode())


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        models = [
            {"name": "gpt4o", "api_format": "openai", "backend_refs": [{"endpoint": f"{url}/gpt4o/v1"}]},
            {"name": "gpt4o-r", "api_format": "responses", "backend_refs": [{"endpoint": f"{url}/gpt4o/v1"}]},
            {"name": "o3", "api_format": "openai", "capabilities": ["reasoning"],
             "backend_refs": [{"endpoint": f"{url}/o3/v1"}]},
            {"name": "o3-r", "api_format": "responses", "capabilities": ["reasoning"],
             "backend_refs": [{"endpoint": f"{url}/o3/v1"}]},
            {"name": "claude", "api_format": "anthropic", "capabilities": ["reasoning"],
             "backend_refs": [{"endpoint": f"{url}/claude/v1"}]}]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "gpt4o"}]}])
        with router(write_config(doc, str(tmp_path_factory.mktemp("effort")))) as proc:
            yield proc


@pytest.fixture
def oa(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)


DROPPED = 'translation_loss;action="dropped";reason="model_does_not_reason";field="{}"'


@pytest.mark.parametrize("model", ["gpt4o", "gpt4o-r"])
def test_a_chat_clients_effort_is_dropped_for_a_model_that_does_not_reason(oa, model):
    raw = oa.chat.completions.with_raw_response.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                                       reasoning_effort="low")
    assert raw.parse().choices[0].message.content == "ok"
    assert "reasoning_effort" not in sent() and "reasoning" not in sent()
    assert DROPPED.format("reasoning_effort") in warnings_of(raw.headers)


@pytest.mark.parametrize("model", ["gpt4o", "gpt4o-r"])
def test_a_responses_clients_effort_is_dropped_for_a_model_that_does_not_reason(oa, model):
    raw = oa.responses.with_raw_response.create(model=model, input="hi", reasoning={"effort": "low"})
    assert raw.parse().output_text == "ok"
    assert "reasoning_effort" not in sent() and "reasoning" not in sent()
    assert DROPPED.format("reasoning.effort") in warnings_of(raw.headers)


@pytest.mark.parametrize("model", ["o3", "o3-r"])
@pytest.mark.parametrize("effort", ["none", "minimal", "xhigh"])
def test_every_effort_openai_lists_reaches_a_model_that_reasons(oa, model, effort):
    oa.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], reasoning_effort=effort)
    assert sent().get("reasoning_effort", (sent().get("reasoning") or {}).get("effort")) == effort
    oa.responses.create(model=model, input="hi", reasoning={"effort": effort})
    assert sent().get("reasoning_effort", (sent().get("reasoning") or {}).get("effort")) == effort


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_effort_no_one_lists_is_refused_naming_the_field(oa, api):
    with pytest.raises(openai.BadRequestError) as caught:
        if api == "chat":
            oa.chat.completions.create(model="o3", messages=[{"role": "user", "content": "hi"}],
                                       reasoning_effort="banana")
        else:
            oa.responses.create(model="o3-r", input="hi", reasoning={"effort": "banana"})
    assert caught.value.body["param"] == ("reasoning_effort" if api == "chat" else "reasoning.effort")
    assert "banana" in caught.value.body["message"] and "xhigh" in caught.value.body["message"]


@pytest.mark.parametrize(("effort", "thinking"), [
    ("xhigh", {"type": "enabled", "budget_tokens": 8192}), ("high", {"type": "enabled", "budget_tokens": 4096}),
    ("minimal", {"type": "enabled", "budget_tokens": 1024}), ("none", {"type": "disabled"})])
def test_every_openai_effort_maps_to_claudes_thinking(oa, effort, thinking):
    raw = oa.chat.completions.with_raw_response.create(model="claude", messages=[{"role": "user", "content": "hi"}],
                                                       reasoning_effort=effort, max_tokens=16000)
    assert raw.parse().choices[0].message.content == "ok"
    assert sent()["thinking"] == thinking
    assert not any("reasoning_effort" in w for w in warnings_of(raw.headers))
    oa.responses.create(model="claude", input="hi", reasoning={"effort": effort}, max_output_tokens=16000)
    assert sent()["thinking"] == thinking


def test_a_messages_clients_thinking_is_still_dropped_for_gpt4o(gw):
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    raw = client.messages.with_raw_response.create(model="gpt4o", max_tokens=2048, messages=[
        {"role": "user", "content": "hi"}], thinking={"type": "enabled", "budget_tokens": 1024})
    assert raw.parse().content[0].text == "ok"
    assert DROPPED.format("thinking") in warnings_of(raw.headers)
