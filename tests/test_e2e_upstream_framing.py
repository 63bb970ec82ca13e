"""An upstream answer whose head says where its body ends twice (Content-Length and Transfer-Encoding: chunked) is
an upstream protocol error (RFC 9112 6.3: "ought to be handled as an error"; nginx answers 502 "upstream sent
... at the same time"), and a head past what the router holds is too large: over real sockets, a router process in
front of a scripted backend, the official SDKs as clients.

Each is a 502 in the client protocol's error shape, counted by its cause, and the next backend is tried as for
any upstream protocol error; the connection that carried it never goes back to the pool (the backend counts the
requests each of its connections carried)."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler

import anthropic
import httpx
import openai
import pytest

from .hostile_upstream import CHAT, serving
from .procs import config, router, write_config

# The most requests one connection carried to the ``both`` mode, for ``count``.
_MOST = [0]
_LOCK = threading.Lock()
FILLER = b"x-filler-%04d: " + b"f" * 1000 + b"\r\n"


class _Framing(BaseHTTPRequestHandler):
    """``/<mode>/v1/...``: ``both``, a valid chunked chat completion whose head also says ``content-length: 5``;
    ``huge-head``, a 200 whose head holds 2 MB of header lines; ``ok``, a plain one; ``count``, an answer saying how
    many requests the busiest ``both`` connection carried."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.served = getattr(self, "served", 0) + 1        # one handler per connection
        mode = self.path.strip("/").split("/")[0]
        body = json.dumps(CHAT).encode()
        try:
            if mode == "both":
                with _LOCK:
                    _MOST[0] = max(_MOST[0], self.served)
                self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            elif mode == "huge-head":
                self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                 + b"".join(FILLER % n for n in range(2000))
                                 + b"content-length: %d\r\n\r\n%s" % (len(body), body))
            else:
                if mode == "count":
                    body = json.dumps({**CHAT, "choices": [{**CHAT["choices"][0], "message": {
                        "role": "assistant", "content": str(_MOST[0])}}]}).encode()
                self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    with serving(_Framing) as url:
        models = [{"name": "m-both", "backend_refs": [{"endpoint": f"{url}/both/v1", "name": "both"}]},
                  {"name": "m-huge", "backend_refs": [{"endpoint": f"{url}/huge-head/v1", "name": "huge"}]},
                  {"name": "m-count", "backend_refs": [{"endpoint": f"{url}/count/v1"}]},
                  # The ambiguous backend first, then a good one: round robin starts with the first.
                  {"name": "m-two", "backend_refs": [{"endpoint": f"{url}/both/v1", "name": "first"},
                                                     {"endpoint": f"{url}/ok/v1", "name": "second"}]},
                  {"name": "m-ok", "backend_refs": [{"endpoint": f"{url}/ok/v1"}]}]
        doc = config(models, [{"name": "d", "modelRefs": [{"model": "m-both"}, {"model": "m-ok"}]}])
        # One attempt per backend: the counts below are the attempts the test made, not retry rounds.
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("framing")))) as proc:
            yield proc


def _errors(proc) -> dict[tuple[str, str, str], int]:
    metrics = httpx.get(f"{proc.url}/metrics", timeout=10).text
    return {(m, b, c): int(n) for m, b, c, n in re.findall(
        r'^vsr_upstream_errors_total\{model="([\w-]+)",backend="([\w-]+)",cause="(\w+)"\} (\d+)$', metrics, re.M)}


def test_content_length_with_chunked_is_a_502_in_each_clients_shape_and_its_connection_is_not_reused(edge):
    oa = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="x", max_retries=0)
    an = anthropic.Anthropic(base_url=edge.url, api_key="x", max_retries=0)
    for _ in range(3):
        with pytest.raises(openai.APIStatusError) as caught:
            oa.chat.completions.create(model="m-both", messages=[{"role": "user", "content": "hi"}])
        assert caught.value.status_code == 502
        error = caught.value.body
        assert error["code"] == "upstream_failed" and "(protocol_error)" in error["message"], error
    with pytest.raises(openai.APIStatusError) as caught:
        oa.chat.completions.create(model="m-both", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert caught.value.status_code == 502
    with pytest.raises(anthropic.APIStatusError) as caught:
        an.messages.create(model="m-both", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "api_error", \
        caught.value.body
    # Every one of those answers came on a connection of its own: none went back to the pool.
    said = oa.chat.completions.create(model="m-count", messages=[{"role": "user", "content": "count"}])
    assert said.choices[0].message.content == "1"
    assert _errors(edge)[("m-both", "both", "protocol_error")] == 5


def test_the_next_backend_and_the_next_model_are_tried_after_an_ambiguous_answer(edge):
    oa = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="x", max_retries=0)
    for _ in range(2):      # round robin: one of them starts with the ambiguous backend
        said = oa.chat.completions.create(model="m-two", messages=[{"role": "user", "content": "hi"}])
        assert said.choices[0].message.content == "fine"
    assert _errors(edge)[("m-two", "first", "protocol_error")] == 1
    answer = oa.chat.completions.with_raw_response.create(model="vsr/auto",
                                                          messages=[{"role": "user", "content": "hi"}])
    assert answer.headers["x-vsr-selected-model"] == "m-ok"
    assert answer.parse().choices[0].message.content == "fine"


def test_a_head_past_what_the_router_holds_is_too_large(edge):
    oa = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        oa.chat.completions.create(model="m-huge", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert "(too_large)" in caught.value.body["message"], caught.value.body
    assert _errors(edge)[("m-huge", "huge", "too_large")] == 1
