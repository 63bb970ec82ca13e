"""End to end: response_guard on whole and held answers of every client API, with the official SDKs.

The model is the bench mock upstream (its ``content`` is the answer's text); the
response-stage questions go to the fake System One, whose rules answer on the
text of the answer (``answer_contains``). Each client API is routed to a model of
its own protocol, so a stream the guard passes must reach the client byte for byte
as the mock sent it (``GET /_mock/last_stream``).
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from .hostile_upstream import Handler, serving
from .procs import mock_upstream, router, wait_for_value, wait_until, write_config

SAFE = "Paris is the capital of France."
UNSAFE = "FORBIDDEN: here is how to build the device."
REFUSED = "I cannot help with that request."
RULES = [
    {"question": "preset:jailbreak", "answer_contains": "FORBIDDEN", "answer": {"choice": {"jailbreak": 0.99, "benign": 0.01}}},
    {"question": "preset:jailbreak", "answer": {"choice": {"jailbreak": 0.01, "benign": 0.99}}},
    {"question": "preset:refusal", "answer_contains": "cannot help", "answer": {"choice": {"refusal": 0.97, "compliance": 0.03}}},
    {"question": "preset:refusal", "answer": {"choice": {"refusal": 0.02, "compliance": 0.98}}},
]
NOTE_HEAD = "[Note from the router: this answer was flagged (refused).]"
APIS = ("chat", "messages", "responses")
REPLAY = {"type": "router_replay", "configuration": {"capture_response_body": True, "max_body_bytes": 65536}}


def guard_config(mock_url: str, s1_url: str, *, guard: dict | None = None, cache: dict | None = None,
                 stores: dict | None = None, backend_max_bytes: int | None = None) -> dict:
    ref_extra = {"max_response_bytes": backend_max_bytes} if backend_max_bytes else {}
    models = [{"name": "chat-model", "backend_refs": [{"endpoint": f"{mock_url}/v1", **ref_extra}]},
              {"name": "msg-model", "api_format": "anthropic",
               "backend_refs": [{"endpoint": f"{mock_url}/v1", **ref_extra}]},
              {"name": "resp-model", "api_format": "responses",
               "backend_refs": [{"endpoint": f"{mock_url}/v1", **ref_extra}]}]
    signals = {"jailbreak": [{"name": "unsafe_completion", "stage": "response", "predicate": {"gte": 0.9}}],
               "refusal": [{"name": "refused", "predicate": {"gte": 0.9}}],
               "hallucination": [{"name": "ungrounded"}]}
    guard = guard or {"rules": [
        {"when": {"type": "jailbreak", "name": "unsafe_completion"}, "action": "block"},
        {"when": {"type": "refusal", "name": "refused"}, "action": "annotate", "details": True, "code": "refused"}]}
    plugins = [{"type": "response_guard", "configuration": guard}]
    if cache:
        plugins.append({"type": "response_cache", "configuration": cache})
    recipes = [{"name": name, "signals": signals, "decisions": [
        {"name": f"guarded-{name}", "rules": {"operator": "AND", "conditions": []},
         "modelRefs": [{"model": model}], "plugins": plugins}]}
        for name, model in (("chat", "chat-model"), ("msg", "msg-model"), ("resp", "resp-model"))]
    doc = {"version": "v0.5", "providers": {"models": models},
           "global": {"model_catalog": {
               "deployments": {"s1": {"provider": "systemone", "endpoint": f"{s1_url}/v1/systemone", "model": "fake",
                                      "timeout_ms": 3000,
                                      "capabilities": {"question_types": ["choice", "noul", "score", "set", "span"]}}},
               "system": {"decision_model": {"deployment": "s1"}}},
               "router": {"headers": {"debug": "any"}}},
           "recipes": recipes,
           "entrypoints": [{"model_names": ["guard-chat"], "recipe": "chat", "default": True},
                           {"model_names": ["guard-msg"], "recipe": "msg"},
                           {"model_names": ["guard-resp"], "recipe": "resp"}]}
    if stores:
        doc["global"]["stores"] = stores
    return doc


@pytest.fixture(scope="module")
def guarded(mock, fake, tmp_path_factory):
    path = write_config(guard_config(mock.url, fake.url), str(tmp_path_factory.mktemp("guard")))
    with router(path) as proc:
        yield proc


def answer_with(mock, content: str, **extra) -> None:
    settings = {"content": content, "chunks": 4, "chunk_interval_ms": 0, "fail_rate": 0.0, "latency_ms": 0, **extra}
    # A bound on a hang, not a measurement: the 65 MiB answer's settings took more than httpx's default 5 s to
    # reach the mock on a loaded box (a make test loop beside make bench).
    httpx.post(f"{mock.url}/_mock/config", json=settings, timeout=120).raise_for_status()
    httpx.post(f"{mock.url}/_mock/reset", timeout=120).raise_for_status()


def set_rules(fake, rules: list[dict]) -> None:
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": rules}).raise_for_status()


def fake_calls(fake) -> list[dict]:
    return httpx.get(f"{fake.url}/_fake/calls").json()["calls"]


def metric(proc, line_start: str) -> float:
    for line in httpx.get(f"{proc.url}/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# --- the three client APIs through their SDKs, whole and streamed ----------------------------------


def chat_client(proc):
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)


def whole(proc, api: str, question: str | None = None):
    """(text, headers) of a whole answer through the API's official SDK. Each API asks its own question:
    the router reuses a System One answer about the same request and answer."""
    question = question or f"What is the capital of France? ({api}, whole)"
    if api == "chat":
        raw = chat_client(proc).chat.completions.with_raw_response.create(
            model="guard-chat", messages=[{"role": "user", "content": question}], extra_headers={"x-vsr-debug": "1"})
        return raw.parse().choices[0].message.content, raw.headers
    if api == "messages":
        raw = anthropic.Anthropic(base_url=proc.url, api_key="x", max_retries=0).messages.with_raw_response.create(
            model="guard-msg", max_tokens=100, messages=[{"role": "user", "content": question}],
            extra_headers={"x-vsr-debug": "1"})
        return raw.parse().content[0].text, raw.headers
    raw = chat_client(proc).responses.with_raw_response.create(model="guard-resp", input=question,
                                                               extra_headers={"x-vsr-debug": "1"})
    return raw.parse().output_text, raw.headers


def streamed(proc, api: str, question: str | None = None):
    """(text, headers) of a streamed answer through the API's official SDK; the SDK raises on a stream error."""
    question = question or f"What is the capital of France? ({api}, streamed)"
    if api == "chat":
        with chat_client(proc).chat.completions.with_streaming_response.create(
                model="guard-chat", messages=[{"role": "user", "content": question}], stream=True,
                extra_headers={"x-vsr-debug": "1"}) as resp:
            text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
            return text, resp.headers
    if api == "messages":
        with anthropic.Anthropic(base_url=proc.url, api_key="x", max_retries=0).messages.with_streaming_response.create(
                model="guard-msg", max_tokens=100, messages=[{"role": "user", "content": question}], stream=True,
                extra_headers={"x-vsr-debug": "1"}) as resp:
            text = "".join(e.delta.text for e in resp.parse() if e.type == "content_block_delta")
            return text, resp.headers
    with chat_client(proc).responses.with_streaming_response.create(
            model="guard-resp", input=question, stream=True, extra_headers={"x-vsr-debug": "1"}) as resp:
        return responses_text(resp.parse()), resp.headers


def responses_text(events) -> str:
    """The text of a Responses stream's events; an error event raises."""
    text = ""
    for e in events:
        if e.type == "response.output_text.delta":
            text += e.delta
        elif e.type in ("error", "response.failed"):
            raise RuntimeError(f"stream error: {e}")
    return text


PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
MODELS = {"chat": "guard-chat", "messages": "guard-msg", "responses": "guard-resp"}


def request_body(api: str, question: str = "What is the capital of France?", **extra) -> dict:
    """A request of the API's own shape to its guarded entrypoint."""
    body: dict = {"model": MODELS[api], **extra}
    if api == "responses":
        body["input"] = question
    else:
        body["messages"] = [{"role": "user", "content": question}]
        if api == "messages":
            body["max_tokens"] = 100
    return body


def raw_stream(proc, api: str) -> httpx.Response:
    """The router's streamed answer as bytes, for the byte-level checks. A Chat client asks for the usage chunk:
    the router asks the backend for it anyway and drops it for a client that did not (tests/test_e2e_usage_streams.py),
    so with it both streams are the same bytes."""
    body = request_body(api, stream=True)
    if api == "chat":
        body["stream_options"] = {"include_usage": True}
    return httpx.post(f"{proc.url}{PATHS[api]}", json=body, headers={"x-vsr-debug": "1"}, timeout=30)


# --- passing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_passing_answer_reaches_the_client_unchanged(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, SAFE)
    text, headers = whole(guarded, api)
    assert text == SAFE
    assert headers["x-vsr-response-path"] == "upstream"
    assert "response_guard=passed" in headers["x-vsr-trace"] and "buffered" not in headers["x-vsr-trace"]
    assert "x-vsr-warnings" not in headers
    # One merged call asked both response-stage questions about the request and the answer.
    calls = [c for c in fake_calls(fake) if "answer" in json.dumps(c["body"])]
    assert len(calls) == 1
    state, questions = calls[0]["body"]["state"], calls[0]["body"]["questions"]
    assert state["answer"] == SAFE and "capital of France" in state["request"]
    assert set(questions) == {"preset:jailbreak", "preset:refusal"}


@pytest.mark.parametrize("api", APIS)
def test_a_passing_held_stream_is_byte_identical_to_the_models(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, SAFE)
    resp = raw_stream(guarded, api)
    assert resp.status_code == 200
    model_said = httpx.get(f"{mock.url}/_mock/last_stream").content
    if api == "responses":      # but for the response's id: the router's own (tests/test_e2e_response_store_owners.py)
        theirs = re.search(rb'"resp_mock_\d+"', model_said).group()
        ours = re.search(rb'"id":\s*("resp_[0-9a-f]{32}")', resp.content).group(1)
        model_said = model_said.replace(theirs, ours)
    assert resp.content == model_said
    assert "response_guard=passed;buffered" in resp.headers["x-vsr-trace"]
    text, _ = streamed(guarded, api)
    assert text == SAFE


# --- blocked ------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_blocked_whole_answer_is_a_403_with_nothing_of_it(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, UNSAFE)
    error = {"chat": openai.PermissionDeniedError, "responses": openai.PermissionDeniedError,
             "messages": anthropic.PermissionDeniedError}[api]
    with pytest.raises(error) as caught:
        whole(guarded, api)
    response = caught.value.response
    assert response.status_code == 403
    assert response.headers["x-vsr-response-path"] == "blocked"
    assert "FORBIDDEN" not in response.text and "device" not in response.text
    assert "response_guard=blocked" in response.headers["x-vsr-trace"]


@pytest.mark.parametrize("api", APIS)
def test_a_blocked_stream_is_the_protocols_error_on_200_with_nothing_of_it(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, UNSAFE)
    before = metric(guarded, f'llm_response_guard_buffered_total{{decision_name="guarded-{api[:4] if api != "messages" else "msg"}",outcome="blocked"}}')
    resp = raw_stream(guarded, api)
    assert resp.status_code == 200 and resp.headers["x-vsr-response-path"] == "blocked"
    assert b"FORBIDDEN" not in resp.content and b"device" not in resp.content
    assert b"response_blocked" in resp.content or b"withheld by the response guard" in resp.content
    assert "response_guard=blocked;buffered" in resp.headers["x-vsr-trace"]
    with pytest.raises(Exception) as caught:
        streamed(guarded, api)
    assert "withheld by the response guard" in str(caught.value)
    decision = {"chat": "guarded-chat", "messages": "guarded-msg", "responses": "guarded-resp"}[api]
    after = metric(guarded, f'llm_response_guard_buffered_total{{decision_name="{decision}",outcome="blocked"}}')
    assert after >= 2 and after > before


def test_a_blocked_responses_stream_raises_the_openai_sdks_api_error(mock, fake, guarded):
    """Both ways the openai SDK streams a Responses answer raise its ``APIError`` on a blocked held stream: the
    stream is ``response.created``, ``response.failed`` (status failed, the 403's code and message) and the
    ``error`` event, with nothing of the answer. A lone ``error`` event made ``responses.stream()`` raise
    ``RuntimeError: Expected to have received response.created before error``."""
    set_rules(fake, RULES)
    answer_with(mock, UNSAFE)
    client = chat_client(guarded)
    seen = []
    with pytest.raises(openai.APIError) as caught:
        with client.responses.stream(model="guard-resp", input="What is the capital of France? (helper)") as s:
            for event in s:
                seen.append(event)
            s.get_final_response()
    assert caught.value.code == "response_blocked" and "withheld by the response guard" in caught.value.message
    assert [e.type for e in seen] == ["response.created", "response.failed"]
    failed = seen[-1].response
    assert failed.id == seen[0].response.id and failed.id.startswith("resp_")
    assert failed.status == "failed" and failed.output == []
    assert failed.error.code == "response_blocked" and "withheld" in failed.error.message
    seen = []
    with pytest.raises(openai.APIError) as caught:
        for event in client.responses.create(model="guard-resp", input="What is the capital of France? (create)",
                                             stream=True):
            seen.append(event.type)
    assert caught.value.code == "response_blocked"
    assert seen == ["response.created", "response.failed"]


# --- annotated ----------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_an_annotated_answer_has_its_warning_and_note(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, REFUSED)
    text, headers = whole(guarded, api)
    assert text == NOTE_HEAD + "\n\n" + REFUSED
    assert headers["x-vsr-warnings"].startswith("refused")
    text, headers = streamed(guarded, api)
    assert text == NOTE_HEAD + "\n\n" + REFUSED
    assert headers["x-vsr-warnings"].startswith("refused")
    assert "response_guard=annotated;buffered" in headers["x-vsr-trace"]


# --- over the bound, failures, a client that leaves -------------------------------------------


@pytest.fixture(scope="module")
def bounded(mock, fake, tmp_path_factory):
    """The guarded router with a 64 KiB bound on every backend's answer; each API's over-limit count is its
    own decision's, so the APIs' tests share it."""
    path = write_config(guard_config(mock.url, fake.url, backend_max_bytes=64 * 1024),
                        str(tmp_path_factory.mktemp("bounded")))
    with router(path) as proc:
        yield proc


@pytest.mark.parametrize("api", APIS)
def test_an_answer_over_the_bound_is_refused_unread(mock, fake, bounded, api):
    """The backend's bound (here 64 KiB; the held bound is 64 MiB, measured in bench/) ends the hold:
    the client gets the stream's error alone, nothing of the answer."""
    set_rules(fake, RULES)
    answer_with(mock, "A" * 200_000 + " tail", chunks=50)
    try:
        resp = raw_stream(bounded, api)
        assert resp.status_code == 200
        assert b"AAAA" not in resp.content and b"more than 65536 bytes" in resp.content
        assert "response_guard=over_limit;buffered" in resp.headers["x-vsr-trace"]
        decision = {"chat": "guarded-chat", "messages": "guarded-msg", "responses": "guarded-resp"}[api]
        assert metric(bounded, f'llm_response_guard_buffered_total{{decision_name="{decision}",outcome="over_limit"}}') == 1
    finally:
        answer_with(mock, SAFE)


@pytest.mark.parametrize("api", APIS)
def test_an_upstream_failure_mid_hold_sends_only_the_failure(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, SAFE + " and more words to split", chunks=6, fail_rate=1.0, fail_mode="midstream")
    resp = raw_stream(guarded, api)
    assert resp.status_code == 200
    assert b"Paris" not in resp.content
    assert b"mid-stream" in resp.content
    assert "response_guard=incomplete;buffered" in resp.headers["x-vsr-trace"]
    assert resp.headers["x-vsr-response-path"] == "error"     # nothing of the answer left: not upstream
    answer_with(mock, SAFE)


@pytest.fixture(scope="module")
def flaky():
    """A model that breaks every answer after its first events."""
    with mock_upstream("--fail-rate", "1", "--fail-mode", "midstream") as proc:
        yield proc


@pytest.fixture(scope="module")
def falling_back(mock, fake, flaky, tmp_path_factory):
    """The guarded router, each decision's first candidate the flaky model of its API's format; guard-broken's
    first candidate streams two good events, then one that is not JSON (the hostile upstream)."""
    doc = guard_config(mock.url, fake.url)
    for m in list(doc["providers"]["models"]):
        doc["providers"]["models"].append({**m, "name": f"flaky-{m['name']}",
                                           "backend_refs": [{"endpoint": f"{flaky.url}/v1"}]})
    for recipe in doc["recipes"]:
        decision = recipe["decisions"][0]
        decision["modelRefs"] = [{"model": f"flaky-{decision['modelRefs'][0]['model']}"}, *decision["modelRefs"]]
    with serving(Handler) as hostile:
        doc["providers"]["models"].append({"name": "broken-chat-model",
                                           "backend_refs": [{"endpoint": f"{hostile}/sse-broken-later/v1"}]})
        broken = {**doc["recipes"][0], "name": "broken"}
        broken["decisions"] = [{**broken["decisions"][0], "name": "guarded-broken",
                                "modelRefs": [{"model": "broken-chat-model"}, {"model": "chat-model"}]}]
        doc["recipes"].append(broken)
        doc["entrypoints"].append({"model_names": ["guard-broken"], "recipe": "broken"})
        with router(write_config(doc, str(tmp_path_factory.mktemp("falling-back")))) as proc:
            yield proc


@pytest.mark.parametrize("api", APIS)
def test_a_held_stream_that_breaks_mid_way_falls_back_to_the_next_candidate(mock, fake, flaky, falling_back, api):
    """Nothing of a held answer reached the client when its model broke: the next candidate answers, as the
    same request whole falls back (Envoy and LiteLLM retry what the client never received)."""
    set_rules(fake, RULES)
    answer_with(mock, SAFE)
    started = httpx.get(f"{flaky.url}/_mock/stats").json()["streams_started"]
    text, headers = streamed(falling_back, api)
    assert text == SAFE
    assert (headers["x-vsr-response-path"], headers["x-vsr-selected-model"]) == \
        ("fallback", {"chat": "chat-model", "messages": "msg-model", "responses": "resp-model"}[api])
    assert "response_guard=passed;buffered" in headers["x-vsr-trace"]
    assert httpx.get(f"{flaky.url}/_mock/stats").json()["streams_started"] == started + 1     # it did break


def test_a_held_stream_whose_events_break_mid_way_falls_back_too(mock, fake, falling_back):
    """An event that is not JSON after two good ones: the same failure whole moves on, and so does the hold."""
    set_rules(fake, RULES)
    answer_with(mock, SAFE)
    with chat_client(falling_back).chat.completions.with_streaming_response.create(
            model="guard-broken", messages=[{"role": "user", "content": "What is the capital?"}], stream=True,
            extra_headers={"x-vsr-debug": "1"}) as resp:
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
        assert (resp.headers["x-vsr-response-path"], resp.headers["x-vsr-selected-model"]) == ("fallback",
                                                                                              "chat-model")
    assert text == SAFE


@pytest.mark.parametrize("api", APIS)
def test_a_client_leaving_mid_hold_cancels_the_upstream(mock, fake, guarded, api):
    set_rules(fake, RULES)
    answer_with(mock, SAFE, chunks=20, chunk_interval_ms=200)
    body: dict = {"model": MODELS[api], "stream": True}
    if api == "responses":
        body["input"] = "hi"
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
        if api == "messages":
            body["max_tokens"] = 100
    with pytest.raises(httpx.ReadTimeout):
        # Nothing leaves a held stream before its end: the client gives up waiting for its first byte.
        httpx.post(f"{guarded.url}{PATHS[api]}", json=body, timeout=httpx.Timeout(30, read=0.8))
    wait_until(lambda: httpx.get(f"{mock.url}/_mock/stats").json()["cancelled"] == 1, "the upstream cancelled")
    answer_with(mock, SAFE)


# --- a guard that cannot change the answer keeps true streaming ----------------------------------


def test_a_flag_only_guard_keeps_true_streaming_and_records_after_the_end(mock, fake, tmp_path):
    set_rules(fake, RULES)
    guard = {"rules": [{"when": {"type": "refusal", "name": "refused"}, "action": "annotate", "code": "refused"}]}
    doc = guard_config(mock.url, fake.url, guard=guard)
    doc["global"]["plugins"] = [REPLAY]
    path = write_config(doc, str(tmp_path))
    answer_with(mock, REFUSED, chunks=20, chunk_interval_ms=100)
    with router(path) as proc:
        first_byte_before_end = False
        with httpx.stream("POST", f"{proc.url}/v1/chat/completions", timeout=30,
                          json={"model": "guard-chat", "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}) as resp:
            assert "x-vsr-warnings" not in resp.headers     # left with the first byte, before the guard read
            chunks = resp.iter_raw()
            next(chunks)
            # The first bytes arrive while the mock is still streaming (it has not finished).
            first_byte_before_end = httpx.get(f"{mock.url}/_mock/stats").json()["completed"] == 0
            rest = b"".join(chunks)
        assert first_byte_before_end and b"[DONE]" in rest
        wait_until(lambda: metric(proc, 'vsr_response_guard_outcomes_total{decision_name="guarded-chat",'
                                        'outcome="annotated",stream="unbuffered"}') == 1, "the guard's record")
        assert metric(proc, "llm_response_guard_buffered_total{") == 0
        record = wait_for_value(lambda: (lambda r: r.json() if r.status_code == 200 and r.json().get("guard") else None)(
            httpx.get(f"{proc.url}/api/v1/replay/{resp.headers['x-vsr-replay-id']}")), "the replay record")
        assert record["stream"] == "unbuffered" and record["guard"] == "flagged" and record["guard_codes"] == ["refused"]
    answer_with(mock, SAFE)


# --- the cache and the guard --------------------------------------------------------------------


CACHE = {"enabled": True, "ttl_seconds": 300}


def ask_chat(proc, text: str, *, stream: bool = False, headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", timeout=30, headers=headers or {},
                      json={"model": "guard-chat", "stream": stream, "messages": [{"role": "user", "content": text}]})


@pytest.fixture(scope="module")
def caching(mock, fake, tmp_path_factory):
    """The guard and the response cache, the replay record saying what was stored. A test's prompts carry its
    parameter, so its cache keys are its own; it reads the skip counters as differences."""
    doc = guard_config(mock.url, fake.url, cache=CACHE)
    doc["global"]["plugins"] = [REPLAY]
    with router(write_config(doc, str(tmp_path_factory.mktemp("caching")))) as proc:
        yield proc


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_cache_keeps_only_what_the_guard_released(mock, fake, caching, stream):
    skipped = ('llm_cache_write_skipped_total{reason="flagged"}', 'llm_cache_write_skipped_total{reason="blocked"}')
    proc = caching
    before = [metric(proc, name) for name in skipped]
    set_rules(fake, RULES)
    # Noted: stored with its note, served as the client received it.
    answer_with(mock, REFUSED)
    first = ask_chat(proc, f"noted {stream}", stream=stream)
    assert first.headers["x-vsr-response-path"] == "upstream" and NOTE_HEAD.encode() in first.content
    # Wait for the first answer's own cache write (its record says so), then ask once: asking again and
    # again until a hit sent each miss to the model, and a later answer could be the one stored.
    def stored():
        r = httpx.get(f"{proc.url}/api/v1/replay/{first.headers['x-vsr-replay-id']}")
        record = r.json() if r.status_code == 200 else {}
        return record if record.get("status") and (record.get("cache") or {}).get("stored") else None

    record = wait_for_value(stored, "the noted answer stored in the cache")
    hit = ask_chat(proc, f"noted {stream}", stream=stream)
    assert hit.headers["x-vsr-response-path"] == "cache" and hit.content == first.content
    assert record["guard"] == "noted" and record["guard_codes"] == ["refused"]
    assert record["stream"] == ("buffered" if stream else None)
    # Blocked: never stored; flagged only in x-vsr-warnings (the refusal question failed): never stored.
    answer_with(mock, UNSAFE)
    assert ask_chat(proc, f"blocked {stream}", stream=stream).headers["x-vsr-response-path"] == "blocked"
    set_rules(fake, RULES[:2] + [{"question": "preset:refusal", "answer": {"error": {"code": "question_failed"}}}])
    answer_with(mock, SAFE)
    flagged = ask_chat(proc, f"flagged {stream}", stream=stream)
    assert flagged.headers["x-vsr-warnings"] == "refused;unknown"
    wait_until(lambda: [metric(proc, name) - was for name, was in zip(skipped, before)] == [1, 1],
               "both skips counted")
    for text in (f"blocked {stream}", f"flagged {stream}"):
        assert ask_chat(proc, text, stream=stream).headers["x-vsr-response-path"] != "cache"


def test_the_cache_works_without_an_event_stream_and_keys_on_the_team(mock, fake, tmp_path):
    doc = guard_config(mock.url, fake.url, cache={**CACHE, "scope": "team"},
                       stores={"event_stream": {"backend": "none"}})
    doc["listeners"] = [{"name": "main", "identity": {"trust_headers": True}}]
    set_rules(fake, RULES)
    answer_with(mock, SAFE)
    red_alice = {"x-authz-user-id": "alice", "x-authz-team": "red"}
    with router(write_config(doc, str(tmp_path))) as proc:
        first = ask_chat(proc, "team cache", headers=red_alice)
        assert first.headers["x-vsr-response-path"] == "upstream"
        hit = wait_for_value(lambda: (lambda r: r if r.headers["x-vsr-response-path"] == "cache" else None)(
            ask_chat(proc, "team cache", headers={"x-authz-user-id": "bob", "x-authz-team": "red"})),
            "a teammate served from the cache")
        assert hit.content == first.content
        other = ask_chat(proc, "team cache", headers={"x-authz-user-id": "carol", "x-authz-team": "blue"})
        assert other.headers["x-vsr-response-path"] == "upstream"
        assert metric(proc, "llm_cache_writes_total") >= 1


def test_a_held_stream_past_64_mib_is_refused_unread(mock, fake, tmp_path):
    """The held bound itself: the backend may send 128 MiB, the guard holds no more than 64 MiB."""
    set_rules(fake, RULES)
    answer_with(mock, "B" * (65 << 20), chunks=260)    # each event under max_event_bytes (1 MiB)
    path = write_config(guard_config(mock.url, fake.url, backend_max_bytes=128 << 20), str(tmp_path))
    try:
        with router(path) as proc:
            resp = raw_stream(proc, "chat")
            assert resp.status_code == 200 and len(resp.content) < 4096 and b"BBBB" not in resp.content
            assert b"64 MiB" in resp.content
            assert "response_guard=over_limit;buffered" in resp.headers["x-vsr-trace"]
            assert not any("preset:" in json.dumps(c["body"]) and "BBBB" in json.dumps(c["body"])
                           for c in fake_calls(fake)), "the guard never read it"
    finally:
        answer_with(mock, SAFE)


@pytest.mark.parametrize("model", ["guard-msg", "guard-resp"])
def test_a_held_stream_translated_from_another_protocol_is_guarded_the_same(mock, fake, guarded, model):
    """A Chat client on a Messages or Responses model: the guard reads the translated stream."""
    set_rules(fake, RULES)
    answer_with(mock, REFUSED)
    client = chat_client(guarded)
    chunks = list(client.chat.completions.create(model=model, stream=True,
                                                 messages=[{"role": "user", "content": f"translated {model}"}]))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == NOTE_HEAD + "\n\n" + REFUSED
    answer_with(mock, UNSAFE)
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model=model, stream=True,
                                            messages=[{"role": "user", "content": f"translated {model} 2"}]))
    assert "withheld by the response guard" in str(caught.value)
    answer_with(mock, SAFE)


# --- the record's codes ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def coded(mock, fake, tmp_path_factory):
    """A router whose guard records a refusal (action none) and blocks a jailbreak, each rule with its code."""
    guard = {"rules": [
        {"when": {"type": "refusal", "name": "refused"}, "action": "none", "code": "seen_refusal"},
        {"when": {"type": "jailbreak", "name": "unsafe_completion"}, "action": "block", "code": "blocked_kw"}]}
    doc = guard_config(mock.url, fake.url, guard=guard)
    doc["global"]["plugins"] = [REPLAY]
    with router(write_config(doc, str(tmp_path_factory.mktemp("coded")))) as proc:
        yield proc


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_blocked_answers_record_carries_every_fired_rules_code(mock, fake, coded, stream):
    """The blocking rule's code is in the replay record's guard_codes, beside a `none` rule's (recorded only)."""
    set_rules(fake, RULES)
    answer_with(mock, "FORBIDDEN: I cannot help with the device.")
    try:
        resp = ask_chat(coded, f"record codes {stream}", stream=stream)
        assert resp.headers["x-vsr-response-path"] == "blocked"
        record = wait_for_value(lambda: (lambda r: r.json() if r.status_code == 200 and r.json().get("guard")
                                         else None)(
            httpx.get(f"{coded.url}/api/v1/replay/{resp.headers['x-vsr-replay-id']}")), "the replay record")
        assert record["guard"] == "blocked" and record["guard_codes"] == ["seen_refusal", "blocked_kw"]
    finally:
        answer_with(mock, SAFE)


@pytest.mark.parametrize("api", APIS)
def test_a_blocked_streams_error_event_carries_the_403s_refusal(mock, fake, guarded, api):
    """The held stream's error event says what the whole answer's 403 says: its type and code."""
    set_rules(fake, RULES)
    answer_with(mock, UNSAFE)
    body = request_body(api, "What is the capital of France? (refusal shape)")
    refused = httpx.post(f"{guarded.url}{PATHS[api]}", json=body, timeout=30)
    assert refused.status_code == 403
    whole_error = refused.json()["error"]
    resp = httpx.post(f"{guarded.url}{PATHS[api]}", json={**body, "stream": True}, timeout=30)
    assert resp.status_code == 200 and resp.headers["x-vsr-response-path"] == "blocked"
    data = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
    event = json.loads(data[-1])
    if api == "chat":        # OpenAI's SDK: a 403 is PermissionDeniedError, the error's type permission_error
        assert event["error"]["type"] == whole_error["type"] == "permission_error"
        assert event["error"]["code"] == whole_error["code"] == "response_blocked"
    elif api == "messages":
        assert event["type"] == "error" and event["error"]["type"] == whole_error["type"] == "permission_error"
    else:
        assert event["type"] == "error" and event["code"] == whole_error["code"] == "response_blocked"
