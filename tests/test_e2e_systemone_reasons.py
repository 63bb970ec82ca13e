"""End to end: why a System One rule is unknown, as the preview and the signals_evaluated event say it, and
answer reuse ending when the configuration changes (spec 5.3).

A real router, the fake System One API as the decision model's remote deployment, real Redis for the events.
"""
from __future__ import annotations

import uuid

import httpx
import pytest
import yaml

from vsr_fast.events.types import SignalsEvaluated

from .procs import router, wait_for_value, write_config
from .test_e2e_events import stream_events
from .test_e2e_systemone_accounting import stream  # noqa: F401 - the module's Redis stream, a fixture

QUESTION = "systemone:flagged"


def config(mock_url: str, fake_url: str, stream: str) -> dict:
    noul = {"type": "noul", "instructions": "Is this flagged?"}
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "global": {
            "model_catalog": {
                "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake_url}/v1/systemone", "model": "fake",
                                       "timeout_ms": 400, "capabilities": {"question_types": ["noul", "choice"]}}},
                "system": {"decision_model": {"deployment": "s1"}}},
            "stores": {"event_stream": {"backend": "redis", "stream": stream}}},
        "recipes": [{
            "name": "default",
            "signals": {"systemone": [{"name": "flagged", "question": noul},
                                      {"name": "needs_tools", "question": {**noul, "instructions": "Tools?"}}]},
            "decisions": [
                {"name": "flag", "priority": 100, "modelRefs": [{"model": "m"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "systemone", "name": "flagged"}]}},
                {"name": "tools", "priority": 50, "modelRefs": [{"model": "m"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "systemone", "name": "needs_tools"}]}}],
            "fallback": {"modelRefs": [{"model": "m"}]},
        }],
    }


@pytest.fixture(scope="module")
def s1(mock, fake, stream, tmp_path_factory):
    with router(write_config(config(mock.url, fake.url, stream), str(tmp_path_factory.mktemp("why")))) as proc:
        yield proc


def rules(fake, *given: dict) -> None:
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": list(given)}).raise_for_status()


def details(proc, prompt: str) -> dict[str, str]:
    r = httpx.post(f"{proc.url}/api/v1/routing/preview", timeout=20,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": prompt}]})
    assert r.status_code == 200, r.text
    return {s["name"]: s["detail"] for s in r.json()["signals"]}


def calls(fake) -> int:
    return len(httpx.get(f"{fake.url}/_fake/calls").json()["calls"])


def test_a_question_the_remote_failed_is_unknown_for_that_reason(s1, fake):
    rules(fake, {"question": QUESTION, "fail": {"kind": "question_failed", "message": "cannot judge this one"}})
    seen = details(s1, f"question failed {uuid.uuid4().hex}")
    assert calls(fake) == 2, "asked again without the failed question"
    assert seen["flagged"].startswith("unknown: question_failed:") and "cannot judge this one" in seen["flagged"]
    assert seen["needs_tools"] == "P(yes)=0.5", "the retry answered the other rule"


def test_an_answer_left_out_of_a_call_that_succeeded_is_an_invalid_response(s1, fake):
    rules(fake, {"question": QUESTION, "answer": {"omit": True}})
    seen = details(s1, f"left out {uuid.uuid4().hex}")
    assert seen["flagged"].startswith("unknown: invalid_response:") and QUESTION in seen["flagged"]
    assert seen["needs_tools"] == "P(yes)=0.5"


def test_a_late_call_is_a_timeout(s1, fake):
    rules(fake, {"latency_ms": 2000})
    seen = details(s1, f"late {uuid.uuid4().hex}")
    assert seen["flagged"].startswith("unknown: timeout:") and seen["needs_tools"].startswith("unknown: timeout:")


def test_the_signals_evaluated_event_says_the_same_reason(s1, fake, stream):
    rules(fake, {"question": QUESTION, "fail": {"kind": "question_failed"}})
    rid = f"why-{uuid.uuid4().hex}"
    r = httpx.post(f"{s1.url}/v1/chat/completions", headers={"x-request-id": rid}, timeout=20,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": f"event {rid}"}]})
    assert r.status_code == 200, r.text

    def evaluated():
        for event in stream_events(stream):
            if isinstance(event, SignalsEvaluated) and event.request_id == rid:
                return {x.name: x.detail for x in event.readings}
        return None

    readings = wait_for_value(evaluated, "the signals_evaluated event")
    assert readings["flagged"].startswith("unknown: question_failed:")


def test_reused_answers_end_with_a_reload_that_changes_the_configuration(mock, fake, stream, tmp_path):
    doc = config(mock.url, fake.url, stream)
    path = write_config(doc, str(tmp_path))
    rules(fake)
    prompt = f"reuse {uuid.uuid4().hex}"
    with router(path) as proc:
        details(proc, prompt)
        assert calls(fake) == 1
        details(proc, prompt)
        assert calls(fake) == 1, "the remote API's answers are reused for 10 minutes"
        doc["providers"]["models"].append({"name": "other", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]})
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        reloaded = httpx.post(f"{proc.url}/admin/reload", timeout=20)
        assert reloaded.status_code == 200, reloaded.text
        details(proc, prompt)
        assert calls(fake) == 2, "until the configuration changes"
        details(proc, prompt)
        assert calls(fake) == 2, "and reused again under the new one"


def test_decision_unresolved_names_each_unknown_signal_with_its_reason(mock, fake, stream, tmp_path):
    doc = config(mock.url, fake.url, stream)
    doc["recipes"][0]["decisions"][0]["rules"]["on_unknown"] = "fail_request"
    rules(fake, {"question": QUESTION, "fail": {"kind": "question_failed", "message": "no verdict"}})
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/api/v1/routing/preview", timeout=20,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": f"fail {uuid.uuid4().hex}"}]})
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "decision_unresolved"
    assert "systemone:flagged (question_failed: " in error["message"] and "no verdict" in error["message"]
