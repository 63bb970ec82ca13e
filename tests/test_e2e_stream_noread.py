"""A stream's client that stops reading, over real sockets: a raw client with a small receive buffer asks the router
for a stream far larger than the sockets between them hold, from the bench mock upstream, and stops reading.

- at the request's deadline the router lets the backend's connection go, whatever the client does, and a client
  that has not resumed within the grace (a second) finds its connection closed, the request recorded as timed out
  and nothing raised;
- one that resumes as the backend is let go reads the rest of what was sent, the ``request_timeout`` error event
  (naming the deadline) and a properly ended chunked body;
- well within a long deadline, ``limits.send_timeout_ms`` between two writes that make progress closes the
  connection of a client that does not read, recorded as ``send_timeout``.

A backend of one connection shows the connection went back: the next client is answered.
"""
from __future__ import annotations

import json
import re
import socket
import uuid

import httpx
import openai
import pytest

from .procs import config, mock_upstream, router, wait_for_value, wait_until, write_config

# Far more than the buffers of the sockets from the backend to the client hold (~10 MB on loopback at most).
CONTENT = "x" * (24 << 20)
CHUNKS = 6000


@pytest.fixture(scope="module")
def upstream():
    with mock_upstream() as mock:
        httpx.post(f"{mock.url}/_mock/config", json={"content": CONTENT, "chunks": CHUNKS},
                   timeout=30).raise_for_status()
        yield mock


def start(upstream, tmp_path, **limits) -> "router":
    # One connection to the backend: a stream still holding it would leave the next client waiting for it.
    doc = config([{"name": "big", "backend_refs": [{"endpoint": f"{upstream.url}/v1", "max_connections": 1,
                                                     "pool_shards": 1}]}],
                 [{"name": "only", "modelRefs": [{"model": "big"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True}, "limits": limits,
                                "upstream": {"retries": {"max_retries": 0}}}}
    return router(write_config(doc, str(tmp_path)))


def stats(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats", timeout=10).json()


def stop_reading_until_let_go(upstream, proc, request_id: str) -> socket.socket:
    """A client's socket once it has asked for the stream, read nothing, and the router has closed the backend's
    connection mid-answer (the mock counts its stream cancelled)."""
    s = ask_and_stop_reading(proc, request_id)
    wait_until(lambda: stats(upstream)["cancelled"] == 1, "the backend's connection let go", timeout=15)
    return s


def ask_and_stop_reading(proc, request_id: str) -> socket.socket:
    body = json.dumps({"model": "big", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", proc.port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"x-request-id: %s\r\ncontent-length: %d\r\n\r\n%s" % (request_id.encode(), len(body), body))
    return s


def read_to_end(s: socket.socket) -> bytes:
    """Everything the router sent, up to its close or the chunked body's end (a bound of 30 s: never a
    measurement)."""
    s.settimeout(30)
    got = bytearray()
    while not got.endswith(b"\r\n0\r\n\r\n") and (data := s.recv(1 << 20)):
        got += data
    return bytes(got)


def access_line(proc, request_id: str) -> dict:
    def find():
        lines = (json.loads(x) for x in proc.lines if x.startswith("{") and request_id in x)
        return next((line for line in lines if line.get("request_id") == request_id), None)
    return wait_for_value(find, f"the access log line of {request_id}", timeout=30)


def timeouts(proc) -> dict[str, int]:
    text = httpx.get(f"{proc.url}/metrics", timeout=10).text
    return {stage: int(float(n)) for stage, n in
            re.findall(r'^vsr_request_timeouts_total\{api="chat",stage="(\w+)"\} (\S+)$', text, re.M)}


def answered_after(proc) -> str:
    """The first event of a well-behaved client's stream from the same one-connection backend (its whole stream
    would outlast a short deadline): a connection still held would leave it waiting, then 504 pool_timeout."""
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0, timeout=60)
    with client.chat.completions.create(model="big", stream=True,
                                        messages=[{"role": "user", "content": "hi"}]) as stream:
        return next(iter(stream)).object


def test_the_deadline_lets_the_backend_go_and_closes_a_client_that_never_reads(upstream, tmp_path):
    httpx.post(f"{upstream.url}/_mock/reset", timeout=10)
    rid = f"noread-{uuid.uuid4().hex[:8]}"
    with start(upstream, tmp_path, request_timeout_ms=1000) as proc:
        s = stop_reading_until_let_go(upstream, proc, rid)
        line = access_line(proc, rid)       # the request has ended while its client still read nothing
        got = read_to_end(s)
        s.close()
        assert got.startswith(b"HTTP/1.1 200"), got[:100]
        # Whether the error event still fits the sockets' buffers when the deadline passes is the kernel's
        # accounting (how many writes filled them: a stream whose held opening chunk left with its first content
        # took one write less, and the 153 bytes fit): either the router wrote it and the request ended at the
        # deadline, or, the buffers full, the grace closed the connection with the end unwritten.
        if got.endswith(b"0\r\n\r\n"):
            assert b'"code":"request_timeout"' in got and line["latency_s"] < 1.5, line
        else:
            assert line["latency_s"] >= 1.9, "a client that read nothing was cut only past the grace"
        assert (line["status"], line["error"]) == (504, "request_timeout"), line
        assert "(1 s)" in line["message"], line
        assert timeouts(proc).get("answer") == 1
        assert answered_after(proc) == "chat.completion.chunk"
        # Cut past the grace, the request's end raised nothing (it was an UnboundLocalError).
        raised = [x for x in proc.lines if "Traceback" in x or "LocalError" in x or "Error in ASGI" in x]
        assert not raised, proc.lines[-20:]


def test_a_client_that_resumes_as_the_backend_is_let_go_reads_the_error_event_and_the_end(upstream, tmp_path):
    httpx.post(f"{upstream.url}/_mock/reset", timeout=10)
    rid = f"resume-{uuid.uuid4().hex[:8]}"
    with start(upstream, tmp_path, request_timeout_ms=1000) as proc:
        s = stop_reading_until_let_go(upstream, proc, rid)
        got = read_to_end(s)
        s.close()
        line = access_line(proc, rid)
    assert got.endswith(b"\r\n0\r\n\r\n"), got[-300:]
    tail = got[-600:].decode("latin-1")
    assert '"code":"request_timeout"' in tail.replace(" ", ""), tail
    assert "deadline (1 s)" in tail, tail
    assert (line["status"], line["error"]) == (504, "request_timeout"), line


def test_send_timeout_closes_a_client_that_stops_reading_within_a_long_deadline(upstream, tmp_path):
    httpx.post(f"{upstream.url}/_mock/reset", timeout=10)
    rid = f"send-{uuid.uuid4().hex[:8]}"
    with start(upstream, tmp_path, request_timeout_ms=600_000, send_timeout_ms=1000) as proc:
        s = stop_reading_until_let_go(upstream, proc, rid)
        line = access_line(proc, rid)
        got = read_to_end(s)
        s.close()
        assert got.startswith(b"HTTP/1.1 200") and not got.endswith(b"0\r\n\r\n"), got[-100:]
        assert (line["status"], line["error"]) == (408, "send_timeout"), line
        assert "1 s" in line["message"], line
        assert timeouts(proc).get("send") == 1
        assert answered_after(proc) == "chat.completion.chunk"
