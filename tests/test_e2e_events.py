"""End to end: the router appends routing events to a real Redis stream; replay records and the response cache."""
from __future__ import annotations

import time
from pathlib import Path
import re
import uuid
from contextlib import contextmanager

import httpx
import msgspec
import pytest
import redis

from vsr_fast.events.types import decode_event

from .procs import mock_upstream, refused_port, router, write_config

CHAT = [{"role": "user", "content": "Tell me about the sea"}]


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return None


@contextmanager
def own_stream():
    name = f"vsr-test:{uuid.uuid4().hex}:events"
    try:
        yield name
    finally:
        r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        for key in r.scan_iter(f"{name}*"):
            r.delete(key)
        r.delete(name)


@pytest.fixture
def stream_name():
    with own_stream() as name:
        yield name


def doc(mock_url: str, stream: str, *, cache: bool = False) -> dict:
    plugins = [{"type": "router_replay", "configuration": {"capture_request_body": True, "capture_response_body": True}}]
    if cache:
        plugins.append({"type": "response_cache", "configuration": {"ttl_seconds": 60}})
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"plugins": plugins,
                   "stores": {"event_stream": {"backend": "redis", "stream": stream},
                              "response_cache": {"backend_type": "redis", "prefix": f"{stream}:cache:"}}},
    }


def events_of(stream: str, replay_id: str) -> list:
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    out = []
    for _, fields in r.xrange(stream):
        payload = next(v for k, v in fields.items() if k in (b"e", b"event", b"data", b"payload"))
        ev = decode_event(payload)
        if ev.replay_id == replay_id:
            out.append(ev)
    return out


@pytest.fixture(scope="module")
def recording(mock, tmp_path_factory):
    """(router, its Redis stream): each request's events are told apart by its replay id."""
    with own_stream() as name, router(write_config(doc(mock.url, name), str(tmp_path_factory.mktemp("rec")))) as proc:
        yield proc, name


@pytest.mark.parametrize("stream_flag", [False, True])
def test_events_of_a_request_arrive_in_order_and_the_record_is_served(recording, stream_flag):
    proc, stream_name = recording
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT, "stream": stream_flag},
                   headers={"x-request-id": "req-e2e-1"})
    assert r.status_code == 200
    replay_id = r.headers["x-vsr-replay-id"]
    events = wait_for(lambda: (lambda e: e if len(e) >= 5 else None)(events_of(stream_name, replay_id)))
    assert events, "the request's events reached the stream"
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["RequestReceived", "SignalsEvaluated", "DecisionChosen", "UpstreamAttempted", "AnswerCompleted"]
    assert [e.seq for e in events] == list(range(len(events)))
    assert {e.request_id for e in events} == {"req-e2e-1"}
    assert events[-1].streamed is stream_flag and events[-1].status == 200
    record = wait_for(lambda: (lambda x: x if x.status_code == 200 and x.json().get("status") else None)(
        httpx.get(f"{proc.url}/api/v1/replay/{replay_id}")))
    assert record is not None, "the replay recorder built the record, answer included"
    body = record.json()
    assert body["decision"] == "d" and body["selected_model"] == "m" and body["model"] == "m"
    assert body["status"] == 200 and body["streamed"] is stream_flag
    # The backend's usage, streamed too: the client did not ask for a usage chunk, the router did.
    usage = body["usage"]
    assert usage is not None and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    listing = httpx.get(f"{proc.url}/api/v1/replay", params={"decision": "d"}).json()["records"]
    assert replay_id in [row["id"] for row in listing]
    assert httpx.get(f"{proc.url}/api/v1/replay/nope").status_code == 404
    metrics = httpx.get(f"{proc.url}/metrics").text
    assert "vsr_events_sent_total" in metrics


def test_an_identical_request_is_served_from_the_response_cache(mock, tmp_path, stream_name):
    with router(write_config(doc(mock.url, stream_name, cache=True), str(tmp_path))) as proc:
        body = {"model": "auto", "messages": [{"role": "user", "content": f"cache me {uuid.uuid4().hex}"}]}
        first = httpx.post(f"{proc.url}/v1/chat/completions", json=body)
        assert first.headers["x-vsr-response-path"] == "upstream"
        second = wait_for(lambda: (lambda r: r if r.headers["x-vsr-response-path"] == "cache" else None)(
            httpx.post(f"{proc.url}/v1/chat/completions", json=body)), timeout=10)
        assert second is not None, "the cache writer stored the released answer"
        assert second.json()["choices"] == first.json()["choices"]
        assert second.headers["x-vsr-selected-decision"] == "d"
        other = httpx.post(f"{proc.url}/v1/chat/completions", json={**body, "temperature": 0.1})
        assert other.headers["x-vsr-response-path"] == "upstream"
        # How each answer was produced, as its header said: a cache hit counts apart from an upstream answer.
        paths = dict(re.findall(r'^vsr_responses_total\{api="chat",path="(\w+)"\} (\d+)$',
                                httpx.get(f"{proc.url}/metrics").text, re.M))
        assert int(paths["cache"]) >= 1 and int(paths["upstream"]) >= 2, paths


def test_a_bad_plugin_configuration_fails_the_load(mock, tmp_path, stream_name):
    from vsr_fast.routing import load_raw
    from vsr_fast.errors import ConfigError
    d = doc(mock.url, stream_name)
    d["global"]["plugins"][0]["configuration"]["max_body_byte"] = 10
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    assert info.value.lines == ["global.plugins[0].configuration.max_body_byte: unknown_field: not a field of this block; "
                                "did you mean max_body_bytes?"]
    d["global"]["plugins"] = [{"type": "image_gen"}]
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    assert info.value.lines == ["global.plugins[0].type: removed_plugin_type: image_gen was removed; write nothing: "
                                "declare the decision's output and route to an api_format: images model"]
    d["global"]["plugins"] = [{"type": "retrieval"}]
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    assert info.value.lines[0].startswith("global.plugins[0].type: invalid_value: plugin type 'retrieval' is not served")
    assert msgspec  # the wire helpers above decode real stream entries


def test_the_shadow_copy_goes_to_its_model_with_the_router_key_and_never_holds_the_answer(mock, tmp_path):
    """A real router, a real shadow model (a second mock upstream): copies land, a hanging one holds nothing."""
    with mock_upstream() as cand:
        doc = {
            "version": "v0.5",
            "providers": {"models": [
                {"name": "live", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
                {"name": "cand", "provider_model_id": "mock-cand",
                 "backend_refs": [{"endpoint": f"{cand.url}/v1", "auth": {"api_key_env": "VSR_TEST_SHADOW_KEY"}}]}]},
            "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "live"}]}]}],
            "global": {"plugins": [{"type": "router_replay", "configuration": {
                "shadow": {"model": "cand", "sample_rate": 1.0, "max_concurrency": 2, "timeout_seconds": 600}}}]},
        }
        headers = {"authorization": "Bearer client-secret"}
        with router(write_config(doc, str(tmp_path)), env={"VSR_TEST_SHADOW_KEY": "sk-shadow"}) as proc:
            first = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT},
                               headers=headers, timeout=20)
            assert first.status_code == 200 and first.headers["x-vsr-selected-model"] == "live"
            record = wait_for(lambda: (lambda x: x if x.status_code == 200 and x.json()["shadow"] else None)(
                httpx.get(f"{proc.url}/api/v1/replay/{first.headers['x-vsr-replay-id']}")))
            assert record is not None, "the shadow's answer reached the replay record"
            (shadow,) = record.json()["shadow"]
            assert shadow["model"] == "cand" and shadow["status"] == 200
            seen = httpx.get(f"{cand.url}/_mock/stats").json()
            assert (seen["requests"], seen["completed"]) == (1, 1)
            assert seen["last_request"]["body"]["model"] == "mock-cand"
            assert seen["last_request"]["headers"]["authorization"] == "Bearer sk-shadow", "the router's key only"

            # The shadow model now holds every copy for a minute: the live answer still comes at once.
            httpx.post(f"{cand.url}/_mock/config", json={"latency_ms": 60_000}).raise_for_status()
            second = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT},
                                headers=headers, timeout=20)
            assert second.status_code == 200
            assert wait_for(lambda: httpx.get(f"{cand.url}/_mock/stats").json()["requests"] == 2), \
                "the second copy was sent"
            assert httpx.get(f"{cand.url}/_mock/stats").json()["completed"] == 1, "and is still unanswered"
            held = httpx.get(f"{proc.url}/api/v1/replay/{second.headers['x-vsr-replay-id']}").json()
            assert held["status"] == 200 and held["shadow"] == [], "recorded without waiting for its shadow"


def test_spill_max_bytes_bounds_what_an_unreachable_store_costs_and_requests_are_served(mock, tmp_path):
    dead = f"redis://127.0.0.1:{refused_port()}/0?socket_timeout=0.5&socket_connect_timeout=0.5"
    doc = {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"plugins": [{"type": "router_replay", "configuration": {
                       "capture_request_body": True, "max_body_bytes": 1 << 20}}],
                   "stores": {"event_stream": {"backend": "redis", "url": dead, "stream": "vsr-test:spill",
                                               "queue": 16, "batch": 4, "spill_max_bytes": 1 << 20}}},
    }
    big = "x" * (300 * 1024)
    with router(write_config(doc, str(tmp_path))) as proc:
        # 40 events: the queue (16) and a batch (4) hold the first four requests' events; the other
        # four requests' copies (~1.2 MB) are more than the 1 MiB journal takes.
        for i in range(8):
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                           json={"model": "auto", "messages": [{"role": "user", "content": f"{i} {big}"}]})
            assert r.status_code == 200
        metrics = httpx.get(f"{proc.url}/metrics").text
        # The same unreachable store behind the replay API: a 503 saying so, in the API error shape, not a 500.
        for path in ("/api/v1/replay/abc", "/api/v1/replay?decision=d"):
            away = httpx.get(f"{proc.url}{path}", timeout=20)
            assert away.status_code == 503, (path, away.status_code, away.text)
            error = away.json()["error"]
            assert (error["code"], error["type"]) == ("store_unavailable", "server_error"), error
            assert "replay records" in error["message"]
        assert httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, json={
            "model": "auto", "messages": [{"role": "user", "content": "still serving"}]}).status_code == 200
        # Nothing is checked past this point: SIGKILL spares the stop the writer's close timeout (5 s) spent on the
        # dead store (the spill at a stop is test_e2e_events_adopt's).
        proc.popen.kill()
        proc.popen.wait()
    lost = [line for line in metrics.splitlines() if line.startswith('vsr_events_lost_total{reason="spill_full"}')]
    assert lost and float(lost[0].split()[-1]) > 0, "\n".join(l for l in metrics.splitlines() if "vsr_events" in l)


def test_a_decision_that_refuses_personal_data_gets_no_shadow_copy_and_the_journal_keeps_no_prompt(mock, tmp_path):
    """capture_personal_data: false at the decision: no copy to the shadow model, no body in the embedded journal;
    the other decision's requests are still copied (capture_request_body: false carries the copy to the
    dispatcher only, never into the record)."""
    secret = "my email is alice.private@example.com and my phone is 415-555-0199"
    with mock_upstream() as cand:
        doc = {
            "version": "v0.5",
            "providers": {"models": [
                {"name": "live", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
                {"name": "private-model", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
                {"name": "cand", "backend_refs": [{"endpoint": f"{cand.url}/v1"}]}]},
            "recipes": [{"name": "r", "signals": {"pii": [{"name": "personal"}]}, "decisions": [
                {"name": "private", "priority": 10,
                 "rules": {"operator": "AND", "conditions": [{"type": "pii", "name": "personal"}]},
                 "modelRefs": [{"model": "private-model"}],
                 "plugins": [{"type": "router_replay", "configuration": {"capture_personal_data": False}}]},
                {"name": "general", "modelRefs": [{"model": "live"}]}]}],
            "global": {"plugins": [{"type": "router_replay", "configuration": {
                "shadow": {"model": "cand", "sample_rate": 1.0}}}]},
        }
        with router(write_config(doc, str(tmp_path))) as proc:
            private = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                                 json={"model": "auto", "messages": [{"role": "user", "content": secret}]})
            assert private.status_code == 200 and private.headers["x-vsr-selected-model"] == "private-model"
            general = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT},
                                 timeout=20)
            assert general.headers["x-vsr-selected-model"] == "live"
            assert wait_for(lambda: httpx.get(f"{cand.url}/_mock/stats").json()["requests"] >= 1)
            record = wait_for(lambda: (lambda x: x if x.status_code == 200 and x.json()["shadow"] else None)(
                httpx.get(f"{proc.url}/api/v1/replay/{general.headers['x-vsr-replay-id']}")))
            assert record is not None, "the general decision's copy was answered and recorded"
            seen = httpx.get(f"{cand.url}/_mock/stats").json()
            assert seen["requests"] == 1 and "alice" not in str(seen["last_request"]["body"])
            journals = list((Path(proc.env["VSR_STATE_DIR"])).rglob("*.journal"))
            assert journals
            assert not any(b"alice.private" in p.read_bytes() for p in journals), "no copy of the private prompt"
            metrics = httpx.get(f"{proc.url}/metrics").text
            assert 'vsr_shadow_requests_total{outcome="skipped_personal_data"} 1' in metrics


def test_a_record_with_an_unreadable_field_is_served_without_it_and_counted(mock, tmp_path, stream_name):
    """A field an operator (or another version) wrote into a record: the record and the listing still answer."""
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    with router(write_config(doc(mock.url, stream_name), str(tmp_path))) as proc:
        ids = []
        for _ in range(2):
            resp = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT})
            ids.append(resp.headers["x-vsr-replay-id"])
        for rid in ids:
            assert wait_for(lambda: httpx.get(f"{proc.url}/api/v1/replay/{rid}").json().get("status") == 200)
        r.hset(f"{stream_name}:replay:r:{ids[0]}", "e:0000000099:bogus", "garbage")
        r.hset(f"{stream_name}:replay:r:{ids[1]}", "s:ts", "notanumber")
        got = httpx.get(f"{proc.url}/api/v1/replay/{ids[0]}")
        assert got.status_code == 200, got.text
        assert got.json()["decision"] == "d" and got.json()["unreadable_events"] == 1
        listing = httpx.get(f"{proc.url}/api/v1/replay")
        assert listing.status_code == 200, listing.text
        assert set(ids) <= {row["id"] for row in listing.json()["records"]}
        by_decision = httpx.get(f"{proc.url}/api/v1/replay", params={"decision": "d"})
        assert by_decision.status_code == 200 and ids[1] in {row["id"] for row in by_decision.json()["records"]}
        metrics = httpx.get(f"{proc.url}/metrics").text
        # Counted at each read that met one: the record's event once, the summary's time in each listing.
        assert "vsr_replay_unreadable_total 3" in metrics.splitlines()
    r.close()


def test_every_upstream_attempt_is_recorded_with_its_status_or_cause(mock, tmp_path, stream_name):
    """A model on a closed port: the failed request's record still lists its attempt, with the cause; a 500 before
    a fallback that answered: that attempt's status and cause."""
    closed = refused_port()
    d = doc(mock.url, stream_name)
    d["providers"]["models"] = [{"name": "gone", "backend_refs": [{"endpoint": f"http://127.0.0.1:{closed}/v1"}]},
                                {"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
                                {"name": "m2", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}]
    d["recipes"][0]["decisions"] = [
        {"name": "dead", "priority": 10, "modelRefs": [{"model": "gone"}],
         "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "dead"}]}},
        {"name": "d", "modelRefs": [{"model": "m"}, {"model": "m2"}]}]
    d["recipes"][0]["signals"] = {"keywords": [{"name": "dead", "keywords": ["unreachable"]}]}
    with router(write_config(d, str(tmp_path))) as proc:
        failed = httpx.post(f"{proc.url}/v1/chat/completions",
                            json={"model": "auto", "messages": [{"role": "user", "content": "unreachable please"}]})
        assert failed.status_code >= 500
        rid = failed.headers["x-vsr-replay-id"]
        record = wait_for(lambda: (lambda x: x.json() if x.status_code == 200 and x.json()["status"] else None)(
            httpx.get(f"{proc.url}/api/v1/replay/{rid}")))
        assert record is not None
        # A refused connection is retried (the retries policy): each try is an attempt.
        # ``error`` the router's code, as in journals written before ``cause``; ``cause`` a failure's one word.
        assert record["attempts"] and {(a["model"], a["status"], a["error"], a["cause"])
                                       for a in record["attempts"]} == {
            ("gone", None, "upstream_failed", "connect_refused")}, record["attempts"]
        assert any(type(e).__name__ == "UpstreamAttempted" for e in events_of(stream_name, rid))

        httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 1, "fail_status": 500}).raise_for_status()
        try:
            served = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT})
        finally:
            httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 0}).raise_for_status()
        assert served.status_code == 200 and served.headers["x-vsr-selected-model"] == "m2"
        rid = served.headers["x-vsr-replay-id"]
        record = wait_for(lambda: (lambda x: x.json() if x.status_code == 200 and x.json()["status"] else None)(
            httpx.get(f"{proc.url}/api/v1/replay/{rid}")))
        assert [(a["model"], a["status"], a["error"], a["cause"]) for a in record["attempts"]] == [
            ("m", 500, None, "status_5xx"), ("m2", 200, None, None)], record["attempts"]

        # A client's error the backend answered, passed back: no failure of the backend's, no cause.
        httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 1, "fail_status": 400}).raise_for_status()
        try:
            refused = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT})
        finally:
            httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 0}).raise_for_status()
        assert refused.status_code == 400
        rid = refused.headers["x-vsr-replay-id"]
        record = wait_for(lambda: (lambda x: x.json() if x.status_code == 200 and x.json()["status"] else None)(
            httpx.get(f"{proc.url}/api/v1/replay/{rid}")))
        assert [(a["model"], a["status"], a["error"], a["cause"]) for a in record["attempts"]] == [
            ("m", 400, None, None)], record["attempts"]


ACCOUNT = "acct-ZX9912QK"


@pytest.mark.parametrize("policy", ["capture_allowed", "capture_personal_data_false", "masking"])
def test_a_private_requests_signals_event_keeps_the_rule_and_its_answer_not_the_words_it_matched(
        mock, tmp_path, stream_name, policy):
    """A keyword rule's detail quotes the request ("matched 'acct-...'"): under capture_personal_data: false, or
    on a decision that masks, the signals event says which rule matched and no more of the request."""
    plugins = {"capture_allowed": [],
               "capture_personal_data_false": [{"type": "router_replay",
                                                "configuration": {"capture_personal_data": False}}],
               "masking": [{"type": "masking", "configuration": {"signal": "personal"}}]}[policy]
    d = doc(mock.url, stream_name)
    d["recipes"] = [{"name": "r", "signals": {
        "keywords": [{"name": "account", "method": "regex", "keywords": [r"acct-[A-Z0-9]+"]}],
        "pii": [{"name": "personal"}]},
        "decisions": [{"name": "d", "modelRefs": [{"model": "m"}], "plugins": plugins,
                       "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "account"}]}}]}]
    with router(write_config(d, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, json={"model": "auto", "messages": [
            {"role": "user", "content": f"Why was {ACCOUNT} charged twice?"}]})
        assert r.status_code == 200 and r.headers["x-vsr-selected-decision"] == "d", r.text
        replay_id = r.headers["x-vsr-replay-id"]
        events = wait_for(lambda: (lambda e: e if len(e) >= 3 else None)(events_of(stream_name, replay_id)))
        assert events, "the request's events reached the stream"
        (signals,) = [e for e in events if type(e).__name__ == "SignalsEvaluated"]
        (reading,) = [x for x in signals.readings if x.type == "keyword"]
        assert reading.name == "account" and reading.matched is True
        private = policy != "capture_allowed"
        assert (ACCOUNT in (reading.detail or "")) is not private, reading.detail
        assert reading.detail == ("matched" if private else f"matched {ACCOUNT!r}")
        streamed = b"".join(v for _, fields in redis.Redis.from_url("redis://127.0.0.1:6379/0").xrange(stream_name)
                            for v in fields.values())
        assert (ACCOUNT.encode() in streamed) is not private
