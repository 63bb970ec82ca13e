"""A stream that fails before its answer begins (outside trial): the backend answers 200 and an event stream whose
first event is its protocol's error (Messages' ``event: error`` with ``overloaded_error``, Chat's ``{"error": ...}``
chunk, Responses' ``response.failed`` after ``response.created`` and ``response.in_progress``). Nothing reached the
client yet, so it is the "before the first byte" case (LiteLLM's MidStreamFallbackError, ``is_pre_first_chunk``):
the next candidate answers, and the backend's failure counts toward its health as the same status answered whole
would. With no candidate left the client gets that status, in its own protocol's shape.

The router and the bench mock upstream run as real processes (``fail_mode: error_event`` scripts the failing
stream), the official SDKs are the clients.
"""
from __future__ import annotations

import re

import anthropic
import httpx
import openai
import pytest

from .procs import config, model, router, write_config
from .test_e2e_translate_fidelity import chat, messages

ASK = [{"role": "user", "content": "Where is the Louvre?"}]


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    models = [{**model(name, f"{mock.url}/v1"), "api_format": fmt}
              for name, fmt in (("an", "anthropic"), ("oa", "openai"), ("rs", "responses"))]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "an"}, {"model": "oa"}]}])
    doc["recipes"] += [{"name": name, "decisions": [{"name": name, "modelRefs": [{"model": m} for m in refs]}]}
                       for name, refs in (("oa-first", ("oa", "an")), ("rs-first", ("rs", "oa")),
                                          ("an-only", ("an",)))]
    doc["entrypoints"] = [{"model_names": ["vsr/auto"], "recipe": "default", "default": True},
                          *({"model_names": [name], "recipe": name} for name in ("oa-first", "rs-first", "an-only"))]
    # No ejection however many failures the tests script: each test's fallback order is the decision's, whatever
    # ran before it.
    doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0},
                                             "outlier": {"consecutive_failures": 1000}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


@pytest.fixture
def first_fails(mock):
    """The mock's next ``n`` answers fail as ``mode`` says with ``status``; ordinary answers after the test."""
    def configure(n: int, status: int = 529, mode: str = "error_event") -> None:
        httpx.post(f"{mock.url}/_mock/config",
                   json={"fail_first": n, "fail_status": status, "fail_mode": mode}).raise_for_status()
    yield configure
    httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 0, "fail_mode": "status", "fail_status": 500})


def errors_counted(gw, name: str, cause: str) -> float:
    text = httpx.get(f"{gw.url}/metrics").text
    found = re.search(rf'^vsr_upstream_errors_total\{{model="{name}",backend="[^"]*",cause="{cause}"\}} (\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else 0.0


def chat_text(client, **kw) -> str:
    return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kw)
                   if c.choices)


def test_an_anthropic_stream_failing_at_once_falls_back_for_a_chat_client(gw, first_fails):
    before = errors_counted(gw, "an", "status_5xx")
    first_fails(1)
    client, tap = chat(gw)
    text = chat_text(client, model="vsr/auto", max_tokens=64, messages=ASK)
    assert text and tap.headers["x-vsr-selected-model"] == "oa"
    assert tap.headers["x-vsr-response-path"] == "fallback"
    # Counted against the backend as its 529 would be.
    assert errors_counted(gw, "an", "status_5xx") == before + 1


def test_an_anthropic_stream_failing_at_once_falls_back_for_a_messages_client(gw, first_fails):
    first_fails(1)
    client, tap = messages(gw)
    with client.messages.stream(model="vsr/auto", max_tokens=64, messages=ASK) as s:
        kinds = [e.type for e in s]
        final = s.get_final_message()
    assert "error" not in kinds and final.content[0].text
    assert tap.headers["x-vsr-selected-model"] == "oa"


@pytest.mark.parametrize(("entry", "failing"), [("oa-first", "oa"), ("rs-first", "rs")])
def test_an_openai_or_responses_stream_failing_before_its_output_falls_back(gw, first_fails, entry, failing):
    before = errors_counted(gw, failing, "status_5xx")
    first_fails(1)
    client, tap = chat(gw)
    events = list(client.responses.create(model=entry, input="Where is the Louvre?", max_output_tokens=64,
                                          stream=True))
    kinds = [e.type for e in events]
    assert "response.failed" not in kinds and "error" not in kinds, kinds
    assert kinds[-1] == "response.completed" and events[-1].response.output_text
    assert tap.headers["x-vsr-selected-model"] == ("an" if failing == "oa" else "oa")
    assert errors_counted(gw, failing, "status_5xx") == before + 1


def test_with_no_candidate_left_the_client_gets_the_status_as_a_whole_failure_gives_it(gw, first_fails):
    """The error event answered as its status: Anthropic's overloaded_error is 529 for both SDKs, as the same
    backend answering 529 whole is."""
    seen = {}
    for mode in ("error_event", "status"):
        first_fails(1, 529, mode)
        with pytest.raises(anthropic.APIStatusError) as caught:
            with messages(gw)[0].messages.stream(model="an-only", max_tokens=64, messages=ASK) as s:
                list(s)
        first_fails(1, 529, mode)
        with pytest.raises(openai.APIStatusError) as chat_caught:
            chat_text(chat(gw)[0], model="an-only", max_tokens=64, messages=ASK)
        seen[mode] = (caught.value.status_code, caught.value.body["error"]["type"], chat_caught.value.status_code)
    assert seen["error_event"] == seen["status"]
    assert seen["error_event"][:2] == (529, "overloaded_error")


def test_a_request_faults_error_event_is_relayed_as_its_400_not_retried(gw, first_fails, mock):
    """An ``invalid_request_error`` event is the request's fault, as a 400 answered whole is: no fallback."""
    first_fails(1, 400)
    requests = httpx.get(f"{mock.url}/_mock/stats").json()["requests"]
    with pytest.raises(anthropic.BadRequestError):
        with messages(gw)[0].messages.stream(model="vsr/auto", max_tokens=64, messages=ASK) as s:
            list(s)
    assert httpx.get(f"{mock.url}/_mock/stats").json()["requests"] == requests + 1
