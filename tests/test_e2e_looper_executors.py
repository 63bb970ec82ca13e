"""The executors that write an answer of their own (spec 5.6; behaviour as the public vLLM Semantic Router defines
it): ratings, remom, fusion and workflows, over a real router and mock upstreams (one per model, each with its own
canned answer), with the official SDKs. Each test shows what the executor called, with what, and what it returned."""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, wait_for_value, write_config

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


@pytest.fixture
def mocks():
    with mock_upstream("--content", TEXT["a"]) as a, mock_upstream("--content", TEXT["b"]) as b, \
            mock_upstream("--content", TEXT["c"]) as c:
        yield {"a": a, "b": b, "c": c}


def start(tmp_path, mocks, algorithm: dict, refs=("a", "b", "c")):
    models = [{**model(n, f"{mocks[n].url}/v1"), "pricing": PRICE} for n in refs]
    doc = config(models, [{"name": "main", "modelRefs": [{"model": n} for n in refs], "algorithm": algorithm}])
    doc["global"] = {"router": {"headers": {"debug": "any"}}}
    return router(write_config(doc, str(tmp_path)))


def chat(proc, stream: bool) -> tuple[dict, list[str], dict]:
    """(headers, the text of each choice, the raw final document or usage chunk) through the OpenAI SDK."""
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model="vsr/auto", messages=ASK, stream=True, extra_headers={"x-vsr-debug": "1"}) as resp:
            chunks = list(resp.parse())
            texts: dict[int, str] = {}
            for c in chunks:
                for choice in c.choices:
                    texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            return resp.headers, [texts[i] for i in sorted(texts)], chunks[-1].model_dump()
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=ASK,
                                                            extra_headers={"x-vsr-debug": "1"})
    done = raw.parse()
    return raw.headers, [c.message.content for c in done.choices], done.model_dump()


# --- ratings ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_ratings_calls_every_candidate_and_returns_one_choice_per_model(tmp_path, mocks, stream):
    with start(tmp_path, mocks, {"type": "ratings"}) as proc:
        headers, texts, doc = chat(proc, stream)
        assert texts == [TEXT["a"], TEXT["b"], TEXT["c"]]
        assert [stats(m)["requests"] for m in mocks.values()] == [1, 1, 1]
        # Each model was asked the client's own turn.
        assert all(last_user_turn(m) == "Say hello" for m in mocks.values())
        assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "a")
        assert float(headers["x-vsr-cost"]) == pytest.approx(hand_cost(*mocks.values()), rel=1e-9)
        assert doc["usage"]["completion_tokens"] == sum(stats(m)["usage"]["output_tokens"] for m in mocks.values())
        assert 'algorithm="ratings"' in headers["x-vsr-trace"]


@pytest.mark.parametrize("stream", [False, True])
def test_ratings_on_the_messages_api_answers_with_the_first_choice(tmp_path, mocks, stream):
    with start(tmp_path, mocks, {"type": "ratings", "ratings": {"max_concurrent": 1}}) as proc:
        client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
        if stream:
            with client.messages.stream(model="vsr/auto", max_tokens=64, messages=ASK) as events:
                text = events.get_final_text()
        else:
            text = client.messages.create(model="vsr/auto", max_tokens=64, messages=ASK).content[0].text
        assert text == TEXT["a"]
        assert [stats(m)["requests"] for m in mocks.values()] == [1, 1, 1]


@pytest.mark.parametrize(("on_error", "status"), [("skip", 200), ("fail", 502)])
def test_a_failing_model_is_skipped_or_fails_the_ratings(tmp_path, mocks, on_error, status):
    httpx.post(f"{mocks['b'].url}/_mock/config", json={"fail_rate": 1, "fail_status": 500}).raise_for_status()
    with start(tmp_path, mocks, {"type": "ratings", "on_error": on_error}) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": ASK})
        assert r.status_code == status, r.text
        if status == 200:
            assert [c["message"]["content"] for c in r.json()["choices"]] == [TEXT["a"], TEXT["c"]]
            assert [c["model"] for c in r.json()["choices"]] == ["a", "c"]
        else:
            assert r.json()["error"]["code"] == "looper_calls_failed"
            assert "b failed" in r.json()["error"]["message"]


def test_max_calls_bounds_the_ratings(tmp_path, mocks):
    with start(tmp_path, mocks, {"type": "ratings", "budget": {"max_calls": 2}, "ratings": {"max_concurrent": 1}}) \
            as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                       json={"model": "vsr/auto", "messages": ASK})
        assert r.status_code == 200
        answered = [c["model"] for c in r.json()["choices"]]
        (left,) = set("abc") - set(answered)        # which two go first is the scheduler's; always two of three
        assert answered == sorted(answered) and len(answered) == 2     # choices keep the modelRefs order
        assert [c["message"]["content"] for c in r.json()["choices"]] == [TEXT[n] for n in answered]
        assert stats(mocks[left])["requests"] == 0
        assert f'"{left}: not called, max_calls (2) spent"' in r.headers["x-vsr-trace"]


# --- remom --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_remom_runs_its_breadth_schedule_then_one_synthesis_reading_the_round_before(tmp_path, mocks, stream):
    alg = {"type": "remom", "remom": {"breadth_schedule": [3], "model_distribution": "round_robin",
                                      "synthesis_model": "b"}}
    with start(tmp_path, mocks, alg) as proc:
        headers, texts, doc = chat(proc, stream)
        # Round 1: a, b and c each answered the request; the final round: b alone, reading all three answers.
        assert [stats(m)["requests"] for m in mocks.values()] == [1, 2, 1]
        assert last_user_turn(mocks["a"]) == "Say hello"
        final_turn = last_user_turn(mocks["b"])
        assert final_turn.startswith("You are given a problem and a list of reference responses.")
        assert "Original Problem:\nSay hello" in final_turn
        assert all(f"({n}):\n{TEXT[n]}" in final_turn for n in "abc")
        assert texts == [TEXT["b"]]
        assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "b")
        assert float(headers["x-vsr-cost"]) == pytest.approx(hand_cost(*mocks.values()), rel=1e-9)
        rounds = doc["looper"]["rounds"]
        assert [(r["round"], r["breadth"], len(r["responses"])) for r in rounds] == [(1, 3, 3), (2, 1, 1)]


def test_remom_weighted_distribution_and_a_failed_round_falls_back_to_the_previous(tmp_path, mocks):
    alg = {"type": "remom", "remom": {"breadth_schedule": [4, 2], "model_distribution": "weighted",
                                      "synthesis_model": "c"}}
    httpx.post(f"{mocks['c'].url}/_mock/config", json={"fail_rate": 1, "fail_status": 500}).raise_for_status()
    models = [{**model(n, f"{mocks[n].url}/v1"), "pricing": PRICE} for n in "abc"]
    doc = config(models, [{"name": "main", "algorithm": alg, "modelRefs": [
        {"model": "a", "weight": 3}, {"model": "b", "weight": 1}, {"model": "c", "weight": 0}]}])
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": ASK})
        assert r.status_code == 200, r.text
        # 4 calls by weight 3:1:0, then 2, then the synthesis by c, which fails: round 2's longest answer stands.
        # Round 2's two calls: a's share 1.5 and b's 0.5, the larger remainder first (a's, listed first).
        assert (stats(mocks["a"])["requests"], stats(mocks["b"])["requests"]) == (3 + 2, 1)
        assert stats(mocks["c"])["requests"] == 1
        assert r.json()["choices"][0]["message"]["content"] in (TEXT["a"], TEXT["b"])
        assert [x["round"] for x in r.json()["looper"]["rounds"]] == [1, 2]


# --- fusion -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_fusion_panel_then_the_judges_analysis_then_its_synthesis(tmp_path, stream):
    analysis = '{"consensus": ["both greet"], "contradictions": []}'
    with mock_upstream("--content", TEXT["a"]) as a, mock_upstream("--content", TEXT["b"]) as b, \
            mock_upstream("--content", analysis) as judge:
        mocks = {"a": a, "b": b, "c": judge}
        alg = {"type": "fusion", "fusion": {"model": "c", "analysis_models": ["a", "b"]}}
        with start(tmp_path, mocks, alg) as proc:
            headers, texts, doc = chat(proc, stream)
            assert [stats(m)["requests"] for m in (a, b, judge)] == [1, 1, 2]     # the judge: analysis, synthesis
            assert last_user_turn(a) == "Say hello" and last_user_turn(b) == "Say hello"
            final_turn = last_user_turn(judge)
            assert final_turn.startswith("You are the Fusion calling model.")
            assert f"Response 1 (a):\n{TEXT['a']}" in final_turn and f"Response 2 (b):\n{TEXT['b']}" in final_turn
            assert '"consensus": [\n    "both greet"\n  ]' in final_turn      # the parsed analysis reached it
            assert texts == [analysis]
            assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == ("looper", "c")
            ext = doc["looper"]
            assert ext["judge_model"] == "c" and ext["analysis"] == {"consensus": ["both greet"], "contradictions": []}
            assert [x["model"] for x in ext["responses"]] == ["a", "b"]
            assert float(headers["x-vsr-cost"]) == pytest.approx(hand_cost(a, b, judge), rel=1e-9)


@pytest.mark.parametrize("stream", [False, True])
def test_fusion_without_analysis_asks_the_judge_once_on_the_responses_api(tmp_path, mocks, stream):
    alg = {"type": "fusion", "fusion": {"analysis_mode": "none"}}
    with start(tmp_path, mocks, alg, refs=("a", "b")) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
        if stream:
            with client.responses.stream(model="vsr/auto", input="Say hello") as events:
                text = events.get_final_response().output_text
        else:
            text = client.responses.create(model="vsr/auto", input="Say hello").output_text
        assert text == TEXT["a"]                               # the judge defaults to the first panel model
        assert (stats(mocks["a"])["requests"], stats(mocks["b"])["requests"]) == (2, 1)
        assert "No structured analysis is available" in last_user_turn(mocks["a"])


# --- workflows ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_workflow_roles_run_in_order_reading_what_their_access_list_allows(tmp_path, mocks, stream):
    alg = {"type": "workflows", "workflows": {
        "roles": [{"name": "plan", "models": ["a"], "prompt": "Plan the answer."},
                  {"name": "solve", "models": ["b"], "prompt": "Solve it."},
                  {"name": "verify", "models": ["c"], "prompt": "Check the plan.", "access_list": ["plan"]}],
        "final": {"model": "a", "prompt": "Merge the outputs."}}}
    with start(tmp_path, mocks, alg) as proc:
        headers, texts, doc = chat(proc, stream)
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


def test_a_workflow_role_none_of_whose_models_answer_fails_clearly(tmp_path, mocks):
    httpx.post(f"{mocks['b'].url}/_mock/config", json={"fail_rate": 1, "fail_status": 500}).raise_for_status()
    alg = {"type": "workflows", "workflows": {"roles": [{"name": "plan", "models": ["a"]},
                                                        {"name": "solve", "models": ["b"]}]}}
    with start(tmp_path, mocks, alg, refs=("a", "b")) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": ASK})
        assert r.status_code == 502
        assert r.json()["error"]["code"] == "looper_calls_failed"
        assert "no call of the workflow's solve role answered" in r.json()["error"]["message"]


PLAN = json.dumps({"steps": [{"id": "draft", "models": ["a"], "prompt": "Draft it."},
                             {"id": "review", "models": ["b"], "prompt": "Review the draft.", "access_list": ["draft"]}],
                   "final": {"model": "b", "prompt": "Merge."}})


def test_a_dynamic_workflow_runs_the_plan_its_planner_wrote(tmp_path):
    with mock_upstream("--content", PLAN) as planner, mock_upstream("--content", TEXT["a"]) as a, \
            mock_upstream("--content", TEXT["b"]) as b:
        mocks = {"p": planner, "a": a, "b": b}
        alg = {"type": "workflows", "workflows": {"mode": "dynamic", "planner": {"model": "p"}}}
        with start(tmp_path, mocks, alg, refs=("p", "a", "b")) as proc:
            headers, texts, doc = chat(proc, False)
            assert [stats(m)["requests"] for m in (planner, a, b)] == [1, 1, 2]     # plan; draft; review, final
            assert "only these models: p, a, b" in last_user_turn(planner)
            assert last_user_turn(a).startswith("You are the draft") and "Your instruction: Draft it." in \
                last_user_turn(a)
            final = last_user_turn(b)
            assert final.startswith("Merge.") and f"[draft:0:a] (draft):\n{TEXT['a']}" in final
            assert texts == [TEXT["b"]] and headers["x-vsr-selected-model"] == "b"
            assert doc["looper"]["plan"] == {"planner": "p", "steps": ["draft", "review"], "fallback": False}


@pytest.mark.parametrize(("on_error", "status"), [("skip", 200), ("fail", 502)])
def test_a_plan_outside_the_modelrefs_falls_back_or_fails(tmp_path, on_error, status):
    bad = json.dumps({"steps": [{"id": "escape", "models": ["ghost"], "prompt": "use a forbidden model"}]})
    with mock_upstream("--content", bad) as planner, mock_upstream("--content", TEXT["a"]) as a:
        alg = {"type": "workflows", "on_error": on_error, "workflows": {"mode": "dynamic"}}
        with start(tmp_path, {"p": planner, "a": a}, alg, refs=("p", "a")) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": ASK})
            assert r.status_code == status, r.text
            if status == 502:
                assert "step escape names ghost, outside the decision's modelRefs" in r.json()["error"]["message"]
                assert stats(a)["requests"] == 0
            else:
                plan = r.json()["looper"]["plan"]
                assert (plan["steps"], plan["fallback"]) == (["fallback_solve"], True)
                # The planner (the first modelRef) planned, then both answered the fallback step; it merged.
                assert (stats(planner)["requests"], stats(a)["requests"]) == (3, 1)


def test_the_replay_record_keeps_every_executor_call_and_their_cost(tmp_path, mocks):
    models = [{**model(n, f"{mocks[n].url}/v1"), "pricing": PRICE} for n in "ab"]
    doc = config(models, [{"name": "main", "modelRefs": [{"model": "a"}, {"model": "b"}],
                           "algorithm": {"type": "fusion"}}])
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {}}]}
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": ASK})
        assert r.status_code == 200
        rid = r.headers["x-vsr-replay-id"]
        record = wait_for_value(lambda: (lambda x: x.json() if x.status_code == 200 and x.json().get("status")
                                         else None)(httpx.get(f"{proc.url}/api/v1/replay/{rid}")), "the record")
        assert record["algorithm"] == "fusion" and record["response_path"] == "looper"
        # The panel (a, b), then the judge a twice: its analysis and its synthesis.
        assert sorted(a["model"] for a in record["attempts"]) == ["a", "a", "a", "b"]
        assert record["cost"] == pytest.approx(hand_cost(mocks["a"], mocks["b"]), rel=1e-9)
