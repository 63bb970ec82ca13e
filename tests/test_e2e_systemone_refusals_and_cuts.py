"""End to end: ``POST /v1/systemone``'s refusals keep their status over HTTP/2, and a native alias call that a
cancellation cut (the request's deadline, the client's leaving) is counted as Chat counts a cut attempt.

A real router process, the fake System One API (``bench.fake_systemone``) behind a native alias, httpx as an
HTTP/1.1 and an HTTP/2 (prior knowledge) client.
"""
from __future__ import annotations

import json
import re

import httpx
import pytest

from .procs import router, wait_until, write_config
from .test_e2e_auth import ADMIN_KEY, KEY, OTHER_KEY, sha
from .test_e2e_systemone import calls, set_rules
from .test_e2e_systemone_accounting import log_lines
from .test_e2e_systemone_reasons import config as why_config

QUESTIONS = {"ok": {"type": "noul"}}


@pytest.fixture(scope="module")
def s1(mock, fake, tmp_path_factory):
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "chat-model", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "deployed", "api_format": "systemone", "deployment": "remote"},
        ]},
        "global": {
            "model_catalog": {"deployments": {
                "remote": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "m",
                           "timeout_ms": 10000}}},
            "router": {"limits": {"request_timeout_ms": 1000}, "access_log": {"enabled": True}, "auth": {"enabled": True, "keys": [
                {"id": "chat-only", "sha256": sha(KEY), "models": ["chat-model"]},
                {"id": "any", "sha256": sha(OTHER_KEY)}, {"id": "ops", "sha256": sha(ADMIN_KEY), "admin": True}]}},
        },
        "recipes": [
            {"name": "chat", "decisions": [{"name": "all", "modelRefs": [{"model": "chat-model"}]}]},
            {"name": "native", "decisions": [{"name": "d", "modelRefs": [{"model": "deployed"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["auto"], "recipe": "chat", "default": True},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("s1cuts")))) as proc:
        yield proc


def post(proc, key: str, model: str, *, http2: bool = False, timeout: float = 20, **headers) -> httpx.Response:
    with httpx.Client(http1=not http2, http2=http2, timeout=timeout) as client:
        return client.post(f"{proc.url}/v1/systemone", headers={"authorization": f"Bearer {key}", **headers},
                           json={"model": model, "state": {"request": "hello"}, "questions": QUESTIONS})


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_refusals_keep_their_status_over_either_http_version(s1, http2):
    r = post(s1, KEY, "deployed", http2=http2)
    assert r.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "model_not_allowed"
    r = post(s1, OTHER_KEY, "no-such-entrypoint", http2=http2)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found", r.text


def metric(proc, line: str) -> float:
    text = httpx.get(f"{proc.url}/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"}).raise_for_status().text
    m = re.search(rf"^{re.escape(line)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


UPSTREAM_ERRORS = 'vsr_upstream_errors_total{model="deployed",backend="remote",cause="%s"}'
ATTEMPTS = 'vsr_upstream_attempts_total{model="deployed",backend="remote",outcome="%s"}'
CALLS = 'vsr_systemone_calls_total{deployment="remote",outcome="%s"}'


def test_a_call_the_request_deadline_cut_is_a_deadline_not_a_failure_of_the_alias(s1, fake):
    set_rules(fake, [{"fail": "hang"}])
    errors, deadline, timeouts = (metric(s1, UPSTREAM_ERRORS % "cancelled"), metric(s1, ATTEMPTS % "deadline"),
                                  metric(s1, CALLS % "timeout"))
    r = post(s1, OTHER_KEY, "router-s1")
    assert r.status_code == 504 and r.json()["error"]["code"] == "request_timeout", r.text
    assert metric(s1, ATTEMPTS % "deadline") == deadline + 1
    assert metric(s1, CALLS % "timeout") == timeouts + 1
    assert metric(s1, UPSTREAM_ERRORS % "cancelled") == errors     # not the alias's failure


def test_a_call_the_client_leaving_cut_is_cancelled_not_a_failure_of_the_alias(s1, fake):
    set_rules(fake, [{"fail": "hang"}])
    errors, cancelled = metric(s1, UPSTREAM_ERRORS % "cancelled"), metric(s1, ATTEMPTS % "cancelled")
    with pytest.raises(httpx.ReadTimeout):
        post(s1, OTHER_KEY, "router-s1", timeout=0.3)
    wait_until(lambda: any(c["disconnected"] for c in calls(fake)), "the remote call cancelled", timeout=5)
    wait_until(lambda: metric(s1, ATTEMPTS % "cancelled") == cancelled + 1, "the cut attempt counted", timeout=5)
    assert metric(s1, UPSTREAM_ERRORS % "cancelled") == errors



def test_a_remote_verdict_is_relayed_to_the_client_and_kept_out_of_the_access_log(s1, fake):
    # A remote's own words may quote the request's text: the client gets them (its own), the log the verdict's code.
    said = "cannot judge 'alice@example.com wrote this'"
    set_rules(fake, [{"fail": {"kind": "question_failed", "message": said}}])
    r = post(s1, OTHER_KEY, "router-s1", **{"x-request-id": "s1-verdict-107"})
    assert r.status_code == 422 and r.json()["error"] == {
        "type": "systemone_error", "code": "question_failed", "message": said, "question": "ok", "state": None}
    line = log_lines(s1, "s1-verdict-107")
    assert line["status"] == 422 and line["error"] == "question_failed", line
    assert "alice" not in json.dumps(line), line
    assert "HTTP 422 question_failed" in line["message"], line


# --- a question the remote failed: its reason names no deployment ---------------------------------------------


@pytest.fixture(scope="module")
def signals(mock, fake, tmp_path_factory):
    doc = why_config(mock.url, fake.url, "")
    del doc["global"]["stores"]         # no event stream: the client's error is what is read here
    catalog = doc["global"]["model_catalog"]
    catalog["deployments"] = {"hidden-secret-dep": {**catalog["deployments"].pop("s1"), "timeout_ms": 2000}}
    catalog["system"]["decision_model"]["deployment"] = "hidden-secret-dep"
    doc["recipes"][0]["decisions"][0]["rules"]["on_unknown"] = "fail_request"
    with router(write_config(doc, str(tmp_path_factory.mktemp("s1why")))) as proc:
        yield proc


def test_a_question_the_remote_failed_names_its_reason_not_the_deployment(signals, fake):
    set_rules(fake, [{"question": "systemone:flagged", "fail": {"kind": "question_failed", "message": "cannot judge"}}])
    r = httpx.post(f"{signals.url}/v1/chat/completions", timeout=20,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "is this flagged?"}]})
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "systemone:flagged (question_failed: cannot judge)" in message, message
    assert "secret" not in message and "HTTP 422" not in message, message
    assert len(calls(fake)) == 2, "asked again without the failed question"
