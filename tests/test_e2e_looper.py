"""The Looper over real processes (spec 5.6): selectors spread and steer load, escalate stops at the first
accepted answer under its budget, and every answer with usage carries its cost. Clients are the official SDKs."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, wait_for_value, write_config

CHAT = [{"role": "user", "content": "Say hello"}]
CHEAP = {"input": 0.5, "output": 1.5}           # per million tokens
DEAR = {"input": 3.0, "output": 15.0}


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


def priced(name: str, mock, pricing: dict, **extra) -> dict:
    return {**model(name, f"{mock.url}/v1", upstream_name=f"up-{name}", **extra), "pricing": pricing}


def start(tmp_path, models: list[dict], refs: list[dict], algorithm: dict | None = None):
    decision: dict = {"name": "main", "modelRefs": refs}
    if algorithm is not None:
        decision["algorithm"] = algorithm
    return router(write_config(config(models, [decision]), str(tmp_path)))


def hand_cost(mock, pricing: dict) -> float:
    """What the mock's answers cost by the mock's own count of the tokens it reported."""
    u = stats(mock)["usage"]
    return (u["input_tokens"] * pricing["input"] + u["output_tokens"] * pricing["output"]) / 1e6


def cost_metric(proc, decision: str, name: str) -> float:
    prefix = f'vsr_cost_total{{decision="{decision}",model="{name}",currency="USD"}} '
    for line in httpx.get(f"{proc.url}/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0.0


def chat(proc) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)


# --- cost ------------------------------------------------------------------------------------------------


def test_cost_header_equals_the_hand_computed_cost_whole(tmp_path):
    with mock_upstream() as up, start(tmp_path, [priced("m", up, CHEAP)], [{"model": "m"}]) as proc:
        raw = chat(proc).chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT)
        raw.parse()
        assert raw.headers["x-vsr-cost-currency"] == "USD"
        assert float(raw.headers["x-vsr-cost"]) == pytest.approx(hand_cost(up, CHEAP), rel=1e-9)
        assert cost_metric(proc, "main", "m") == pytest.approx(hand_cost(up, CHEAP), rel=1e-9)


def test_streamed_cost_reaches_the_metric_from_the_final_usage_chunk(tmp_path):
    with mock_upstream() as up, start(tmp_path, [priced("m", up, CHEAP)], [{"model": "m"}]) as proc:
        with chat(proc).chat.completions.with_streaming_response.create(
                model="vsr/auto", messages=CHAT, stream=True, stream_options={"include_usage": True}) as resp:
            # A stream's headers leave before its usage: the cost is not among them (spec 6.1).
            assert "x-vsr-cost" not in resp.headers
            chunks = list(resp.parse())
        assert chunks[-1].usage is not None
        expected = hand_cost(up, CHEAP)
        assert expected > 0
        assert wait_for_value(lambda: cost_metric(proc, "main", "m") or None, "the cost metric") == \
            pytest.approx(expected, rel=1e-9)


def test_an_unpriced_model_has_no_cost_header(tmp_path):
    with mock_upstream() as up, start(tmp_path, [model("m", f"{up.url}/v1")], [{"model": "m"}]) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200 and "x-vsr-cost" not in r.headers


# --- random ----------------------------------------------------------------------------------------------


def test_random_spreads_by_weight_chi_squared(tmp_path):
    """600 requests over weights 3:1; χ² against the expected 450:150 stays under 10.83 (p = 0.001, 1 df). A wrong
    spread shows at this size (1:1 would give χ² = 200)."""
    with mock_upstream() as up:
        models = [model("a", f"{up.url}/v1"), model("b", f"{up.url}/v1")]
        refs = [{"model": "a", "weight": 3}, {"model": "b", "weight": 1}]
        with start(tmp_path, models, refs, {"type": "random"}) as proc, httpx.Client() as client:
            seen = {"a": 0, "b": 0}
            for _ in range(600):
                r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
                assert r.status_code == 200
                assert r.headers["x-vsr-response-path"] == "upstream"
                seen[r.headers["x-vsr-selected-model"]] += 1
    chi2 = (seen["a"] - 450) ** 2 / 450 + (seen["b"] - 150) ** 2 / 150
    assert chi2 < 10.83, seen


def test_random_with_a_zero_weight_never_picks_it_first_and_keeps_it_as_fallback(tmp_path):
    with mock_upstream("--fail-rate", "1") as bad, mock_upstream() as good:
        models = [model("a", f"{bad.url}/v1"), model("b", f"{good.url}/v1")]
        refs = [{"model": "a", "weight": 1}, {"model": "b", "weight": 0}]
        with start(tmp_path, models, refs, {"type": "random"}) as proc:
            for _ in range(5):
                r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
                assert r.status_code == 200
                assert (r.headers["x-vsr-selected-model"], r.headers["x-vsr-response-path"]) == ("b", "fallback")
            assert stats(bad)["requests"] == 5


# --- multi_factor ----------------------------------------------------------------------------------------


def test_multi_factor_prefers_the_cheaper_model_until_its_error_rate_rises(tmp_path):
    with mock_upstream() as cheap_up, mock_upstream() as dear_up:
        models = [priced("dear", dear_up, DEAR), priced("cheap", cheap_up, CHEAP)]
        refs = [{"model": "dear"}, {"model": "cheap"}]
        # Latency off: on a loaded box the two mocks' measured latencies differ by as much as their costs do.
        alg = {"type": "multi_factor", "multi_factor": {"weights": {"latency": 0}}}
        with start(tmp_path, models, refs, alg) as proc:
            def ask():
                r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
                assert r.status_code == 200, r.text
                return r.headers["x-vsr-selected-model"], r.headers["x-vsr-response-path"]

            assert [ask() for _ in range(3)] == [("cheap", "upstream")] * 3
            assert stats(dear_up)["requests"] == 0
            httpx.post(f"{cheap_up.url}/_mock/config", json={"fail_rate": 1}).raise_for_status()
            answers = [ask() for _ in range(8)]
            # Each failure falls back to the dear model, until the cheap one's error rate moves it first.
            assert answers[0] == ("dear", "fallback")
            assert answers[-1] == ("dear", "upstream")
            tried = stats(cheap_up)["requests"]
            ask()
            assert stats(cheap_up)["requests"] == tried


def test_multi_factor_session_affinity_keeps_a_session_on_its_model_within_the_bound(tmp_path):
    """b scores 0.03 below a, less than the 0.05 affinity: a session b served stays on b; others go to a."""
    with mock_upstream() as a_up, mock_upstream() as b_up:
        models = [priced("a", a_up, CHEAP), priced("b", b_up, CHEAP)]
        alg = {"type": "multi_factor", "multi_factor": {"weights": {"error_rate": 0, "latency": 0},
                                                        "quality": {"a": 0.5, "b": 0.47}}}
        with start(tmp_path, models, [{"model": "a"}, {"model": "b"}], alg) as proc:
            def ask(session: str | None = None):
                headers = {"x-vsr-session-id": session} if session else {}
                r = httpx.post(f"{proc.url}/v1/chat/completions", headers=headers,
                               json={"model": "vsr/auto", "messages": CHAT})
                assert r.status_code == 200, r.text
                return r.headers["x-vsr-selected-model"]

            assert ask("s1") == "a"
            httpx.post(f"{a_up.url}/_mock/config", json={"fail_rate": 1}).raise_for_status()
            assert ask("s2") == "b"           # a failed: b answered session s2
            httpx.post(f"{a_up.url}/_mock/config", json={"fail_rate": 0}).raise_for_status()
            assert [ask("s2"), ask("s1"), ask(), ask("s2")] == ["b", "a", "a", "b"]


# --- escalate --------------------------------------------------------------------------------------------

ESCALATE = {"type": "escalate", "escalate": {"accept": {"confidence": {"method": "avg_logprob", "gte": -0.5}}}}


@pytest.fixture
def unsure_and_sure():
    with mock_upstream("--logprob", "-2.0") as unsure, mock_upstream("--logprob", "-0.1") as sure:
        yield unsure, sure


def two(unsure, sure) -> list[dict]:
    return [priced("small", unsure, CHEAP), priced("large", sure, DEAR)]


REFS = [{"model": "small"}, {"model": "large"}]


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_goes_to_the_second_model_when_the_first_fails_the_check(tmp_path, unsure_and_sure, stream):
    unsure, sure = unsure_and_sure
    with start(tmp_path, two(unsure, sure), REFS, ESCALATE) as proc:
        client = chat(proc)
        if stream:
            with client.chat.completions.with_streaming_response.create(
                    model="vsr/auto", messages=CHAT, stream=True, stream_options={"include_usage": True}) as resp:
                headers = resp.headers
                text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
        else:
            raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT)
            headers, text = raw.headers, raw.parse().choices[0].message.content
        assert text == "Hello! This is a canned answer from the mock upstream."
        assert headers["x-vsr-selected-model"] == "large"
        assert headers["x-vsr-response-path"] == "looper"
        assert stats(unsure)["requests"] == 1 and stats(sure)["requests"] == 1
        # Held while judged, so even a stream carries the cost of both calls.
        assert float(headers["x-vsr-cost"]) == pytest.approx(hand_cost(unsure, CHEAP) + hand_cost(sure, DEAR),
                                                             rel=1e-9)


def test_escalate_calls_a_model_whose_backends_are_all_ejected_last(tmp_path):
    """The cheap model first, unless its only backend is out of the rotation: then the next model answers at
    once instead of after the ejected backend's failure on every request."""
    with mock_upstream("--fail-rate", "1", "--fail-status", "500") as broken, mock_upstream() as good:
        doc = config([priced("small", broken, CHEAP), priced("large", good, DEAR)],
                     [{"name": "main", "modelRefs": REFS, "algorithm": {"type": "escalate", "escalate": {
                         "accept": {"refusal": False}}}}])
        doc["global"] = {"router": {"upstream": {"outlier": {"consecutive_failures": 2, "base_ejection_ms": 60_000},
                                                 "retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            for _ in range(5):
                r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
                assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "large"
            assert stats(broken)["requests"] == 2          # the two failures that ejected it, then never again
            assert stats(good)["requests"] == 5


def test_escalate_stops_at_the_first_accepted_answer(tmp_path, unsure_and_sure):
    unsure, sure = unsure_and_sure
    refs = [{"model": "large"}, {"model": "small"}]    # the sure model first: it is accepted
    with start(tmp_path, two(unsure, sure), refs, ESCALATE) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "large"
        assert stats(sure)["requests"] == 1 and stats(unsure)["requests"] == 0


def test_escalate_order_cost_calls_the_cheaper_first(tmp_path, unsure_and_sure):
    unsure, sure = unsure_and_sure
    alg = {**ESCALATE, "escalate": {**ESCALATE["escalate"], "order": "cost"}}
    refs = [{"model": "large"}, {"model": "small"}]
    with start(tmp_path, [priced("small", sure, CHEAP), priced("large", unsure, DEAR)], refs, alg) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.headers["x-vsr-selected-model"] == "small"
        assert stats(unsure)["requests"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_refusal_false_on_the_messages_api(tmp_path, stream):
    alg = {"type": "escalate", "escalate": {"accept": {"refusal": False}}}
    with mock_upstream("--refusal", "I cannot help with that.") as refuser, mock_upstream() as helper:
        models = [priced("small", refuser, CHEAP), priced("large", helper, DEAR)]
        with start(tmp_path, models, REFS, alg) as proc:
            client = anthropic.Anthropic(base_url=proc.url, api_key="unused", max_retries=0)
            if stream:
                with client.messages.with_streaming_response.create(
                        model="vsr/auto", max_tokens=64, messages=CHAT, stream=True) as resp:
                    headers = resp.headers
                    text = "".join(e.delta.text for e in resp.parse()
                                   if e.type == "content_block_delta" and e.delta.type == "text_delta")
            else:
                raw = client.messages.with_raw_response.create(model="vsr/auto", max_tokens=64, messages=CHAT)
                headers, text = raw.headers, raw.parse().content[0].text
            assert text == "Hello! This is a canned answer from the mock upstream."
            assert headers["x-vsr-selected-model"] == "large"
            assert headers["x-vsr-response-path"] == "looper"
            assert stats(refuser)["requests"] == 1


def test_no_accepted_answer_returns_the_last_attempt_by_default(tmp_path):
    with mock_upstream("--logprob", "-2.0") as a, mock_upstream("--logprob", "-3.0") as b:
        with start(tmp_path, [priced("small", a, CHEAP), priced("large", b, DEAR)], REFS, ESCALATE) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
            assert r.status_code == 200
            assert (r.headers["x-vsr-selected-model"], r.headers["x-vsr-response-path"]) == ("large", "looper")


def test_no_accepted_answer_with_on_error_fail_is_a_clear_error(tmp_path):
    with mock_upstream("--logprob", "-2.0") as a, mock_upstream("--logprob", "-3.0") as b:
        alg = {**ESCALATE, "on_error": "fail"}
        with start(tmp_path, [priced("small", a, CHEAP), priced("large", b, DEAR)], REFS, alg) as proc:
            with pytest.raises(openai.APIStatusError) as info:
                chat(proc).chat.completions.create(model="vsr/auto", messages=CHAT)
            assert info.value.status_code == 502
            err = info.value.body
            assert err["code"] == "looper_no_accepted_answer"
            assert "small: avg_logprob=-2.000, rejected" in err["message"]
            assert "large: avg_logprob=-3.000, rejected" in err["message"]


@pytest.mark.parametrize(("on_error", "status"), [("fail", 504), ("last_attempt", 200)])
def test_max_calls_exhausted_follows_on_error(tmp_path, unsure_and_sure, on_error, status):
    unsure, sure = unsure_and_sure
    alg = {**ESCALATE, "budget": {"max_calls": 1}, "on_error": on_error}
    with start(tmp_path, two(unsure, sure), REFS, alg) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == status, r.text
        assert stats(sure)["requests"] == 0
        if status == 504:
            assert r.json()["error"]["code"] == "looper_budget_exhausted"
            assert "max_calls (1) spent" in r.json()["error"]["message"]
        else:
            assert r.headers["x-vsr-selected-model"] == "small"


def test_deadline_exhausted_cuts_the_call_and_fails(tmp_path):
    with mock_upstream("--logprob", "-2.0", "--latency-ms", "5000") as slow, mock_upstream("--logprob", "-0.1") as sure:
        alg = {**ESCALATE, "budget": {"deadline_ms": 300}, "on_error": "fail"}
        with start(tmp_path, two(slow, sure), REFS, alg) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT},
                           timeout=30)
            assert r.status_code == 504
            assert r.json()["error"]["code"] == "looper_budget_exhausted"
            assert "deadline (300 ms from arrival) passed" in r.json()["error"]["message"]
            assert stats(sure)["requests"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_the_replay_record_keeps_the_cost_the_algorithm_and_every_call(tmp_path, unsure_and_sure, stream):
    unsure, sure = unsure_and_sure
    doc = config(two(unsure, sure), [{"name": "main", "modelRefs": REFS, "algorithm": ESCALATE}])
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {}}]}
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions",
                       json={"model": "vsr/auto", "messages": CHAT, "stream": stream,
                             "stream_options": {"include_usage": True}} if stream else
                       {"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200
        rid = r.headers["x-vsr-replay-id"]
        record = wait_for_value(lambda: (lambda x: x.json() if x.status_code == 200 and x.json().get("status")
                                         else None)(httpx.get(f"{proc.url}/api/v1/replay/{rid}")), "the record")
        assert record["algorithm"] == "escalate" and record["response_path"] == "looper"
        assert [a["model"] for a in record["attempts"]] == ["small", "large"]
        assert record["cost"] == pytest.approx(hand_cost(unsure, CHEAP) + hand_cost(sure, DEAR), rel=1e-9)
        assert record["cost_currency"] == "USD"


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_on_the_responses_api(tmp_path, unsure_and_sure, stream):
    unsure, sure = unsure_and_sure
    with start(tmp_path, two(unsure, sure), REFS, ESCALATE) as proc:
        client = chat(proc)
        if stream:
            with client.responses.with_streaming_response.create(model="vsr/auto", input="Say hello",
                                                                stream=True) as resp:
                headers = resp.headers
                text = "".join(e.delta for e in resp.parse() if e.type == "response.output_text.delta")
        else:
            raw = client.responses.with_raw_response.create(model="vsr/auto", input="Say hello")
            headers, text = raw.headers, raw.parse().output_text
        assert text == "Hello! This is a canned answer from the mock upstream."
        assert (headers["x-vsr-selected-model"], headers["x-vsr-response-path"]) == ("large", "looper")
        assert stats(unsure)["requests"] == 1 and stats(sure)["requests"] == 1


def test_a_client_that_leaves_cancels_the_outstanding_call(tmp_path):
    with mock_upstream("--logprob", "-2.0", "--latency-ms", "30000") as slow, mock_upstream() as other:
        with start(tmp_path, two(slow, other), REFS, ESCALATE) as proc:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT},
                           timeout=httpx.Timeout(5, read=0.5))
            # The router closed its call to the slow model when the client left; the next model was never asked.
            wait_for_value(lambda: stats(slow)["cancelled"], "the slow model's call cancelled")
            assert stats(other)["requests"] == 0


def test_the_trace_names_the_algorithm_and_each_looper_call(tmp_path, unsure_and_sure):
    unsure, sure = unsure_and_sure
    doc = config(two(unsure, sure), [{"name": "main", "modelRefs": REFS, "algorithm": ESCALATE}])
    doc["global"] = {"router": {"headers": {"debug": "any"}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                       json={"model": "vsr/auto", "messages": CHAT})
        trace = r.headers["x-vsr-trace"]
        assert 'algorithm="escalate"' in trace
        assert 'looper=("small: avg_logprob=-2.000, rejected" "large: avg_logprob=-0.100, accepted")' in trace


# --- one wall-clock budget per turn ----------------------------------------------------------------------

RESCUE = {"type": "escalate", "escalate": {"accept": {"refusal": False}}}


@pytest.mark.parametrize("stream", [False, True])
def test_a_truncated_first_attempt_is_rescued_by_the_next(tmp_path, stream):
    with mock_upstream("--finish-reason", "length") as cut, mock_upstream() as whole:
        doc = config([priced("small", cut, CHEAP), priced("large", whole, DEAR)],
                     [{"name": "main", "modelRefs": REFS, "algorithm": RESCUE}])
        doc["global"] = {"router": {"headers": {"debug": "any"}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                           json={"model": "vsr/auto", "messages": CHAT, "stream": stream})
            assert r.status_code == 200
            assert r.headers["x-vsr-selected-model"] == "large"
            assert '"small: truncated, rejected"' in r.headers["x-vsr-trace"]
            assert stats(cut)["requests"] == 1


def test_the_thinking_attempt_gets_its_share_of_the_turn_then_the_rescue_answers(tmp_path):
    """20 s turn, 15 s reserve, a 1 s thinking cap: the slow first model is cut at its share, the rescue answers."""
    turn = {"reserve_ms": 15000, "thinking_cap_ms": 1000, "rescue_floor_ms": 100, "min_start_ms": 100}
    alg = {**RESCUE, "budget": {"deadline_ms": 20000, "turn": turn}}
    with mock_upstream("--latency-ms", "15000") as slow, mock_upstream() as fast:
        doc = config([priced("small", slow, CHEAP), priced("large", fast, DEAR)],
                     [{"name": "main", "modelRefs": REFS, "algorithm": alg}])
        doc["global"] = {"router": {"headers": {"debug": "any"}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                           json={"model": "vsr/auto", "messages": CHAT}, timeout=30)
            assert r.status_code == 200
            assert r.headers["x-vsr-selected-model"] == "large"
            assert '"small: cut at its share of the turn"' in r.headers["x-vsr-trace"]
            wait_for_value(lambda: stats(slow)["cancelled"], "the cut call closed")


def test_nothing_starts_with_under_min_start_left(tmp_path, unsure_and_sure):
    unsure, sure = unsure_and_sure
    alg = {**ESCALATE, "budget": {"deadline_ms": 1000, "turn": {}}, "on_error": "fail"}
    with start(tmp_path, two(unsure, sure), REFS, alg) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 504
        assert "under 5000 ms left in the turn" in r.json()["error"]["message"]
        assert stats(unsure)["requests"] == 0 and stats(sure)["requests"] == 0


def test_a_first_model_that_breaks_mid_stream_is_escalated_past(tmp_path):
    with mock_upstream("--fail-rate", "1", "--fail-mode", "midstream") as broken, mock_upstream() as whole:
        models = [priced("small", broken, CHEAP), priced("large", whole, DEAR)]
        with start(tmp_path, models, REFS, RESCUE) as proc:
            with chat(proc).chat.completions.with_streaming_response.create(
                    model="vsr/auto", messages=CHAT, stream=True) as resp:
                text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
                assert resp.headers["x-vsr-selected-model"] == "large"
            assert text == "Hello! This is a canned answer from the mock upstream."
            assert stats(broken)["failures_injected"] == 1


# --- confidence: hybrid and self_verify ---------------------------------------------------------------------


def test_hybrid_confidence_weighs_normalized_logprob_and_margin(tmp_path, unsure_and_sure):
    """The mock's runner-up is 1.0 below every token: margin 1 -> 1 - e^(-1/3) = 0.283; logprob -2.0 -> 0.333,
    -0.1 -> 0.967; at 0.5/0.5 the scores are 0.308 and 0.625 against gte 0.5."""
    unsure, sure = unsure_and_sure
    alg = {"type": "escalate", "escalate": {"accept": {"confidence": {"method": "hybrid", "gte": 0.5}}}}
    doc = config(two(unsure, sure), [{"name": "main", "modelRefs": REFS, "algorithm": alg}])
    doc["global"] = {"router": {"headers": {"debug": "any"}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                       json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "large"
        assert 'looper=("small: hybrid=0.308, rejected" "large: hybrid=0.625, accepted")' in r.headers["x-vsr-trace"]
        sent = stats(unsure)["last_request"]["body"]
        assert sent["logprobs"] is True and sent["top_logprobs"] >= 2


@pytest.mark.parametrize("stream", [False, True])
def test_self_verify_asks_the_model_to_rate_its_own_answer(tmp_path, stream):
    low, high = '{"confidence": 0.3, "reason": "unsure"}', '{"confidence": 0.9, "reason": "sure"}'
    alg = {"type": "escalate", "escalate": {"accept": {"confidence": {"method": "self_verify", "gte": 0.7}}}}
    with mock_upstream("--content", low) as small, mock_upstream("--content", high) as large:
        models = [priced("small", small, CHEAP), {**priced("large", large, DEAR), "api_format": "anthropic"}]
        doc = config(models, [{"name": "main", "modelRefs": REFS, "algorithm": alg}])
        doc["global"] = {"router": {"headers": {"debug": "any"}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"},
                           json={"model": "vsr/auto", "messages": CHAT, "stream": stream,
                                 **({"stream_options": {"include_usage": True}} if stream else {})})
            assert r.status_code == 200
            assert r.headers["x-vsr-selected-model"] == "large"
            assert '"small: self_verify=0.300, rejected" "large: self_verify=0.900, accepted"' \
                in r.headers["x-vsr-trace"]
            # Each model answered, then was asked (whole, no logprobs) to rate that answer.
            assert stats(small)["requests"] == 2 and stats(large)["requests"] == 2
            rating = stats(small)["last_request"]["body"]
            assert "logprobs" not in rating and not rating.get("stream")
            turn = rating["messages"][-1]["content"]
            assert turn.startswith("Rate how well an AI assistant answered a question.")
            assert f"Question: Say hello\n\nAnswer: {low}" in turn
            assert float(r.headers["x-vsr-cost"]) == pytest.approx(hand_cost(small, CHEAP) + hand_cost(large, DEAR),
                                                                   rel=1e-9)
