"""router_replay.shadow through a real router (spec 5.7): the copy is the live model's provider-bound request,
made only where one provider answered through single-model dispatch.

The live model and the shadow model are two bench mock upstreams (real HTTP servers that keep the last request
they received); the clients are the official SDKs. A copy must carry what masking wrote (placeholders, whatever
``capture_personal_data`` says), the decision's tools policy, and must not be made for a cache hit or a
multi-model Looper decision.
"""
from __future__ import annotations

import json
import re

import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, wait_until, write_config

EMAIL = "jane.doe@example.com"
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in ("lookup", "delete_everything")]


def kw(name: str) -> dict:
    return {"operator": "AND", "conditions": [{"type": "keyword", "name": name}]}


@pytest.fixture(scope="module")
def shadowed(mock, tmp_path_factory):
    """One router, the live model on ``mock`` and the shadow model ``cand`` on a mock of its own; a decision
    per keyword: ``masked-kept``, ``masked-private`` and ``masked-unset`` mask emails under
    capture_personal_data true, false and unset; ``cached`` has an exact response cache; ``rated`` is a
    ratings decision over two models; ``governed`` keeps only the ``lookup`` tool; anything else is ``plain``."""
    with mock_upstream() as cand:
        models = [model("live", f"{mock.url}/v1"), model("live-b", f"{mock.url}/v1"),
                  model("cand", f"{cand.url}/v1", upstream_name="mock-cand")]
        masking = {"type": "masking", "configuration": {"enabled": True, "signal": "personal",
                                                        "entity_types": ["EMAIL_ADDRESS"]}}
        decisions = [
            *({"name": f"masked-{name}", "priority": 10, "rules": kw(f"masked-{name}"),
               "modelRefs": [{"model": "live"}],
               "plugins": [masking, *([{"type": "router_replay", "configuration": {"capture_personal_data": keep}}]
                                      if keep is not None else [])]}
              for name, keep in (("kept", True), ("private", False), ("unset", None))),
            {"name": "cached", "priority": 10, "rules": kw("cached"), "modelRefs": [{"model": "live"}],
             "plugins": [{"type": "response_cache", "configuration": {"mode": "exact", "ttl_seconds": 300}}]},
            {"name": "rated", "priority": 10, "rules": kw("rated"), "algorithm": {"type": "ratings"},
             "modelRefs": [{"model": "live"}, {"model": "live-b"}]},
            {"name": "governed", "priority": 10, "rules": kw("governed"), "modelRefs": [{"model": "live"}],
             "plugins": [{"type": "tools", "configuration": {"policy": {"mode": "filtered",
                                                                        "allow_tools": ["lookup"]}}}]},
            {"name": "plain", "modelRefs": [{"model": "live"}]},
        ]
        words = ("masked-kept", "masked-private", "masked-unset", "cached", "rated", "governed")
        doc = config(models, decisions, signals={
            "pii": [{"name": "personal"}],
            "keywords": [{"name": w, "operator": "OR", "keywords": [w]} for w in words]})
        doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {
            "capture_request_body": True, "shadow": {"model": "cand", "sample_rate": 1.0, "max_concurrency": 8}}}]}
        with router(write_config(doc, str(tmp_path_factory.mktemp("shadowed")))) as proc:
            yield proc, cand


def metric(proc, line: str) -> float:
    found = re.search(rf"^{re.escape(line)} (\S+)$", httpx.get(f"{proc.url}/metrics", timeout=10).text, re.M)
    return float(found.group(1)) if found else 0.0


def ask(proc, text: str, **extra) -> httpx.Headers:
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0, timeout=30)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": text}], **extra)
    raw.parse()
    return raw.headers


def copies(cand) -> dict:
    return httpx.get(f"{cand.url}/_mock/stats", timeout=10).json()


def settled(proc, cand, count: int) -> dict:
    """The shadow model's counters once it received ``count`` copies and the shadow consumer has handled every
    event the router appended (each copy answered and acknowledged)."""
    wait_until(lambda: copies(cand)["requests"] >= count, f"{count} shadow copies")
    wait_until(lambda: metric(proc, 'vsr_events_consumer_acked_total{group="shadow"}')
               == metric(proc, "vsr_events_sent_total"), "the shadow consumer caught up")
    return copies(cand)


@pytest.fixture
def fresh(shadowed):
    proc, cand = shadowed
    settled(proc, cand, 0)
    httpx.post(f"{cand.url}/_mock/reset", timeout=10).raise_for_status()
    return proc, cand


@pytest.mark.parametrize("keep", ["kept", "unset"])
def test_a_shadow_copy_carries_the_masked_request_whatever_capture_personal_data_says(fresh, mock, keep):
    """capture_personal_data: true lets the record keep the request as received; the copy is masked still."""
    proc, cand = fresh
    headers = ask(proc, f"masked-{keep}: find the account of {EMAIL}")
    assert headers["x-vsr-selected-decision"] == f"masked-{keep}"
    live = json.dumps(copies(mock)["last_request"]["body"])
    assert EMAIL not in live and "[EMAIL_ADDRESS_1]" in live
    seen = settled(proc, cand, 1)
    assert seen["requests"] == 1
    copy = json.dumps(seen["last_request"]["body"])
    assert EMAIL not in copy and "jane.doe" not in copy, copy
    assert "[EMAIL_ADDRESS_1]" in copy and seen["last_request"]["body"]["model"] == "mock-cand"


def test_capture_personal_data_false_still_makes_no_shadow_copy_of_a_masked_request(fresh):
    """No event carries such a request's text, masked or not (masking leaves the labels it does not mask)."""
    proc, cand = fresh
    skipped = 'vsr_shadow_requests_total{outcome="skipped_personal_data"}'
    before = metric(proc, skipped)
    private = ask(proc, f"masked-private: find the account of {EMAIL}")["x-vsr-replay-id"]
    assert metric(proc, skipped) == before + 1
    ask(proc, "a plain request after it")
    seen = settled(proc, cand, 1)
    assert seen["requests"] == 1 and "a plain request after it" in json.dumps(seen["last_request"]["body"])
    # The record tells a sampled copy that was not made from one not sampled (``shadow: []``).
    rec = httpx.get(f"{proc.url}/api/v1/replay/{private}", timeout=10).json()
    assert [(s["model"], s["skipped"], s["status"]) for s in rec["shadow"]] == [("cand", "personal_data", None)]


def test_a_shadow_copy_gets_the_live_requests_tools_policy(fresh, mock):
    proc, cand = fresh
    ask(proc, "governed: look it up", tools=TOOLS)
    assert [t["function"]["name"] for t in copies(mock)["last_request"]["body"]["tools"]] == ["lookup"]
    seen = settled(proc, cand, 1)
    assert [t["function"]["name"] for t in seen["last_request"]["body"]["tools"]] == ["lookup"]


def test_no_shadow_copy_for_a_cache_hit(fresh):
    proc, cand = fresh
    assert ask(proc, "cached: the same question")["x-vsr-response-path"] != "cache"
    settled(proc, cand, 1)
    assert ask(proc, "cached: the same question")["x-vsr-response-path"] == "cache"
    ask(proc, "a plain request after it")        # its copy comes after any the cache hit made
    seen = settled(proc, cand, 2)
    assert seen["requests"] == 2, "the cache hit was copied"
    assert "a plain request after it" in json.dumps(seen["last_request"]["body"])


def test_no_shadow_copy_for_a_multi_model_looper_decision(fresh, mock):
    proc, cand = fresh
    live = copies(mock)["requests"]
    assert ask(proc, "rated: which is better")["x-vsr-selected-decision"] == "rated"
    assert copies(mock)["requests"] == live + 2, "both models answered"
    ask(proc, "a plain request after it")
    seen = settled(proc, cand, 1)
    assert seen["requests"] == 1, "the ratings decision was copied"
    assert "a plain request after it" in json.dumps(seen["last_request"]["body"])
