"""A backend's 200 that cannot be read as an answer is its failure for every client API, over real sockets: a
scripted backend started here answers what trial 20 found (invalid UTF-8 in the content, ``prompt_tokens`` as a
string, a stream whose first event is invalid UTF-8), and the next backend answers, whatever API the client speaks.
A usage chunk of the wrong types after a whole answer is ignored, with a warning: the stream the client read ends
whole, not with an error event. A whole answer's tool call whose arguments are not JSON is unreadable for a Messages
client (its tool_use input must be an object), and taken as sent by an OpenAI one.
"""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import anthropic
import httpx
import openai
import pytest

from .hostile_upstream import serving
from .procs import config, router, wait_until, write_config
from .test_e2e_stream_ends import access_line

# The endless whole answer: at most these bytes (past max_response_bytes, 64 MiB), and what each request's backend
# managed to write before the router closed the connection.
ENDLESS_UP_TO = 80 << 20
ENDLESS_SENT: list[int] = []
PATH = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


def chat(text: str = "hello from the backend", usage: object = None) -> dict:
    return {"id": "chatcmpl-u", "object": "chat.completion", "created": 1, "model": "b",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage or {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}


def chunk(delta: dict, finish: str | None = None, **extra) -> bytes:
    doc = {"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1, "model": "b",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


USAGE_CHUNK = b"data: " + json.dumps({"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1,
                                      "model": "b", "choices": [], "usage": {
                                          "prompt_tokens": 10 ** 30, "completion_tokens": -5,
                                          "total_tokens": 1e300}}).encode() + b"\n\n"
# mode -> (content type, body)
MODES = {
    "good": ("application/json", json.dumps(chat()).encode()),
    "utf8bad": ("application/json", json.dumps(chat("he-llo")).encode().replace(b"he-llo", b"he\xff\xfello")),
    "usagestr": ("application/json", json.dumps(chat(usage={"prompt_tokens": "12", "completion_tokens": None})
                                                ).encode()),
    # A Chat tool call whose arguments are not JSON: a Chat or Responses client takes the string as it is (OpenAI's
    # arguments are a string the model may get wrong), a Messages client's tool_use input must be an object.
    "toolbad": ("application/json", json.dumps({**chat(), "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [{
                    "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}}]}
                                               ).encode()),
    "good-sse": ("text/event-stream", chunk({"role": "assistant", "content": "hello "}) + chunk({"content": "there"})
                 + chunk({}, "stop") + b"data: [DONE]\n\n"),
    "utf8bad-sse": ("text/event-stream", chunk({"role": "assistant", "content": "o-k"}).replace(b"o-k", b"o\xffk")
                    + chunk({}, "stop") + b"data: [DONE]\n\n"),
    "usagebig-sse": ("text/event-stream", chunk({"role": "assistant", "content": "ok"}) + chunk({}, "stop")
                     + USAGE_CHUNK + b"data: [DONE]\n\n"),
}


class _Scripted(BaseHTTPRequestHandler):
    """``/<mode>/v1/...``: that mode's body, ``-sse`` added for a stream request."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        stream = json.loads(self.rfile.read(int(self.headers.get("content-length", 0)))).get("stream")
        mode = self.path.strip("/").split("/")[0] + ("-sse" if stream else "")
        if mode == "endless":       # a whole answer's start, then 64 KiB blocks until the router closes
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            sent, block = 0, b"a" * (64 << 10)
            try:
                self.wfile.write(b'{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"')
                while sent < ENDLESS_UP_TO:
                    self.wfile.write(block)
                    sent += len(block)
            except OSError:
                pass
            ENDLESS_SENT.append(sent)
            return
        content_type, body = MODES[mode]
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    with serving(_Scripted) as url:
        # Weighted so that every request here tries the bad backend first (round robin gives the good one the
        # first turn once in 1001 rounds).
        models = [{"name": f"{mode}-then-good", "backend_refs": [{"endpoint": f"{url}/{mode}/v1", "weight": 1000},
                                                                  {"endpoint": f"{url}/good/v1"}]}
                  for mode in ("utf8bad", "usagestr", "toolbad", "endless")]
        models += [{"name": mode, "backend_refs": [{"endpoint": f"{url}/{mode}/v1"}]} for mode in ("usagebig", "toolbad")]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": models[0]["name"]}]}])
        doc["global"] = {"router": {"access_log": {"enabled": True}, "upstream": {
            "retries": {"max_retries": 0}, "outlier": {"consecutive_failures": 1000},
            "max_buffered_bytes": 4 << 20}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("unreadable")))) as proc:
            yield proc


def post(edge, api: str, model: str, rid: str, stream: bool) -> httpx.Response:
    body = ({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
            if api != "responses" else {"model": model, "input": "hi"})
    return httpx.post(f"{edge.url}{PATH[api]}", json={**body, "stream": stream}, timeout=30,
                      headers={"x-request-id": rid})


def failed(body: bytes) -> bool:
    """An error in any client API's words: an error event, Chat's error chunk or body, a failed response."""
    return any(mark in body for mark in (b"event: error", b'"error":{', b'"error": {', b"response.failed"))


def first_attempt_failed(edge, rid: str) -> None:
    """The access log: two attempts, the first (the bad backend) failed for its answer."""
    line = access_line(edge, rid)
    assert line["status"] == 200 and line["attempts"] == 2, line
    assert line["failed_backends"] and "," not in line["failed_backends"], line   # one failed: the first


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
# A stream's usage of the wrong types is ignored (below), not a failure: no usagestr stream.
@pytest.mark.parametrize("mode, stream", [("utf8bad", False), ("usagestr", False), ("utf8bad", True)])
def test_an_unreadable_200_moves_on_to_the_next_backend_for_every_client_api(edge, api, mode, stream):
    rid = f"{mode}-{api}-{'stream' if stream else 'whole'}"
    r = post(edge, api, f"{mode}-then-good", rid, stream)
    assert r.status_code == 200, r.text
    assert b"\xff" not in r.content
    assert (b"hello" in r.content) if not stream else (b"hello " in r.content and b"there" in r.content), r.text
    assert not failed(r.content), r.text
    first_attempt_failed(edge, rid)


def test_the_anthropic_sdk_gets_the_second_backends_answer_after_an_unreadable_first(edge):
    client = anthropic.Anthropic(base_url=edge.url, api_key="k", max_retries=0)
    message = client.messages.create(model="utf8bad-then-good", max_tokens=16,
                                     messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "hello from the backend"


@pytest.mark.parametrize("api", ["messages", "responses", "chat"])
def test_a_usage_chunk_of_the_wrong_types_is_ignored_and_the_stream_ends_whole(edge, api):
    rid = f"usagebig-{api}"
    r = post(edge, api, "usagebig", rid, True)
    assert r.status_code == 200
    assert not failed(r.content), r.text
    ends = {"messages": b"event: message_stop\n", "responses": b"event: response.completed\n",
            "chat": b"data: [DONE]\n\n"}
    assert ends[api] in r.content, r.text[-400:]
    line = access_line(edge, rid)
    assert line["status"] == 200 and not line.get("cause"), line


def test_the_openai_sdk_reads_a_stream_whose_usage_chunk_was_bogus(edge):
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0)
    text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="usagebig", stream=True, messages=[{"role": "user", "content": "hi"}]) if c.choices)
    assert text == "ok"


def test_a_tool_call_whose_arguments_are_not_json_moves_a_messages_client_on_to_the_next_backend(edge):
    """A whole answer's tool_use input was ``{}`` (the call's arguments silently lost) while a streamed one passed the
    string on, which the anthropic SDK refuses (``Unable to parse tool parameter JSON from model``): whole, the
    answer is the backend's failure for a Messages client, as an unreadable one, and the next backend answers."""
    rid = "toolbad-messages-whole"
    r = post(edge, "messages", "toolbad-then-good", rid, False)
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "hello from the backend", r.text
    first_attempt_failed(edge, rid)
    alone = post(edge, "messages", "toolbad", "toolbad-messages-alone", False)
    assert alone.status_code == 502, alone.text
    assert "arguments are not a JSON object" in alone.json()["error"]["message"], alone.text


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_tool_call_whose_arguments_are_not_json_reaches_an_openai_client_as_sent(edge, api):
    r = post(edge, api, "toolbad", f"toolbad-{api}", False)
    assert r.status_code == 200, r.text
    calls = (r.json()["choices"][0]["message"]["tool_calls"] if api == "chat" else
             [{"function": o} for o in r.json()["output"] if o["type"] == "function_call"])
    assert [c["function"]["arguments"] for c in calls] == ["{not json"]


def test_a_whole_answer_past_max_buffered_bytes_moves_on_to_the_next_backend(edge):
    """The trial's case: a backend writes a whole answer's start, then 64 KiB blocks without end. Each answer was held
    up to its max_response_bytes (64 MiB); now the worker's answers being read together are held to
    max_buffered_bytes (4 MiB here): past it the answer is the backend's failure and the next backend answers."""
    before = len(ENDLESS_SENT)
    r = post(edge, "chat", "endless-then-good", "endless-whole", False)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hello from the backend"
    first_attempt_failed(edge, "endless-whole")
    wait_until(lambda: len(ENDLESS_SENT) > before, "the backend's write failing on the closed connection")
    assert ENDLESS_SENT[before] < 24 << 20, ENDLESS_SENT[before]    # 4 MiB read, and the sockets' buffers
