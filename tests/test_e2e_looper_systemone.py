"""The Looper's System One questions over real processes (spec 5.6): the ``systemone`` selector picks a candidate
from their descriptions in one choice question, and escalate's ``accept.systemone`` asks ``answer_check`` about
each answer. Asked of the fake System One API (every answer scripted, every call read back) and of the embedded
model; the candidates are mock upstreams and the clients the official SDKs."""
from __future__ import annotations

import os

import anthropic
import httpx
import openai
import pytest
import yaml

from .procs import config, mock_upstream, model, router, write_config

REFS = [{"model": "fast"}, {"model": "reasoner"}]
DESCRIBED = {"fast": "Short everyday answers", "reasoner": "Multi-step reasoning and proofs"}


def set_rules(fake, rules: list[dict]) -> None:
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": rules}).raise_for_status()


def calls(fake) -> list[dict]:
    return httpx.get(f"{fake.url}/_fake/calls").json()["calls"]


def requests_of(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


def with_fake(doc: dict, fake, timeout_ms: int = 2000) -> dict:
    doc["global"] = {"model_catalog": {
        "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
                               "timeout_ms": timeout_ms,
                               "capabilities": {"question_types": ["choice", "noul", "score"]}}},
        "system": {"decision_model": {"deployment": "s1"}}},
        "router": {"headers": {"debug": "any"}}}
    return doc


@pytest.fixture(scope="module")
def two_models():
    with mock_upstream() as fast, mock_upstream() as reasoner:
        yield fast, reasoner


@pytest.fixture(scope="module")
def selecting(two_models, fake, tmp_path_factory):
    fast, reasoner = two_models
    alg = {"type": "systemone", "systemone": {"instructions": "Which model should answer this request?",
                                              "candidates": DESCRIBED}}
    doc = with_fake(config([model("fast", f"{fast.url}/v1"), model("reasoner", f"{reasoner.url}/v1")],
                           [{"name": "main", "modelRefs": REFS, "algorithm": alg}]), fake)
    with router(write_config(doc, str(tmp_path_factory.mktemp("sel")))) as proc:
        yield proc


def test_the_selector_asks_one_choice_over_the_candidates_and_routes_to_its_pick(selecting, fake, two_models):
    fast, reasoner = two_models
    set_rules(fake, [{"question": "selector", "answer": {"choice": {"reasoner": 0.8, "fast": 0.2}}}])
    before = requests_of(reasoner), requests_of(fast)
    raw = openai.OpenAI(base_url=f"{selecting.url}/v1", api_key="k", max_retries=0).chat.completions \
        .with_raw_response.create(model="vsr/auto", messages=[{"role": "user", "content": "Prove that 2 is prime"}],
                                  extra_headers={"x-vsr-debug": "1"})
    raw.parse()
    assert raw.headers["x-vsr-selected-model"] == "reasoner"
    assert raw.headers["x-vsr-response-path"] == "upstream"
    assert 'selector=("systemone: reasoner=0.800" "systemone: fast=0.200")' in raw.headers["x-vsr-trace"]
    assert (requests_of(reasoner), requests_of(fast)) == (before[0] + 1, before[1])
    (call,) = calls(fake)
    body = call["body"]
    assert body["state"] == {"request": "Prove that 2 is prime"}
    assert body["questions"] == {"selector": {"type": "choice", "criteria": DESCRIBED,
                                              "instructions": "Which model should answer this request?"}}


def test_the_selector_on_the_messages_api_picks_the_other_candidate(selecting, fake):
    set_rules(fake, [{"question": "selector", "answer": {"choice": {"reasoner": 0.1, "fast": 0.9}}}])
    raw = anthropic.Anthropic(base_url=selecting.url, api_key="k", max_retries=0).messages.with_raw_response.create(
        model="vsr/auto", max_tokens=32, messages=[{"role": "user", "content": "Hi there"}])
    assert raw.parse().content[0].text
    assert raw.headers["x-vsr-selected-model"] == "fast"


@pytest.mark.parametrize("fail", [{"kind": "status", "status": 503}, {"kind": "hang"}])
def test_a_failing_selector_falls_back_to_the_first_candidate(selecting, fake, fail):
    set_rules(fake, [{"question": "selector", "fail": fail}])
    r = httpx.post(f"{selecting.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, timeout=30,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "Prove it"}]})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "fast"
    assert 'selector=("systemone: no answer, the first candidate goes first")' in r.headers["x-vsr-trace"]
    assert len(calls(fake)) == 1


def test_the_embedded_model_picks_by_description(two_models, tmp_path):
    """No deployment configured: the embedded decision model answers the choice from the descriptions alone."""
    fast, reasoner = two_models
    alg = {"type": "systemone", "systemone": {"candidates": {
        "fast": "Cooking, recipes, baking, kitchen ingredients and meals",
        "reasoner": "Mathematics: equations, algebra, calculus and proofs"}}}
    doc = config([model("fast", f"{fast.url}/v1"), model("reasoner", f"{reasoner.url}/v1")],
                 [{"name": "main", "modelRefs": REFS, "algorithm": alg}])
    with router(write_config(doc, str(tmp_path))) as proc:
        def pick(text: str) -> str:
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=60,
                           json={"model": "vsr/auto", "messages": [{"role": "user", "content": text}]})
            assert r.status_code == 200, r.text
            return r.headers["x-vsr-selected-model"]

        assert pick("Solve the equation 3x + 7 = 22 and show the algebra") == "reasoner"
        assert pick("How long should I bake a loaf of bread, and which flour is best?") == "fast"


def test_a_selector_added_by_a_reload_is_named_for_a_restart_and_picks_after_it(two_models, tmp_path):
    """Keyword-only signals ask nothing of System One, so the started router runs no deployment; a reload that
    adds a systemone selector cannot start one and must say so, not answer "no answer" forever (trial 6c). A
    start on the same file runs the decision model for the selector alone."""
    fast, reasoner = two_models
    keyword = {"operator": "AND", "conditions": [{"type": "keyword", "name": "pick"}]}
    plain = {"name": "plain", "priority": 0, "modelRefs": [{"model": "fast"}]}
    doc = config([model("fast", f"{fast.url}/v1"), model("reasoner", f"{reasoner.url}/v1")],
                 [{"name": "sel", "modelRefs": REFS, "rules": keyword}, plain],
                 signals={"keywords": [{"name": "pick", "keywords": ["SONESEL"]}]})
    doc["global"] = {"router": {"headers": {"debug": "any"}}}
    path = write_config(doc, str(tmp_path))
    doc["recipes"][0]["decisions"][0]["algorithm"] = {"type": "systemone", "systemone": {
        "candidates": {"fast": "casual chat", "reasoner": "hard math proofs"}}}
    ask = {"model": "vsr/auto",
           "messages": [{"role": "user", "content": "SONESEL prove there are infinitely many primes"}]}
    with router(path) as proc:
        assert reloaded(proc, path, doc) == [
            "recipes[default].decisions[0].algorithm.systemone: System One deployment 'primary' opens at start"]
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, timeout=60, json=ask)
        assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "fast", r.text
        assert ('selector=("systemone: deployment primary is not running (a restart starts it), the first candidate '
                'goes first")') in r.headers["x-vsr-trace"]
    with router(path) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, timeout=60, json=ask)
        assert r.status_code == 200, r.text
        assert r.headers["x-vsr-selected-model"] == "reasoner"
        assert "systemone: reasoner=" in r.headers["x-vsr-trace"]
        assert 'vsr_systemone_calls_total{deployment="primary",outcome="ok"} 1' in httpx.get(f"{proc.url}/metrics").text


def reloaded(proc, path: str, doc: dict) -> list[str]:
    """``doc`` written over ``path`` (whole, under another name, then renamed) and reloaded: what waits for a
    restart."""
    with open(path + ".new", "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(path + ".new", path)
    r = httpx.post(f"{proc.url}/admin/reload", timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["restart_required"]


# --- escalate's accept.systemone -------------------------------------------------------------------------

CHECKED = {"type": "escalate", "escalate": {"accept": {"systemone": {"gte": 0.7}}}}
JUDGED = [{"question": "preset:answer_check", "answer_contains": "Small says", "answer": {"noul": 0.2}},
          {"question": "preset:answer_check", "answer_contains": "Large says", "answer": {"noul": 0.9}}]


@pytest.fixture(scope="module")
def checked(fake, tmp_path_factory):
    with mock_upstream("--content", "Small says 42.") as small, mock_upstream("--content", "Large says 41.") as large:
        models = [{**model("small", f"{small.url}/v1"), "api_format": "anthropic"}, model("large", f"{large.url}/v1")]
        doc = with_fake(config(models, [{"name": "main", "modelRefs": [{"model": "small"}, {"model": "large"}],
                                         "algorithm": CHECKED}]), fake)
        with router(write_config(doc, str(tmp_path_factory.mktemp("chk")))) as proc:
            yield proc, small, large


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_asks_answer_check_of_each_answer_and_stops_at_the_first_that_passes(checked, fake, stream):
    proc, small, large = checked
    set_rules(fake, JUDGED)
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    ask = [{"role": "user", "content": "What is 6 x 7?"}]
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model="vsr/auto", messages=ask, stream=True, extra_headers={"x-vsr-debug": "1"}) as resp:
            headers = resp.headers
            text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
    else:
        raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=ask,
                                                                extra_headers={"x-vsr-debug": "1"})
        headers, text = raw.headers, raw.parse().choices[0].message.content
    assert text == "Large says 41."
    assert (headers["x-vsr-selected-model"], headers["x-vsr-response-path"]) == ("large", "looper")
    assert 'looper=("small: answer_check=0.200, rejected" "large: answer_check=0.900, accepted")' \
        in headers["x-vsr-trace"]
    judged = calls(fake)
    assert [c["body"]["state"] for c in judged] == [{"request": "What is 6 x 7?", "answer": "Small says 42."},
                                                    {"request": "What is 6 x 7?", "answer": "Large says 41."}]
    assert all(list(c["body"]["questions"]) == ["preset:answer_check"] for c in judged)
    assert judged[0]["body"]["questions"]["preset:answer_check"]["type"] == "noul"


def test_an_answer_the_judge_accepts_ends_the_escalation_at_once(checked, fake):
    proc, small, large = checked
    set_rules(fake, [{"question": "preset:answer_check", "answer": {"noul": 0.75}}])
    before = requests_of(large)
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto",
                                                             "messages": [{"role": "user", "content": "6 x 7?"}]})
    assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "small"
    assert requests_of(large) == before and len(calls(fake)) == 1


def test_a_judge_that_does_not_answer_accepts_nothing_and_on_error_decides(checked, fake):
    proc, small, large = checked
    set_rules(fake, [{"question": "preset:answer_check", "fail": {"kind": "status", "status": 500}}])
    r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "6 x 7?"}]})
    assert r.status_code == 200      # on_error: last_attempt, the default on Chat
    assert r.headers["x-vsr-selected-model"] == "large"
    assert '"small: answer_check: no answer, rejected" "large: answer_check: no answer, rejected"' \
        in r.headers["x-vsr-trace"]


# --- domains.model_scores as multi_factor's domain factor ------------------------------------------------


def test_the_matched_domains_model_scores_steer_multi_factor(two_models, fake, tmp_path):
    fast, reasoner = two_models
    alg = {"type": "multi_factor", "multi_factor": {"weights": {"cost": 0, "latency": 0, "error_rate": 0}}}
    reads_math = {"operator": "OR", "conditions": [
        {"type": "domain", "name": "math"},
        {"operator": "NOT", "conditions": [{"type": "domain", "name": "math"}]}]}
    doc = with_fake(config([model("fast", f"{fast.url}/v1"), model("reasoner", f"{reasoner.url}/v1")],
                           [{"name": "main", "modelRefs": REFS, "algorithm": alg, "rules": reads_math}],
                           signals={"domains": [{"name": "math", "model_scores": {"reasoner": 0.95, "fast": 0.2}}]}),
                    fake)
    with router(write_config(doc, str(tmp_path))) as proc:
        def ask(text: str) -> str:
            r = httpx.post(f"{proc.url}/v1/chat/completions",
                           json={"model": "vsr/auto", "messages": [{"role": "user", "content": text}]})
            assert r.status_code == 200, r.text
            return r.headers["x-vsr-selected-model"]

        set_rules(fake, [{"question": "preset:domain", "request_contains": "integral",
                          "answer": {"choice": {"math": 0.9, "other": 0.1}}},
                         {"question": "preset:domain", "answer": {"choice": {"other": 0.9, "math": 0.1}}}])
        assert ask("What is the integral of x squared?") == "reasoner"
        assert ask("Tell me a joke") == "fast"          # no domain matched: no domain factor, a tie, modelRefs order


def test_a_rule_a_reload_puts_on_a_deployment_not_running_is_unknown_not_a_failed_request(two_models, fake, tmp_path):
    """The client runs the remote deployment the started file asked; a reload adds a jailbreak rule on the embedded
    one, which it does not run: the rule reads unknown (its on_unknown decides) and the request is served."""
    fast, reasoner = two_models
    set_rules(fake, [{"question": "selector", "answer": {"choice": {"reasoner": 0.8, "fast": 0.2}}}])
    alg = {"type": "systemone", "systemone": {"candidates": DESCRIBED}}
    doc = with_fake(config([model("fast", f"{fast.url}/v1"), model("reasoner", f"{reasoner.url}/v1")],
                           [{"name": "main", "modelRefs": REFS, "algorithm": alg}]), fake)
    path = write_config(doc, str(tmp_path))
    doc["recipes"][0]["signals"] = {"jailbreak": [{"name": "jb", "deployment": "primary"}]}
    doc["recipes"][0]["decisions"].insert(0, {
        "name": "blocked", "priority": 10, "modelRefs": [{"model": "fast"}],
        "rules": {"operator": "AND", "conditions": [{"type": "jailbreak", "name": "jb"}]}})
    with router(path) as proc:
        assert reloaded(proc, path, doc) == [
            "recipes[default].signals.jailbreak[jb]: System One deployment 'primary' opens at start"]
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, timeout=60,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": "Prove it"}]})
        assert r.status_code == 200, r.text
        assert (r.headers["x-vsr-selected-decision"], r.headers["x-vsr-selected-model"]) == ("main", "reasoner")
