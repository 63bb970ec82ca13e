"""End to end: ``POST /v1/systemone`` gets the request accounting Chat gets (metrics, access log, events,
x-request-id, x-vsr-trace), and the routing preview takes a System One body.

A real router, the fake System One API (bench.fake_systemone) behind a remote deployment, the scripted in-process
model, real Redis for the event stream, the access log on stderr.
"""
from __future__ import annotations

import json
import re

import httpx
import pytest

from .procs import mock_upstream, refused_port, router, wait_for_value, write_config
from .test_e2e_events import own_stream, stream_events

QUESTIONS = {"ok": {"type": "noul"}}
NATIVE = [{"type": "native", "model": "deployed"}, {"type": "native", "model": "local-scripted"}]


@pytest.fixture(scope="module")
def stream():
    with own_stream() as name:
        yield name


@pytest.fixture(scope="module")
def judge():
    """A Chat model whose canned reply names answer 1: an escalation's judge."""
    with mock_upstream("--content", "Answer 1 is the best.") as proc:
        yield proc


@pytest.fixture(scope="module")
def s1(mock, fake, judge, stream, tmp_path_factory):
    words = ["deployed", "escalated", "judged", "misjudged"]
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "chat-model", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "judge-llm", "backend_refs": [{"endpoint": f"{judge.url}/v1"}]},
            {"name": "judge-down", "backend_refs": [{"endpoint": f"http://127.0.0.1:{refused_port()}/v1"}]},
            {"name": "local-scripted", "api_format": "systemone", "deployment": "local"},
            {"name": "deployed", "api_format": "systemone", "deployment": "remote"},
        ]},
        "global": {
            "model_catalog": {"deployments": {
                "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"},
                "remote": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake-deployed"}}},
            "router": {"access_log": {"enabled": True}, "headers": {"debug": "any"}},
            "stores": {"event_stream": {"backend": "redis", "stream": stream}},
        },
        "recipes": [
            {"name": "chat", "decisions": [{"name": "all", "modelRefs": [{"model": "chat-model"}]}]},
            {"name": "native", "signals": {"keywords": [{"name": w, "keywords": [w]} for w in words]},
             "decisions": [
                 {"name": "to_deployed", "priority": 20, "modelRefs": [{"model": "deployed"}],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "deployed"}]}},
                 {"name": "escalated", "priority": 10, "modelRefs": [{"model": m} for m in ("deployed", "local-scripted")],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "escalated"}]},
                  "algorithm": {"type": "escalate", "escalate": {"stages": NATIVE, "quality": {
                      "mode": "uncalibrated", "accept": {"min_confidence": 0.8}}}}},
                 {"name": "judged", "priority": 15, "modelRefs": [{"model": m} for m in ("deployed", "judge-llm")],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "judged"}]},
                  "algorithm": {"type": "escalate", "escalate": {
                      "stages": [NATIVE[0], {"type": "judge", "model": "judge-llm"}],
                      "quality": {"mode": "uncalibrated", "accept": {"min_confidence": 0.95}}}}},
                 {"name": "misjudged", "priority": 16, "modelRefs": [{"model": m} for m in ("deployed", "judge-down")],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "misjudged"}]},
                  "algorithm": {"type": "escalate", "escalate": {
                      "stages": [NATIVE[0], {"type": "judge", "model": "judge-down"}],
                      "quality": {"mode": "uncalibrated", "accept": {"min_confidence": 0.95}}}}},
                 {"name": "to_local", "priority": 1, "modelRefs": [{"model": "local-scripted"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["auto"], "recipe": "chat", "default": True},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("acct")))) as proc:
        yield proc


def post(proc, body, **headers):
    return httpx.post(f"{proc.url}/v1/systemone", json=body, headers=headers, timeout=20)


def log_lines(proc, request_id: str) -> dict:
    def found():
        for line in proc.lines:
            if line.startswith("{") and f'"request_id":"{request_id}"' in line.replace(" ", ""):
                return json.loads(line)
        return None
    return wait_for_value(found, f"the access log line of {request_id}")


def events(stream: str, request_id: str, count: int) -> list:
    def found():
        out = [event for event in stream_events(stream) if event.request_id == request_id]
        return out if len(out) >= count else None
    return wait_for_value(found, f"{count} events of {request_id}")


def series(metrics: str, name: str, **labels) -> float:
    """The value of the one series of ``name`` whose labels include ``labels`` (0 when there is none)."""
    total = 0.0
    for m in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", metrics, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def test_a_routed_call_to_a_remote_alias_is_counted_logged_and_recorded_as_chat_is(s1, fake, stream):
    httpx.post(f"{fake.url}/_fake/reset")
    before = httpx.get(f"{s1.url}/metrics").text
    r = post(s1, {"model": "router-s1", "state": {"request": "deployed please"}, "questions": QUESTIONS},
             **{"x-request-id": "s1-acct-1"})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "s1-acct-1"
    assert r.headers["x-vsr-selected-model"] == "deployed"
    assert "x-vsr-trace" not in r.headers, "no x-vsr-debug asked for it"
    after = httpx.get(f"{s1.url}/metrics").text

    def grew(name, **labels):
        return series(after, name, **labels) - series(before, name, **labels)

    assert grew("vsr_requests_total", api="systemone", recipe="native", decision="to_deployed", model="deployed",
                status="200") == 1
    assert grew("vsr_responses_total", api="systemone", path="upstream") == 1
    assert grew("vsr_upstream_attempts_total", model="deployed", backend="remote", outcome="ok") == 1
    assert grew("vsr_systemone_calls_total", deployment="remote", outcome="ok") == 1
    assert grew("vsr_request_duration_seconds_count", api="systemone", decision="to_deployed", model="deployed") == 1

    line = log_lines(s1, "s1-acct-1")
    assert (line["api"], line["recipe"], line["decision"], line["model"], line["backend"], line["status"],
            line["path"]) == ("systemone", "native", "to_deployed", "deployed", "remote", 200, "upstream")
    assert line["attempts"] == 1 and line["latency_s"] > 0

    kinds = [type(e).__name__ for e in events(stream, "s1-acct-1", 5)]
    assert kinds == ["RequestReceived", "SignalsEvaluated", "DecisionChosen", "UpstreamAttempted", "AnswerCompleted"]
    received, *_, attempt, answer = events(stream, "s1-acct-1", 5)
    assert received.api == "systemone" and received.model == "router-s1" and received.stream is False
    assert (attempt.model, attempt.backend, attempt.status) == ("deployed", "remote", 200)
    assert (answer.status, answer.response_path, answer.model) == (200, "upstream", "deployed")


def test_every_answer_carries_a_request_id_and_a_failed_call_is_accounted_with_its_code(s1, fake, stream):
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"question": "ok", "fail": {"kind": "question_failed"}}]})
    try:
        r = post(s1, {"model": "router-s1", "state": {"request": "deployed again"}, "questions": QUESTIONS})
    finally:
        httpx.post(f"{fake.url}/_fake/reset")
    assert r.status_code == 422 and r.json()["error"]["code"] == "question_failed"
    rid = r.headers["x-request-id"]
    assert rid, "the router made one"
    line = log_lines(s1, rid)
    assert (line["status"], line["path"], line["error"], line["model"]) == (422, "error", "question_failed", "deployed")
    metrics = httpx.get(f"{s1.url}/metrics").text
    assert series(metrics, "vsr_systemone_calls_total", deployment="remote", outcome="question_failed") >= 1
    assert series(metrics, "vsr_upstream_attempts_total", model="deployed", outcome="question_failed") >= 1
    kinds = [type(e).__name__ for e in events(stream, rid, 6)]
    assert kinds[-2:] == ["ErrorRaised", "AnswerCompleted"] and "UpstreamAttempted" in kinds
    # Refused before routing: the name is unknown.
    r = post(s1, {"model": "nope", "state": {"request": "x"}, "questions": QUESTIONS}, **{"x-request-id": "s1-404"})
    assert r.status_code == 404 and r.headers["x-request-id"] == "s1-404"
    line = log_lines(s1, "s1-404")
    assert (line["api"], line["status"], line["error"]) == ("systemone", 404, "model_not_found")


def test_an_escalations_judge_call_is_recorded_as_an_upstream_attempt(s1, fake, judge, stream):
    """The judge's Chat call is an upstream call like a native stage's: its upstream_attempt event, its place in
    the access log's attempts, its count in vsr_upstream_attempts_total."""
    httpx.post(f"{fake.url}/_fake/reset")
    judged = httpx.get(f"{judge.url}/_mock/stats").json()["requests"]
    before = httpx.get(f"{s1.url}/metrics").text
    r = post(s1, {"model": "router-s1", "state": {"request": "judged please"}, "questions": QUESTIONS},
             **{"x-request-id": "s1-judged"})
    assert r.status_code == 200, r.text     # the fake's neutral 0.5 fails 0.95; the judge names answer 1
    assert r.headers["x-vsr-selected-model"] == "deployed" and r.headers["x-vsr-response-path"] == "looper"
    assert httpx.get(f"{judge.url}/_mock/stats").json()["requests"] == judged + 1
    after = httpx.get(f"{s1.url}/metrics").text
    assert series(after, "vsr_upstream_attempts_total", model="judge-llm", outcome="ok") - \
        series(before, "vsr_upstream_attempts_total", model="judge-llm", outcome="ok") == 1
    line = log_lines(s1, "s1-judged")
    assert (line["decision"], line["model"], line["status"], line["attempts"]) == ("judged", "deployed", 200, 2)
    kinds = [type(e).__name__ for e in events(stream, "s1-judged", 6)]
    assert kinds == ["RequestReceived", "SignalsEvaluated", "DecisionChosen", "UpstreamAttempted",
                     "UpstreamAttempted", "AnswerCompleted"], kinds
    attempts = [e for e in events(stream, "s1-judged", 6) if type(e).__name__ == "UpstreamAttempted"]
    assert [(a.attempt, a.model, a.status) for a in attempts] == [(1, "deployed", 200), (2, "judge-llm", 200)]
    # A judge whose backend refuses connections: each attempt recorded with its cause, the escalation failed.
    r = post(s1, {"model": "router-s1", "state": {"request": "misjudged please"}, "questions": QUESTIONS},
             **{"x-request-id": "s1-misjudged"})
    assert r.status_code >= 400 and r.headers["x-vsr-selected-decision"] == "misjudged", r.text
    line = log_lines(s1, "s1-misjudged")
    assert line["attempts"] >= 2 and "judge-down" in line["failed_backends"], line
    got = events(stream, "s1-misjudged", 4 + line["attempts"])
    down = [e for e in got if type(e).__name__ == "UpstreamAttempted" and e.model == "judge-down"]
    assert len(down) == line["attempts"] - 1 and all(e.cause == "connect_refused" for e in down), down


def test_a_refusal_before_the_handler_is_counted_and_logged_on_the_systemone_route(s1):
    r = httpx.post(f"{s1.url}/v1/systemone", content=b"x", headers={"content-type": "text/plain",
                                                                    "x-request-id": "s1-415"})
    assert r.status_code == 415 and r.headers["x-request-id"] == "s1-415"
    line = log_lines(s1, "s1-415")
    assert (line["api"], line["status"]) == ("systemone", 415)


def test_the_trace_reaches_a_debug_caller_on_escalate_and_direct_answers(s1, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    body = {"model": "router-s1", "state": {"request": "escalated, yes"}, "questions": QUESTIONS}
    r = post(s1, body, **{"x-vsr-debug": "1"})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-response-path"] == "looper"
    trace = r.headers["x-vsr-trace"]
    assert 'decision="escalated"' in trace and 'algorithm="escalate"' in trace
    # Each stage's verdict: the fake's neutral 0.5 is not sure enough, the scripted model's 0.9 is.
    looper = re.search(r"looper=\(([^)]*)\)", trace).group(1)
    assert looper.startswith('"deployed: ') and "rejected" in looper and "local-scripted: " in looper \
        and looper.endswith('accepted"'), trace
    assert "x-vsr-trace" not in post(s1, body).headers
    direct = post(s1, {"model": "local-scripted", "state": {"request": "x"}, "questions": QUESTIONS},
                  **{"x-vsr-debug": "1"})
    assert direct.status_code == 200 and "model named directly" in direct.headers["x-vsr-trace"]


def test_the_preview_takes_a_systemone_body_and_calls_no_model(s1, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    body = {"model": "router-s1", "state": {"request": "deployed please"}, "questions": QUESTIONS}
    r = httpx.post(f"{s1.url}/api/v1/routing/preview", json=body, headers={"x-vsr-debug": "1"}, timeout=20)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert (doc["model_requested"], doc["recipe"], doc["decision"], doc["model"], doc["response_path"]) == \
        ("router-s1", "native", "to_deployed", "deployed", "upstream")
    assert {s["name"]: s["matched"] for s in doc["signals"]}["deployed"] is True
    assert r.headers["x-vsr-selected-decision"] == "to_deployed" and 'decision="to_deployed"' in r.headers["x-vsr-trace"]
    escalated = httpx.post(f"{s1.url}/api/v1/routing/preview", timeout=20,
                           json={**body, "state": {"request": "escalated"}}).json()
    assert (escalated["decision"], escalated["response_path"]) == ("escalated", "looper")
    assert httpx.get(f"{fake.url}/_fake/calls").json()["calls"] == [], "the preview calls no model"
    bad = httpx.post(f"{s1.url}/api/v1/routing/preview", json={"model": "router-s1", "states": {}}, timeout=20)
    assert bad.status_code == 400 and "states" in bad.text


def preview(proc, body=None, query: str = "", **kw) -> httpx.Response:
    return httpx.post(f"{proc.url}/api/v1/routing/preview{query}", timeout=20, **({"json": body} if body else kw))


def test_the_preview_refuses_json_too_deep_before_decoding_it_and_keeps_serving(s1):
    """README: nesting deeper than 256 is a 400 found by the scan before anything decodes; it was a 500 with no
    body (the System One detection's decode recursed)."""
    for deep in (b'{"model": ' + b"[" * 1000 + b"]" * 1000 + b"}", b"[" * 1000 + b"]" * 1000,
                 b'{"model": "router-s1", "state": ' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"}"):
        r = preview(s1, content=deep, headers={"content-type": "application/json"})
        assert r.status_code == 400, (r.status_code, r.text)
        assert "nested deeper than 256" in r.json()["error"]["message"], r.text
    assert preview(s1, {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}).status_code == 200


def test_an_explicit_api_wins_over_detection_and_systemone_is_one(s1):
    """``?api=chat`` with a model naming a System One entrypoint routes as /v1/chat/completions routes that body
    (by the default recipe); ``?api=systemone`` reads a System One body, validated like the others."""
    chat = {"model": "router-s1", "messages": [{"role": "user", "content": "deployed please"}]}
    live = httpx.post(f"{s1.url}/v1/chat/completions", json=chat, timeout=20)
    assert live.status_code == 200, live.text
    r = preview(s1, chat, "?api=chat")
    assert r.status_code == 200, r.text
    assert (r.json()["recipe"], r.json()["decision"], r.json()["model"]) == \
        ("chat", live.headers["x-vsr-selected-decision"], live.headers["x-vsr-selected-model"])
    body = {"model": "router-s1", "state": {"request": "deployed please"}, "questions": QUESTIONS}
    r = preview(s1, body, "?api=systemone")
    assert r.status_code == 200 and (r.json()["recipe"], r.json()["decision"]) == ("native", "to_deployed"), r.text
    assert preview(s1, {**body, "model": "deployed"}, "?api=systemone").json()["model"] == "deployed"
    unknown = preview(s1, {**body, "model": "no-such-s1"}, "?api=systemone")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found", unknown.text
    refused = preview(s1, chat, "?api=systemone")
    assert refused.status_code == 400 and "Invalid System One body" in refused.text, refused.text


def test_a_bad_api_is_quoted_capped(s1):
    r = preview(s1, {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}, "?api=" + "q" * 10_000)
    assert r.status_code == 400 and r.json()["error"]["param"] == "api", r.text[:300]
    message = r.json()["error"]["message"]
    assert "q" * 64 in message and "q" * 65 not in message and len(r.content) < 1000, len(r.content)
    assert "systemone" in message       # the APIs it takes, the documented systemone among them
