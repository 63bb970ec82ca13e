"""The executors that write an answer of their own (spec 5.6; behaviour as the public vLLM Semantic Router defines
it): ratings, remom, fusion and workflows, over a real router and mock upstreams (one per model, each with its own
canned answer), with the official SDKs. Each test shows what the executor called, with what, and what it returned.

The mocks are shared across the module, each reset (once at rest) before a test reads its counters; the tests share
one router (each decision in a recipe of its own, reached by its entrypoint model name) unless their models differ."""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from .procs import config, model, router, wait_for_value, write_config
from .test_e2e_looper import DEBUG, configured, fresh, shared_mock, shared_router

ASK = [{"role": "user", "content": "Say hello"}]
PRICE = {"input": 1.0, "output": 2.0}
TEXT = {"a": "Alpha answer.", "b": "Beta answer.", "c": "Gamma answer."}


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


def last_user_turn(mock) -> str:
    """The last user turn of the last request a mock received (Chat shape)."""
    messages = stats(mock)["last_request"]["body"]["messages"]
    return [m for m in messages if m["role"] == "user"][-1]["content"]


def hand_cost(*mocks) -> float:
    return sum((stats(m)["usage"]["input_tokens"] * PRICE["input"] + stats(m)["usage"]["output_tokens"] * PRICE["output"])
               / 1e6 for m in mocks)


mock_a = shared_mock("--content", TEXT["a"])
mock_b = shared_mock("--content", TEXT["b"])
mock_c = shared_mock("--content", TEXT["c"])
failing_b = shared_mock("--content", TEXT["b"], "--fail-rate", "1", "--fail-status", "500")
ANALYSIS = '{"consensus": ["both greet"], "contradictions": []}'
judge = shared_mock("--content", ANALYSIS)
PLAN = json.dumps({"steps": [{"id": "draft", "models": ["a"], "prompt": "Draft it."},
                             {"id": "review", "models": ["b"], "prompt": "Review the draft.", "access_list": ["draft"]}],
                   "final": {"model": "b", "prompt": "Merge."}})
planner = shared_mock("--content", PLAN)
BAD_PLAN = json.dumps({"steps": [{"id": "escape", "models": ["ghost"], "prompt": "use a forbidden model"}]})
bad_planner = shared_mock("--content", BAD_PLAN)


def priced(mocks: dict, refs) -> list[dict]:
    return [{**model(n, f"{mocks[n].url}/v1"), "pricing": PRICE} for n in refs]


def refs(names) -> list[dict]:
    return [{"model": n} for n in names]


ROLES = {"type": "workflows", "workflows": {
    "roles": [{"name": "plan", "models": ["a"], "prompt": "Plan the answer."},
              {"name": "solve", "models": ["b"], "prompt": "Solve it."},
              {"name": "verify", "models": ["c"], "prompt": "Check the plan.", "access_list": ["plan"]}],
    "final": {"model": "a", "prompt": "Merge the outputs."}}}


@pytest.fixture(scope="module")
def _executing(mock_a, mock_b, mock_c, planner, bad_planner, tmp_path_factory):
    """a, b and c answer their own canned text, p plans PLAN, q a plan naming a model outside its modelRefs."""
    all_mocks = {"a": mock_a, "b": mock_b, "c": mock_c, "p": planner, "q": bad_planner}
    abc = refs("abc")
    decisions = {
        "auto": (abc, {"type": "ratings"}),
        "ratings-one-at-a-time": (abc, {"type": "ratings", "ratings": {"max_concurrent": 1}}),
        "ratings-max-calls": (abc, {"type": "ratings", "budget": {"max_calls": 2}, "ratings": {"max_concurrent": 1}}),
        "remom": (abc, {"type": "remom", "remom": {"breadth_schedule": [3], "model_distribution": "round_robin",
                                                   "synthesis_model": "b"}}),
        "fusion-no-analysis": (refs("ab"), {"type": "fusion", "fusion": {"analysis_mode": "none"}}),
        "fusion": (refs("ab"), {"type": "fusion"}),
        "workflow": (abc, ROLES),
        "dynamic": (refs("pab"), {"type": "workflows", "workflows": {"mode": "dynamic", "planner": {"model": "p"}}}),
        "plan-skip": (refs("qa"), {"type": "workflows", "on_error": "skip", "workflows": {"mode": "dynamic"}}),
        "plan-fail": (refs("qa"), {"type": "workflows", "on_error": "fail", "workflows": {"mode": "dynamic"}}),
    }
    glob = {**DEBUG, "plugins": [{"type": "router_replay", "configuration": {}}]}
    with shared_router(tmp_path_factory, priced(all_mocks, "abcpq"), decisions, glob) as proc:
        yield proc


@pytest.fixture
def mocks(mock_a, mock_b, mock_c):
    fresh(mock_a, mock_b, mock_c)
    return {"a": mock_a, "b": mock_b, "c": mock_c}


@pytest.fixture
def executing(_executing, mocks, planner, bad_planner):
    fresh(planner, bad_planner)
    return _executing


def chat(proc, stream: bool, name: str = "vsr/auto") -> tuple[dict, list[str], dict]:
    """(headers, the text of each choice, the raw final document or usage chunk) through the OpenAI SDK."""
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model=name, messages=ASK, stream=True, extra_headers={"x-vsr-debug": "1"}) as resp:
            chunks = list(resp.parse())
            texts: dict[int, str] = {}
            for c in chunks:
                for choice in c.choices:
                    texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            return resp.headers, [texts[i] for i in sorted(texts)], chunks[-1].model_dump()
    raw = client.chat.completions.with_raw_response.create(model=name, messages=ASK,
                                                            extra_headers={"x-vsr-debug": "1"})
    done = raw.parse()
    return raw.headers, [c.message.content for c in done.choices], done.model_dump()


def assert_cost(headers, stream: bool, spent: float) -> None:
    """x-vsr-cost on a whole answer; none on a streamed one (spec 5.10: its head leaves before its cost is known)."""
    if stream:
        assert "x-vsr-cost" not in headers
    else:
        assert float(headers["x-vsr-cost"]) == pytest.approx(spent, rel=1e-9)


# --- ratings ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_ratings_calls_every_candidate_and_returns_one_choice_per_model(executing, mocks, stream):
    headers, texts, doc = chat(executing, stream)
    assert texts == [TEXT["a"], TEXT["b"], TEXT["c"]]
    assert [stats(m)["requests"] for m in mocks.values()] == [1, 1, 1]
    # Each model was asked the client's own turn.
    assert all(last_user_turn(m) == "Say hello" for m in mocks.values())
    assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "a")
    assert_cost(headers, stream, hand_cost(*mocks.values()))
    assert doc["usage"]["completion_tokens"] == sum(stats(m)["usage"]["output_tokens"] for m in mocks.values())
    assert 'algorithm="ratings"' in headers["x-vsr-trace"]


@pytest.mark.parametrize("stream", [False, True])
def test_ratings_on_the_messages_api_answers_with_the_first_choice(executing, mocks, stream):
    # vsr/ratings-one-at-a-time: ratings with max_concurrent 1
    client = anthropic.Anthropic(base_url=executing.url, api_key="k", max_retries=0)
    if stream:
        with client.messages.stream(model="vsr/ratings-one-at-a-time", max_tokens=64, messages=ASK) as events:
            text = events.get_final_text()
    else:
        text = client.messages.create(model="vsr/ratings-one-at-a-time", max_tokens=64, messages=ASK).content[0].text
    assert text == TEXT["a"]
    assert [stats(m)["requests"] for m in mocks.values()] == [1, 1, 1]


@pytest.fixture(scope="module")
def _b_failing(mock_a, failing_b, mock_c, tmp_path_factory):
    """b answers every call 500; a and c answer."""
    all_mocks = {"a": mock_a, "b": failing_b, "c": mock_c}
    decisions = {"auto": (refs("abc"), {"type": "ratings", "on_error": "skip"}),
                 "ratings-fail": (refs("abc"), {"type": "ratings", "on_error": "fail"}),
                 "workflow": (refs("ab"), {"type": "workflows", "workflows": {
                     "roles": [{"name": "plan", "models": ["a"]}, {"name": "solve", "models": ["b"]}]}})}
    with shared_router(tmp_path_factory, priced(all_mocks, "abc"), decisions, DEBUG) as proc:
        yield proc


@pytest.fixture
def b_failing(_b_failing, mock_a, failing_b, mock_c):
    fresh(mock_a, failing_b, mock_c)
    return _b_failing


@pytest.mark.parametrize(("on_error", "status"), [("skip", 200), ("fail", 502)])
def test_a_failing_model_is_skipped_or_fails_the_ratings(b_failing, on_error, status):
    name = "vsr/auto" if on_error == "skip" else "vsr/ratings-fail"     # ratings with on_error skip, fail
    r = httpx.post(f"{b_failing.url}/v1/chat/completions", json={"model": name, "messages": ASK})
    assert r.status_code == status, r.text
    if status == 200:
        assert [c["message"]["content"] for c in r.json()["choices"]] == [TEXT["a"], TEXT["c"]]
        assert [c["model"] for c in r.json()["choices"]] == ["a", "c"]
    else:
        assert r.json()["error"]["code"] == "looper_calls_failed"
        assert "b failed" in r.json()["error"]["message"]


def test_max_calls_bounds_the_ratings(executing, mocks):
    r = httpx.post(f"{executing.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                   json={"model": "vsr/ratings-max-calls", "messages": ASK})
    assert r.status_code == 200
    answered = [c["model"] for c in r.json()["choices"]]
    (left,) = set("abc") - set(answered)        # which two go first is the scheduler's; always two of three
    assert answered == sorted(answered) and len(answered) == 2     # choices keep the modelRefs order
    assert [c["message"]["content"] for c in r.json()["choices"]] == [TEXT[n] for n in answered]
    assert stats(mocks[left])["requests"] == 0
    assert f'"{left}: not called, max_calls (2) spent"' in r.headers["x-vsr-trace"]


# --- remom --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_remom_runs_its_breadth_schedule_then_one_synthesis_reading_the_round_before(executing, mocks, stream):
    # vsr/remom: breadth_schedule [3], round_robin, synthesis by b
    headers, texts, doc = chat(executing, stream, "vsr/remom")
    # Round 1: a, b and c each answered the request; the final round: b alone, reading all three answers.
    assert [stats(m)["requests"] for m in mocks.values()] == [1, 2, 1]
    assert last_user_turn(mocks["a"]) == "Say hello"
    final_turn = last_user_turn(mocks["b"])
    assert final_turn.startswith("You are given a problem and a list of reference responses.")
    assert "Original Problem:\nSay hello" in final_turn
    assert all(f"({n}):\n{TEXT[n]}" in final_turn for n in "abc")
    assert texts == [TEXT["b"]]
    assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "b")
    assert_cost(headers, stream, hand_cost(*mocks.values()))
    rounds = doc["looper"]["rounds"]
    assert [(r["round"], r["breadth"], len(r["responses"])) for r in rounds] == [(1, 3, 3), (2, 1, 1)]


def test_remom_weighted_distribution_and_a_failed_round_falls_back_to_the_previous(tmp_path, mocks):
    alg = {"type": "remom", "remom": {"breadth_schedule": [4, 2], "model_distribution": "weighted",
                                      "synthesis_model": "c"}}
    models = [{**model(n, f"{mocks[n].url}/v1"), "pricing": PRICE} for n in "abc"]
    doc = config(models, [{"name": "main", "algorithm": alg, "modelRefs": [
        {"model": "a", "weight": 3}, {"model": "b", "weight": 1}, {"model": "c", "weight": 0}]}])
    with configured(mocks["c"], fail_rate=1, fail_status=500), router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": ASK})
        assert r.status_code == 200, r.text
        # 4 calls by weight 3:1:0, then 2, then the synthesis by c, which fails: round 2's longest answer stands.
        # Round 2's two calls: a's share 1.5 and b's 0.5, the larger remainder first (a's, listed first).
        assert (stats(mocks["a"])["requests"], stats(mocks["b"])["requests"]) == (3 + 2, 1)
        assert stats(mocks["c"])["requests"] == 1
        assert r.json()["choices"][0]["message"]["content"] in (TEXT["a"], TEXT["b"])
        assert [x["round"] for x in r.json()["looper"]["rounds"]] == [1, 2]


# --- fusion -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def _fusing(mock_a, mock_b, judge, tmp_path_factory):
    """a and b answer their canned text; the judge (c) its analysis."""
    all_mocks = {"a": mock_a, "b": mock_b, "c": judge}
    alg = {"type": "fusion", "fusion": {"model": "c", "analysis_models": ["a", "b"]}}
    with shared_router(tmp_path_factory, priced(all_mocks, "abc"), {"auto": (refs("abc"), alg)}, DEBUG) as proc:
        yield proc


@pytest.mark.parametrize("stream", [False, True])
def test_fusion_panel_then_the_judges_analysis_then_its_synthesis(_fusing, mock_a, mock_b, judge, stream):
    a, b = mock_a, mock_b
    fresh(a, b, judge)
    headers, texts, doc = chat(_fusing, stream)
    assert [stats(m)["requests"] for m in (a, b, judge)] == [1, 1, 2]     # the judge: analysis, synthesis
    assert last_user_turn(a) == "Say hello" and last_user_turn(b) == "Say hello"
    final_turn = last_user_turn(judge)
    assert final_turn.startswith("You are the Fusion calling model.")
    assert f"Response 1 (a):\n{TEXT['a']}" in final_turn and f"Response 2 (b):\n{TEXT['b']}" in final_turn
    assert '"consensus": [\n    "both greet"\n  ]' in final_turn      # the parsed analysis reached it
    assert texts == [ANALYSIS]
    assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "c")
    ext = doc["looper"]
    assert ext["judge_model"] == "c" and ext["analysis"] == {"consensus": ["both greet"], "contradictions": []}
    assert [x["model"] for x in ext["responses"]] == ["a", "b"]
    assert_cost(headers, stream, hand_cost(a, b, judge))


@pytest.mark.parametrize("stream", [False, True])
def test_fusion_without_analysis_asks_the_judge_once_on_the_responses_api(executing, mocks, stream):
    # vsr/fusion-no-analysis: fusion over a and b, analysis_mode none
    client = openai.OpenAI(base_url=f"{executing.url}/v1", api_key="k", max_retries=0)
    if stream:
        with client.responses.stream(model="vsr/fusion-no-analysis", input="Say hello") as events:
            text = events.get_final_response().output_text
    else:
        text = client.responses.create(model="vsr/fusion-no-analysis", input="Say hello").output_text
    assert text == TEXT["a"]                               # the judge defaults to the first panel model
    assert (stats(mocks["a"])["requests"], stats(mocks["b"])["requests"]) == (2, 1)
    assert "No structured analysis is available" in last_user_turn(mocks["a"])


# --- workflows ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_workflow_roles_run_in_order_reading_what_their_access_list_allows(executing, mocks, stream):
    # vsr/workflow: ROLES (plan by a, solve by b, verify by c reading plan only; the final by a)
    headers, texts, doc = chat(executing, stream, "vsr/workflow")
    assert [stats(m)["requests"] for m in mocks.values()] == [2, 1, 1]
    solve = last_user_turn(mocks["b"])
    assert "You are the solve" in solve and "Your instruction: Solve it." in solve
    assert f"[plan:0:a] (plan):\n{TEXT['a']}" in solve
    verify = last_user_turn(mocks["c"])
    assert f"[plan:0:a] (plan):\n{TEXT['a']}" in verify and TEXT["b"] not in verify    # its access list
    final = last_user_turn(mocks["a"])
    assert final.startswith("Merge the outputs.")
    assert all(TEXT[n] in final for n in "abc")
    assert texts == [TEXT["a"]]
    assert [s["role"] for s in doc["looper"]["steps"]] == ["plan", "solve", "verify"]
    assert doc["looper"]["steps"][1]["responses"][0]["agent"] == "solve:0:b"
    assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "a")


def test_a_workflow_role_none_of_whose_models_answer_fails_clearly(b_failing):
    # vsr/workflow: roles plan by a, solve by b (which fails)
    r = httpx.post(f"{b_failing.url}/v1/chat/completions", json={"model": "vsr/workflow", "messages": ASK})
    assert r.status_code == 502
    assert r.json()["error"]["code"] == "looper_calls_failed"
    assert "no call of the workflow's solve role answered" in r.json()["error"]["message"]


def test_a_dynamic_workflow_runs_the_plan_its_planner_wrote(executing, mocks, planner):
    # vsr/dynamic: workflows over p, a, b, planned by p (it answers PLAN)
    a, b = mocks["a"], mocks["b"]
    headers, texts, doc = chat(executing, False, "vsr/dynamic")
    assert [stats(m)["requests"] for m in (planner, a, b)] == [1, 1, 2]     # plan; draft; review, final
    assert "only these models: p, a, b" in last_user_turn(planner)
    assert last_user_turn(a).startswith("You are the draft") and "Your instruction: Draft it." in \
        last_user_turn(a)
    final = last_user_turn(b)
    assert final.startswith("Merge.") and f"[draft:0:a] (draft):\n{TEXT['a']}" in final
    assert texts == [TEXT["b"]] and headers["x-vsr-selected-model"] == "b"
    assert doc["looper"]["plan"] == {"planner": "p", "steps": ["draft", "review"], "fallback": False}


@pytest.mark.parametrize(("on_error", "status"), [("skip", 200), ("fail", 502)])
def test_a_plan_outside_the_modelrefs_falls_back_or_fails(executing, mocks, bad_planner, on_error, status):
    # vsr/plan-<on_error>: dynamic workflows over q (it answers BAD_PLAN, naming ghost) and a
    planner, a = bad_planner, mocks["a"]
    r = httpx.post(f"{executing.url}/v1/chat/completions", json={"model": f"vsr/plan-{on_error}", "messages": ASK})
    assert r.status_code == status, r.text
    if status == 502:
        assert "step escape names ghost, outside the decision's modelRefs" in r.json()["error"]["message"]
        assert stats(a)["requests"] == 0
    else:
        plan = r.json()["looper"]["plan"]
        assert (plan["steps"], plan["fallback"]) == (["fallback_solve"], True)
        # The planner (the first modelRef) planned, then both answered the fallback step; it merged.
        assert (stats(planner)["requests"], stats(a)["requests"]) == (3, 1)


def test_the_replay_record_keeps_every_executor_call_and_their_cost(executing, mocks):
    # vsr/fusion: fusion over a and b, every default
    proc = executing
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/fusion", "messages": ASK})
    assert r.status_code == 200
    rid = r.headers["x-vsr-replay-id"]
    record = wait_for_value(lambda: (lambda x: x.json() if x.status_code == 200 and x.json().get("status")
                                     else None)(httpx.get(f"{proc.url}/api/v1/replay/{rid}")), "the record")
    assert record["algorithm"] == "fusion" and record["response_path"] == "looper"
    # The panel (a, b), then the judge a twice: its analysis and its synthesis.
    assert sorted(a["model"] for a in record["attempts"]) == ["a", "a", "a", "b"]
    assert record["cost"] == pytest.approx(hand_cost(mocks["a"], mocks["b"]), rel=1e-9)
