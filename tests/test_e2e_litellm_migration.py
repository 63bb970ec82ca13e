"""What a team migrating from LiteLLM found (outside-user trial): five answers LiteLLM gives that the router did not.

1. A Chat backend whose stream opens with its role chunk (``"role": "assistant", "content": ""``) and then sends its
   error: nothing of the answer reached the client, so it is a failure before the first chunk (LiteLLM's
   ``is_pre_first_chunk``) and the next candidate answers; the held opening chunk still reaches the client, with
   the first content, when the answer goes on.
2. A stream or a whole answer whose backend reports no usage is estimated from its text: the estimate reaches the
   cost, the token metric, the access log and the answer's record, marked estimated; Messages and Responses clients
   read the estimate, not zeros presented as measured.
3. ``stream_usage: false`` strips the client's own ``stream_options`` on the same-format path too.
4. A backend's error text that is not in its API's error shape (FastAPI's ``detail`` list, plain text) is kept
   in the client's error message.
5. Anthropic clients read ``request-id`` (the SDK's ``_request_id``, ``e.request_id``) and ``request_id`` in an
   error body.

The scripted upstream is a real HTTP server in this process, the router a real process, the official SDKs the
clients.
"""
from __future__ import annotations

import json
import re
import threading
import time

import anthropic
import httpx
import openai
import pytest

from . import hostile_upstream
from .procs import config, replay_record, router, wait_for_value, write_config
from .test_e2e_thinking import anthropic_sdk as an, openai_sdk as oa

ASK = [{"role": "user", "content": "Where is the Louvre?"}]
ANSWER = "The Louvre is in Paris, on the right bank of the Seine, in the first arrondissement."
LOCK = threading.Lock()
SEEN: dict[str, list[dict]] = {}
PRICE = {"input": 1000.0, "output": 2000.0, "currency": "USD"}


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                   "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                "finish_reason": finish}]}).encode() + b"\n\n"


ROLE = _chunk({"role": "assistant", "content": ""})
OVERLOADED = b'data: {"error":{"message":"The server is overloaded","type":"server_error","code":503}}\n\n'
DONE = b"data: [DONE]\n\n"
WHOLE = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ANSWER}}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}


class Scripted(hostile_upstream.Handler):
    """The first path segment is the backend: ``errearly`` (role chunk, then its error), ``backup`` and ``nousage``
    (an answer that never reports usage, whatever the request asks), ``wholenousage`` (the same, whole even to a
    stream request), ``slowrole`` (the role chunk, then the answer 0.3 s later), ``fastapi`` (FastAPI's 422),
    ``plain`` (a long text/plain 500)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        backend = self.path.strip("/").split("/")[0]
        with LOCK:
            SEEN.setdefault(backend, []).append(body)
        if backend == "fastapi":
            self.whole(422, json.dumps({"detail": [{"loc": ["body", "temperature"], "msg": "bad temperature",
                                                    "type": "value_error"}]}).encode())
        elif backend == "plain":
            self.send_response(500)
            text = ("model worker crashed: CUDA out of memory. " * 10).encode()
            self.send_header("content-type", "text/plain; charset=utf-8")
            self.send_header("content-length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
        elif not body.get("stream") or backend == "wholenousage":
            answer = {k: v for k, v in WHOLE.items() if k != "usage"} if "nousage" in backend else WHOLE
            self.whole(200, json.dumps(answer).encode())
        elif backend == "errearly":
            self.sse([ROLE, OVERLOADED, DONE])
        elif backend == "slowrole":
            self.sse_paced([(ROLE, 0.3), (_chunk({"content": "late"}), 0), (_chunk({}, "stop"), 0), (DONE, 0)])
        else:
            words = ANSWER.split(" ")
            self.sse([ROLE, *(_chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)),
                      _chunk({}, "stop"), DONE])

    def sse_paced(self, events: list[tuple[bytes, float]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event, pause in events:
            self.wfile.write(b"%x\r\n" % len(event) + event + b"\r\n")
            self.wfile.flush()
            time.sleep(pause)
        self.wfile.write(b"0\r\n\r\n")


def seen(backend: str) -> list[dict]:
    with LOCK:
        return list(SEEN.get(backend, ()))


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        def one(name: str, fmt: str = "openai", **extra) -> dict:
            return {"name": name, "api_format": fmt, "backend_refs": [{"endpoint": f"{url}/{name}/v1"}], **extra}
        models = [one("errearly"), one("backup"), one("slowrole"), one("fastapi"), one("plain"),
                  one("nousage", stream_usage=False, pricing=PRICE), one("wholenousage", stream_usage=False)]
        doc = config(models, [{"name": "fallback", "modelRefs": [{"model": "errearly"}, {"model": "backup"}]}])
        doc["global"] = {"router": {"access_log": {"enabled": True},
                                    "upstream": {"retries": {"max_retries": 0},
                                                 "outlier": {"consecutive_failures": 1000}}},
                         "plugins": [{"type": "router_replay", "configuration": {}}]}
        with router(write_config(doc, str(tmp_path_factory.mktemp("litellm")))) as proc:
            yield proc


# --- 1. an error right after the opening role chunk is a failure before the first chunk -------------------------


def test_an_error_after_the_role_chunk_fails_over_for_a_chat_client(gw):
    tried = len(seen("errearly"))
    raw = oa(gw).chat.completions.with_raw_response.create(model="vsr/auto", messages=ASK, stream=True)
    chunks = list(raw.parse())
    assert raw.headers["x-vsr-selected-model"] == "backup" and raw.headers["x-vsr-response-path"] == "fallback"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER
    assert chunks[0].choices[0].delta.role == "assistant"       # the backup's own opening chunk, once
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1
    assert len(seen("errearly")) == tried + 1


def test_an_error_after_the_role_chunk_fails_over_for_a_messages_client(gw):
    with an(gw).messages.stream(model="vsr/auto", max_tokens=64, messages=ASK) as s:
        kinds = [e.type for e in s]
        final = s.get_final_message()
    assert "error" not in kinds and final.content[0].text == ANSWER


def test_with_no_candidate_left_the_error_is_answered_whole_with_its_status(gw):
    with pytest.raises(openai.InternalServerError) as caught:
        list(oa(gw).chat.completions.create(model="errearly", messages=ASK, stream=True))
    assert caught.value.status_code == 503 and "The server is overloaded" in caught.value.message


def test_the_held_role_chunk_goes_out_with_the_first_content_and_no_later(gw):
    with httpx.stream("POST", f"{gw.url}/v1/chat/completions", timeout=10,
                      json={"model": "slowrole", "messages": ASK, "stream": True}) as r:
        pieces = r.iter_raw()
        first = next(pieces)
        rest = first + b"".join(pieces)
    assert r.status_code == 200
    events = [json.loads(line[6:]) for line in rest.split(b"\n") if line.startswith(b"data: {")]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[1]["choices"][0]["delta"]["content"] == "late"
    # The held role chunk leaves in one write with the first content (0.3 s in), never alone before it.
    assert b'"late"' in first, "the held role chunk went out before the first content"


# --- 2. a stream that reports no usage is estimated, and says so -------------------------------------------------


def metric(gw, pattern: str) -> float:
    found = re.search(pattern, httpx.get(f"{gw.url}/metrics").text, re.M)
    return float(found.group(1)) if found else 0.0


def access_line(gw, request_id: str) -> dict:
    def line():
        found = [json.loads(x) for x in gw.lines if x.startswith("{") and f'"{request_id}"' in x]
        return found[0] if found else None
    return wait_for_value(line, f"the access log line of {request_id}")


def test_a_stream_without_usage_is_estimated_for_cost_metrics_access_log_and_record(gw):
    cost_before = metric(gw, r'^vsr_cost_total\{decision="[^"]*",model="nousage",currency="USD"\} (\S+)$')
    out_before = metric(gw, r'^vsr_tokens_total\{model="nousage",direction="output"\} (\S+)$')
    raw = oa(gw).chat.completions.with_raw_response.create(
        model="nousage", messages=ASK, stream=True, extra_headers={"x-request-id": "est-1"})
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text == ANSWER
    logged = access_line(gw, "est-1")
    assert logged["input_tokens"] > 0 and logged["output_tokens"] == len(ANSWER.encode()) // 4
    assert logged["usage_estimated"] is True
    assert metric(gw, r'^vsr_tokens_total\{model="nousage",direction="output"\} (\S+)$') == \
        out_before + logged["output_tokens"]
    assert metric(gw, r'^vsr_cost_total\{decision="[^"]*",model="nousage",currency="USD"\} (\S+)$') > cost_before
    record = replay_record(gw, raw.headers["x-vsr-replay-id"], answered=True)
    assert record["usage"]["completion_tokens"] == logged["output_tokens"] and record["usage"]["estimated"]


def test_a_chat_client_that_asked_for_usage_gets_the_estimate(gw):
    chunks = list(oa(gw).chat.completions.create(model="nousage", messages=ASK, stream=True,
                                                 stream_options={"include_usage": True}))
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == len(ANSWER.encode()) // 4 and usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_messages_and_responses_clients_read_the_estimate_not_zeros(gw):
    with an(gw).messages.stream(model="nousage", max_tokens=64, messages=ASK) as s:
        list(s)
        final = s.get_final_message()
    assert final.usage.output_tokens == len(ANSWER.encode()) // 4 and final.usage.input_tokens > 0
    events = list(oa(gw).responses.create(model="nousage", input="Where is the Louvre?", stream=True))
    done = events[-1].response
    assert done.usage.output_tokens == len(ANSWER.encode()) // 4 and done.usage.input_tokens > 0


def test_whole_answers_without_usage_reach_every_client_estimated_and_marked_so(gw):
    """A whole answer whose backend reports no usage gets the estimate a stream gets: Messages and Responses
    clients read it (not zeros presented as measured), and the access log and the record mark it estimated."""
    taken = len(ANSWER.encode()) // 4
    estimated = r'^vsr_tokens_estimated_total\{model="nousage",direction="output"\} (\S+)$'
    before = metric(gw, estimated)
    raw = an(gw).messages.with_raw_response.create(model="nousage", max_tokens=64, messages=ASK,
                                                   extra_headers={"x-request-id": "est-whole-msg"})
    message = raw.parse()
    assert message.content[0].text == ANSWER
    assert message.usage.output_tokens == taken and message.usage.input_tokens > 0
    logged = access_line(gw, "est-whole-msg")
    assert (logged["input_tokens"], logged["output_tokens"]) == (message.usage.input_tokens, taken)
    assert logged["usage_estimated"] is True
    assert metric(gw, estimated) == before + taken
    record = replay_record(gw, raw.headers["x-vsr-replay-id"], answered=True)
    assert record["usage"]["completion_tokens"] == taken and record["usage"]["estimated"]
    response = oa(gw).responses.with_raw_response.create(model="nousage", input="Where is the Louvre?",
                                                         extra_headers={"x-request-id": "est-whole-resp"})
    usage = response.parse().usage
    assert usage.output_tokens == taken and usage.input_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert access_line(gw, "est-whole-resp")["usage_estimated"] is True
    chat = oa(gw).chat.completions.create(model="nousage", messages=ASK)
    assert chat.usage is None        # a same-protocol answer passes as the backend wrote it
    # A backend that answers a stream request whole: the events the router writes carry the estimate too.
    with an(gw).messages.stream(model="wholenousage", max_tokens=64, messages=ASK,
                                extra_headers={"x-request-id": "est-whole-stream"}) as s:
        assert s.get_final_text() == ANSWER
        final = s.get_final_message()
    assert final.usage.output_tokens == taken and final.usage.input_tokens > 0
    assert access_line(gw, "est-whole-stream")["usage_estimated"] is True


# --- 3. stream_usage: false strips the client's stream_options on every path --------------------------------------


def test_stream_usage_false_strips_the_clients_own_stream_options(gw):
    list(oa(gw).chat.completions.create(model="nousage", messages=ASK, stream=True,
                                        stream_options={"include_usage": True}))
    assert "stream_options" not in seen("nousage")[-1]


# --- 4. a backend's error text not in its API's shape is kept ------------------------------------------------------


def test_fastapis_detail_list_reaches_both_sdks(gw):
    with pytest.raises(openai.UnprocessableEntityError) as chat_caught:
        oa(gw).chat.completions.create(model="fastapi", messages=ASK)
    assert "body.temperature: bad temperature" in chat_caught.value.message
    with pytest.raises(anthropic.UnprocessableEntityError) as msg_caught:
        an(gw).messages.create(model="fastapi", max_tokens=16, messages=ASK)
    assert "body.temperature: bad temperature" in msg_caught.value.body["error"]["message"]


def test_a_plain_text_error_is_kept_up_to_500_characters(gw):
    with pytest.raises(openai.InternalServerError) as caught:
        oa(gw).chat.completions.create(model="plain", messages=ASK)
    said = caught.value.body["message"]
    assert "CUDA out of memory" in said and said.count("model worker crashed") >= 10


# --- 5. the Anthropic SDK's request id --------------------------------------------------------------------------


def test_anthropic_clients_read_the_request_id_of_answers_errors_and_counts(gw):
    client = an(gw)
    raw = client.messages.with_raw_response.create(model="backup", max_tokens=16, messages=ASK)
    assert raw.headers["request-id"] == raw.headers["x-request-id"]
    assert raw.parse()._request_id == raw.headers["x-request-id"]
    with client.messages.with_streaming_response.create(model="backup", max_tokens=16, messages=ASK,
                                                         stream=True) as streamed:
        assert streamed.headers["request-id"] == streamed.headers["x-request-id"]
    with pytest.raises(anthropic.UnprocessableEntityError) as caught:
        client.messages.create(model="fastapi", max_tokens=16, messages=ASK)
    assert caught.value.request_id and caught.value.request_id == caught.value.response.headers["x-request-id"]
    assert caught.value.body["request_id"] == caught.value.request_id
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="backup", max_tokens=16, messages=[])
    assert refused.value.request_id and refused.value.body["request_id"] == refused.value.request_id
    counted = client.messages.with_raw_response.count_tokens(model="backup", messages=ASK)
    assert counted.headers["request-id"] == counted.headers["x-request-id"]
