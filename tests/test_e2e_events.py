"""End to end: the router appends routing events to a real Redis stream; replay records and the response cache."""
from __future__ import annotations

import json
import re
import socket
import time
import uuid
from pathlib import Path
from contextlib import contextmanager

import anthropic
import httpx
import msgspec
import openai
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


def stream_events(stream: str) -> list:
    """Every event on the Redis stream ``stream``, in order."""
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    return [decode_event(next(v for k, v in fields.items() if k in (b"e", b"event", b"data", b"payload")))
            for _, fields in r.xrange(stream)]


def events_of(stream: str, replay_id: str) -> list:
    return [ev for ev in stream_events(stream) if ev.replay_id == replay_id]


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


def test_a_record_with_an_unreadable_field_is_served_without_it_and_counted(recording):
    """A field an operator (or another version) wrote into a record: the record and the listing still answer.
    The only test that writes one: the module's router counts no unreadable field before it."""
    proc, stream_name = recording
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
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


# --- the answer's facts on its event: usage, time to first byte, streamed, what a cache hit served -------------------


def answer_event(stream: str, replay_id: str, timeout: float = 10.0):
    """The request's AnswerCompleted event, once the writer has appended it."""
    found = wait_for(lambda: [e for e in events_of(stream, replay_id) if type(e).__name__ == "AnswerCompleted"],
                     timeout)
    assert found, "the answer's event reached the stream"
    (answer,) = found
    return answer


# One provider model per backend format, all on the mock; a client names one directly. No body capture: the
# answer's usage is on its event, not read back from a captured body.
FORMATS = {"openai": "m", "anthropic": "m-anthropic", "responses": "m-responses"}


@pytest.fixture(scope="module")
def formats(mock, tmp_path_factory):
    with own_stream() as name:
        d = doc(mock.url, name)
        d["global"]["plugins"] = [{"type": "router_replay", "configuration": {}}]
        d["providers"]["models"] = [{"name": model, "api_format": fmt, "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}
                                    for fmt, model in FORMATS.items()]
        with router(write_config(d, str(tmp_path_factory.mktemp("formats")))) as proc:
            yield proc, name


def _whole_answer(url: str, api: str, model: str) -> tuple[str, tuple[int, int]]:
    """A whole answer of client API ``api`` by the official SDK: its replay id and the usage the client read."""
    if api == "messages":
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=20)
        raw = client.messages.with_raw_response.create(model=model, max_tokens=32, messages=CHAT)
        u = raw.parse().usage
        return raw.headers["x-vsr-replay-id"], (u.input_tokens, u.output_tokens)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=20)
    if api == "responses":
        raw = client.responses.with_raw_response.create(model=model, input="Tell me about the sea")
        u = raw.parse().usage
        return raw.headers["x-vsr-replay-id"], (u.input_tokens, u.output_tokens)
    raw = client.chat.completions.with_raw_response.create(model=model, messages=CHAT)
    u = raw.parse().usage
    return raw.headers["x-vsr-replay-id"], (u.prompt_tokens, u.completion_tokens)


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_a_whole_answer_s_event_carries_the_backend_s_usage(formats, api, fmt):
    proc, stream_name = formats
    replay_id, (prompt, completion) = _whole_answer(proc.url, api, FORMATS[fmt])
    answer = answer_event(stream_name, replay_id)
    assert answer.streamed is False and answer.status == 200 and answer.body is None
    assert answer.usage is not None, "a whole answer's usage, as a streamed one's"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (prompt, completion) and prompt > 0
    assert answer.usage.total_tokens == prompt + completion


@pytest.fixture(scope="module")
def paced(tmp_path_factory):
    """(router, its Redis stream, its one model's mock): the tests set the mock's pace."""
    with mock_upstream() as slow, own_stream() as name:
        with router(write_config(doc(slow.url, name), str(tmp_path_factory.mktemp("paced")))) as proc:
            yield proc, name, slow


def pace(mock, **knobs) -> None:
    httpx.post(f"{mock.url}/_mock/config", json=knobs).raise_for_status()


@pytest.mark.parametrize("stream_flag", [False, True])
def test_ttfb_is_the_time_to_the_backend_s_first_byte(paced, stream_flag):
    proc, stream_name, slow = paced
    # 200 ms before the backend's first byte; a stream's four events 150 ms apart after it.
    pace(slow, latency_ms=200, chunks=4, chunk_interval_ms=150)
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "auto", "messages": CHAT, "stream": stream_flag},
                   timeout=20)
    assert r.status_code == 200
    answer = answer_event(stream_name, r.headers["x-vsr-replay-id"])
    assert answer.ttfb_ms is not None, "ttfb_ms is set"
    assert 200 <= answer.ttfb_ms <= answer.duration_ms
    if stream_flag:     # the first event, not the end of the stream: the three later ones came 450 ms after it
        assert answer.duration_ms - answer.ttfb_ms >= 450


def test_a_client_that_leaves_mid_stream_is_recorded_as_a_stream(paced):
    proc, stream_name, slow = paced
    pace(slow, latency_ms=0, chunks=200, chunk_interval_ms=50)
    body = json.dumps({"model": "auto", "messages": CHAT, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", proc.port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        head = b""
        while b"data:" not in head:     # the head, and the first event: the stream had begun
            head += s.recv(65536)
    assert head.startswith(b"HTTP/1.1 200")
    replay_id = re.search(rb"x-vsr-replay-id: (\w+)", head, re.I).group(1).decode()
    answer = answer_event(stream_name, replay_id, timeout=20)
    assert (answer.status, answer.complete) == (499, False)
    assert answer.streamed is True, "the answer was streamed when its client left"
    assert answer.body and answer.body.startswith(b"data:"), "what the client had received"


@pytest.mark.parametrize("mode", ["exact", "semantic"])
def test_a_cache_hit_s_event_keeps_the_answer_it_served(mock, tmp_path, stream_name, mode):
    """capture_response_body: true: the event of an answer the cache served keeps that answer, as an upstream
    answer's keeps the model's."""
    d = doc(mock.url, stream_name, cache=True)
    d["global"]["plugins"][1]["configuration"]["mode"] = mode
    d["global"]["stores"]["response_cache"] = {"backend_type": "memory"}
    with router(write_config(d, str(tmp_path))) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0, timeout=20)
        first = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "How do I reverse a list in Python?"}])
        assert first.headers["x-vsr-response-path"] == "upstream"
        again = "How do I reverse a list in Python?" if mode == "exact" else "How can I reverse a list in python"
        second = wait_for(lambda: (lambda r: r if r.headers["x-vsr-response-path"] == "cache" else None)(
            httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                       json={"model": "auto", "messages": [{"role": "user", "content": again}]})))
        assert second is not None, "the answer was stored and served again"
        answer = answer_event(stream_name, second.headers["x-vsr-replay-id"])
        assert answer.response_path == "cache"
        assert answer.body == second.content and answer.body_bytes == len(second.content) > 0
        record = wait_for(lambda: (lambda x: x.json() if x.status_code == 200 and x.json().get("status") else None)(
            httpx.get(f"{proc.url}/api/v1/replay/{second.headers['x-vsr-replay-id']}")))
        assert record["response_body"] == second.text and record["cache"]["hit"] is True

PRIVACY = {"capture_allowed": [],
           "capture_personal_data_false": [{"type": "router_replay",
                                            "configuration": {"capture_personal_data": False}}],
           "masking": [{"type": "masking", "configuration": {"signal": "personal"}}]}


@pytest.fixture(scope="module")
def private(mock, tmp_path_factory):
    """(router, its Redis stream): a recipe per test below and privacy policy (its decision's plugins), reached by
    the model name ``keyword-<policy>`` or ``authz-<policy>``. Each test's words are its own (``secret``) and it
    looks for them in the whole stream."""
    with own_stream() as name:
        d = doc(mock.url, name)
        d["listeners"] = [{"name": "main", "identity": {"trust_headers": True}}]
        d["recipes"] = []
        for policy, plugins in PRIVACY.items():
            d["recipes"].append({"name": f"keyword-{policy}", "signals": {
                "keywords": [{"name": "account", "method": "regex", "keywords": [r"acct-[A-Z0-9]+"]}],
                "pii": [{"name": "personal"}]},
                "decisions": [{"name": "d", "modelRefs": [{"model": "m"}], "plugins": plugins, "rules": {
                    "operator": "AND", "conditions": [{"type": "keyword", "name": "account"}]}}]})
            if policy != "masking":
                d["recipes"].append({"name": f"authz-{policy}", "signals": {"role_bindings": [
                    {"name": "admins", "role": "admin", "subjects": [{"kind": "User", "name": "root"}]}]},
                    "decisions": [
                        {"name": "admin", "priority": 10, "modelRefs": [{"model": "m"}], "plugins": plugins,
                         "rules": {"operator": "AND", "conditions": [{"type": "authz", "name": "admins"}]}},
                        {"name": "d", "priority": 1, "modelRefs": [{"model": "m"}], "plugins": plugins}]})
        d["entrypoints"] = [{"api": "chat", "model_names": [r["name"]], "recipe": r["name"], "default": i == 0}
                            for i, r in enumerate(d["recipes"])]
        with router(write_config(d, str(tmp_path_factory.mktemp("private")))) as proc:
            yield proc, name


def secret(stem: str) -> str:
    """``stem`` and a part no other request on the stream carries."""
    return f"{stem}{uuid.uuid4().hex[:10].upper()}"


@pytest.mark.parametrize("policy", ["capture_allowed", "capture_personal_data_false", "masking"])
def test_a_private_requests_signals_event_keeps_the_rule_and_its_answer_not_the_words_it_matched(private, policy):
    """A keyword rule's detail quotes the request ("matched 'acct-...'"): under capture_personal_data: false, or
    on a decision that masks, the signals event says which rule matched and no more of the request."""
    proc, stream_name = private
    account = secret("acct-ZX")
    r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, json={"model": f"keyword-{policy}", "messages": [
        {"role": "user", "content": f"Why was {account} charged twice?"}]})
    assert r.status_code == 200 and r.headers["x-vsr-selected-decision"] == "d", r.text
    replay_id = r.headers["x-vsr-replay-id"]
    events = wait_for(lambda: (lambda e: e if len(e) >= 3 else None)(events_of(stream_name, replay_id)))
    assert events, "the request's events reached the stream"
    (signals,) = [e for e in events if type(e).__name__ == "SignalsEvaluated"]
    (reading,) = [x for x in signals.readings if x.type == "keyword"]
    assert reading.name == "account" and reading.matched is True
    hidden = policy != "capture_allowed"
    assert (account in (reading.detail or "")) is not hidden, reading.detail
    assert reading.detail == ("matched" if hidden else f"matched {account!r}")
    streamed = b"".join(v for _, fields in redis.Redis.from_url("redis://127.0.0.1:6379/0").xrange(stream_name)
                        for v in fields.values())
    assert (account.encode() in streamed) is not hidden


@pytest.mark.parametrize("policy", ["capture_allowed", "capture_personal_data_false"])
def test_a_private_requests_signals_event_names_no_caller(private, policy):
    """An authz rule's detail names the caller ("user jane... does not hold role admin"): under
    capture_personal_data: false the request event keeps no identity, and neither does the signals event."""
    proc, stream_name = private
    user = secret("jane.doe.")
    r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, headers={"x-authz-user-id": user},
                   json={"model": f"authz-{policy}", "messages": [{"role": "user", "content": "hello"}]})
    assert r.status_code == 200, r.text
    replay_id = r.headers["x-vsr-replay-id"]
    events = wait_for(lambda: (lambda e: e if len(e) >= 3 else None)(events_of(stream_name, replay_id)))
    assert events, "the request's events reached the stream"
    (signals,) = [e for e in events if type(e).__name__ == "SignalsEvaluated"]
    (reading,) = [x for x in signals.readings if x.type == "authz"]
    assert reading.matched is False
    hidden = policy != "capture_allowed"
    assert (user in (reading.detail or "")) is not hidden, reading.detail
    streamed = b"".join(v for _, fields in redis.Redis.from_url("redis://127.0.0.1:6379/0").xrange(stream_name)
                        for v in fields.values())
    assert (user.encode() in streamed) is not hidden
