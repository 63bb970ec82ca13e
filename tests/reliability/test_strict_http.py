"""Request smuggling shapes, wrong methods, media types and sizes (issue 13): each refused in the route's protocol, the smuggled
bytes never served as a second request, and the router keeps serving.

h11 (under hypercorn) accepts bare LF line endings and has no option to refuse them, so they are not
tested as refused here."""
from __future__ import annotations

import gzip
import json

import httpx
import pytest

from vsr_fast.server.app import edge_answer
from vsr_fast.server.asgi import origin_path

from .conftest import connect, edge_router, read_until_closed

SMALL_LIMIT = 64 * 1024
SMUGGLED = b"GET /health HTTP/1.1\r\nHost: router\r\n\r\n"
ROUTES = ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens",
          "/api/v1/routing/preview", "/v1/systemone", "/api/v1/diagnostics/classify/batch"]


@pytest.fixture(scope="module")
def edge(upstream, tmp_path_factory):
    with edge_router(upstream, str(tmp_path_factory.mktemp("strict")), max_body_bytes=SMALL_LIMIT) as proc:
        yield proc


def exchange(proc, raw: bytes) -> list[bytes]:
    """Send ``raw`` on a fresh connection; every response the router wrote before closing it."""
    s = connect(proc)
    with s:
        s.sendall(raw)
        got = read_until_closed(s)
    return [b"HTTP/1.1 " + part for part in got.split(b"HTTP/1.1 ")[1:]]


def parts(response: bytes) -> tuple[int, dict[str, str], bytes]:
    top, _, body = response.partition(b"\r\n\r\n")
    lines = top.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), headers, body


def error_code(path: str, body: bytes) -> str:
    """The machine-readable error of ``body`` in the route's protocol (Anthropic's has only a type)."""
    doc = json.loads(body)
    if path.startswith("/v1/messages"):
        assert doc["type"] == "error"
        return doc["error"]["type"]
    return doc["error"]["code"]


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("order", ["cl-first", "te-first"])
def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(edge, path, order):
    framing = ["Content-Length: 5", "Transfer-Encoding: chunked"]
    if order == "te-first":
        framing.reverse()
    head = "\r\n".join([f"POST {path} HTTP/1.1", "Host: router", "Content-Type: application/json", *framing])
    responses = exchange(edge, head.encode() + b"\r\n\r\n0\r\n\r\n" + SMUGGLED)
    assert len(responses) == 1, responses    # the bytes after the chunked body were never read as a request
    status, headers, body = parts(responses[0])
    assert status == 400 and headers["connection"] == "close"
    expected = "invalid_request_error" if path.startswith("/v1/messages") else "ambiguous_framing"
    assert error_code(path, body) == expected
    assert "Content-Length and Transfer-Encoding" in body.decode()
    assert httpx.get(f"{edge.url}/health", timeout=10).status_code == 200


def metric(proc, line_start: str) -> float:
    """The value of the /metrics line starting with ``line_start`` (0 when absent)."""
    for line in httpx.get(f"{proc.url}/metrics", timeout=10).text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_transfer_encoding_in_an_http_1_0_request_is_refused_and_the_connection_closed(edge, path):
    """RFC 9112 6.1: a server that receives Transfer-Encoding in an HTTP/1.0 request treats its framing as
    faulty (an HTTP/1.0 intermediary would read the body otherwise), as nginx does: 400, connection closed."""
    api = "messages" if path == "/v1/messages" else "chat"
    counted = f'vsr_requests_total{{api="{api}",recipe="",decision="",model="",status="400"}}'
    before = metric(edge, counted)
    body = json.dumps({"model": "vsr/auto", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = "\r\n".join([f"POST {path} HTTP/1.0", "Host: router", "Content-Type: application/json",
                         "Transfer-Encoding: chunked"])
    responses = exchange(edge, head.encode() + b"\r\n\r\n%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    assert len(responses) == 1, responses
    status, headers, answer = parts(responses[0])
    assert status == 400 and headers["connection"] == "close", responses[0]
    assert error_code(path, answer) == ("invalid_request_error" if path == "/v1/messages" else "ambiguous_framing")
    assert "HTTP/1.0" in answer.decode() and "Transfer-Encoding" in answer.decode()
    assert metric(edge, counted) == before + 1, "refused and counted as the other framing refusals are"
    assert httpx.get(f"{edge.url}/health", timeout=10).status_code == 200


# Shapes h11 refuses itself; the test holds the router to it (one refusal, the connection closed).
REFUSED_BY_H11 = {
    "two different Content-Lengths": (b"Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 400),
    "a coding before chunked": (b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    "an unknown coding": (b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 501),
    "chunked twice": (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501),
    "a space before the colon": (b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400),
    "a signed Content-Length": (b"Content-Length: +4\r\n\r\nabcd", 400),
}


@pytest.mark.parametrize("shape", sorted(REFUSED_BY_H11))
def test_other_smuggling_shapes_are_refused_and_the_connection_closed(edge, shape):
    rest, expected = REFUSED_BY_H11[shape]
    responses = exchange(edge, b"POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\n" + rest + SMUGGLED)
    assert len(responses) == 1, responses
    status, headers, _ = parts(responses[0])
    assert status == expected and headers["connection"] == "close"


# What h11 refuses hypercorn answers with its status and no body; the router's connection server puts the error of
# the path the request line named in it (its status kept, the connection closed).
BROKEN_HTTP = {
    "a bad chunk size": (b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "malformed_request"),
    "a Content-Length not a number": (b"Content-Length: abc\r\n\r\n", 400, "malformed_request"),
    "a header name with a space": (b"Bad Name: x\r\nContent-Length: 0\r\n\r\n", 400, "malformed_request"),
    "a 70 KB header": (b"X-Pad: " + b"a" * 70_000 + b"\r\n\r\n", 431, "request_head_too_large"),
    "an unknown coding": (b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 501, "transfer_coding_not_implemented"),
}
ANTHROPIC_TYPES = {400: "invalid_request_error", 431: "invalid_request_error", 501: "api_error"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/systemone", "/health"])
@pytest.mark.parametrize("shape", sorted(BROKEN_HTTP))
def test_what_h11_refuses_gets_its_status_with_the_paths_error(edge, path, shape):
    rest, status, code = BROKEN_HTTP[shape]
    head = f"POST http://router{path} HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\n".encode()
    responses = exchange(edge, head + rest)
    assert len(responses) == 1, responses
    got, headers, body = parts(responses[0])
    assert got == status and headers["connection"] == "close" and headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    assert error_code(path, body) == (ANTHROPIC_TYPES[status] if path.startswith("/v1/messages") else code)


def test_a_request_line_h11_refuses_gets_openais_error(edge):
    got, headers, body = parts(exchange(edge, b"NOT A REQUEST LINE AT ALL\r\n\r\n")[0])
    assert got == 400 and json.loads(body)["error"]["code"] == "malformed_request"
    assert httpx.get(f"{edge.url}/health", timeout=10).status_code == 200


@pytest.mark.parametrize("path", ROUTES + ["/v1/decisions", "/chat/completions", "/v1/images/generations"])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_a_method_other_than_post_gets_405_in_the_routes_protocol(edge, path, method):
    r = httpx.request(method, f"{edge.url}{path}", timeout=10)
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == "POST"
    expected = "invalid_request_error" if path.startswith("/v1/messages") else "method_not_allowed"
    assert error_code(path, r.content) == expected


# The routes served by method (quart's and the System One listing): a wrong method is 405 with the methods served.
GET_ROUTES = {"/health": {"GET", "HEAD", "OPTIONS"}, "/ready": {"GET", "HEAD", "OPTIONS"},
              "/metrics": {"GET", "HEAD", "OPTIONS"}, "/v1/models": {"GET", "HEAD", "OPTIONS"},
              "/v1/systemone/models": {"GET", "HEAD"}, "/admin/reload": {"POST", "OPTIONS"},
              "/api/v1/keys": {"GET", "HEAD", "OPTIONS", "POST"}}


@pytest.mark.parametrize(("method", "path"), [("PUT", "/health"), ("POST", "/metrics"), ("GET", "/admin/reload"),
                                              ("DELETE", "/ready"), ("POST", "/v1/models"),
                                              ("POST", "/v1/systemone/models"), ("PUT", "/api/v1/keys")])
def test_a_wrong_method_on_a_get_route_gets_405_with_allow(edge, method, path):
    with httpx.Client(base_url=edge.url, timeout=10) as client:
        r = client.request(method, path)
        assert r.status_code == 405, r.text
        assert {m.strip() for m in r.headers["allow"].split(",")} == GET_ROUTES[path]
        assert error_code(path, r.content) == "method_not_allowed"
        assert client.get("/health").status_code == 200


def test_head_on_the_systemone_listing_is_its_head(edge):
    r = httpx.head(f"{edge.url}/v1/systemone/models", timeout=10)
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["content-length"]) == len(httpx.get(f"{edge.url}/v1/systemone/models", timeout=10).content)


@pytest.mark.parametrize("scheme", ["http", "HTTP"])
def test_an_absolute_form_target_is_routed_by_its_path(edge, scheme):
    # RFC 9112 3.2.2: a server MUST accept the absolute-form (a proxy's form); hypercorn puts all of it in the path.
    body = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}).encode()
    target = f"{scheme}://127.0.0.1:{edge.port}"
    raw = (f"POST {target}/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    raw += f"GET {target}/health HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    raw += f"PUT {target}/v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode()
    raw += f"GET {target}?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()   # no path: "/"
    chat, health, messages, root = (parts(r) for r in exchange(edge, raw))
    assert chat[0] == 200 and json.loads(chat[2])["choices"], chat
    assert health[0] == 200 and json.loads(health[2]) == {"status": "ok"}
    assert messages[0] == 405 and error_code("/v1/messages", messages[2]) == "invalid_request_error"
    assert root[0] == 404 and error_code("/", root[2]) == "not_found"


@pytest.mark.parametrize(("target", "path"), [
    (b"/v1/messages?beta=true", b"/v1/messages?beta=true"), (b"*", b"*"),
    (b"http://h:1/v1/models/a%2Fb", b"/v1/models/a%2Fb"), (b"HTTPS://h/x?q=http://y/z", b"/x?q=http://y/z"),
    (b"http://h?q=1", b"/?q=1"), (b"http://h", b"/"), (b"ftp://h/x", b"ftp://h/x"), (b"/r?u=http://h/x", b"/r?u=http://h/x"),
])
def test_origin_path_of_each_target_form(target, path):
    assert origin_path(target) == path


def test_a_head_timed_out_on_an_absolute_form_target_answers_in_its_paths_shape():
    answer = edge_answer(b"http://h:1/v1/messages", 408, "r-1")
    assert parts(answer)[1]["x-request-id"] == "r-1"
    assert parts(answer)[0] == 408 and error_code("/v1/messages", parts(answer)[2]) == "invalid_request_error"


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonx"])
def test_a_body_that_is_not_json_by_its_content_type_gets_415_in_the_routes_protocol(edge, path, content_type):
    headers = {"content-type": content_type} if content_type else {}
    with httpx.Client(base_url=edge.url, timeout=10) as client:
        r = client.post(path, content=b'{"model": "vsr/auto"}', headers=headers)
        assert r.status_code == 415, r.text
        assert r.headers["accept"] == "application/json"
        expected = "invalid_request_error" if path.startswith("/v1/messages") else "unsupported_media_type"
        assert error_code(path, r.content) == expected
        # The refused body was read, so the same connection serves the next request.
        assert client.get("/health").status_code == 200


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("coding", ["gzip", "br", "GZIP", "identity, gzip", "deflate", "x-custom"])
def test_a_coded_body_gets_415_naming_the_coding_in_the_routes_protocol(edge, path, coding):
    # RFC 9110 §15.5.16: the router decodes no content coding, so it says so (and which it takes) rather than
    # reading compressed bytes as JSON; the body is still a plain one here, as a client mislabelling it sends.
    body = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}).encode()
    if coding == "gzip":
        body = gzip.compress(body)
    with httpx.Client(base_url=edge.url, timeout=10) as client:
        r = client.post(path, content=body, headers={"content-type": "application/json", "content-encoding": coding})
        assert r.status_code == 415, r.text
        assert r.headers["accept-encoding"] == "identity"
        expected = "invalid_request_error" if path.startswith("/v1/messages") else "unsupported_media_type"
        assert error_code(path, r.content) == expected
        assert "Content-Encoding" in r.text and "not supported" in r.text
        # The refused body was read, so the same connection serves the next request.
        assert client.get("/health").status_code == 200


@pytest.mark.parametrize("coding", ["identity", "Identity", ""])
def test_an_identity_coded_body_is_served(edge, coding):
    r = httpx.post(f"{edge.url}/v1/chat/completions", timeout=30,
                   headers={"content-type": "application/json", "content-encoding": coding},
                   content=json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON",
                                          "application/vnd.api+json"])
def test_json_by_any_spelling_is_served(edge, content_type):
    r = httpx.post(f"{edge.url}/v1/chat/completions", timeout=30, headers={"content-type": content_type},
                   content=json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/v1/systemone", "/api/v1/routing/preview", "/v1/messages/count_tokens",
                                  "/api/v1/diagnostics/classify/intent", "/api/v1/keys"])   # the last: quart's
def test_an_oversized_body_gets_413_in_the_routes_protocol(edge, path):
    body = json.dumps({"model": "vsr/decide", "pad": "x" * SMALL_LIMIT})
    r = httpx.post(f"{edge.url}{path}", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413, r.text
    assert error_code(path, r.content) == "request_too_large"      # Anthropic's own type for a 413 too


def test_a_head_request_s_refusal_is_its_head_alone_and_the_connection_goes_on(edge):
    # A whole answer's head is held for its body (listen.EdgeServer); HEAD has its body suppressed, so the head
    # must leave with the end of the answer, and the kept-alive connection serve the next request.
    s = connect(edge)
    with s:
        s.sendall(b"HEAD /v1/chat/completions HTTP/1.1\r\nHost: router\r\n\r\n")
        head, rest = read_head(s)
        assert head.startswith(b"HTTP/1.1 405") and rest == b""
        s.sendall(b"GET /health HTTP/1.1\r\nHost: router\r\nConnection: close\r\n\r\n")
        answer = read_until_closed(s)
    status, _, _ = parts(answer)
    assert status == 200


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_a_head_past_16_kib_is_431_however_its_bytes_arrive(edge, path):
    """h11 refuses a head past 16 KiB only while it waits for the rest of it: one that arrives in a single read
    must be refused all the same (nginx's buffers do not depend on how the bytes came)."""
    head = (f"POST {path} HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            f"X-Pad: {'a' * 20_000}\r\n\r\n{{}}").encode()
    responses = exchange(edge, head)
    assert len(responses) == 1, responses
    got, headers, body = parts(responses[0])
    assert got == 431 and headers["connection"] == "close", responses[0][:300]
    assert error_code(path, body) == (ANTHROPIC_TYPES[431] if path.startswith("/v1/messages")
                                      else "request_head_too_large")
    # Just under the limit is read as before: the route answers it (here: the empty body's 400).
    under = httpx.post(f"{edge.url}{path}", headers={"x-pad": "a" * 15_000}, json={}, timeout=10)
    assert under.status_code == 400, under.text


def read_head(sock) -> tuple[bytes, bytes]:
    """The head of the first response on ``sock``, and what came after it in the same reads."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    return head, rest


def one_response(sock) -> bytes:
    """The first whole response (its Content-Length read) on ``sock``, without waiting for the close."""
    head, body = read_head(sock)
    length = int(parts(head + b"\r\n\r\n")[1]["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, head + body
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/systemone"])
@pytest.mark.parametrize("size", [b"ffffffffffffffffff", b"7fffffff", b"%x" % (SMALL_LIMIT + 1)])
@pytest.mark.parametrize("data", [b"", b'{"model": "vsr/auto"}'], ids=["header-alone", "with-data"])
def test_a_chunk_declared_past_the_limit_gets_413_before_its_bytes(edge, path, size, data):
    # nginx: "client intended to send too large chunked body". Its bytes never come: without the chunk's
    # declared size, the router waited for them until the body's pace ran out (408).
    head = f"POST {path} HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\n" \
           "Transfer-Encoding: chunked\r\n\r\n".encode()
    s = connect(edge)
    with s:
        s.sendall(head + size + b"\r\n" + data)
        status, headers, body = parts(one_response(s))
    assert status == 413, body
    assert error_code(path, body) == "request_too_large"      # Anthropic's own type for a 413 too
