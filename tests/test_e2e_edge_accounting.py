"""What the router says of itself and accounts at its edge, through a real router on a real socket: every answer
names the server ``vsr-fast`` (never the stack under it), an HTTP/1.1 request without Host is a 400 (RFC 9112
3.2), a key is charged the tokens the access log shows, and a charge that raises loses neither the answer nor
the request's access log line."""
from __future__ import annotations

import json
import re
import socket

import h2.config
import h2.connection
import h2.errors
import h2.events
import httpx
import openai
import pytest

from . import hostile_upstream
from .procs import Proc, config, router, wait_for_value, write_config
from .test_e2e_auth import sha
from .test_e2e_edge_hostile import ended, events_until, status_of

KEY = "vsk-edge-" + "e" * 32
ANSWER = "hello"        # 5 bytes: 1.25 tokens at four bytes a token, an estimate of 2
CHAT = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


class NoUsage(hostile_upstream.Handler):
    """A Chat backend whose whole answers report no usage: the router estimates it."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.whole(200, json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                                    "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": ANSWER}}]}).encode())


def _doc(url: str) -> dict:
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["listeners"] = [{"name": "main", "address": "127.0.0.1", "port": 0},
                        {"name": "ops", "role": "admin", "port": 0}]
    doc["global"] = {"router": {"access_log": {"enabled": True},
                                "auth": {"enabled": True, "keys": [{"id": "k-est", "sha256": sha(KEY),
                                                                    "limits": {"tpm": 1_000_000}}]}}}
    return doc


@pytest.fixture(scope="module")
def upstream():
    with hostile_upstream.serving(NoUsage) as url:
        yield url


@pytest.fixture(scope="module")
def edge(upstream, tmp_path_factory):
    with router(write_config(_doc(upstream), str(tmp_path_factory.mktemp("edge-acct")))) as proc:
        yield proc


def access_line(proc, request_id: str) -> dict:
    def line():
        found = [json.loads(x) for x in proc.lines if x.startswith("{") and f'"{request_id}"' in x]
        return found[0] if found else None
    return wait_for_value(line, f"the access log line of {request_id}")


def raw(proc, request: bytes) -> tuple[bytes, bytes]:
    """``request`` on a fresh connection, closed after it; the answer's head and body."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as s:
        s.sendall(request)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    return head, body


def chat_request(version: bytes, host: bool) -> bytes:
    body = json.dumps(CHAT).encode()
    return (b"POST /v1/chat/completions HTTP/%s\r\n%sAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (version, b"Host: r\r\n" if host else b"", KEY.encode(), len(body), body))


def servers(head: bytes) -> list[bytes]:
    return [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")[1:] if line.lower().startswith(b"server:")]


# --- the Host header (RFC 9112 3.2) ---------------------------------------------------------------------------


def test_an_http11_request_without_host_is_refused_400_with_a_request_id_and_logged(edge):
    head, body = raw(edge, chat_request(b"1.1", host=False))
    assert head.startswith(b"HTTP/1.1 400 "), head
    err = json.loads(body)["error"]
    assert err["code"] == "invalid_host" and "Host" in err["message"], err
    rid = re.search(rb"\r\nx-request-id: (\S+)", head).group(1).decode()
    line = access_line(edge, rid)
    assert (line["status"], line["error"], line["api"]) == (400, "invalid_host", "chat")
    # A probe is held to it too; HTTP/1.0 has no Host to send, and is served.
    assert raw(edge, b"GET /health HTTP/1.1\r\n\r\n")[0].startswith(b"HTTP/1.1 400 ")
    assert raw(edge, b"GET /health HTTP/1.0\r\n\r\n")[0].startswith(b"HTTP/1.1 200 ")
    head, body = raw(edge, chat_request(b"1.0", host=False))
    assert head.startswith(b"HTTP/1.1 200 ") and json.loads(body)["choices"][0]["message"]["content"] == ANSWER


def test_an_http2_request_with_neither_authority_nor_host_is_reset_and_the_connection_serves_on(edge):
    # RFC 9113 8.3.1 and 8.1.1: malformed, a stream error PROTOCOL_ERROR (h2 itself holds it); never served.
    def ask(sock, conn, stream_id: int, *authority: tuple[str, str]) -> list:
        conn.send_headers(stream_id, [(":method", "GET"), (":path", "/health"), (":scheme", "http"), *authority],
                          end_stream=True)
        sock.sendall(conn.data_to_send())
        return events_until(sock, conn, ended(stream_id))

    with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as sock:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                    validate_outbound_headers=False))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        reset = [e for e in ask(sock, conn, 1) if isinstance(e, h2.events.StreamReset)]
        assert [(e.stream_id, e.error_code) for e in reset] == [(1, h2.errors.ErrorCodes.PROTOCOL_ERROR)]
        assert status_of(ask(sock, conn, 3, (":authority", "r")), 3) == b"200"
        assert status_of(ask(sock, conn, 5, ("host", "r")), 5) == b"200"


# --- the Server header ----------------------------------------------------------------------------------------


def test_every_answer_names_the_server_vsr_fast_never_the_stack(edge):
    served = raw(edge, chat_request(b"1.1", host=True))[0]
    refused = raw(edge, chat_request(b"1.1", host=False))[0]
    # An edge refusal: h11 refuses the head (its Content-Length is no number) before any app runs.
    at_edge = raw(edge, b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length: abc\r\n\r\n")[0]
    assert at_edge.startswith(b"HTTP/1.1 400 "), at_edge
    for head in (served, refused, at_edge):
        assert servers(head) == [b"vsr-fast"], head
    with httpx.Client(http1=False, http2=True) as h2:
        answer = h2.get(f"{edge.url}/health")
    assert answer.http_version == "HTTP/2" and answer.headers.get_list("server") == ["vsr-fast"]


# --- the key's charge agrees with the access log ---------------------------------------------------------------


def charged(proc) -> int:
    """The tokens the key's tpm window holds, as the admin API reads them."""
    admin = next(line for line in proc.lines if line.startswith("vsr-fast: admin on")).split()[-1]
    key = httpx.get(f"{admin}/api/v1/keys/k-est")
    assert key.status_code == 200, key.text
    return key.json()["usage"]["tpm"]["used"]


def test_an_estimated_usage_charges_the_key_the_tokens_its_log_line_shows(edge):
    before = charged(edge)      # the module's other requests use the key too
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key=KEY, max_retries=0)
    answer = client.chat.completions.create(**CHAT, extra_headers={"x-request-id": "est-charge"})
    assert answer.choices[0].message.content == ANSWER
    line = access_line(edge, "est-charge")
    assert line["usage_estimated"] is True and line["output_tokens"] == 2, line      # 5 bytes: 2 tokens, not 1
    # The line is written after the charge (the request's end): the key's window holds it already.
    used = charged(edge) - before
    assert used == line["input_tokens"] + line["output_tokens"], (used, line)


# --- accounting that raises --------------------------------------------------------------------------------------


def test_a_charge_that_raises_loses_neither_the_answer_nor_the_access_log_line(upstream, tmp_path):
    path = write_config(_doc(upstream), str(tmp_path))
    with Proc(["-m", "tests.faulty_charge", "serve", "--config", path, "--host", "127.0.0.1", "--port", "0"],
              "vsr-fast: serving on", env={"VSR_STATE_DIR": str(tmp_path / "state")}) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        for i in range(3):
            answer = client.chat.completions.create(**CHAT, extra_headers={"x-request-id": f"charged-{i}"})
            assert answer.choices[0].message.content == ANSWER
        lines = [access_line(proc, f"charged-{i}") for i in range(3)]
        assert httpx.get(f"{proc.url}/health").status_code == 200
    for line in lines:
        assert (line["status"], line["model"], line["path"], line["usage_estimated"]) == (200, "m", "upstream", True)
    # Said at ERROR with its traceback, once: not a traceback a request.
    failed = [text for text in proc.lines if text.startswith("ChargeFailed: the key usage store refused")]
    assert len(failed) == 1, "\n".join(proc.lines)
    said = next(text for text in proc.lines if "request accounting raised" in text)
    assert "ERROR" in said, said
