"""End to end: what a remote System One API answers is checked, bounded and failed over before anyone reads it.

A real router process, the fake System One API (``bench.fake_systemone``) for failures it can script, and a
misbehaving one (``tests.hostile_systemone``) for answers the fake never gives: a wrong kind, probabilities
outside 0..1, an option not offered, answers missing, an answer of 24 MB.
"""
from __future__ import annotations

import re
import socket
import threading

import httpx
import pytest

from vsr_fast.config.catalog import Deployment
from vsr_fast.protocol import systemone as wire
from vsr_fast.systemone.deployments import CallFailed, Remote

from .hostile_systemone import LEAK, Handler
from .hostile_upstream import serving
from .procs import refused_port, router, wait_until, write_config
from .test_e2e_systemone import calls, set_rules

INVALID = ["wrong-kind", "out-of-range", "unoffered", "empty", "missing-last", "batch-missing"]
TYPES = ["choice", "noul", "score", "set", "span"]
QUESTIONS = {"tone": {"type": "choice", "criteria": {"urgent": "Needs action now", "calm": "Can wait"}},
             "spam": {"type": "noul"},
             "level": {"type": "score", "criteria": ["low", "high"]}}
STATE = {"request": "please reply, it is urgent"}


@pytest.fixture(scope="module")
def hostile():
    with serving(Handler) as url:
        yield url


def remote(url: str, **extra) -> dict:
    return {"provider": "systemone", "endpoint": url, "model": "m", "capabilities": {"question_types": TYPES},
            **extra}


def native(name: str, url: str) -> dict:
    return {"name": name, "api_format": "systemone", "backend_refs": [{"endpoint": url}]}


def keyword(word: str) -> dict:
    return {"operator": "AND", "conditions": [{"type": "keyword", "name": word}]}


@pytest.fixture(scope="module")
def trial(mock, fake, hostile, tmp_path_factory):
    chat = [{"name": n, "backend_refs": [{"endpoint": f"{mock.url}/v1"}]} for n in ("safe-model", "general-model")]
    aliases = [native(f"h-{mode}", f"{hostile}/{mode}/v1/systemone")
               for mode in [*INVALID, "ok", "extra", "huge", "rate-limited", "leaky-503", "long-choice"]]
    aliases += [native("faked", f"{fake.url}/v1/systemone"),
                {"name": "slow", "api_format": "systemone", "deployment": "slow-secret-dep"}]
    words = ["failover", "invalid", "gated"]
    gate = {"type": "escalate", "escalate": {
        "stages": [{"type": "native", "model": "h-out-of-range"}, {"type": "native", "model": "h-ok"}],
        "quality": {"mode": "uncalibrated", "accept": {"min_confidence": 0.5}}}}
    doc = {
        "version": "v0.5",
        "providers": {"models": chat + aliases},
        "global": {
            "router": {"limits": {"request_timeout_ms": 3000}, "headers": {"debug": "any"},
                       "access_log": {"enabled": True}},
            "model_catalog": {
                "signal_timeout_ms": 1500,
                "deployments": {
                    "bad-secret-dep": remote(f"{hostile}/out-of-range/v1/systemone", timeout_ms=1000),
                    "ghost-secret-dep": remote(f"{hostile}/unoffered/v1/systemone", timeout_ms=1000),
                    "gone-secret-dep": remote(f"http://127.0.0.1:{refused_port()}/v1/systemone", timeout_ms=500),
                    "late-secret-dep": remote(f"{fake.url}/v1/systemone", timeout_ms=5000),
                    "slow-secret-dep": remote(f"{fake.url}/v1/systemone", timeout_ms=2000, max_retries=2)},
                "system": {"decision_model": {"deployment": "bad-secret-dep"}}}},
        "recipes": [
            {"name": "chat",
             "signals": {"keywords": [{"name": w, "keywords": [w]} for w in ("select", "gone", "late", "checkme")],
                         "jailbreak": [{"name": "attack"}],
                         "systemone": [
                             {"name": "needs_tools", "deployment": "gone-secret-dep",
                              "question": {"type": "noul", "instructions": "Does this need a tool?"}},
                             {"name": "bad_check", "deployment": "bad-secret-dep",
                              "question": {"type": "noul", "instructions": "Is this fine?"}},
                             {"name": "slow_check", "deployment": "late-secret-dep",
                              "question": {"type": "noul", "instructions": "Is this slow?"}}]},
             "decisions": [
                 {"name": "blocked", "priority": 300, "rules": {"operator": "AND", "conditions": [
                     {"type": "jailbreak", "name": "attack"}]}, "modelRefs": [{"model": "safe-model"}]},
                 {"name": "unreachable_tools", "priority": 200, "rules": {
                     "operator": "AND", "on_unknown": "fail_request", "conditions": [
                         {"type": "keyword", "name": "gone"}, {"type": "systemone", "name": "needs_tools"}]},
                  "modelRefs": [{"model": "general-model"}]},
                 {"name": "invalid_check", "priority": 250, "rules": {
                     "operator": "AND", "on_unknown": "fail_request", "conditions": [
                         {"type": "keyword", "name": "checkme"}, {"type": "systemone", "name": "bad_check"}]},
                  "modelRefs": [{"model": "general-model"}]},
                 {"name": "late_check", "priority": 150, "rules": {"operator": "AND", "conditions": [
                     {"type": "keyword", "name": "late"}, {"type": "systemone", "name": "slow_check"}]},
                  "modelRefs": [{"model": "general-model"}]},
                 {"name": "selected", "priority": 400, "rules": keyword("select"),
                  "modelRefs": [{"model": "general-model"}, {"model": "safe-model"}],
                  "algorithm": {"type": "systemone", "systemone": {"deployment": "ghost-secret-dep"}}}],
             "fallback": {"modelRefs": [{"model": "general-model"}]}},
            {"name": "native", "signals": {"keywords": [{"name": w, "keywords": [w]} for w in words]},
             "decisions": [
                 {"name": "failover", "priority": 30, "rules": keyword("failover"),
                  "modelRefs": [{"model": "faked"}, {"model": "h-ok"}]},
                 {"name": "invalid", "priority": 20, "rules": keyword("invalid"),
                  "modelRefs": [{"model": "h-wrong-kind"}, {"model": "h-ok"}]},
                 {"name": "gated", "priority": 10, "rules": keyword("gated"),
                  "modelRefs": [{"model": "h-out-of-range"}, {"model": "h-ok"}], "algorithm": gate},
                 {"name": "plain", "priority": 1, "modelRefs": [{"model": "slow"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["auto"], "recipe": "chat", "default": True},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("trust")))) as proc:
        yield proc


def s1(proc, model: str, body: dict | None = None, **kw) -> httpx.Response:
    body = body or {"state": STATE, "questions": QUESTIONS}
    return httpx.post(f"{proc.url}/v1/systemone", json={"model": model, **body}, timeout=kw.pop("timeout", 20), **kw)


def chat(proc, text: str) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                      json={"model": "auto", "messages": [{"role": "user", "content": text}]})


def metric(proc, line: str) -> float:
    m = re.search(rf"^{re.escape(line)} (\S+)$", httpx.get(f"{proc.url}/metrics").text, re.M)
    return float(m.group(1)) if m else 0.0


def systemone_requests(proc, status: str) -> float:
    """``vsr_requests_total`` of the System One API with ``status``, every recipe, decision and model."""
    text = httpx.get(f"{proc.url}/metrics").text
    return sum(float(m.group(1)) for m in re.finditer(
        rf'^vsr_requests_total{{api="systemone",[^}}]*status="{status}"}} (\S+)$', text, re.M))


BATCH = {"states": {"a": {"state": {"request": "one"}, "questions": {"spam": {"type": "noul"}}},
                    "b": {"state": {"request": "two"}, "questions": {"spam": {"type": "noul"}}}}}


# --- 1. answers held to their questions ------------------------------------------------------------------


@pytest.mark.parametrize("mode", INVALID)
def test_an_answer_that_does_not_fit_its_questions_is_invalid_response(trial, mode):
    r = s1(trial, f"h-{mode}", BATCH if mode == "batch-missing" else None)
    assert r.status_code == 502, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_response", err
    assert "h-" + mode in err["message"] and "secret" not in err["message"]


def test_a_remote_value_is_quoted_capped_in_the_error_and_the_log(trial):
    """A remote's choice of 200 000 characters: the 502 and the access log quote 64 of them, escaped."""
    r = s1(trial, "h-long-choice")
    assert r.status_code == 502, r.text[:300]
    message = r.json()["error"]["message"]
    assert "Z" * 64 in message and "Z" * 65 not in message and "more characters" in message, message
    assert len(r.content) < 2000, len(r.content)
    def logged() -> list[str]:
        return [line for line in trial.lines if "h-long-choice" in line and "502" in line]
    wait_until(logged, "the access log line")
    line = logged()[0]
    assert "Z" * 65 not in line and len(line) < 4000, len(line)


def test_an_invalid_answer_moves_on_to_the_next_alias(trial):
    r = s1(trial, "router-s1", {"state": {"request": "invalid please"}, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "h-ok"
    assert r.json()["answers"]["tone"]["choice"] == "urgent"


def test_an_unasked_answer_is_not_relayed(trial):
    r = s1(trial, "h-extra")
    assert r.status_code == 200, r.text
    assert set(r.json()["answers"]) == set(QUESTIONS)


def test_the_quality_gate_never_accepts_an_invalid_answer(trial):
    r = s1(trial, "router-s1", {"state": {"request": "gated please"}, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "h-ok"
    assert r.json()["answers"]["spam"]["noul"] == 0.5


def test_a_signal_whose_answer_is_out_of_range_is_unknown(trial):
    """The jailbreak question answered 7.5: unknown (invalid_response), its on_unknown (no_match) applies."""
    r = chat(trial, "hello there, how are you")
    assert r.status_code == 200, r.text
    assert r.headers.get("x-vsr-selected-decision") != "blocked"
    assert r.headers["x-vsr-selected-model"] == "general-model"


def test_a_decision_left_unknown_by_an_invalid_answer_says_why(trial):
    """noul 7.5: the rule is unknown, its decision (on_unknown: fail_request) fails naming invalid_response."""
    r = chat(trial, "checkme please")
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "decision_unresolved"
    assert "systemone:bad_check (invalid_response: " in r.json()["error"]["message"], r.text


def test_the_selector_never_routes_on_an_answer_naming_a_model_not_offered(trial):
    """ghost-model 0.99, safe-model 0.01: no valid answer, so the first modelRef goes first, not safe-model."""
    r = httpx.post(f"{trial.url}/v1/chat/completions", timeout=20, headers={"x-vsr-debug": "1"},
                   json={"model": "auto", "messages": [{"role": "user", "content": "select a model"}]})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-decision"] == "selected"
    assert r.headers["x-vsr-selected-model"] == "general-model"
    assert "systemone: no answer, the first candidate goes first" in r.headers["x-vsr-trace"]


# --- 2. failover by status, Retry-After passed on ----------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504, 401, 404, 429])
def test_a_failing_alias_passes_the_request_on_whatever_code_its_body_says(trial, fake, status):
    set_rules(fake, [{"fail": {"kind": "status", "status": status}}])
    r = s1(trial, "router-s1", {"state": {"request": "failover please"}, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "h-ok"
    assert len(calls(fake)) == 1


def test_a_bad_request_verdict_is_relayed_not_passed_on(trial, fake):
    set_rules(fake, [{"fail": {"kind": "status", "status": 400, "body": {"error": {
        "type": "systemone_error", "code": "invalid_request", "message": "criteria too long"}}}}])
    r = s1(trial, "router-s1", {"state": {"request": "failover please"}, "questions": QUESTIONS})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_request"
    assert r.headers["x-vsr-selected-model"] == "faked"


def test_the_last_429_keeps_its_status_code_and_retry_after(trial, fake):
    r = s1(trial, "h-rate-limited")
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limited"
    assert r.headers["retry-after"] == "7"
    set_rules(fake, [{"fail": {"kind": "overloaded", "retry_after_s": 3}}])
    r = s1(trial, "faked")
    assert r.status_code == 429 and r.json()["error"]["code"] == "overloaded"
    assert r.headers["retry-after"] == "3"


# --- 3. the request's deadline and the client's leaving -----------------------------------------------------


def test_the_request_deadline_bounds_the_remote_and_its_retries(trial, fake):
    set_rules(fake, [{"fail": "hang"}])
    r = s1(trial, "router-s1", {"state": {"request": "plain"}, "questions": QUESTIONS})
    # The request's own deadline answered (its retries would end as the deployment's `timeout`).
    assert r.status_code == 504, r.text
    assert r.json()["error"]["code"] == "request_timeout"
    # Answered at 3 s, its calls cancelled with it: no attempt can begin after (a third would have at 4 s).
    assert len(calls(fake)) == 2


def test_a_client_that_leaves_cancels_the_remote_calls(trial, fake):
    set_rules(fake, [{"fail": "hang"}])
    gone = systemone_requests(trial, "499")
    with pytest.raises(httpx.ReadTimeout):
        s1(trial, "router-s1", {"state": {"request": "plain"}, "questions": QUESTIONS}, timeout=0.5)
    wait_until(lambda: any(c["disconnected"] for c in calls(fake)), "the remote call cancelled", timeout=5)
    # The request counted as ended (499): nothing of it runs after that, so no retry can begin.
    wait_until(lambda: systemone_requests(trial, "499") > gone, "the request counted as the client's leaving",
               timeout=10)
    assert len(calls(fake)) == 1


def test_a_body_slower_than_the_request_deadline_is_408(trial):
    with socket.create_connection(("127.0.0.1", trial.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: 100\r\n\r\n{\"model\": ")
        head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 408"), head
    assert b'"code":"body_timeout"' in head


# --- 5. calls cut by the signals' deadline ---------------------------------------------------------------------


def test_a_call_cut_by_the_signal_deadline_counts_as_timeout(trial, fake):
    set_rules(fake, [{"latency_ms": 4000}])
    ok = 'vsr_systemone_calls_total{deployment="late-secret-dep",outcome="ok"}'
    timeout = 'vsr_systemone_calls_total{deployment="late-secret-dep",outcome="timeout"}'
    before_ok, before_timeout = metric(trial, ok), metric(trial, timeout)
    r = chat(trial, "late answer please")
    assert r.status_code == 200, r.text
    assert metric(trial, timeout) == before_timeout + 1
    assert metric(trial, ok) == before_ok


# --- 7. a bounded answer -------------------------------------------------------------------------------------


def test_an_answer_past_max_response_bytes_is_refused_unread_and_the_router_keeps_serving(trial):
    health: list[int] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            health.append(httpx.get(f"{trial.url}/health", timeout=10).status_code)

    rss_before = _rss(trial)
    watcher = threading.Thread(target=probe)
    watcher.start()
    try:
        r = s1(trial, "h-huge")
    finally:
        done.set()
        watcher.join()
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == "invalid_response" and "too_large" in r.json()["error"]["message"]
    assert health and set(health) == {200}, health     # served all along (no timing asserted)
    assert _rss(trial) - rss_before < 16 * 1024 * 1024


def _rss(proc) -> int:
    with open(f"/proc/{proc.popen.pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


# --- 10. no deployment's name, address or exception in a client's error ---------------------------------------


def test_errors_name_the_model_and_cause_never_the_deployment_or_exception(trial, fake):
    r = s1(trial, "h-leaky-503")
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "db-7" not in message and LEAK not in message and "h-leaky-503: HTTP 503 server_error" in message
    set_rules(fake, [{"fail": "reset"}])
    r = s1(trial, "slow")
    assert r.status_code == 502, r.text
    message = r.json()["error"]["message"]
    assert "secret" not in message and "Error" not in message and "Errno" not in message, message
    r = chat(trial, "gone tools")
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "systemone:needs_tools (unreachable: the connection failed)" in message, message
    assert "secret" not in message and "Errno" not in message and "ConnectError" not in message


# --- 1. partial answers: the valid ones kept, the others unknown with why ----------------------------------------


async def test_a_partial_answer_keeps_what_fits_and_leaves_the_rest_unknown_with_why(hostile):
    """Over real HTTP, as the client's signals read it: the answered question kept, the unanswered one an in-place
    ``invalid_response`` (its rule unknown with that reason), a batch entry that never came back the same; read
    whole (``strict``, a native alias's relay), the call fails."""
    remote = Remote("r", Deployment(provider="systemone", endpoint=f"{hostile}/missing-last/v1/systemone"))
    batch = Remote("b", Deployment(provider="systemone", endpoint=f"{hostile}/batch-missing/v1/systemone"))
    body = wire.StandardRequest(state=wire.State(request="x"), questions={
        "spam": wire.NoulQuestion(), "tone": wire.ChoiceQuestion(criteria={"urgent": "", "calm": ""})})
    try:
        response = await remote.call(body)
        assert response.answers == {"spam": wire.NoulAnswer(0.5),
                                    "tone": wire.QuestionError("invalid_response", "$.answers.tone: no answer")}
        with pytest.raises(CallFailed) as info:
            await remote.call(body, strict=True)
        assert info.value.code == "invalid_response" and "$.answers.tone: no answer" in info.value.message
        got = await batch.call(wire.BatchRequest(states={
            "1": wire.Entry(state=wire.State(request="a"), questions={"spam": wire.NoulQuestion()}),
            "2": wire.Entry(state=wire.State(request="b"), questions={"spam": wire.NoulQuestion()})}))
        assert got.states["1"].answers == {"spam": wire.NoulAnswer(0.5)}
        assert got.states["2"].answers == {"spam": wire.QuestionError("invalid_response", "no entry")}
    finally:
        await remote.aclose()
        await batch.aclose()
