"""An outside recipe author's trial of the Looper and the response path, over real processes: a router, the bench
mocks as providers (one per behaviour), a real Redis event stream, the official OpenAI SDK and httpx as clients.

What it found, each a test here: a failed Looper run named a model that did not fail in x-vsr-selected-model, and
another one on the next run; hops and static calls the deadline cut had no ``upstream_attempt`` event, and a static
request the deadline failed no ``answer_completed``; an escalation's error named its last call only; the routing
preview said ``upstream`` where the request answers on ``fallback``, ``fast_response`` or ``looper``; fusion dropped a
judge's prose analysis unseen and a failed judge threw the panel's answers away; escalate's health reorder was
unexplained; and an executor's answer named the router's model where every other route names the provider's."""
from __future__ import annotations

import contextlib

import httpx
import openai
import pytest

from .procs import model, refused_port, router, wait_until, write_config
from .test_e2e_events import events_of, own_stream
from .test_e2e_looper import fresh, shared_mock, stats

ASK = [{"role": "user", "content": "Say hello"}]
TEXT = {"a": "Alpha answer.", "b": "Beta answer."}
PROSE = "The first answer is the better one; the second is terse."
ESC = {"type": "escalate", "escalate": {"accept": {"refusal": False}}}

ok_a = shared_mock("--content", TEXT["a"])
ok_b = shared_mock("--content", TEXT["b"])
failing = shared_mock("--fail-rate", "1", "--fail-status", "500")
slow = shared_mock("--latency-ms", "30000")
prose = shared_mock("--content", PROSE)
# Its first event at once, the next 30 s later: a stream the Looper holds when its budget runs out.
drip = shared_mock("--chunks", "2", "--chunk-interval-ms", "30000")


def refs(names: str) -> list[dict]:
    return [{"model": n} for n in names]


DECISIONS = {
    # ratings over f (fails) and a, b (answer): on_error fail ends the run at f's failure
    "ratings-fail": (refs("fab"), {"type": "ratings", "on_error": "fail"}),
    # every call fails: the error names the last call in the executor's order, g
    "ratings-none": (refs("fg"), {"type": "ratings"}),
    "static-timeout": (refs("s"), None),
    "esc-deadline": (refs("sa"), {**ESC, "budget": {"deadline_ms": 400}, "on_error": "fail"}),
    "esc-held-deadline": (refs("da"), {**ESC, "budget": {"deadline_ms": 400}, "on_error": "fail"}),
    "esc-max-calls": (refs("fa"), {**ESC, "budget": {"max_calls": 1}, "on_error": "fail"}),
    "esc-all-fail": (refs("fr"), {**ESC, "on_error": "fail"}),
    "fusion-prose": (refs("abj"), {"type": "fusion", "fusion": {"analysis_models": ["a", "b"], "model": "j",
                                                                "include_analysis": True}}),
    "fusion-judge-fails": (refs("abf"), {"type": "fusion", "fusion": {"analysis_models": ["a", "b"], "model": "f",
                                                                      "analysis_mode": "none"}}),
    # a model that refuses connections (r) inside remom, workflows and fusion (on_error: skip)
    "remom-dead": (refs("abr"), {"type": "remom", "remom": {"breadth_schedule": [2], "synthesis_model": "r",
                                                            "model_distribution": "first_only"}}),
    "workflows-dead": (refs("abr"), {"type": "workflows", "workflows": {
        "roles": [{"name": "draft", "models": ["r", "a"], "prompt": "Draft it."}], "final": {"model": "b"}}}),
    "fusion-dead-judge": (refs("abr"), {"type": "fusion", "fusion": {"model": "r"}}),
    "static": (refs("a"), None),
    "escalate": (refs("ab"), ESC),
    "ratings": (refs("ab"), {"type": "ratings"}),
    "remom": (refs("ab"), {"type": "remom", "remom": {"breadth_schedule": [2], "synthesis_model": "b"}}),
    "workflows": (refs("ab"), {"type": "workflows", "workflows": {
        "roles": [{"name": "draft", "models": ["a"], "prompt": "Draft it."}], "final": {"model": "b"}}}),
}


def _doc(mocks: dict, stream: str) -> dict:
    gone = f"http://127.0.0.1:{refused_port()}/v1"
    models = [model("a", f"{mocks['a'].url}/v1", upstream_name="provider-a"),
              model("b", f"{mocks['b'].url}/v1", upstream_name="provider-b"),
              model("f", f"{mocks['f'].url}/v1"), model("g", f"{mocks['f'].url}/v1"),
              model("s", f"{mocks['s'].url}/v1"), model("d", f"{mocks['d'].url}/v1"), model("j", f"{mocks['j'].url}/v1", upstream_name="provider-j"),
              model("r", gone)]
    recipes, entrypoints = [], []
    for key, (rs, alg) in DECISIONS.items():
        decision: dict = {"name": "main", "modelRefs": rs, **({"algorithm": alg} if alg else {})}
        if key == "static-timeout":
            decision["request_timeout_ms"] = 500
        recipes.append({"name": key, "decisions": [decision]})
        entrypoints.append({"api": "chat", "model_names": [f"vsr/{key}"], "recipe": key,
                            **({"default": True} if key == "static" else {})})
    return {"version": "v0.5", "providers": {"models": models}, "recipes": recipes, "entrypoints": entrypoints,
            # No ejection: each test reads the order its decision wrote (the reorder has a test of its own).
            "global": {"router": {"headers": {"debug": "any"},
                                  "upstream": {"retries": {"max_retries": 0},
                                               "outlier": {"consecutive_failures": 1000}}},
                       "plugins": [{"type": "router_replay", "configuration": {}}],
                       "stores": {"event_stream": {"backend": "redis", "stream": stream}}}}


@pytest.fixture(scope="module")
def _trial(ok_a, ok_b, failing, slow, prose, drip, tmp_path_factory):
    mocks = {"a": ok_a, "b": ok_b, "f": failing, "s": slow, "j": prose, "d": drip}
    with own_stream() as stream, \
            router(write_config(_doc(mocks, stream), str(tmp_path_factory.mktemp("trial")))) as proc:
        yield proc, stream, mocks


@pytest.fixture
def trial(_trial):
    proc, stream, mocks = _trial
    fresh(*mocks.values())
    return proc, stream, mocks


def post(proc, name: str, **extra) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, timeout=30,
                      json={"model": f"vsr/{name}", "messages": ASK, **extra})


def kinds_of(stream: str, r: httpx.Response, last: str) -> list:
    """The request's events, once its ``last`` kind has been appended."""
    rid = r.headers["x-vsr-replay-id"]
    found: list = []

    def arrived() -> bool:
        found[:] = events_of(stream, rid)
        return any(type(e).__name__ == last for e in found)
    wait_until(arrived, f"the {last} event of {rid}")
    return found


# --- 1. a failed Looper run names the model its error is about, the same every run --------------------------------


def test_a_failed_run_names_the_failed_model_every_time(trial):
    proc, _, _ = trial
    seen = set()
    for _ in range(8):
        r = post(proc, "ratings-fail")
        assert r.status_code == 502 and r.json()["error"]["code"] == "looper_calls_failed", r.text
        seen.add(r.headers["x-vsr-selected-model"])
        message = r.json()["error"]["message"]
        assert message.startswith("f failed") and "calls: " in message and "f: upstream_failed" in message
    assert seen == {"f"}, "a model that did not fail, or a different one per run"


def test_every_call_failed_names_the_last_call_in_order(trial):
    proc, _, _ = trial
    seen = set()
    for _ in range(8):
        r = post(proc, "ratings-none")
        assert r.status_code == 502, r.text
        seen.add(r.headers["x-vsr-selected-model"])
        assert "f: upstream_failed" in r.json()["error"]["message"]
        assert "g: upstream_failed" in r.json()["error"]["message"]
    assert seen == {"g"}


# --- 2. every started hop has its upstream_attempt; every request its terminal event -------------------------------


def test_a_static_call_the_deadline_cut_has_its_attempt_and_the_request_its_answer_completed(trial):
    proc, stream, _ = trial
    r = post(proc, "static-timeout")
    assert r.status_code == 504 and r.json()["error"]["code"] == "request_timeout"
    events = kinds_of(stream, r, "AnswerCompleted")
    names = [type(e).__name__ for e in events]
    assert names[-2:] == ["ErrorRaised", "AnswerCompleted"], names
    attempts = [e for e in events if type(e).__name__ == "UpstreamAttempted"]
    assert [(a.model, a.status, a.cause) for a in attempts] == [("s", None, "deadline")]
    done = events[-1]
    assert (done.status, done.response_path, done.model, done.complete) == (504, "error", "s", False)
    # Counted by that outcome; not the backend's error (it was only slow), so no upstream error and no ejection.
    metrics = httpx.get(f"{proc.url}/metrics").text
    assert 'vsr_upstream_attempts_total{model="s",backend="s[0]",outcome="deadline"}' in metrics, metrics
    assert 'vsr_upstream_errors_total{model="s"' not in metrics


def test_a_hop_the_budget_cut_has_its_attempt(trial):
    proc, stream, _ = trial
    r = post(proc, "esc-deadline")
    assert r.status_code == 504 and r.json()["error"]["code"] == "looper_budget_exhausted", r.text
    attempts = [e for e in kinds_of(stream, r, "AnswerCompleted") if type(e).__name__ == "UpstreamAttempted"]
    assert [(a.model, a.cause, a.hop) for a in attempts] == [("s", "deadline", 1)]


def test_a_held_stream_the_budget_cut_has_its_attempt_cut_by_the_deadline(trial):
    # The stream had started (its first event held), yet its attempt's cause is the one the events name for any
    # attempt a deadline cut: ``deadline``, as an attempt cut before its first byte says it.
    proc, stream, _ = trial
    r = post(proc, "esc-held-deadline", stream=True)
    attempts = [e for e in kinds_of(stream, r, "AnswerCompleted") if type(e).__name__ == "UpstreamAttempted"]
    assert r.json()["error"]["code"] == "looper_budget_exhausted", r.text
    assert [(a.model, a.status, a.cause, a.hop) for a in attempts] == [("d", 200, "deadline", 1)]
    # The word the metric counts the attempt by, and no error of the model's.
    metrics = httpx.get(f"{proc.url}/metrics").text
    assert 'vsr_upstream_attempts_total{model="d",backend="d[0]",outcome="deadline"} 1' in metrics, metrics
    assert 'vsr_upstream_errors_total{model="d"' not in metrics


# --- 3. an escalation's error names every call, and the candidates left uncalled --------------------------------


def test_max_calls_spent_names_every_call_and_the_uncalled(trial):
    proc, _, mocks = trial
    r = post(proc, "esc-max-calls")
    assert r.status_code == 500, r.text       # the last call's own failure (README: no candidate answered)
    message = r.json()["error"]["message"]
    assert "f: upstream_failed" in message and "a: not called, max_calls (1) spent" in message
    assert stats(mocks["a"])["requests"] == 0


def test_every_call_failing_names_each_whatever_the_last_failure(trial):
    proc, _, _ = trial
    r = post(proc, "esc-all-fail")        # f answers 500, r refuses the connection
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_failed", r.text
    message = r.json()["error"]["message"]
    assert "f: upstream_failed; r: upstream_failed" in message
    assert r.headers["x-vsr-selected-model"] == "r"


# --- 5. fusion keeps a prose analysis, and a failed judge leaves the panel's answer -------------------------------


def test_a_judge_analysis_that_is_not_json_is_used_as_text_and_said(trial):
    proc, _, mocks = trial
    r = post(proc, "fusion-prose")
    assert r.status_code == 200, r.text
    assert '"j: analysis not JSON, used as text"' in r.headers["x-vsr-trace"]
    assert "fusion_analysis_not_json;model=\"j\"" in r.headers["x-vsr-warnings"]
    assert r.json()["looper"]["analysis"] == PROSE
    final_turn = stats(mocks["j"])["last_request"]["body"]["messages"][-1]["content"]
    assert f"Structured analysis:\n{PROSE}" in final_turn


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_judge_leaves_the_first_panel_answer(trial, stream):
    proc, _, _ = trial
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model="vsr/fusion-judge-fails", messages=ASK, stream=True, extra_headers={"x-vsr-debug": "1"}) as resp:
            headers = resp.headers
            chunks = list(resp.parse())
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        served = chunks[0].model
    else:
        raw = client.chat.completions.with_raw_response.create(model="vsr/fusion-judge-fails", messages=ASK,
                                                               extra_headers={"x-vsr-debug": "1"})
        headers, done = raw.headers, raw.parse()
        text, served = done.choices[0].message.content, done.model
        assert done.model_extra["looper"]["fallback"] == {"model": "a", "why": "the judge's final answer failed"}
    assert text == TEXT["a"]
    assert (headers["x-vsr-selected-model"], headers["x-vsr-response-path"], served) == ("a", "looper", "provider-a")
    assert "fusion_judge_failed;model=\"f\"" in headers["x-vsr-warnings"]
    assert "f: final answer failed, a's panel answer stands" in headers["x-vsr-trace"]


# --- 6. a model failing inside remom or workflows is said, and a judge that cannot be reached is asked once ------


def attempts_of(proc, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in httpx.get(f"{proc.url}/metrics").text.splitlines()
               if line.startswith("vsr_upstream_attempts_total{") and f'model="{name}"' in line)


@pytest.mark.parametrize("name", ["remom-dead", "workflows-dead"])
def test_a_model_failing_inside_remom_or_workflows_is_said_to_the_client(trial, name):
    """remom's synthesis model and a workflow role's model refuse connections (on_error: skip): the answer
    stands from what did answer, and x-vsr-warnings names the model that failed, as fusion names its judge."""
    proc, _, _ = trial
    r = post(proc, name)
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-warnings"] == 'looper_call_failed;model="r"'


def test_a_judge_that_cannot_be_reached_is_not_asked_again_in_the_request(trial):
    """fusion's judge r is on the panel too (the modelRefs): its connection refused there, neither the analysis
    nor the final answer asks it again (LiteLLM cools a deployment down after a connection failure)."""
    proc, _, _ = trial
    before = attempts_of(proc, "r")
    r = post(proc, "fusion-dead-judge")
    assert r.status_code == 200, r.text
    assert attempts_of(proc, "r") - before == 1
    assert 'fusion_judge_failed;model="r"' in r.headers["x-vsr-warnings"]
    assert "r: not called, its connection failed earlier in this request" in r.headers["x-vsr-trace"]


# --- 7. the answer's model is the provider's, whatever the algorithm ----------------------------------------------


@pytest.mark.parametrize(("name", "selected", "served"), [
    ("static", "a", "provider-a"), ("escalate", "a", "provider-a"), ("ratings", "a", "provider-a"),
    ("remom", "b", "provider-b"), ("workflows", "b", "provider-b"), ("fusion-prose", "j", "provider-j")])
def test_the_answer_names_the_provider_model_that_wrote_it(trial, name, selected, served):
    proc, _, _ = trial
    raw = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0) \
        .chat.completions.with_raw_response.create(model=f"vsr/{name}", messages=ASK)
    assert (raw.headers["x-vsr-selected-model"], raw.parse().model) == (selected, served)


# --- 4 and 6: the preview's response path, and escalate's health reorder explained ---------------------------------


@contextlib.contextmanager
def paths_router(tmp_path, ok, bad):
    doc = {"version": "v0.5",
           "providers": {"models": [model("m", f"{ok.url}/v1"), model("small", f"{bad.url}/v1"),
                                    model("large", f"{ok.url}/v1")]},
           "recipes": [{"name": "r",
                        "signals": {"keywords": [{"name": "closed", "keywords": ["opening hours"]},
                                                 {"name": "hard", "keywords": ["escalate this"]}]},
                        "decisions": [
                            {"name": "closed", "priority": 20, "modelRefs": refs(["m"]),
                             "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "closed"}]},
                             "plugins": [{"type": "fast_response", "configuration": {"message": "Closed today."}}]},
                            {"name": "hard", "priority": 10, "modelRefs": refs(["small", "large"]), "algorithm": ESC,
                             "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "hard"}]}}],
                        "fallback": {"modelRefs": refs(["m"])}}],
           "global": {"router": {"headers": {"debug": "any"},
                                 "upstream": {"outlier": {"consecutive_failures": 1, "base_ejection_ms": 60_000},
                                              "retries": {"max_retries": 0}}}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        yield proc


@pytest.fixture(scope="module")
def previewing(ok_a, failing, tmp_path_factory):
    """``paths_router`` for the preview's cases below: each text reaches a route of its own, and only the escalate
    case calls small (ejecting it), which no other case names. The health test has a router of its own."""
    with paths_router(tmp_path_factory.mktemp("paths"), ok_a, failing) as proc:
        yield proc


@pytest.mark.parametrize(("text", "path", "model_header"), [
    ("what are your opening hours", "fast_response", None), ("tell me a story", "upstream", "m"),   # the recipe fallback answers as `upstream` (no -decision header)
    ("escalate this please", "looper", "large")])
def test_the_preview_says_the_path_the_request_takes(previewing, text, path, model_header):
    proc = previewing
    body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
    real = httpx.post(f"{proc.url}/v1/chat/completions", json=body, timeout=30)
    assert real.status_code == 200, real.text
    preview = httpx.post(f"{proc.url}/api/v1/routing/preview", json=body, timeout=30)
    assert preview.status_code == 200, preview.text
    assert real.headers["x-vsr-response-path"] == preview.headers["x-vsr-response-path"] == path
    assert preview.json()["response_path"] == path
    assert real.headers.get("x-vsr-selected-model") == model_header
    if path != "looper":        # escalate's first call (small) fails here: the preview names the first
        assert preview.headers.get("x-vsr-selected-model") == model_header
    if text == "tell me a story":   # no decision matched: neither names one
        assert "x-vsr-selected-decision" not in real.headers and "x-vsr-selected-decision" not in preview.headers


def test_escalate_says_which_model_health_moved_and_why(tmp_path, ok_a, failing):
    fresh(failing)
    with paths_router(tmp_path, ok_a, failing) as proc:
        body = {"model": "auto", "messages": [{"role": "user", "content": "escalate this please"}]}
        first = httpx.post(f"{proc.url}/v1/chat/completions", json=body, headers={"x-vsr-debug": "1"}, timeout=30)
        assert first.status_code == 200 and "moved last" not in first.headers["x-vsr-trace"]
        # small's only backend failed once: ejected, so escalate calls large first, and says so.
        moved = "small: moved last (was 1 of 2 by modelRefs), every backend ejected by health checks"
        second = httpx.post(f"{proc.url}/v1/chat/completions", json=body, headers={"x-vsr-debug": "1"}, timeout=30)
        assert second.status_code == 200 and f'"{moved}"' in second.headers["x-vsr-trace"]
        preview = httpx.post(f"{proc.url}/api/v1/routing/preview", json=body, headers={"x-vsr-debug": "1"},
                             timeout=30)
        assert preview.json()["selection"]["calls"] == ["large", "small"]
        assert preview.json()["selection"]["moved"] == [moved]
        assert f'"{moved}"' in preview.headers["x-vsr-trace"]
        assert stats(failing)["requests"] == 1
