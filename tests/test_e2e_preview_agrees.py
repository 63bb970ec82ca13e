"""End to end, over a real router, the bench mock upstream and the fake System One API: the routing preview says
what the request path does, for the selectors and escalate, and a ``fail_request`` decision fails only the
requests it could have won, with an error the client may retry and a preview that shows why (trial 8b)."""
from __future__ import annotations

import httpx
import openai
import pytest

from .procs import config, model, router, write_config

UNREACHABLE = "http://127.0.0.1:9/v1/systemone"       # the discard port: nothing answers
PRICING = {"m-a": {"input": 10, "output": 10}, "m-b": {"input": 1, "output": 1}, "m-c": {"input": 0.1, "output": 0.1}}


def models(mock) -> list[dict]:
    return [{**model(name, f"{mock.url}/v1", upstream_name=f"mock-{name}"), "pricing": pricing}
            for name, pricing in PRICING.items()]


def when(keyword: str) -> dict:
    return {"operator": "AND", "conditions": [{"type": "keyword", "name": keyword}]}


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def preview(proc, text: str) -> httpx.Response:
    return httpx.post(f"{proc.url}/api/v1/routing/preview", json={"model": "vsr/auto", "messages": user(text)},
                      headers={"x-vsr-debug": "1"}, timeout=30)


# --- fail_request ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unresolved(mock, tmp_path_factory):
    """The trial's unk2.yaml: tv (200, on_unknown: match) and fail (100, fail_request) read a systemone rule on
    an unreachable deployment; failtop (300, fail_request) outranks them for prompts with "yak"."""
    both = lambda k: {"operator": "AND", "conditions": [{"type": "keyword", "name": k},  # noqa: E731
                                                        {"type": "systemone", "name": "dead"}]}
    decisions = [
        {"name": "tv", "priority": 200, "rules": {**both("k"), "on_unknown": "match"}, "modelRefs": [{"model": "m-b"}]},
        {"name": "fail", "priority": 100, "rules": {**both("k"), "on_unknown": "fail_request"},
         "modelRefs": [{"model": "m-a"}]},
        {"name": "failtop", "priority": 300, "rules": {**both("y"), "on_unknown": "fail_request"},
         "modelRefs": [{"model": "m-c"}]},
    ]
    doc = config(models(mock), decisions, fallback={"modelRefs": [{"model": "m-a"}]}, signals={
        "keywords": [{"name": "k", "keywords": ["zebra"]}, {"name": "y", "keywords": ["yak"]}],
        "systemone": [{"name": "dead", "deployment": "remote", "timeout_ms": 300,
                       "question": {"type": "noul", "instructions": "Is this urgent?"}}]})
    doc["global"] = {"router": {"headers": {"debug": "any"}}, "model_catalog": {"deployments": {
        "remote": {"provider": "systemone", "endpoint": UNREACHABLE, "model": "d3", "timeout_ms": 300}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("unresolved")))) as proc:
        yield proc


def test_a_decision_that_outranks_an_unresolved_fail_request_one_wins(unresolved):
    client = openai.OpenAI(base_url=f"{unresolved.url}/v1", api_key="x", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=user("zebra now"))
    assert raw.headers["x-vsr-selected-decision"] == "tv" and raw.headers["x-vsr-selected-model"] == "m-b"
    doc = preview(unresolved, "zebra now").json()
    assert (doc["decision"], doc["model"]) == ("tv", "m-b")
    assert {d["name"]: d["unresolved"] for d in doc["decisions"]} == {"tv": False, "fail": True, "failtop": False}


def test_an_unresolved_fail_request_decision_that_could_win_is_a_retryable_503_naming_why(unresolved):
    client = openai.OpenAI(base_url=f"{unresolved.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="vsr/auto", messages=user("yak zebra"))
    exc = info.value
    assert exc.status_code == 503 and exc.response.headers["retry-after"] == "1"
    assert exc.code == "decision_unresolved"
    assert "'failtop'" in exc.message and "systemone:dead" in exc.message and "unreachable" in exc.message

    answer = preview(unresolved, "yak zebra")
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    doc = answer.json()
    assert doc["error"]["code"] == "decision_unresolved"
    assert doc["unresolved"] == "failtop" and doc["unknown"] == ["systemone:dead"]
    signals = {f"{s['type']}:{s['name']}": s["matched"] for s in doc["signals"]}
    assert signals["keyword:k"] is True and signals["keyword:y"] is True and signals["systemone:dead"] is None
    assert [d["name"] for d in doc["decisions"] if d["unresolved"]] == ["fail", "failtop"]


# --- selectors and escalate: the preview runs the selection the request runs ------------------------------


@pytest.fixture(scope="module")
def selecting(mock, fake, tmp_path_factory):
    refs = [{"model": "m-a"}, {"model": "m-b"}]
    decisions = [
        {"name": "mf", "priority": 4, "rules": when("mf"), "modelRefs": refs, "algorithm": {
            "type": "multi_factor", "multi_factor": {
                "weights": {"cost": 1, "latency": 0, "error_rate": 0, "quality": 1, "domain": 0},
                "quality": {"m-a": 0.1, "m-b": 0.9}}}},
        {"name": "rnd", "priority": 3, "rules": when("rnd"), "algorithm": {"type": "random"},
         "modelRefs": [{"model": "m-a", "weight": 0}, {"model": "m-b", "weight": 1}]},
        {"name": "sel", "priority": 2, "rules": when("sel"), "modelRefs": refs, "algorithm": {
            "type": "systemone", "systemone": {"instructions": "Which model should answer?"}}},
        {"name": "esc", "priority": 1, "rules": when("esc"), "algorithm": {
            "type": "escalate", "escalate": {"order": "cost", "accept": {"refusal": False}}},
         "modelRefs": [{"model": "m-a"}, {"model": "m-b"}, {"model": "m-c"}]},
    ]
    doc = config(models(mock), decisions, signals={"keywords": [
        {"name": k, "keywords": [k]} for k in ("mf", "rnd", "sel", "esc")]})
    doc["global"] = {"router": {"headers": {"debug": "any"}}, "model_catalog": {
        "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
                               "timeout_ms": 2000, "capabilities": {"question_types": ["choice", "noul"]}}},
        "system": {"decision_model": {"deployment": "s1"}}}}
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [
        {"question": "selector", "answer": {"choice": {"m-a": 0.1, "m-b": 0.9}}}]}).raise_for_status()
    with router(write_config(doc, str(tmp_path_factory.mktemp("selecting")))) as proc:
        yield proc


@pytest.mark.parametrize("prompt, live", [("mf please", "m-b"), ("rnd please", "m-b"), ("sel please", "m-b"),
                                          ("esc please", "m-c")])
def test_the_preview_names_the_model_the_request_goes_to(selecting, prompt, live):
    client = openai.OpenAI(base_url=f"{selecting.url}/v1", api_key="x", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=user(prompt))
    assert raw.headers["x-vsr-selected-model"] == live
    answer = preview(selecting, prompt)
    assert answer.status_code == 200
    doc = answer.json()
    assert doc["model"] == live and answer.headers["x-vsr-selected-model"] == live
    if doc["algorithm"] != "random":       # a draw has no order before it is drawn
        assert doc["candidates"][0] == live


def test_random_previews_a_draw_with_each_candidates_chance(selecting):
    doc = preview(selecting, "rnd please").json()
    assert doc["selection"] == {"type": "random", "draw": True, "probabilities": {"m-a": 0.0, "m-b": 1.0}}


def test_escalate_previews_its_calls_in_cost_order(selecting):
    doc = preview(selecting, "esc please").json()
    assert doc["candidates"] == ["m-c", "m-b", "m-a"]
    assert doc["selection"] == {"type": "escalate", "order": "cost", "calls": ["m-c", "m-b", "m-a"]}


def test_multi_factor_traces_and_previews_its_ranking(selecting):
    raw = httpx.post(f"{selecting.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                     json={"model": "vsr/auto", "messages": user("mf please")})
    assert 'ranking=("m-b=0.800" "m-a=-0.900")' in raw.headers["x-vsr-trace"]
    answer = preview(selecting, "mf please")
    assert 'ranking=("m-b=0.800" "m-a=-0.900")' in answer.headers["x-vsr-trace"]
    assert [r["model"] for r in answer.json()["selection"]["ranking"]] == ["m-b", "m-a"]
