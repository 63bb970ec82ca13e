"""A tenant's big body does not freeze the router for the others (security trial: 420,000 tools in 63 MB held
the event loop 20-26 s; /health and every other tenant waited).

- Past ``MAX_JSON_ITEMS`` a body is refused 400 naming the top-level field, before msgspec decodes it (msgspec
  holds the GIL for a whole decode: no worker thread would hide it); /health answers meanwhile.
- A big body under the bound is decoded, routed (signals), recorded (cache key, replay copy) and translated
  for its backend in a worker thread (``vsr_off_loop_steps_total`` counts each step); a small one in line.
  count_tokens's decode and signals likewise.
"""
from __future__ import annotations

import json
import threading

import httpx
import pytest

from vsr_fast.protocol.errors import MAX_JSON_ITEMS
from vsr_fast.server.pipeline.offload import OFF_LOOP_BYTES

from .procs import config, model, router, write_config
from .test_e2e_pipeline import metric

TOOL = ('{"type":"function","function":{"name":"f%d","description":"d",'
        '"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}')
STEPS = ("decode", "signals", "record", "upstream")


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    """A keyword decision to a Messages backend (a translation), with the response cache, and replay copies."""
    models = [{**model("m-anthropic", f"{mock.url}/v1"), "api_format": "anthropic"}]
    decisions = [{"name": "big", "priority": 10,
                  "plugins": [{"type": "response_cache", "configuration": {"ttl_seconds": 300}}],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "k"}]},
                  "modelRefs": [{"model": "m-anthropic"}]}]
    doc = config(models, decisions, signals={"keywords": [{"name": "k", "operator": "OR", "keywords": ["tenant"]}]})
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {
        "enabled": True, "capture_request_body": True}}]}
    with router(write_config(doc, str(tmp_path_factory.mktemp("big-body")))) as proc:
        yield proc


def in_flight(gw, body: bytes) -> tuple[httpx.Response, int]:
    """``body`` posted to Chat from a thread; the answer, and how many times /health answered 200 meanwhile."""
    done = threading.Event()
    answer: list[httpx.Response] = []

    def post() -> None:
        try:
            answer.append(httpx.post(f"{gw.url}/v1/chat/completions", content=body,
                                     headers={"content-type": "application/json"}, timeout=120))
        finally:
            done.set()

    worker = threading.Thread(target=post)
    worker.start()
    healthy = 0
    with httpx.Client(timeout=120) as client:
        while not done.is_set():
            healthy += client.get(f"{gw.url}/health").status_code == 200
    worker.join()
    return answer[0], healthy


def off_loop(gw) -> dict[str, float]:
    return {step: metric(gw, "vsr_off_loop_steps_total", step=step) for step in STEPS}


def test_the_trials_body_of_420000_tools_is_refused_naming_tools_while_health_answers(gw):
    body = ('{"model":"vsr/auto","messages":[{"role":"user","content":"tenant"}],"tools":[%s]}'
            % ",".join(TOOL % i for i in range(420_000))).encode()
    assert len(body) < 64 << 20
    r, healthy = in_flight(gw, body)
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert (err["code"], err["param"]) == ("invalid_value", "tools")
    assert f"more than {MAX_JSON_ITEMS} items" in err["message"] and "'tools'" in err["message"]
    assert healthy >= 1
    ok = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": [
        {"role": "user", "content": "tenant"}]}, timeout=30)
    assert ok.status_code == 200, ok.text


def test_a_big_body_runs_off_the_loop_and_a_small_one_in_line(gw):
    before = off_loop(gw)
    small = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": [
        {"role": "user", "content": "tenant small"}], "tools": [json.loads(TOOL % 1)]}, timeout=30)
    assert small.status_code == 200, small.text
    assert off_loop(gw) == before
    # 15,000 tools and 1,001 turns (~185,000 items, under the bound): megabytes, answered whole.
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"tenant turn {i} " + "lorem " * 200}
             for i in range(1001)]
    body = ('{"model":"vsr/auto","messages":%s,"tools":[%s]}'
            % (json.dumps(turns), ",".join(TOOL % i for i in range(15_000)))).encode()
    assert len(body) > OFF_LOOP_BYTES
    r, healthy = in_flight(gw, body)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["x-vsr-selected-decision"] == "big" and r.json()["choices"][0]["message"]["content"]
    assert healthy >= 1
    after = off_loop(gw)
    assert all(after[step] == before[step] + 1 for step in STEPS), (before, after)


def test_a_big_count_tokens_body_is_decoded_and_routed_off_the_loop(gw):
    before = off_loop(gw)
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"tenant turn {i} " + "lorem " * 200}
             for i in range(301)]
    body = json.dumps({"model": "vsr/auto", "messages": turns}).encode()
    assert len(body) > OFF_LOOP_BYTES
    r = httpx.post(f"{gw.url}/v1/messages/count_tokens", content=body, headers={"content-type": "application/json"},
                   timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["input_tokens"] > 0
    after = off_loop(gw)
    assert [after[s] - before[s] for s in STEPS] == [1, 1, 0, 0]
