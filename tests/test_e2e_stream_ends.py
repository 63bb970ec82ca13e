"""How a backend's event stream ends, over real sockets: a hostile upstream started here writes chunked SSE
by hand, and the official SDKs read what the router relays.

- a stream cut mid-event, or cut cleanly between events with no terminator (Chat's ``data: [DONE]``,
  Messages' ``message_stop``, Responses' ``response.completed``), ends with the client protocol's error event,
  is recorded incomplete, and the access log and ``vsr_upstream_errors_total`` carry its ``midstream_`` cause;
- nothing a backend sends after its terminator reaches the client, and the router closes that connection;
- one SSE line of 20 MB (no newline for 20 MB) is relayed whole, or refused with the error event.
"""
from __future__ import annotations

import json
import uuid

import anthropic
import httpx
import openai
import pytest

from . import hostile_upstream
from .procs import config, replay_record, router, wait_for_value, wait_until, write_config

LONG = 20 * 1000 * 1000
PIECE = 64 << 10


def chat_chunk(delta: dict, finish: str | None = None) -> bytes:
    doc = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 1, "model": "hostile",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def named(kind: str, doc: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **doc})}\n\n".encode()


_RESPONSE = {"id": "resp_h", "object": "response", "created_at": 1, "model": "hostile", "output": [],
             "status": "in_progress"}
_ITEM = {"id": "msg_h", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Hello there", "annotations": []}]}
_WHERE = {"item_id": "msg_h", "output_index": 0, "content_index": 0}
# Per backend format: (the answer's events before its terminator, the terminator, an event to leak after it).
ANSWERS = {
    "chat": ([chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "Hello "}),
              chat_chunk({"content": "there"}, "stop")], b"data: [DONE]\n\n",
             chat_chunk({"content": "AFTER-DONE-LEAK"})),
    "messages": ([named("message_start", {"message": {
                      "id": "msg_h", "type": "message", "role": "assistant", "model": "hostile", "content": [],
                      "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 0}}}),
                  named("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
                  named("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hello "}}),
                  named("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "there"}}),
                  named("content_block_stop", {"index": 0}),
                  named("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}})],
                 named("message_stop", {}),
                 named("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                     "text": "AFTER-DONE-LEAK"}})),
    "responses": ([named("response.created", {"response": _RESPONSE}),
                   named("response.output_item.added", {"output_index": 0, "item": {
                       **_ITEM, "status": "in_progress", "content": []}}),
                   named("response.content_part.added", {**_WHERE, "part": {
                       "type": "output_text", "text": "", "annotations": []}}),
                   named("response.output_text.delta", {**_WHERE, "delta": "Hello "}),
                   named("response.output_text.delta", {**_WHERE, "delta": "there"}),
                   named("response.output_text.done", {**_WHERE, "text": "Hello there"}),
                   named("response.output_item.done", {"output_index": 0, "item": _ITEM})],
                  named("response.completed", {"response": {**_RESPONSE, "status": "completed", "output": [_ITEM],
                                                            "usage": {"input_tokens": 1, "output_tokens": 2,
                                                                      "total_tokens": 3}}}),
                  named("response.output_text.delta", {**_WHERE, "delta": "AFTER-DONE-LEAK"})),
}
FORMAT_OF_PATH = {"completions": "chat", "messages": "messages", "responses": "responses"}
API_FORMAT = {"chat": "openai", "messages": "anthropic", "responses": "responses"}
# The endless line's bytes: at most these, past the default max_response_bytes (64 MiB); how many each request
# managed to write before the router closed its connection.
ENDLESS_UP_TO = 80 << 20
ENDLESS_SENT: list[int] = []
# How many connections each mode saw closed by the router while it still held them open.
CLOSED: dict[str, int] = {}


class Hostile(hostile_upstream.Handler):
    """``/<mode>/v1/<the format's path>``: chunked SSE of that format, ended as ``mode`` says."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        mode = self.path.strip("/").split("/")[0]
        events, end, leak = ANSWERS[FORMAT_OF_PATH[self.path.rsplit("/", 1)[-1]]]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if mode == "endless":       # Chat only: "Hello ", then a line that never ends, until the router closes
            self.send(*events[:2])
            self.close_connection = True
            sent, piece = 0, b"data: " + b"C" * (PIECE - 6)
            try:
                while sent < ENDLESS_UP_TO:
                    self.send(piece)
                    sent += len(piece)
            except OSError:         # the router closed the connection it stopped reading
                pass
            ENDLESS_SENT.append(sent)
            return
        if mode.startswith("long"):     # Chat only: one line of LONG bytes, in PIECE-sized chunks
            self.send(*events[:2 if mode == "long-default" else 1])     # past max_event_bytes once "Hello " came
            line = chat_chunk({"content": "A" * LONG}) if mode != "long-cut" else b"data: " + b"B" * LONG
            self.send(*(line[i:i + PIECE] for i in range(0, len(line), PIECE)))
            if mode != "long-cut":
                self.send(chat_chunk({}, "stop"), end)
            self.wfile.write(b"0\r\n\r\n")
            return
        hello = next(i for i, event in enumerate(events) if b'"Hello ' in event) + 1
        if mode == "cut-mid":       # the events up to "Hello ", half of the next, and the connection closes unframed
            self.send(*events[:hello])
            self.wfile.write(b"%x\r\n" % 20 + events[hello][:20] + b"\r\n")
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "cut-clean":     # the events up to "Hello ", then a clean end of the body: no terminator
            self.send(*events[:hello])
            self.wfile.write(b"0\r\n\r\n")
            return
        # after-done: the whole answer, then an event and the terminator again, and the body ended (-framed) or
        # held open until the router closes the connection (a bound: 20 s), counted in CLOSED.
        self.send(*events, end)
        self.close_connection = True
        try:
            self.send(leak, end)
            if mode == "after-done-framed":
                self.wfile.write(b"0\r\n\r\n")
                return
            self.connection.settimeout(20)
            closed = self.connection.recv(1) == b""
        except TimeoutError:
            closed = False
        except OSError:         # a reset or a broken pipe: the router closed with bytes it did not read
            closed = True
        if closed:
            CLOSED[self.path] = CLOSED.get(self.path, 0) + 1

    def send(self, *pieces: bytes) -> None:
        """``pieces`` as chunks, in one write."""
        self.wfile.write(b"".join(b"%x\r\n" % len(piece) + piece + b"\r\n" for piece in pieces))
        self.wfile.flush()


@pytest.fixture(scope="module")
def hostile():
    with hostile_upstream.serving(Hostile) as url:
        yield url


MODES = ("cut-mid", "cut-clean", "after-done", "after-done-framed")


@pytest.fixture(scope="module")
def edge(hostile, tmp_path_factory):
    models = [{"name": f"{mode}-{fmt}", "api_format": API_FORMAT[fmt],
               "backend_refs": [{"endpoint": f"{hostile}/{mode}/v1"}]} for mode in MODES for fmt in ANSWERS]
    # A 20 MB event is relayed where max_event_bytes allows it; by default (1 MiB) it is refused.
    models += [{"name": mode, "backend_refs": [{"endpoint": f"{hostile}/{mode}/v1", "max_event_bytes": 32 << 20}]}
               for mode in ("long-ok", "long-cut")]
    models += [{"name": mode, "backend_refs": [{"endpoint": f"{hostile}/{mode}/v1"}]}
               for mode in ("long-default", "endless")]
    doc = config(models, [{"name": "only", "modelRefs": [{"model": models[0]["name"]}]}])
    directory = tmp_path_factory.mktemp("stream-ends")
    doc["global"] = {"router": {"access_log": {"enabled": True}, "upstream": {"retries": {"max_retries": 0}}},
                     "plugins": [{"type": "router_replay"}],
                     "stores": {"event_stream": {"backend": "embedded", "path": str(directory / "events")}}}
    with router(write_config(doc, str(directory))) as proc:
        yield proc


def access_line(edge, request_id: str) -> dict:
    def find():
        lines = (json.loads(x) for x in edge.lines if x.startswith("{") and request_id in x)
        return next((line for line in lines if line.get("request_id") == request_id), None)
    return wait_for_value(find, f"the access log line of {request_id}")


def sdk_stream(edge, api: str, model: str, request_id: str) -> tuple[list, Exception | None, str]:
    """What the client API's official SDK reads of a stream: its events, the exception it raised, the replay id."""
    got: list = []
    headers = {"x-request-id": request_id}
    replay_id = ""
    try:
        if api == "messages":
            client = anthropic.Anthropic(base_url=edge.url, api_key="k", max_retries=0, default_headers=headers)
            raw = client.messages.with_raw_response.create(model=model, max_tokens=16, stream=True,
                                                           messages=[{"role": "user", "content": "hi"}])
        elif api == "chat":
            client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0, default_headers=headers)
            raw = client.chat.completions.with_raw_response.create(
                model=model, stream=True, messages=[{"role": "user", "content": "hi"}])
        else:
            client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0, default_headers=headers)
            raw = client.responses.with_raw_response.create(model=model, input="hi", stream=True)
        replay_id = raw.headers.get("x-vsr-replay-id", "")
        for event in raw.parse():
            got.append(event)
    except (openai.APIError, anthropic.APIError) as exc:
        return got, exc, replay_id
    return got, None, replay_id


def failed_as_its_protocol_says(api: str, got: list, exc: Exception | None) -> str:
    """The error the client read at the stream's end: the SDK's exception. A Responses stream first ends its
    response with ``response.failed`` (the same id as ``response.created``, status failed, the error in it), then
    the ``error`` event the openai SDK raises on."""
    assert exc is not None, got[-3:]
    if api == "responses":
        assert got[-1].type == "response.failed", got[-3:]
        assert not [e for e in got if e.type == "response.completed"]
        failed = got[-1].response
        assert failed.status == "failed" and failed.id == got[0].response.id
        assert failed.error.message == exc.message and failed.error.code == exc.code
    return str(exc)


def text_of(api: str, got: list) -> str:
    if api == "chat":
        return "".join(c.choices[0].delta.content or "" for c in got if c.choices)
    if api == "messages":
        return "".join(e.delta.text for e in got if e.type == "content_block_delta")
    return "".join(e.delta for e in got if e.type == "response.output_text.delta")


def midstream_errors(edge, model: str) -> dict[str, float]:
    metrics = httpx.get(f"{edge.url}/metrics").text
    out = {}
    for line in metrics.splitlines():
        if line.startswith("vsr_upstream_errors_total{") and f'model="{model}"' in line:
            cause = line.split('cause="', 1)[1].split('"', 1)[0]
            out[cause] = float(line.rsplit(" ", 1)[1])
    return out


@pytest.mark.parametrize("fmt", list(ANSWERS))
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_a_stream_cut_mid_event_logs_its_midstream_cause_on_every_client_api(edge, api, fmt):
    model, rid = f"cut-mid-{fmt}", f"cut-mid-{api}-{fmt}-{uuid.uuid4().hex[:8]}"
    got, exc, _ = sdk_stream(edge, api, model, rid)
    said = failed_as_its_protocol_says(api, got, exc)
    assert "failed mid-stream" in said, said
    assert text_of(api, got) == "Hello "          # what came before the cut still came
    line = access_line(edge, rid)
    # The backend closed its connection mid-answer (h11: "peer closed connection..."): named so, not a protocol error.
    assert (line["path"], line["cause"]) == ("upstream", "midstream_connection_closed"), line
    assert line["error"] and line["message"]
    assert midstream_errors(edge, model).get(line["cause"], 0) >= 1      # the metric counts the same cause


@pytest.mark.parametrize("fmt", list(ANSWERS))
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_a_stream_cut_cleanly_between_events_ends_with_the_error_event_and_is_incomplete(edge, api, fmt):
    """The events up to the first text, then a clean end of the chunked body with no terminator: not an
    answer, though every byte of it was well formed."""
    model, rid = f"cut-clean-{fmt}", f"cut-clean-{api}-{fmt}-{uuid.uuid4().hex[:8]}"
    got, exc, replay_id = sdk_stream(edge, api, model, rid)
    said = failed_as_its_protocol_says(api, got, exc)
    assert "failed mid-stream" in said and "ended its event stream before the answer did" in said, said
    assert text_of(api, got) == "Hello "          # what came before the cut still came
    line = access_line(edge, rid)
    assert (line["path"], line["cause"], line["error"]) == ("upstream", "midstream_invalid_answer",
                                                            "upstream_invalid_answer"), line
    assert midstream_errors(edge, model).get("midstream_invalid_answer", 0) >= 1
    record = replay_record(edge, replay_id, answered=True)
    assert record["complete"] is False, record      # so no cache keeps it


def test_the_openai_sdk_raises_on_a_chat_stream_cut_before_done(edge):
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0)
    chunks = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in client.chat.completions.create(model="cut-clean-chat", stream=True,
                                                    messages=[{"role": "user", "content": "hi"}]):
            chunks.append(chunk)
    assert "no data: [DONE]" in str(caught.value)
    assert [c.choices[0].delta.content for c in chunks] == ["", "Hello "]


@pytest.mark.parametrize("fmt", list(ANSWERS))
def test_the_openai_sdks_responses_stream_helper_raises_its_api_error_on_a_stream_cut(edge, fmt):
    """``responses.stream()`` accumulates the response: a cut stream must reach it as an ``openai.APIError`` (it
    raised ``RuntimeError: Didn't receive a response.completed event`` on a lone ``error`` event)."""
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0)
    seen = []
    with pytest.raises(openai.APIError) as caught:
        with client.responses.stream(model=f"cut-clean-{fmt}", input="hi") as stream:
            for event in stream:
                seen.append(event.type)
            stream.get_final_response()
    assert "failed mid-stream" in str(caught.value)
    assert seen[0] == "response.created" and seen[-1] == "response.failed", seen
    assert "response.output_text.delta" in seen


BODIES = {"chat": {"messages": [{"role": "user", "content": "hi"}]},
          "messages": {"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
          "responses": {"input": "hi"}}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
TERMINATORS = {"chat": b"data: [DONE]\n\n", "messages": b"event: message_stop\n",
               "responses": b"event: response.completed\n"}


@pytest.mark.parametrize("fmt", list(ANSWERS))
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_nothing_after_the_terminator_reaches_the_client_and_that_connection_is_closed(edge, api, fmt):
    """The backend sends its terminator, an event, the terminator again, and holds the body open: the client's
    stream ends whole at the first terminator, and the router closes the connection it stopped reading."""
    rid = f"after-done-{api}-{fmt}-{uuid.uuid4().hex[:8]}"
    path = f"/after-done{PATHS[fmt]}"       # where the router sends a model of backend format fmt
    closed = CLOSED.get(path, 0)
    with httpx.stream("POST", f"{edge.url}{PATHS[api]}", headers={"x-request-id": rid}, timeout=60,
                      json={"model": f"after-done-{fmt}", "stream": True, **BODIES[api]}) as r:
        body = r.read()
    assert r.status_code == 200
    assert b"AFTER-DONE-LEAK" not in body, body[-300:]
    assert b"event: error" not in body and b'data: {"error"' not in body, body[-300:]
    assert body.count(TERMINATORS[api]) == 1 and body.endswith(b"\n\n")
    if api == fmt:                  # the same protocol: the bytes up to the terminator, as the backend sent them
        events, end, _ = ANSWERS[fmt]
        sent = b"".join(events) + end
        if api == "responses":   # but for the response's id: the router's own, in every event
            ours = json.loads(body.split(b"data: ", 1)[1].split(b"\n", 1)[0])["response"]["id"]
            assert ours != "resp_h"
            sent = sent.replace(b'"resp_h"', json.dumps(ours).encode())
        assert body == sent
    wait_until(lambda: CLOSED.get(path, 0) > closed, "the router closing the backend's connection")
    line = access_line(edge, rid)
    assert (line["status"], line["path"], line.get("cause"), line.get("error")) == (200, "upstream", None, None)


def test_a_chat_stream_ends_at_its_first_done_when_the_body_goes_on(edge):
    """The trial's case: [DONE], a chunk, [DONE] again, then the body ends. (The openai SDK itself stops
    reading at the first [DONE]; a client reading the bytes got the rest.)"""
    r = httpx.post(f"{edge.url}/v1/chat/completions", timeout=60,
                   json={"model": "after-done-framed-chat", "stream": True, **BODIES["chat"]})
    events, end, _ = ANSWERS["chat"]
    assert r.status_code == 200 and r.content == b"".join(events) + end
    record = replay_record(edge, r.headers["x-vsr-replay-id"], answered=True)
    assert record["complete"] is True and record["status"] == 200


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_20_mb_line_is_relayed_whole(edge, api):
    """One event of 20 MB, in 64 KiB reads: passed through (Chat) or parsed and translated (Messages)."""
    rid = f"long-ok-{api}-{uuid.uuid4().hex[:8]}"
    got, exc, _ = sdk_stream(edge, api, "long-ok", rid)
    assert exc is None
    text = text_of(api, got)
    assert len(text) == LONG and text == "A" * LONG
    assert access_line(edge, rid)["status"] == 200


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_line_that_never_ends_is_cut_at_max_event_bytes_not_at_max_response_bytes(edge, api):
    """The trial's case: a backend writes one SSE line of 64 KiB blocks without end. The stream ends with the
    error event once the line passes max_event_bytes (1 MiB), and the router closes the connection then: the
    backend got far fewer bytes in than max_response_bytes (64 MiB), which each such stream held before."""
    rid = f"endless-{api}-{uuid.uuid4().hex[:8]}"
    before = len(ENDLESS_SENT)
    got, exc, _ = sdk_stream(edge, api, "endless", rid)
    said = failed_as_its_protocol_says(api, got, exc)
    assert "failed mid-stream" in said and "C" * 100 not in said, said[:300]
    assert access_line(edge, rid)["cause"] == "midstream_too_large"
    wait_until(lambda: len(ENDLESS_SENT) > before, "the backend's write failing on the closed connection")
    # What the router read (1 MiB) and what the sockets' buffers took: far below 64 MiB.
    assert ENDLESS_SENT[before] < 24 << 20, ENDLESS_SENT[before]
    assert httpx.get(f"{edge.url}/health").status_code == 200


# A 20 MB line that the body ends before the line does (max_event_bytes 32 MiB), and a whole 20 MB event past the
# default max_event_bytes (1 MiB): each refused with the error event, none of the line relayed.
REFUSED_LINES = {"long-cut": ("B", "midstream_invalid_answer", "not a JSON event of its protocol"),
                 "long-default": ("A", "midstream_too_large", "an event not ended within 1048576 bytes (max_event_bytes)")}


@pytest.mark.parametrize("mode", list(REFUSED_LINES))
@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_20_mb_line_that_never_ends_is_refused_with_the_error_event(edge, api, mode):
    letter, cause, why = REFUSED_LINES[mode]
    rid = f"{mode}-{api}-{uuid.uuid4().hex[:8]}"
    got, exc, _ = sdk_stream(edge, api, mode, rid)
    said = failed_as_its_protocol_says(api, got, exc)
    assert "failed mid-stream" in said and letter * 100 not in said and why in said, said[:300]
    assert access_line(edge, rid)["cause"] == cause
    assert httpx.get(f"{edge.url}/health").status_code == 200
