"""An outside user's trial of the event stream, replay records, ``vsr-replay`` and the shadow, through a real
router, real Redis (a stream of its own per test), the bench mock upstream as the models and the official SDKs:
shadows of every conversation API with the decision's request plugins, late consumer events for evicted records,
the record store's bounds on reload, the preview of every API's body, and ``vsr-replay run`` on what the router
recorded (stateful routes, cut copies, a stream that does not exist)."""
from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
import yaml

from replay.cli import main as replay_main

from .procs import mock_upstream, redis_prefix, router, run_main, wait_for_value, wait_until, write_config

REDIS_URL = "redis://127.0.0.1:6379/0"
SHADOW_SYSTEM = "You are the shadow-checked assistant."


@pytest.fixture
def stream():
    """A stream of this test's own: its records and its consumer groups' keys go with it."""
    with redis_prefix("trial102") as prefix:
        yield f"{prefix}events"


def kw(name: str) -> dict:
    return {"operator": "AND", "conditions": [{"type": "keyword", "name": name}]}


def base_doc(live_url: str, stream: str, replay: dict, *, decisions: list[dict] | None = None,
             models: list[dict] | None = None, signals: dict | None = None) -> dict:
    recipe: dict = {"name": "r", "decisions": decisions or [{"name": "d", "modelRefs": [{"model": "live"}]}]}
    if signals:
        recipe["signals"] = signals
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "live", "backend_refs": [{"endpoint": f"{live_url}/v1"}]},
                                 *(models or [])]},
        "recipes": [recipe],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "r", "default": True}],
        "global": {"plugins": [{"type": "router_replay", "configuration": replay}],
                   "stores": {"event_stream": {"backend": "redis", "stream": stream}}},
    }


def record(proc, replay_id: str) -> httpx.Response:
    return httpx.get(f"{proc.url}/api/v1/replay/{replay_id}", timeout=10)


def metric(proc, line: str) -> float | None:
    text = httpx.get(f"{proc.url}/metrics", timeout=10).text
    found = re.search(rf"^{re.escape(line)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


# --- 1 and 6: every conversation API is shadowed, with the decision's request plugins ----------------------------


def test_messages_and_responses_are_shadowed_like_chat_with_the_decisions_request_plugins(mock, tmp_path, stream):
    with mock_upstream() as cand:
        cand_model = {"name": "cand", "provider_model_id": "claude-cand", "api_format": "anthropic",
                      "backend_refs": [{"endpoint": f"{cand.url}/v1"}]}
        decisions = [{"name": "d", "modelRefs": [{"model": "live"}], "plugins": [
            {"type": "system_prompt", "configuration": {"system_prompt": SHADOW_SYSTEM, "mode": "replace"}},
            {"type": "request_params", "configuration": {"max_tokens_limit": 64}}]}]
        doc = base_doc(mock.url, stream, {"capture_request_body": True, "shadow": {
            "model": "cand", "sample_rate": 1.0, "timeout_seconds": 30}}, decisions=decisions, models=[cand_model])
        with router(write_config(doc, str(tmp_path))) as proc:
            oa = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)
            an = anthropic.Anthropic(base_url=proc.url, api_key="unused", max_retries=0)
            sends = {
                "chat": lambda: oa.chat.completions.with_raw_response.create(
                    model="vsr/auto", max_tokens=500, messages=[{"role": "user", "content": "chat: the sea"}]),
                "messages": lambda: an.messages.with_raw_response.create(
                    model="vsr/auto", max_tokens=500, system="the client's own system",
                    messages=[{"role": "user", "content": "messages: the sea"}]),
                "responses": lambda: oa.responses.with_raw_response.create(
                    model="vsr/auto", input="responses: the sea", max_output_tokens=500),
            }
            for n, (api, send) in enumerate(sends.items(), 1):
                rid = send().headers["x-vsr-replay-id"]
                rec = wait_for_value(lambda: (lambda x: x.json() if x.status_code == 200 and x.json()["shadow"]
                                              else None)(record(proc, rid)), f"the {api} request's shadow", 20)
                (shadow,) = rec["shadow"]
                assert (shadow["model"], shadow["status"]) == ("cand", 200), (api, shadow)
                stats = httpx.get(f"{cand.url}/_mock/stats").json()
                # Each copy written in the candidate's own format (Anthropic's), whatever API the client spoke.
                assert stats["by_api"]["messages"] == n and stats["requests"] == n, (api, stats["by_api"])
                copy = stats["last_request"]["body"]
                assert copy["model"] == "claude-cand" and not copy.get("stream"), (api, copy)
                # The decision's request plugins, as the live model got them: the system prompt replaced, the
                # max_tokens capped.
                assert copy["system"] in (SHADOW_SYSTEM, [{"type": "text", "text": SHADOW_SYSTEM}]), (api, copy)
                assert copy["max_tokens"] == 64, (api, copy)
                assert f"{api}: the sea" in json.dumps(copy["messages"]), (api, copy)
            assert metric(proc, 'vsr_shadow_requests_total{outcome="answered"}') == 3


# --- 2: a late consumer event never makes a record again -------------------------------------------------------


@pytest.mark.parametrize("backend", ["redis", "embedded"])
def test_a_late_shadow_answer_for_an_evicted_record_does_not_bring_it_back(mock, tmp_path, stream, backend):
    """Redis records and the embedded stream's in-memory ones alike."""
    with mock_upstream() as cand:
        cand_model = {"name": "cand", "backend_refs": [{"endpoint": f"{cand.url}/v1"}]}
        doc = base_doc(mock.url, stream, {"max_records": 2, "shadow": {
            "model": "cand", "sample_rate": 1.0, "timeout_seconds": 30, "max_concurrency": 4}}, models=[cand_model])
        if backend == "embedded":
            doc["global"]["stores"]["event_stream"] = {"backend": "embedded", "path": str(tmp_path / "events")}
        with router(write_config(doc, str(tmp_path))) as proc:
            ask = asker(proc)

            # The first request's shadow is held by the candidate while two newer requests evict its record.
            httpx.post(f"{cand.url}/_mock/config", json={"latency_ms": 1500}).raise_for_status()
            first = ask("first")
            wait_until(lambda: httpx.get(f"{cand.url}/_mock/stats").json()["requests"] == 1, "the first copy sent")
            httpx.post(f"{cand.url}/_mock/config", json={"latency_ms": 0}).raise_for_status()
            newer = [ask("second"), ask("third")]
            for rid in newer:
                wait_for_value(lambda: record(proc, rid).status_code == 200 and record(proc, rid).json()["shadow"],
                               f"record {rid} with its shadow")
            assert record(proc, first).status_code == 404, "evicted by max_records: 2"
            wait_until(lambda: metric(proc, 'vsr_shadow_requests_total{outcome="answered"}') == 3,
                       "the first copy's late answer")
            # The late answer is recorded by the recorder after it was appended: give it the time to.
            wait_until(lambda: caught_up(proc), "the recorder caught up")
            assert record(proc, first).status_code == 404, "the late shadow_answer made the record again"
            listed = httpx.get(f"{proc.url}/api/v1/replay", timeout=10).json()
            ids = [x["id"] for x in listed["records"]]
            assert sorted(ids) == sorted(newer), "the newest whole records stay"


def asker(proc):
    """A function sending one Chat turn through ``proc`` and answering its replay id."""
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)

    def ask(text: str) -> str:
        raw = client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=[{"role": "user", "content": text}])
        return raw.headers["x-vsr-replay-id"]

    return ask


def caught_up(proc) -> bool:
    """The replay recorder has acknowledged every event this router appended (its consumer's late ones too)."""
    sent = metric(proc, "vsr_events_sent_total")
    return bool(sent) and metric(proc, 'vsr_events_consumer_acked_total{group="replay-recorder"}') == sent


# --- 5: max_records and ttl_seconds apply on reload ----------------------------------------------------------


def test_a_reload_applies_max_records_and_ttl_seconds_to_the_running_store(mock, tmp_path, stream):
    path = Path(tmp_path) / "router.yaml"
    doc = base_doc(mock.url, stream, {"max_records": 100, "ttl_seconds": 3600})
    path.write_text(yaml.safe_dump(doc))
    with router(str(path)) as proc:
        send = asker(proc)

        def ask(text: str) -> str:
            rid = send(text)
            wait_until(lambda: record(proc, rid).status_code == 200, f"record {rid}")
            return rid

        ids = [ask(f"turn {i}") for i in range(3)]
        doc["global"]["plugins"][0]["configuration"]["max_records"] = 1
        path.write_text(yaml.safe_dump(doc))
        answer = httpx.post(f"{proc.url}/admin/reload", timeout=30).json()
        assert answer["status"] == "reloaded" and answer.get("restart_required", []) == [], answer
        assert [record(proc, rid).status_code for rid in ids] == [404, 404, 200], "max_records: 1 at once"

        doc["global"]["plugins"][0]["configuration"]["ttl_seconds"] = 1
        path.write_text(yaml.safe_dump(doc))
        assert httpx.post(f"{proc.url}/admin/reload", timeout=30).json()["status"] == "reloaded"
        wait_until(lambda: record(proc, ids[2]).status_code == 404, "the record past the new ttl_seconds", 5)
        listed = httpx.get(f"{proc.url}/api/v1/replay", timeout=10).json()
        assert listed["records"] == []


# --- 7: the preview reads every conversation API's body -----------------------------------------------------


def test_the_preview_reads_responses_and_messages_bodies_as_their_endpoints_do(mock, tmp_path, stream):
    # context reads every token of the request, a Messages body's top-level system included; keyword the user's.
    signals = {"keywords": [{"name": "sea", "keywords": ["ocean"]}], "context": [{"name": "long", "min_tokens": 200}]}
    decisions = [{"name": "long", "priority": 20, "rules": {"operator": "AND", "conditions": [
                     {"type": "context", "name": "long"}]}, "modelRefs": [{"model": "live"}]},
                 {"name": "sea", "priority": 10, "rules": kw("sea"), "modelRefs": [{"model": "live"}]},
                 {"name": "other", "priority": 0, "modelRefs": [{"model": "live"}]}]
    doc = base_doc(mock.url, stream, {}, decisions=decisions, signals=signals)
    long_system = "Answer briefly. " * 60
    with router(write_config(doc, str(tmp_path))) as proc:
        url = f"{proc.url}/api/v1/routing/preview"
        cases = [
            ("/v1/responses", {"model": "vsr/auto", "input": "tell me about the ocean"}, "sea"),
            ("/v1/responses", {"model": "vsr/auto", "input": [{"role": "user", "content": "about the ocean"}]}, "sea"),
            ("/v1/messages", {"model": "vsr/auto", "max_tokens": 8, "system": long_system,
                              "messages": [{"role": "user", "content": "hi"}]}, "long"),
            ("/v1/messages", {"model": "vsr/auto", "max_tokens": 8, "system": [{"type": "text", "text": long_system}],
                              "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}, "long"),
            ("/v1/chat/completions", {"model": "vsr/auto", "messages": [{"role": "user", "content": "the ocean"}]},
             "sea"),
        ]
        for path, body, decision in cases:
            answer = httpx.post(url, json=body, timeout=10)
            assert answer.status_code == 200, (body, answer.text)
            assert answer.json()["decision"] == decision, body
            live = httpx.post(f"{proc.url}{path}", json=body, timeout=10)
            assert live.status_code == 200 and live.headers["x-vsr-selected-decision"] == decision, path
        # Named by ?api=: read by that API's decoder, its errors in its words.
        forced = httpx.post(url, params={"api": "responses"}, json={"model": "vsr/auto", "messages": []}, timeout=10)
        assert forced.status_code == 400 and forced.json()["error"]["param"] == "messages", forced.text
        bad = httpx.post(url, params={"api": "images"}, json={"model": "vsr/auto"}, timeout=10)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "api", bad.text


# --- 3, 4 and 9: vsr-replay run on what the router recorded ------------------------------------------------


def vsr_replay(*args: str):
    return run_main(replay_main, args, "vsr-replay", thread=True)


def test_replaying_the_recording_config_counts_stateful_and_cut_routes_and_never_fails_the_gate(
        mock, tmp_path, stream):
    signals = {"keywords": [{"name": "hard", "keywords": ["prove"]}],
               "context": [{"name": "long", "min_tokens": 200}]}
    decisions = [
        {"name": "long", "priority": 300, "rules": {"operator": "AND", "conditions": [
            {"type": "context", "name": "long"}]}, "modelRefs": [{"model": "live"}]},
        {"name": "hard", "priority": 200, "rules": kw("hard"), "modelRefs": [{"model": "live"}],
         "retention": {"ttl_turns": 3}},
        {"name": "chat", "priority": 0, "modelRefs": [{"model": "live"}]}]
    doc = base_doc(mock.url, stream, {"capture_request_body": True, "max_body_bytes": 300},
                   decisions=decisions, signals=signals)
    config_path = write_config(doc, str(tmp_path))
    with router(config_path) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)
        oa_headers = {"x-vsr-session-id": f"s-{uuid.uuid4().hex}"}

        def ask(text: str, **extra) -> str:
            raw = client.chat.completions.with_raw_response.create(
                model="vsr/auto", messages=[{"role": "user", "content": text}], extra_headers=extra or None)
            return raw.headers["x-vsr-selected-decision"]

        assert ask("please prove it", **oa_headers) == "hard"
        assert ask("and then?", **oa_headers) == "hard", "retained from the session's earlier turn"
        assert ask("a plain question") == "chat"
        assert ask("word " * 400) == "long", "400 tokens: the context signal"
        first = client.responses.create(model="vsr/auto", input="please prove it")
        client.responses.create(model="vsr/auto", input="and next?", previous_response_id=first.id)
        wait_until(lambda: caught_up(proc), "the recorder caught up")

    done = vsr_replay("run", "--config", config_path, "--redis", REDIS_URL, "--stream", stream, "--json",
                      "--fail-on-change")
    result = json.loads(done.stdout)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert result["changed"] == 0 and result["moves"] == [], result["moves"]
    assert result["stateful"] == {"retained": 1, "previous_response_id": 1}, result
    assert result["approximate_reasons"] == {"cut": 1}, result
    # The cut copy (300 bytes) is 75 tokens; the live route read 500, and so does the replay's context signal.
    assert result["approximate_changed"] == 0 and result["approximate_moves"] == [], result["approximate_moves"]
    assert result["decisions"]["long"] == {"before": 1, "after": 1}
    assert result["compared"] == 4
    text = vsr_replay("run", "--config", config_path, "--redis", REDIS_URL, "--stream", stream).stdout
    assert "stateful   1 (not compared: a decision retained from an earlier turn" in text, text
    assert "cut at max_body_bytes" in text


def test_a_masking_decisions_requests_are_withheld_by_default_and_run_and_diff_say_so(mock, tmp_path, stream):
    """capture_personal_data left unset on a masking decision keeps no copy of the request as received: run and
    diff count those requests as withheld by decision (not replayable), not as "no request copy"/"only in a"."""
    masking = {"type": "masking", "configuration": {"enabled": True, "signal": "personal",
                                                    "entity_types": ["EMAIL_ADDRESS"]}}
    decisions = [{"name": "masked", "priority": 10, "rules": kw("account"), "modelRefs": [{"model": "live"}],
                  "plugins": [masking]},
                 {"name": "chat", "priority": 0, "modelRefs": [{"model": "live"}]}]
    doc = base_doc(mock.url, stream, {"capture_request_body": True}, decisions=decisions, signals={
        "pii": [{"name": "personal"}], "keywords": [{"name": "account", "operator": "OR", "keywords": ["account"]}]})
    config_path = write_config(doc, str(tmp_path))
    with router(config_path) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)

        def ask(text: str) -> tuple[str, str]:
            raw = client.chat.completions.with_raw_response.create(
                model="vsr/auto", messages=[{"role": "user", "content": text}])
            return raw.headers["x-vsr-selected-decision"], raw.headers["x-vsr-replay-id"]

        masked = [ask(f"the account of jane{i}@example.com") for i in range(2)]
        plain = ask("a plain question")
        assert [d for d, _ in masked] == ["masked", "masked"] and plain[0] == "chat"
        wait_until(lambda: caught_up(proc), "the recorder caught up")
        assert [record(proc, rid).json()["request_body"] for _, rid in masked] == [None, None]
        assert record(proc, plain[1]).json()["request_body"] is not None

    exported, rerouted = tmp_path / "e.jsonl", tmp_path / "r.jsonl"
    assert vsr_replay("export", "--redis", REDIS_URL, "--stream", stream, "--out", str(exported)).returncode == 0
    done = vsr_replay("run", "--config", config_path, "--input", str(exported), "--json", "--out", str(rerouted))
    result = json.loads(done.stdout)
    assert (result["compared"], result["withheld"], result["skipped"]) == (1, {"masked": 2}, {}), result
    text = vsr_replay("run", "--config", config_path, "--input", str(exported)).stdout
    assert "withheld   2 (withheld: masking decision masked keeps no request copy; not replayable)" in text, text
    done = vsr_replay("diff", str(exported), str(rerouted), "--json")
    result = json.loads(done.stdout)
    assert (result["compared"], result["withheld"], result["skipped"]) == (1, {"masked": 2}, {}), result


def test_a_stream_that_does_not_exist_is_exit_2_naming_it(tmp_path, stream):
    cfg = write_config(base_doc("http://127.0.0.1:9", stream, {}), str(tmp_path))
    missing = f"{stream}-typo"
    for args in (("run", "--config", cfg), ("export",)):
        done = vsr_replay(*args, "--redis", REDIS_URL, "--stream", missing)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert f"stream {missing} does not exist on {REDIS_URL}" in done.stderr


def test_a_start_or_end_that_is_no_stream_id_is_one_usage_error_and_a_start_past_the_end_warns(tmp_path, stream):
    import redis
    cfg = write_config(base_doc("http://127.0.0.1:9", stream, {}), str(tmp_path))
    last = redis.Redis.from_url(REDIS_URL).xadd(stream, {"e": b"not an event"}).decode()
    for option, value in (("--start", "garbage"), ("--end", "12-x"), ("--start", "+"), ("--end", "-")):
        done = vsr_replay("run", "--config", cfg, "--redis", REDIS_URL, "--stream", stream, option, value)
        assert done.returncode == 2, (option, value, done.stderr)
        assert f"argument {option}: {value!r} is not a stream entry id" in done.stderr, done.stderr
        assert "Redis" not in done.stderr, done.stderr
    ms = int(last.split("-")[0])
    out = str(tmp_path / "e.jsonl")
    past = vsr_replay("export", "--redis", REDIS_URL, "--stream", stream, "--start", f"{ms + 1}", "--out", out)
    assert past.returncode == 0 and Path(out).read_text() == "", past
    assert f"--start {ms + 1} is at or past the last entry of {stream} ({last})" in past.stderr, past.stderr
    whole = vsr_replay("export", "--redis", REDIS_URL, "--stream", stream, "--start", "-", "--end", "+", "--out", out)
    assert whole.returncode == 0 and "warning" not in whole.stderr, whole.stderr


# --- shadow copies wait for a slot: every sampled copy is sent ---------------------------------------------------


def test_copies_that_find_the_shadow_model_busy_wait_for_it_and_each_record_keeps_its_answer(mock, tmp_path, stream):
    """max_concurrency: 1 and a candidate holding the first copy: the next copies wait, none is skipped."""
    with mock_upstream() as cand:
        cand_model = {"name": "cand", "backend_refs": [{"endpoint": f"{cand.url}/v1"}]}
        doc = base_doc(mock.url, stream, {"shadow": {"model": "cand", "sample_rate": 1.0, "max_concurrency": 1}},
                       models=[cand_model])
        with router(write_config(doc, str(tmp_path))) as proc:
            ask = asker(proc)

            httpx.post(f"{cand.url}/_mock/config", json={"latency_ms": 1500}).raise_for_status()
            ids = [ask("first")]
            wait_until(lambda: httpx.get(f"{cand.url}/_mock/stats").json()["requests"] == 1, "the first copy sent")
            ids += [ask(f"busy {i}") for i in range(4)]
            httpx.post(f"{cand.url}/_mock/config", json={"latency_ms": 0}).raise_for_status()
            wait_until(lambda: caught_up(proc) and all(record(proc, rid).json()["shadow"] for rid in ids),
                       "every record with its shadow answer")
            assert httpx.get(f"{cand.url}/_mock/stats").json()["requests"] == 5
            assert [record(proc, rid).json()["shadow"][0]["status"] for rid in ids] == [200] * 5
