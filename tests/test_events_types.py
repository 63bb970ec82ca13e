"""Events as data: the wire format, what a request's events carry, the plugins' policies, keys and records."""
from __future__ import annotations

import msgspec
import pytest

import vsr_fast.events as events_pkg
from vsr_fast.routing import load_raw
from vsr_fast.events import cache_store, capture, replay_record
from vsr_fast.events.request import RequestEvents
from vsr_fast.events.types import (
    EVENT_TYPES,
    AnswerCompleted,
    CacheIntent,
    DecisionChosen,
    RequestReceived,
    ShadowAnswered,
    SignalsEvaluated,
    UpstreamAttempted,
    Usage,
    decode_event,
    encode_event,
    event_from_json,
    event_json,
    new_replay_id,
)
from vsr_fast.plugins import response_cache as rc
from vsr_fast.plugins import router_replay as rr
from vsr_fast.protocol.chat import REQUEST_DECODER
from vsr_fast.server.route import decode_chat, route_chat
from vsr_fast.signals.base import Identity
from vsr_fast.upstream import Attempt


class ListSink:
    """Stands in for EventSink where only the recorded events matter."""

    def __init__(self) -> None:
        self.events: list = []

    def record(self, event) -> None:
        encode_event(event)          # what the real sink does first: it must encode
        self.events.append(event)

    def record_many(self, events) -> None:
        for event in events:
            self.record(event)


def test_public_surface_is_pinned():
    for name in events_pkg.__all__:
        assert hasattr(events_pkg, name), name
    assert {"RequestEvents", "EventSink", "open_event_stream", "open_event_services", "ReplayRecords",
            "run_consumer"} <= set(events_pkg.__all__)


@pytest.mark.parametrize("cls", EVENT_TYPES)
def test_every_kind_round_trips_in_msgpack_and_json(cls):
    ev = cls(replay_id="r1", request_id="q", session_id="s", recipe="default", config_version="v", seq=3, ts_ms=5)
    assert decode_event(encode_event(ev)) == ev
    assert event_from_json(event_json(ev)) == ev


def test_events_are_strict_and_tagged():
    data = msgspec.msgpack.encode({"kind": "decision_chosen", "replay_id": "r", "surprise": 1})
    with pytest.raises(msgspec.ValidationError, match="surprise"):
        decode_event(data)
    data = msgspec.msgpack.encode({"kind": "no_such_kind", "replay_id": "r"})
    with pytest.raises(msgspec.ValidationError):
        decode_event(data)


def test_replay_ids_sort_by_time_and_do_not_repeat():
    ids = [new_replay_id() for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(len(i) == 24 for i in ids)
    assert ids[0][:12] <= ids[-1][:12]


CONFIG = {
    "version": "v0.5",
    "providers": {"models": [{"name": m, "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}
                             for m in ("code-model", "general-model")]},
    "recipes": [{"name": "default",
                 "signals": {"keywords": [{"name": "code", "keywords": ["python", "rust"]}]},
                 "decisions": [
                     {"name": "code", "priority": 10, "modelRefs": [{"model": "code-model"}, {"model": "general-model"}],
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "code"}]}},
                     {"name": "general", "priority": 0, "modelRefs": [{"model": "general-model"}]}]}],
}


async def _route(text: str):
    raw = msgspec.json.encode({"model": "vsr/auto", "messages": [{"role": "user", "content": text}]})
    request = decode_chat(raw)
    route = await route_chat(load_raw(CONFIG).table, request, lambda: Identity("ana", frozenset({"eng"})))
    return raw, request, route


async def test_a_request_s_events_are_numbered_and_carry_its_identity():
    sink = ListSink()
    policy = rr.ReplayPolicy(capture_request_body=True)
    ev = RequestEvents(sink, config_version="cfg1", request_id="req-1", session_id="sess-1", policy=policy)
    raw, request, route = await _route("a rust question")
    ev.routed(raw, request, route, identity=Identity("ana", frozenset({"eng"})))
    ev.attempt(Attempt("code-model", "b0", 503, None, 0.01))
    ev.attempt(Attempt("general-model", "b1", 200, None, 0.02, fallback=True))
    ev.answer(status=200, response_path="fallback", model="general-model", streamed=False,
              finish_reason="stop", usage=Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7))
    kinds = [type(e) for e in sink.events]
    assert kinds == [RequestReceived, SignalsEvaluated, DecisionChosen, UpstreamAttempted, UpstreamAttempted,
                     AnswerCompleted]
    assert [e.seq for e in sink.events] == list(range(6))
    assert {(e.replay_id, e.request_id, e.session_id, e.recipe, e.config_version) for e in sink.events} == {
        (ev.replay_id, "req-1", "sess-1", "default", "cfg1")}
    received, signals, decision, a1, a2, _ = sink.events
    assert received.user == "ana" and received.groups == ["eng"]
    assert decode_chat(received.request).messages[0].content == "a rust question"
    assert signals.readings[0].matched is True and signals.coverage == 1.0 and "keyword" in signals.timings_us
    assert (decision.decision, decision.model, decision.candidates) == ("code", "code-model",
                                                                        ["code-model", "general-model"])
    assert [v.name for v in decision.verdicts if v.matched] == ["code", "general"]
    assert (a1.fallback, a2.fallback, a2.attempt) == (False, True, 2)


async def test_without_capture_the_events_keep_no_request_and_no_identity():
    sink = ListSink()
    ev = RequestEvents(sink, config_version="c", policy=rr.ReplayPolicy())
    raw, request, route = await _route("a rust question")
    ev.routed(raw, request, route, identity=Identity("ana"))
    received = sink.events[0]
    assert received.request is None and received.user is None and received.body_bytes == len(raw)
    off = rr.ReplayPolicy(capture_request_body=True, capture_personal_data=False)
    assert off.request_bytes == 0 and not RequestEvents(sink, config_version="c").kept


def test_the_request_copy_is_capped_and_keeps_the_current_turn_longest():
    history = [{"role": "user", "content": "old " * 500}, {"role": "assistant", "content": "answer " * 500},
               {"role": "user", "content": "rust " * 100},
               {"role": "user", "content": [{"type": "text", "text": "look"},
                                            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 9000}}]}]
    request = REQUEST_DECODER.decode(msgspec.json.encode({"model": "m", "messages": history}))
    body, cut = capture.request_copy(request, 1024)
    assert cut and body is not None and len(body) <= 1024
    copy = decode_chat(body)
    assert copy.messages[-1].content[1].image_url.url == "data:image/png;omitted"
    assert len(copy.messages[0].content) < len(copy.messages[2].content)
    small, cut = capture.request_copy(REQUEST_DECODER.decode(b'{"messages":[{"role":"user","content":"hi"}]}'), 1024)
    assert not cut and decode_chat(small).messages[0].content == "hi"


def test_a_messages_or_responses_copy_is_the_body_as_received_capped_so_it_still_decodes():
    from vsr_fast.protocol import anthropic

    doc = {"model": "claude-x", "max_tokens": 64, "system": "s " * 200, "messages": [
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 9000}},
            {"type": "text", "text": "old " * 400}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": "rust question"}]}
    raw = msgspec.json.encode(doc)
    assert capture.body_copy(raw, len(raw)) == (raw, False)
    body, cut = capture.body_copy(raw, 1024)
    assert cut and body is not None and len(body) <= 1024
    copy = anthropic.REQUEST_DECODER.decode(body)   # names, ids and tags are never cut
    assert copy.messages[0].content[0].source.data == "" and copy.messages[0].content[0].source.media_type
    assert copy.messages[1].content[0].name == "Bash" and copy.messages[2].content == "rust question"
    assert len(copy.messages[0].content[1].text) < 1600   # the longest texts were cut first
    responses = msgspec.json.encode({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/png;base64," + "B" * 5000},
        {"type": "input_text", "text": "hi"}]}]})
    body, cut = capture.body_copy(responses, 200)
    assert cut and b"data:image/png;omitted" in body and b'"hi"' in body
    assert capture.body_copy(b"[1, 2, 3]" * 100, 10) == (None, True)
    assert capture.body_copy(raw, 0) == (None, True)


def test_answer_facts_read_whole_and_streamed_answers():
    whole = b'{"id":"x","choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{}}}'
    facts = capture.answer_facts(whole, False)
    assert (facts.finish_reason, facts.usage.total_tokens, facts.complete, facts.error) == ("stop", 3, True, False)
    sse = (b'data: {"choices":[{"index":0,"delta":{"content":"h"}}]}\n\n'
           b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n')
    assert capture.answer_facts(sse, True).finish_reason == "length" and capture.answer_facts(sse, True).complete
    cut = sse.replace(b"data: [DONE]\n\n", b"")
    assert not capture.answer_facts(cut, True).complete
    err = sse.replace(b"data: [DONE]", b'data: {"error":{"message":"boom"}}')
    assert capture.answer_facts(err, True).error


@pytest.mark.parametrize("body, streamed, reason, usage, complete, error", [
    # Messages: stop_reason in the record's (Chat's) words; input/output tokens as prompt/completion tokens.
    (b'{"type":"message","stop_reason":"stop_sequence","usage":{"input_tokens":5,"output_tokens":2}}', False,
     "stop", (5, 2, 7), True, False),
    (b'{"type":"message","stop_reason":"max_tokens","usage":{"input_tokens":5,"output_tokens":9}}', False,
     "length", (5, 9, 14), True, False),
    (b'event: message_start\ndata: {"type":"message_start",'
     b'"message":{"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
     b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},'
     b'"usage":{"output_tokens":3}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n', True,
     "tool_calls", (5, 3, 8), True, False),
    (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5}}}\n\n', True,
     None, (5, 0, 5), False, False),
    (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"x"}}\n\n', True,
     None, None, False, True),
    # Responses: status and incomplete_details; a function call ends as tool_calls.
    (b'{"object":"response","status":"completed","output":[{"type":"message"}],'
     b'"usage":{"input_tokens":4,"output_tokens":6,"total_tokens":10}}', False, "stop", (4, 6, 10), True, False),
    (b'{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},'
     b'"output":[],"usage":{"input_tokens":4,"output_tokens":6,"total_tokens":10}}', False,
     "length", (4, 6, 10), True, False),
    (b'event: response.completed\ndata: {"type":"response.completed","response":{"status":"completed",'
     b'"output":[{"type":"function_call"}],"usage":{"input_tokens":4,"output_tokens":6,"total_tokens":10}}}\n\n',
     True, "tool_calls", (4, 6, 10), True, False),
    (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"hi"}\n\n', True,
     None, None, False, False),
    (b'event: error\ndata: {"type":"error","code":"server_error","message":"boom"}\n\n', True,
     None, None, False, True),
])
def test_answer_facts_read_messages_and_responses_answers(body, streamed, reason, usage, complete, error):
    facts = capture.answer_facts(body, streamed)
    got = None if facts.usage is None else (facts.usage.prompt_tokens, facts.usage.completion_tokens,
                                            facts.usage.total_tokens)
    assert (facts.finish_reason, got, facts.complete, facts.error) == (reason, usage, complete, error)


def test_the_cache_key_includes_the_client_api():
    policy = rc.resolve(msgspec.convert({"enabled": True}, rc.ResponseCacheConfig, strict=True))
    raw = b'{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}'
    kw = {"recipe": "r", "decision": "d", "guard": None, "policy": policy, "principal": ""}
    assert rc.cache_key(raw, api="chat", **kw) != rc.cache_key(raw, api="messages", **kw)
    assert rc.semantic_partition(raw, api="chat", **kw) != rc.semantic_partition(raw, api="messages", **kw)


def test_answer_capture_keeps_a_prefix_and_counts_everything():
    cap = capture.AnswerCapture(5)
    for chunk in (b"abc", b"defg", b"hi"):
        cap.feed(chunk)
    assert (cap.body(), cap.size, cap.truncated) == (b"abcde", 9, True)


# --- the plugins' policies ----------------------------------------------------------------


def _replay(doc: dict) -> rr.RouterReplayConfig:
    return msgspec.convert(doc, rr.RouterReplayConfig, strict=True)


def test_router_replay_layers_override_field_by_field():
    glob = _replay({"enabled": True, "max_body_bytes": 100, "shadow": {"model": "cand", "sample_rate": 0.1}})
    recipe = _replay({"capture_request_body": True, "shadow": {"sample_rate": 0.5}})
    policy = rr.resolve(glob, recipe, None)
    assert policy.capture_request_body and policy.max_body_bytes == 100 and policy.request_bytes == 100
    assert policy.shadow == rr.ShadowPolicy(model="cand", sample_rate=0.5)
    assert rr.resolve(glob, _replay({"shadow": None})).shadow is None
    assert not rr.resolve().enabled and rr.resolve(_replay({})).enabled
    assert not rr.resolve(glob, _replay({"enabled": False})).enabled
    with pytest.raises(msgspec.ValidationError, match="max_body_bytes"):
        _replay({"max_body_bytes": -1})
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        _replay({"capture_bodies": True})


def test_router_replay_check_names_a_shadow_without_a_known_model():
    errors = rr.check([("global.plugins[0]", _replay({"shadow": {"model": "ghost"}}))], ["general-model"])
    assert errors == ["global.plugins[0].shadow.model: unknown_model: shadow model 'ghost' is not in providers.models"]
    errors = rr.check([("recipes[r].plugins[0]", _replay({"shadow": {"sample_rate": 1.0}}))], ["m"])
    assert errors[0].startswith("recipes[r].plugins[0].shadow.model: missing_field")
    assert rr.check([("g", _replay({"shadow": {"model": "m"}})), ("d", _replay({"shadow": None}))], []) == []


def test_response_cache_key_covers_request_guard_revision_and_principal():
    policy = rc.resolve(msgspec.convert({"enabled": True}, rc.ResponseCacheConfig, strict=True))
    a = b'{"model":"vsr/auto","messages":[{"role":"user","content":"hi"}],"temperature":0,"user":"x"}'
    b = b'{"temperature":0, "messages":[{"content":"hi","role":"user"}],"model":"vsr/auto"}'
    key = lambda raw, **kw: rc.cache_key(raw, **{"recipe": "r", "decision": "d", "guard": None,
                                                 "policy": policy, "principal": "user:ana", **kw})
    assert key(a) == key(b)
    assert key(a) != key(a.replace(b'"hi"', b'"hi!"'))
    assert key(a) != key(a, guard={"rules": [{"action": "block"}]})
    assert key(a) != key(a, principal="user:bob")
    assert key(a) != key(a, decision="other")
    revised = rc.resolve(msgspec.convert({"revision": {"policy_revision": "2"}}, rc.ResponseCacheConfig, strict=True))
    assert key(a) != key(a, policy=revised)
    assert rc.principal("user", user=None) == "anonymous" and rc.principal("global", user="ana") == ""
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"mode": "fuzzy"}, rc.ResponseCacheConfig, strict=True)
    # The semantic partition: everything but the conversation, so a paraphrase shares it and nothing else does.
    part = lambda raw, **kw: rc.semantic_partition(raw, **{"recipe": "r", "decision": "d", "guard": None,
                                                            "policy": policy, "principal": "user:ana", **kw})
    assert part(a) == part(a.replace(b'"hi"', b'"hello"'))
    assert part(a) != part(a.replace(b'"temperature":0', b'"temperature":1'))
    assert part(a) != part(a, principal="user:bob") and part(a) != part(a, guard={"rules": []})
    # An attachment is not text: another image, file id or audio clip is another partition, in every API.
    img = lambda url, text="what is this": msgspec.json.encode({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]}]})
    assert part(img("http://a/1.png")) == part(img("http://a/1.png", "what is this?"))
    assert part(img("http://a/1.png")) != part(img("http://a/2.png"))
    file = lambda fid, text="sum it up": msgspec.json.encode({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": text}, {"type": "input_file", "file_id": fid}]}]})
    assert part(file("f1"), api="responses") == part(file("f1", "summarize"), api="responses")
    assert part(file("f1"), api="responses") != part(file("f2"), api="responses")
    block = lambda data, system="be brief": msgspec.json.encode({"model": "m", "system": system, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                    "data": data}}, {"type": "text", "text": "what"}]}]})
    assert part(block("AAAA"), api="messages") == part(block("AAAA", "be short"), api="messages")
    assert part(block("AAAA"), api="messages") != part(block("BBBB"), api="messages")


WHOLE = b'{"id":"x","choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}]}'
SSE = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def answer(**kw) -> AnswerCompleted:
    fields = {"replay_id": "r", "status": 200, "body": WHOLE, "body_bytes": len(WHOLE), "content_type": "application/json",
              "cache": CacheIntent(key="k", ttl_seconds=60), **kw}
    return AnswerCompleted(**fields)


@pytest.mark.parametrize("fields, reason", [
    ({}, None),
    ({"guard": "passed"}, None),
    ({"guard": "noted"}, None),
    ({"streamed": True, "held": True, "body": SSE, "body_bytes": len(SSE)}, None),
    ({"guard": "blocked"}, "blocked"),
    ({"guard": "flagged"}, "flagged"),
    ({"guard": "over_limit"}, "over_limit"),
    ({"guard": "incomplete"}, "incomplete"),
    ({"complete": False}, "incomplete"),
    ({"body": WHOLE.replace(b',"finish_reason":"stop"', b"")}, "incomplete"),
    ({"body": WHOLE.replace(b"stop", b"length")}, "truncated"),
    ({"streamed": True, "body": SSE.replace(b"data: [DONE]\n\n", b"")}, "incomplete"),
    ({"status": 500}, "error"),
    ({"body": b'{"error":{"message":"x"}}'}, "error"),
    ({"body_truncated": True}, "incomplete"),
    ({"body_bytes": 10 << 20}, "too_large"),
])
def test_only_answers_the_guard_released_whole_may_be_cached(fields, reason):
    assert cache_store.skip_reason(answer(**fields), 1 << 20) == reason


async def test_a_record_is_folded_from_its_events_in_order_whatever_the_arrival():
    sink = ListSink()
    policy = rr.ReplayPolicy(capture_request_body=True, capture_response_body=True, max_body_bytes=10)
    ev = RequestEvents(sink, config_version="c", request_id="q", policy=policy)
    raw, request, route = await _route("python please")
    ev.routed(raw, request, route)
    ev.attempt(Attempt("code-model", "b0", 200, None, 0.01))
    cap = capture.AnswerCapture(1000)
    cap.feed(SSE)
    ev.answer(status=200, response_path="upstream", model="code-model", streamed=True, held=True, guard="passed",
              content_type="text/event-stream", captured=cap, cache=CacheIntent(key="k", ttl_seconds=9))
    shadow = ShadowAnswered(replay_id=ev.replay_id, seq=0, model="cand", status=200, body=b"x")
    stored = [replay_record.for_record(e) for e in [shadow, *reversed(sink.events)]]
    rec = replay_record.build_record(stored)
    assert (rec.id, rec.request_id, rec.recipe, rec.decision, rec.selected_model, rec.model) == (
        ev.replay_id, "q", "default", "code", "code-model", "code-model")
    assert rec.matched_signals == ["keyword:code"] and rec.attempts[0].backend == "b0"
    assert (rec.streamed, rec.stream, rec.guard, rec.finish_reason) == (True, "buffered", "passed", "stop")
    assert rec.response_body == SSE[:10].decode() and rec.response_truncated
    assert rec.cache.key == "k" and rec.shadow[0].model == "cand" and rec.events == 6
    assert rec.request_body is None and rec.request_truncated   # 10 bytes cannot hold even the skeleton
    assert msgspec.json.decode(msgspec.json.encode(rec))["decision"] == "code"


async def test_events_built_with_few_keywords_are_the_events_built_with_all():
    # RequestEvents builds RequestReceived and AnswerCompleted without their optional fields when all are at
    # their defaults (a cheaper call, bench/RESULTS.md issue 14): the events and their bytes must be the same.
    sink = ListSink()
    ev = RequestEvents(sink, config_version="cfg1", request_id="req-1")
    raw, request, route = await _route("a rust question")
    ev.routed(raw, request, route)
    ev.answer(status=200, response_path="upstream", model="code-model", streamed=False, content_type="application/json")
    received, answered = sink.events[0], sink.events[-1]
    whole = RequestReceived(
        replay_id=ev.replay_id, request_id="req-1", session_id=None, recipe="default", config_version="cfg1", seq=0,
        ts_ms=ev.started_ms, replay=False, api="chat", model="vsr/auto", stream=False, body_bytes=len(raw),
        request=None, request_truncated=False, user=None, groups=[], shadow=None)
    assert received == whole and encode_event(received) == encode_event(whole)
    whole = AnswerCompleted(
        replay_id=ev.replay_id, request_id="req-1", session_id=None, recipe="default", config_version="cfg1",
        seq=answered.seq, ts_ms=answered.ts_ms, replay=False, status=200, response_path="upstream",
        model="code-model", streamed=False, held=False, complete=True, finish_reason=None, usage=None, guard="none",
        guard_codes=[], duration_ms=answered.duration_ms, ttfb_ms=None, content_type="application/json", body=None,
        body_bytes=0, body_truncated=False, replay_body_bytes=0, cache=None, cost=None, cost_currency=None)
    assert answered == whole and encode_event(answered) == encode_event(whole)
    # One optional field set: the whole call, the field kept.
    ev.answer(status=200, response_path="upstream", model="code-model", streamed=False, cost=0.5, cost_currency="USD")
    assert (sink.events[-1].cost, sink.events[-1].cost_currency) == (0.5, "USD")


def _whole_attempt(ev: RequestEvents, built: UpstreamAttempted, attempt: Attempt, n: int,
                   hop: int | None = None) -> UpstreamAttempted:
    usage = None if attempt.usage is None else Usage(prompt_tokens=attempt.usage[0], completion_tokens=attempt.usage[1],
                                                    total_tokens=sum(attempt.usage))
    return UpstreamAttempted(
        replay_id=ev.replay_id, request_id="req-1", session_id="s", recipe=None, config_version="cfg1", seq=built.seq,
        ts_ms=built.ts_ms, replay=False, attempt=n, model=attempt.model, backend=attempt.backend, status=attempt.status,
        error=attempt.error, duration_ms=attempt.seconds * 1000, fallback=attempt.fallback, usage=usage, hop=hop)


def test_an_executor_s_calls_are_numbered_hops_and_only_a_retry_within_one_is_a_fallback():
    sink = ListSink()
    ev = RequestEvents(sink, config_version="c")
    # Two parallel calls (ratings): a answered at once; b's first backend failed, its second answered.
    ev.attempts([Attempt("a", "a0", 200, None, 0.01), Attempt("b", "b0", 503, None, 0.01, failed=True),
                 Attempt("b", "b1", 200, None, 0.01, fallback=True)], hops=True)
    assert [(e.model, e.hop, e.fallback) for e in sink.events] == [("a", 1, False), ("b", 2, False), ("b", 2, True)]
    ev.attempts([Attempt("m", "m0", 503, None, 0.01), Attempt("m2", "m1", 200, None, 0.01, fallback=True)])
    assert [(e.hop, e.fallback) for e in sink.events[3:]] == [(None, False), (None, True)]


@pytest.mark.parametrize("usage", [None, (3, 4)])
def test_attempts_and_answers_built_in_two_steps_are_the_events_built_with_all(usage):
    # UpstreamAttempted and AnswerCompleted take their usual fields in one call and the rest in a replace (16
    # keywords or more take CPython's slow call, bench/RESULTS.md issue 14): every field and byte as one call gives.
    sink = ListSink()
    ev = RequestEvents(sink, config_version="cfg1", request_id="req-1", session_id="s")
    tries = [Attempt("a", "b0", 503, "busy", 0.01, usage=usage), Attempt("b", "b1", 200, None, 0.02, usage=usage,
                                                                     fallback=True)]
    for n, attempt in enumerate(tries, 1):
        for hop in (None, n):       # the provider call's attempts, and a Looper hop's
            ev.attempt(attempt, hop=hop)
            whole = _whole_attempt(ev, sink.events[-1], attempt, sink.events[-1].attempt, hop)
            assert sink.events[-1] == whole and encode_event(sink.events[-1]) == encode_event(whole)
    meter = None if usage is None else Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
    captured = capture.AnswerCapture(64)
    captured.feed(b'{"ok": true}')
    for kw in ({"usage": meter}, {"usage": meter, "ttfb_ms": 2.5}, {"ttfb_ms": 2.5},
               {"usage": meter, "held": True, "finish_reason": "stop", "guard": "flagged", "guard_codes": ("x",),
                "ttfb_ms": 1.5, "captured": captured, "cache": CacheIntent(key="k", ttl_seconds=5), "cost": 0.5,
                "cost_currency": "USD"}):
        ev.answer(status=201, response_path="fallback", model="b", streamed=True, complete=False,
                  content_type="text/event-stream", **kw)
        got = sink.events[-1]
        whole = AnswerCompleted(
            replay_id=ev.replay_id, request_id="req-1", session_id="s", recipe=None, config_version="cfg1",
            seq=got.seq, ts_ms=got.ts_ms, replay=False, status=201, response_path="fallback", model="b", streamed=True,
            held=kw.get("held", False), complete=False, finish_reason=kw.get("finish_reason"), usage=kw.get("usage"),
            guard=kw.get("guard", "none"), guard_codes=list(kw.get("guard_codes", ())), duration_ms=got.duration_ms,
            ttfb_ms=kw.get("ttfb_ms"), content_type="text/event-stream",
            body=captured.body() if "captured" in kw else None, body_bytes=captured.size if "captured" in kw else 0,
            body_truncated=False, replay_body_bytes=0, cache=kw.get("cache"), cost=kw.get("cost"),
            cost_currency=kw.get("cost_currency"))
        assert got == whole and encode_event(got) == encode_event(whole)


def test_a_copy_of_many_texts_is_cut_in_a_bounded_number_of_whole_encodings(monkeypatch):
    # Each cut used to re-encode the whole body: 2,000 turns of 3 KB took 30 s of a worker's CPU.
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "lorem " * 500}
             for i in range(400)]
    raw = msgspec.json.encode({"model": "m", "messages": turns})
    request = REQUEST_DECODER.decode(raw)
    whole = []
    encode = capture._encode
    monkeypatch.setattr(capture, "_encode", lambda value: whole.append(value) or encode(value))
    body, cut = capture.request_copy(request, 64 * 1024)
    assert cut and body is not None and len(body) <= 64 * 1024
    assert decode_chat(body).messages[398].content == turns[398]["content"]      # the current user turn kept whole
    assert sum(1 for v in whole if not isinstance(v, capture.Message)) <= 3
    encoder = capture._JSON
    counted = []

    class Counting:
        def encode(self, value):
            counted.append(isinstance(value, dict))
            return encoder.encode(value)

    monkeypatch.setattr(capture, "_JSON", Counting())
    body, cut = capture.body_copy(raw, 64 * 1024)
    assert cut and body is not None and len(body) <= 64 * 1024 and sum(counted) <= 2
    assert decode_chat(body).messages[0].role == "user"
