"""``decisions[].retention`` (spec 5.7) and escalate's ``order: size`` (5.6) through a real router, with the
official OpenAI SDK as the client and the bench mock as every model.

One router, one recipe: each decision is reached by a keyword; a session is named by x-vsr-session-id. What a
turn was routed to is read from x-vsr-selected-decision and x-vsr-selected-model."""
from __future__ import annotations

import uuid

import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, wait_for_value, write_config


@pytest.fixture(scope="module")
def sure():
    with mock_upstream("--logprob", "-0.1") as proc:
        yield proc


def kw(name: str) -> dict:
    return {"operator": "AND", "conditions": [{"type": "keyword", "name": name}]}


CACHE = [{"type": "response_cache", "configuration": {"ttl_seconds": 300}}]


@pytest.fixture(scope="module")
def proc(sure, tmp_path_factory):
    models = [{**model(n, f"{sure.url}/v1", upstream_name=f"up-{n}"), "param_size": size}
              for n, size in (("big", "70B"), ("small", "8B"), ("other", "3B"))]
    words = {"hard": "prove", "urgent": "urgent", "bigplease": "bigplease", "sticky": "sticky",
             "escalate": "escalate", "secret": "secret", "cacheme": "cacheme", "prefix": "prefix"}
    decisions = [
        {"name": "urgent", "priority": 300, "rules": kw("urgent"), "modelRefs": [{"model": "other"}]},
        {"name": "hard", "priority": 200, "rules": kw("hard"), "modelRefs": [{"model": "big"}],
         "retention": {"ttl_turns": 2}},
        {"name": "secret", "priority": 150, "rules": kw("secret"), "modelRefs": [{"model": "small"}],
         "plugins": CACHE, "retention": {"drop": True}},
        {"name": "cacheme", "priority": 140, "rules": kw("cacheme"), "modelRefs": [{"model": "small"}],
         "plugins": CACHE},
        {"name": "escalate", "priority": 130, "rules": kw("escalate"),
         "modelRefs": [{"model": "big"}, {"model": "small"}],
         "algorithm": {"type": "escalate", "escalate": {"order": "size",
                                                        "accept": {"confidence": {"gte": -0.5}}}}},
        {"name": "prefix", "priority": 120, "rules": kw("prefix"), "modelRefs": [{"model": "small"}],
         "retention": {"prefer_prefix_retention": True}},
        {"name": "sticky", "priority": 100, "rules": kw("sticky"),
         "modelRefs": [{"model": "small"}, {"model": "big"}], "retention": {"keep_current_model": True}},
        {"name": "bigplease", "priority": 50, "rules": kw("bigplease"), "modelRefs": [{"model": "big"}]},
        {"name": "chat", "priority": 0, "rules": {"operator": "AND", "conditions": []},
         "modelRefs": [{"model": "other"}]},
    ]
    signals = {"keywords": [{"name": n, "operator": "OR", "keywords": [w]} for n, w in words.items()]}
    doc = config(models, decisions, signals=signals)
    doc["global"] = {"router": {"headers": {"debug": "any"}}}
    # A recipe with no fallback and no catch-all: a turn no decision matches is refused, unless one is held.
    doc["recipes"].append({"name": "strict", "signals": signals, "decisions": [
        {"name": "hard", "rules": kw("hard"), "modelRefs": [{"model": "big"}], "retention": {"ttl_turns": 1}}]})
    doc["entrypoints"].append({"api": "chat", "model_names": ["vsr/strict"], "recipe": "strict"})
    with router(write_config(doc, str(tmp_path_factory.mktemp("retention")))) as p:
        yield p


def turn(proc, text: str, session: str | None = None, name: str = "vsr/auto") -> tuple[str, str]:
    """(decision, model) of one turn."""
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)
    headers = {"x-vsr-session-id": session} if session else {}
    raw = client.chat.completions.with_raw_response.create(
        model=name, messages=[{"role": "user", "content": text}], extra_headers=headers)
    return raw.headers.get("x-vsr-selected-decision"), raw.headers.get("x-vsr-selected-model")


def test_ttl_turns_keeps_the_decisions_choice_for_the_sessions_next_turns(proc):
    s = f"s-{uuid.uuid4().hex}"
    assert turn(proc, "please prove it", s) == ("hard", "big")
    assert turn(proc, "and then?", s) == ("hard", "big")
    assert turn(proc, "and after that?", s) == ("hard", "big")
    assert turn(proc, "one more?", s) == ("chat", "other")          # two turns held, then the turn's own route
    # Another session, and a request without one, keep nothing.
    assert turn(proc, "and then?", f"s-{uuid.uuid4().hex}") == ("chat", "other")
    assert turn(proc, "please prove it") == ("hard", "big")
    assert turn(proc, "and then?") == ("chat", "other")


def test_a_held_decision_serves_a_turn_that_no_decision_matches_and_only_in_its_recipe(proc):
    s = f"s-{uuid.uuid4().hex}"
    assert turn(proc, "please prove it", s, "vsr/strict") == ("hard", "big")
    assert turn(proc, "and then?", s, "vsr/auto") == ("chat", "other")    # another recipe: not held there
    assert turn(proc, "and then?", s, "vsr/strict") == ("hard", "big")
    with pytest.raises(openai.BadRequestError, match="no_decision_matched|No decision"):
        turn(proc, "and then?", s, "vsr/strict")


def test_a_decision_that_outranks_the_held_one_routes_its_turn_which_still_counts(proc):
    s = f"s-{uuid.uuid4().hex}"
    assert turn(proc, "please prove it", s) == ("hard", "big")
    assert turn(proc, "urgent: the server is down", s) == ("urgent", "other")
    assert turn(proc, "and then?", s) == ("hard", "big")
    assert turn(proc, "and then?", s) == ("chat", "other")


def test_matching_the_decision_again_holds_its_turns_anew(proc):
    s = f"s-{uuid.uuid4().hex}"
    assert turn(proc, "please prove it", s) == ("hard", "big")
    assert turn(proc, "and then?", s) == ("hard", "big")
    assert turn(proc, "now prove this", s) == ("hard", "big")
    assert turn(proc, "and then?", s) == ("hard", "big")
    assert turn(proc, "and then?", s) == ("hard", "big")
    assert turn(proc, "and then?", s) == ("chat", "other")


def test_keep_current_model_keeps_the_model_that_served_the_sessions_last_turn(proc):
    s = f"s-{uuid.uuid4().hex}"
    assert turn(proc, "bigplease", s) == ("bigplease", "big")
    assert turn(proc, "sticky question", s) == ("sticky", "big")       # big served the last turn: it stays
    assert turn(proc, "sticky question", f"s-{uuid.uuid4().hex}") == ("sticky", "small")
    assert turn(proc, "sticky question") == ("sticky", "small")


def test_escalate_order_size_calls_the_smallest_candidate_first(proc):
    assert turn(proc, "escalate this") == ("escalate", "small")       # modelRefs list big first


def metric(proc, line_prefix: str) -> float | None:
    for line in httpx.get(f"{proc.url}/metrics").text.splitlines():
        if line.startswith(line_prefix):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_drop_keeps_the_decisions_answers_out_of_the_response_cache(proc):
    text = f"secret {uuid.uuid4().hex}"
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)

    def path(t: str) -> str:
        raw = client.chat.completions.with_raw_response.create(model="vsr/auto",
                                                               messages=[{"role": "user", "content": t}])
        return raw.headers.get("x-vsr-response-path")

    before = metric(proc, 'llm_cache_write_skipped_total{reason="retention_drop"}') or 0
    assert path(text) == "upstream"
    wait_for_value(lambda: (metric(proc, 'llm_cache_write_skipped_total{reason="retention_drop"}') or 0) > before,
                   "the cache writer skipping the dropped answer")
    assert path(text) == "upstream"
    # The same cache on a decision without drop stores its answer.
    control = f"cacheme {uuid.uuid4().hex}"
    assert path(control) == "upstream"
    wait_for_value(lambda: path(control) == "cache", "a cache hit for the decision that keeps its answers")


def test_prefer_prefix_retention_asks_the_provider_to_keep_the_prompt_prefix(proc, sure):
    turn(proc, "prefix please")
    body = httpx.get(f"{sure.url}/_mock/stats").json()["last_request"]["body"]
    assert body["prompt_cache_retention"] == "24h"
    turn(proc, "plain chat")
    body = httpx.get(f"{sure.url}/_mock/stats").json()["last_request"]["body"]
    assert "prompt_cache_retention" not in body


def test_the_trace_names_a_held_route(proc):
    s = f"s-{uuid.uuid4().hex}"
    turn(proc, "please prove it", s)
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": "and then?"}],
        extra_headers={"x-vsr-session-id": s, "x-vsr-debug": "1"})
    trace = raw.headers.get("x-vsr-trace")
    assert 'retention=("held by an earlier turn: retained from an earlier turn of the session (1 more turns)" ' \
           '"ttl_turns=2")' in trace, trace
