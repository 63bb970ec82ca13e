"""Every call the Looper makes, over real processes (spec 5.6, the budget "counts every call"): charged to the
caller's key once whether the request succeeds or fails, counted in max_calls (transport retries and ratings
included), booked under its own model, kept in the replay record; and what a failed or partial run answers.

The bench mocks play the providers (one per behaviour); clients are the official SDKs or httpx. The tests share
one router (each decision in a recipe of its own, reached by ``vsr/<name>``), except the charge tests, which
share one with client keys on, each reading its own key's token window in Redis."""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest
import redis

from .procs import redis_prefix, router, wait_for_value, wait_until, write_config
from .test_e2e_auth import REDIS_URL, sha
from .test_e2e_looper import DEBUG, fresh, shared_mock, shared_router, stats
from .test_e2e_looper_executors import priced, refs

ASK = [{"role": "user", "content": "Say hello"}]
LONG = "Alpha " * 60
PLAN = json.dumps({"steps": [{"id": "draft", "models": ["a"], "prompt": "Draft it."}],
                   "final": {"model": "b", "prompt": "Merge."}})

mock_a = shared_mock("--content", LONG)
mock_b = shared_mock("--content", "Beta answer.")
mock_c = shared_mock("--content", "Gamma answer.")
failing = shared_mock("--fail-rate", "1", "--fail-status", "500")
refusing = shared_mock("--fail-rate", "1", "--fail-status", "400")
unavailable = shared_mock("--fail-rate", "1", "--fail-status", "503", "--retry-after", "0")
unsure = shared_mock("--logprob", "-2.0", "--content", "Unsure answer.")
planner = shared_mock("--content", PLAN)


def used(*mocks) -> int:
    return sum(stats(m)["usage"]["input_tokens"] + stats(m)["usage"]["output_tokens"] for m in mocks)


@pytest.fixture(scope="module")
def all_mocks(mock_a, mock_b, mock_c, failing, refusing, unavailable, unsure, planner):
    return {"a": mock_a, "b": mock_b, "c": mock_c, "f": failing, "x": refusing, "s": unavailable, "u": unsure,
            "p": planner}


def _models(mocks: dict) -> list[dict]:
    models = priced(mocks, "abcfxsup")
    for m in models:
        if m["name"] == "c":
            m["api_format"] = "anthropic"
        if m["name"] == "s":
            m["pricing"] = {"input": 0.1, "output": 0.1}      # the cheapest: escalate's order: cost calls it first
    return models


CONFIDENT = {"confidence": {"method": "avg_logprob", "gte": -0.5}}
DECISIONS = {
    "auto": (refs("ab"), {"type": "ratings"}),
    "fusion-fail": (refs("abf"), {"type": "fusion", "on_error": "fail",
                                  "fusion": {"analysis_models": ["a", "b"], "model": "f", "analysis_mode": "none"}}),
    "fusion-n": (refs("ac"), {"type": "fusion", "fusion": {"model": "c", "analysis_mode": "none"}}),
    "remom-n": (refs("ac"), {"type": "remom", "remom": {"breadth_schedule": [1], "synthesis_model": "c"}}),
    "fusion-b": (refs("ab"), {"type": "fusion", "fusion": {"model": "b", "analysis_mode": "none"}}),
    "esc-last": (refs("ux"), {"type": "escalate", "on_error": "last_attempt", "escalate": {"accept": CONFIDENT}}),
    "esc-none": (refs("xf"), {"type": "escalate", "on_error": "last_attempt",
                              "escalate": {"accept": {"refusal": False}}}),
    "esc-503": (refs("bs"), {"type": "escalate", "budget": {"max_calls": 1},
                             "escalate": {"order": "cost", "accept": CONFIDENT}}),
    "sv-one": (refs("ab"), {"type": "escalate", "budget": {"max_calls": 1},
                            "escalate": {"accept": {"confidence": {"method": "self_verify", "gte": 0.7}}}}),
    "dynamic": (refs("pab"), {"type": "workflows", "workflows": {"mode": "dynamic", "planner": {"model": "p"}}}),
}


@pytest.fixture(scope="module")
def _looping(all_mocks, tmp_path_factory):
    glob = {**DEBUG, "plugins": [{"type": "router_replay", "configuration": {}}]}
    with shared_router(tmp_path_factory, _models(all_mocks), DECISIONS, glob) as proc:
        yield proc


@pytest.fixture
def looping(_looping, all_mocks):
    fresh(*all_mocks.values())
    return _looping


def post(proc, name: str, stream: bool = False, **extra) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, timeout=60,
                      json={"model": f"vsr/{name}", "messages": ASK, **({"stream": True} if stream else {}), **extra})


def record_of(proc, r: httpx.Response) -> dict:
    rid = r.headers["x-vsr-replay-id"]
    return wait_for_value(lambda: (lambda x: x.json() if x.status_code == 200 and x.json().get("status")
                                   else None)(httpx.get(f"{proc.url}/api/v1/replay/{rid}")), "the record")


def tokens_metric(proc, name: str) -> float:
    text = httpx.get(f"{proc.url}/metrics").text
    return sum(float(v) for v in re.findall(rf'^vsr_tokens_total\{{model="{name}",direction="\w+"\}} (\S+)$',
                                            text, re.M))


# --- every call charged to the key, once -----------------------------------------------------------------------


# A key per test below, each its own tpm window: (id, key).
METERED = {name: (f"metered-{name}", f"vsk-calls-{name}-" + "c" * 32) for name in ("failed", "whole", "streamed")}


def charged(prefix: str, key_id: str) -> int:
    r = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(int(v) for v in r.hvals(f"{prefix}limit:key:{key_id}:tpm"))
    finally:
        r.close()


@pytest.fixture(scope="module")
def _metered(all_mocks, tmp_path_factory):
    """The shared decisions behind the METERED keys, whose tpm windows (in Redis) hold what each request was
    charged."""
    with redis_prefix("looper-calls") as prefix:
        doc = {"version": "v0.5", "providers": {"models": _models(all_mocks)},
               "recipes": [{"name": k, "decisions": [{"name": "main", "modelRefs": r, "algorithm": alg}]}
                           for k, (r, alg) in DECISIONS.items()],
               "entrypoints": [{"api": "chat", "model_names": [f"vsr/{k}"], "recipe": k,
                                **({"default": True} if k == "auto" else {})} for k in DECISIONS],
               "global": {"router": {"auth": {
                   "enabled": True, "keys": [{"id": id_, "sha256": sha(key), "limits": {"tpm": 1_000_000}}
                                             for id_, key in METERED.values()],
                   "store": {"backend": "redis", "url": REDIS_URL, "prefix": prefix}}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("metered")))) as proc:
            yield proc, prefix


@pytest.fixture
def metered(_metered, all_mocks):
    fresh(*all_mocks.values())
    return _metered


def test_a_failed_executor_run_is_charged_every_call_it_made(metered, all_mocks):
    proc, prefix = metered       # vsr/fusion-fail: the panel a and b answer, the judge f fails, on_error: fail
    key_id, key = METERED["failed"]
    r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=60,
                   json={"model": "vsr/fusion-fail", "messages": ASK})
    assert r.status_code == 502 and r.json()["error"]["code"] == "looper_calls_failed", r.text
    spent = used(all_mocks["a"], all_mocks["b"])
    assert spent > 100, "the panel's answers are long: far more than the request's own estimate"
    wait_until(lambda: charged(prefix, key_id) == spent,
               f"the panel's {spent} tokens to be charged (at {charged(prefix, key_id)})")


@pytest.mark.parametrize("stream", [False, True])
def test_an_executor_answer_is_charged_every_call_once(metered, all_mocks, stream):
    proc, prefix = metered       # vsr/auto: ratings over a and b
    key_id, key = METERED["streamed" if stream else "whole"]
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=key, max_retries=0)
    if stream:
        assert list(client.chat.completions.create(model="vsr/auto", messages=ASK, stream=True))
    else:
        done = client.chat.completions.create(model="vsr/auto", messages=ASK)
        assert done.usage.total_tokens == used(all_mocks["a"], all_mocks["b"])
    spent = used(all_mocks["a"], all_mocks["b"])
    wait_until(lambda: charged(prefix, key_id) == spent, f"{spent} tokens charged once (at {charged(prefix, key_id)})")


# --- max_calls counts every call ---------------------------------------------------------------------------------


def test_max_calls_counts_transport_retries_and_names_the_real_failure(looping, all_mocks):
    # vsr/esc-503: escalate, order cost (s first), max_calls 1; s answers every call 503 (Retry-After: 0)
    r = post(looping, "esc-503")
    assert stats(all_mocks["s"])["requests"] == 1, "one call: no retry past max_calls"
    assert stats(all_mocks["b"])["requests"] == 0
    # The cause is the upstream's 503, not a timeout; the model named is the one called.
    assert r.status_code == 503, r.text
    assert r.json()["error"]["type"] != "timeout_error"
    assert r.headers["x-vsr-selected-model"] == "s"
    record = record_of(looping, r)
    assert (record["model"], record["response_path"]) == ("s", "error")
    assert [(a["model"], a["status"]) for a in record["attempts"]] == [("s", 503)]


def test_max_calls_counts_the_self_verify_rating(looping, all_mocks):
    # vsr/sv-one: escalate on self_verify over a, b; max_calls 1: a's answer, and no call left to rate it
    r = post(looping, "sv-one")
    assert r.status_code == 200, r.text
    assert stats(all_mocks["a"])["requests"] == 1
    assert stats(all_mocks["b"])["requests"] == 0


# --- escalate's last_attempt: the last answer, never an error ---------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_last_attempt_returns_the_last_answer_not_a_later_error(looping, all_mocks, stream):
    # vsr/esc-last: u answers, rejected on confidence; x answers 400
    r = post(looping, "esc-last", stream)
    assert r.status_code == 200, r.text
    if stream:
        deltas = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data: {")]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in deltas if c["choices"])
    else:
        text = r.json()["choices"][0]["message"]["content"]
    assert text == "Unsure answer."
    assert r.headers["x-vsr-selected-model"] == "u"
    assert stats(all_mocks["x"])["requests"] == 1


def test_every_candidate_failing_is_the_same_router_error_whole_and_streamed(looping, all_mocks):
    # vsr/esc-none: x answers 400, f 500: no answer at all
    whole, streamed = post(looping, "esc-none"), post(looping, "esc-none", True)
    assert whole.status_code == streamed.status_code >= 400, (whole.text, streamed.text)
    assert whole.headers["content-type"].startswith("application/json")
    assert streamed.headers["content-type"].startswith("application/json")
    assert whole.json()["error"]["code"] == streamed.json()["error"]["code"]
    assert "x:" in whole.json()["error"]["message"] and "f:" in whole.json()["error"]["message"]
    assert whole.headers["x-vsr-response-path"] == streamed.headers["x-vsr-response-path"] == "error"
    assert whole.headers["x-vsr-selected-model"] == streamed.headers["x-vsr-selected-model"] == "f"


# --- n and the executors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fusion-n", "remom-n"])
def test_n_is_not_carried_to_an_executors_calls_and_says_so(looping, all_mocks, name):
    # vsr/fusion-n: fusion over a and c (anthropic), judged by c; vsr/remom-n: remom over a, c, synthesis by c
    r = post(looping, name, n=2)
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"]) == 1
    assert 'field="n"' in r.headers["x-vsr-warnings"]
    assert stats(all_mocks["c"])["requests"] >= 1
    assert "n" not in stats(all_mocks["a"])["last_request"]["body"]


# --- the replay record of a failed run ---------------------------------------------------------------------------


def test_the_record_of_a_failed_run_keeps_every_call_and_what_it_spent(looping, all_mocks):
    r = post(looping, "fusion-fail")     # the panel a and b answer, the judge f answers 500: on_error fail
    assert r.status_code == 502, r.text
    assert float(r.headers["x-vsr-cost"]) > 0
    record = record_of(looping, r)
    assert sorted(a["model"] for a in record["attempts"]) == ["a", "b", "f"]
    assert [a["status"] for a in record["attempts"] if a["model"] == "f"] == [500]
    # Each call with what it spent (the failed one nothing).
    by_model = {a["model"]: a["usage"] for a in record["attempts"]}
    assert by_model["f"] is None
    for name in "ab":
        u = stats(all_mocks[name])["usage"]
        assert (by_model[name]["prompt_tokens"], by_model[name]["completion_tokens"]) == \
            (u["input_tokens"], u["output_tokens"])
    assert record["cost"] == pytest.approx(float(r.headers["x-vsr-cost"]), rel=1e-9)
    assert record["usage"]["total_tokens"] == used(all_mocks["a"], all_mocks["b"])
    assert record["response_path"] == "error"


def test_an_executor_s_parallel_calls_are_recorded_as_looper_hops_not_fallbacks(looping, all_mocks):
    # vsr/auto: ratings over a and b, called in parallel, each answering on its first attempt. The spec names
    # them: the Looper "makes an executor's model calls, each a hop" (5.6), and the per-call rule lists "the
    # provider call and its fallbacks, Looper hops" apart. A fallback is an attempt after one of its call failed.
    record = record_of(looping, post(looping, "auto"))
    assert sorted((a["model"], a["fallback"]) for a in record["attempts"]) == [("a", False), ("b", False)]
    assert sorted(a["hop"] for a in record["attempts"]) == [1, 2]
    record = record_of(looping, post(looping, "fusion-b"))      # the panel a and b, then b's final call
    assert [a["fallback"] for a in record["attempts"]] == [False] * 3 and \
        sorted(a["hop"] for a in record["attempts"]) == [1, 2, 3]


# --- every call's tokens under its own model ----------------------------------------------------------------------


def test_a_dynamic_workflow_counts_the_planner_in_usage_and_every_call_under_its_model(looping, all_mocks):
    # vsr/dynamic: p plans draft (a), final b
    before = {n: tokens_metric(looping, n) for n in "pab"}
    r = post(looping, "dynamic")
    assert r.status_code == 200, r.text
    p, a, b = (all_mocks[n] for n in "pab")
    assert r.json()["usage"]["total_tokens"] == used(p, a, b)
    for name, mock in (("p", p), ("a", a), ("b", b)):
        wait_until(lambda: tokens_metric(looping, name) - before[name] == used(mock),
                   f"{name}'s tokens under its own name")


# --- what a client of another protocol is told ------------------------------------------------------------------


def test_a_streamed_ratings_answer_to_a_messages_client_says_what_it_dropped(looping, all_mocks):
    # vsr/auto: ratings over a and b; Messages carries one answer
    client = anthropic.Anthropic(base_url=looping.url, api_key="k", max_retries=0)
    with client.messages.with_streaming_response.create(model="vsr/auto", max_tokens=64, messages=ASK,
                                                        stream=True) as resp:
        assert list(resp.iter_lines())
        warnings = resp.headers.get("x-vsr-warnings", "")
    assert 'field="choices[1]"' in warnings


# --- the synthesis after a tool exchange ------------------------------------------------------------------------


def test_the_synthesis_instruction_comes_after_the_last_turn(looping, all_mocks):
    # vsr/fusion-b: the panel a and b, then b writes the final answer; the history ends in a tool result
    messages = [{"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"}]
    r = httpx.post(f"{looping.url}/v1/chat/completions", timeout=60,
                   json={"model": "vsr/fusion-b", "messages": messages})
    assert r.status_code == 200, r.text
    sent = stats(all_mocks["b"])["last_request"]["body"]["messages"]
    assert sent[-1]["role"] == "user" and "Fusion calling model" in sent[-1]["content"], sent
    assert sent[0]["content"] == "What is the weather in Paris?", "the first turn stays the user's"
    assert any("Sunny, 21 C" in (m["content"] or "") for m in sent[:-1]), "the tool result is still read"
