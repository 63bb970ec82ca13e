"""Request targets that are not canonical never reach a route the canonical one guards (trial 7b, finding 1).

The router decides who may call a route (an admin key, the listener's role, a client key) on the request's
path; quart's url map matched a normalised one (``//metrics`` as ``/metrics``). Each variant below is sent
as-is over a raw socket (curl --path-as-is): repeated slashes, dot segments, percent-encoded letters and
slashes, a trailing slash, a query, absolute form, HTTP/2. Without a key none is answered 2xx, on the single
listener and on the serving listener of a two-listener configuration, and none reaches the upstream.
"""
from __future__ import annotations

import json
import socket

import httpx
import openai

from .procs import router, write_config
from .test_e2e_auth import ADMIN_KEY, KEY, REDIS_URL, auth_doc, prefix  # noqa: F401 (a fixture)

EVIL = json.dumps({"id": "evil", "admin": True})
PREVIEW = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
CHAT = PREVIEW

# (method, target, body) of the operator's routes, each spelled so that quart would have matched it.
ADMIN_VARIANTS = [
    ("GET", "//metrics", None), ("GET", "///metrics", None), ("GET", "/./metrics", None),
    ("GET", "/v1/../metrics", None), ("GET", "/%6detrics", None), ("GET", "/%6Detrics", None),
    ("GET", "/metrics/", None), ("GET", "//metrics?x=1", None), ("GET", "/%2e/metrics", None),
    ("GET", "/x/%2E%2E/metrics", None), ("GET", "http://x//metrics", None), ("GET", "http://x/./metrics", None),
    ("GET", "//api/v1/replay", None), ("GET", "/api//v1/replay", None), ("GET", "/api/v1/./replay", None),
    ("GET", "//api/v1/keys", None), ("GET", "/api//v1/keys", None), ("GET", "/api/v1/%6beys", None),
    ("GET", "/api%2Fv1%2Fkeys", None), ("GET", "/api%2fv1/keys", None), ("GET", "/api/v1/keys/", None),
    ("GET", "/api/v1/keys?x", None), ("GET", "//api/v1/inventory/embedding-models", None),
    ("POST", "//admin/reload", "{}"), ("POST", "/admin//reload", "{}"), ("POST", "/%61dmin/reload", "{}"),
    ("POST", "http://x//admin/reload", "{}"), ("POST", "//api/v1/keys", EVIL), ("POST", "/api/v1//keys", EVIL),
    ("POST", "/api/v1/%6Beys", EVIL), ("POST", "//api/v1/routing/preview", PREVIEW),
    ("POST", "//api/v1/diagnostics/classify/intent", json.dumps({"text": "hi"})),
    ("GET", "metrics", None), ("GET", "api/v1/replay", None), ("GET", "api/v1/keys", None),
    ("POST", "admin/reload", "{}"), ("POST", "api/v1/keys", EVIL), ("GET", "api/v1/inventory/embedding-models", None),
]
# The client APIs, which need a client key.
CLIENT_VARIANTS = [
    ("GET", "//v1/models", None), ("GET", "/v1//models", None), ("GET", "/%761/models", None),
    ("GET", "/v1/models/", None), ("GET", "/v1/./models", None), ("GET", "/v1/x/../models", None),
    ("GET", "http://x//v1/models", None), ("GET", "//v1/models?limit=5", None), ("GET", "//v1/models/vsr/auto", None),
    ("GET", "/v1/models/vsr%2Fauto", None), ("GET", "/v1/systemone//models", None),
    ("POST", "//v1/chat/completions", CHAT), ("POST", "/v1//chat/completions", CHAT),
    ("POST", "/v1/chat/completions/", CHAT), ("POST", "/v1/./chat/completions", CHAT),
    ("POST", "/v1/%63hat/completions", CHAT), ("POST", "http://x//v1/chat/completions", CHAT),
    ("POST", "//chat/completions", CHAT), ("POST", "//v1/messages", CHAT), ("POST", "//v1/responses", CHAT),
    ("GET", "v1/models", None), ("POST", "v1/chat/completions", CHAT), ("POST", "v1/messages", CHAT),
]


def raw_request(port: int, method: str, target: str, body: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """``method target HTTP/1.1`` sent byte for byte; the answer's status and body."""
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body.encode())}"]
    data = ("\r\n".join(lines) + "\r\n\r\n" + (body or "")).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(data)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def h2_get(port: int, path: str) -> int:
    """GET ``path`` as one HTTP/2 stream (prior knowledge); the answer's status."""
    import h2.config
    import h2.connection
    import h2.events

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "x")],
                      end_stream=True)
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(conn.data_to_send())
        while True:
            data = s.recv(65536)
            assert data, "the router closed the HTTP/2 connection"
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    return int(dict(event.headers)[b":status"])
            s.sendall(conn.data_to_send())


def refused(status: int, body: bytes) -> bool:
    """A refusal before any route ran: 400, 401 or 404, with an error body."""
    return status in (400, 401, 404) and b'"error"' in body


def _doc(mock, prefix: str) -> dict:
    # Stored keys on: POST /api/v1/keys would make a working admin key.
    return auth_doc(mock.url, store={"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100})


def _requests_seen(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


def test_no_spelling_of_a_guarded_path_passes_without_a_key(mock, tmp_path, prefix):
    with router(write_config(_doc(mock, prefix), str(tmp_path))) as proc:
        before = _requests_seen(mock)
        for method, target, body in ADMIN_VARIANTS + CLIENT_VARIANTS:
            status, answer = raw_request(proc.port, method, target, body)
            assert refused(status, answer), (method, target, status, answer)
        assert _requests_seen(mock) == before, "no variant reached the upstream"
        # Refused in the protocol of the route the path would have named.
        status, answer = raw_request(proc.port, "GET", "//metrics")
        assert status == 400 and json.loads(answer)["error"]["code"] == "non_canonical_path", answer
        status, answer = raw_request(proc.port, "POST", "/v1//messages", CHAT)
        assert status == 400 and json.loads(answer)["type"] == "error", answer      # Anthropic's shape
        # The canonical spellings: 401 without a key, served with one (the refusal is not a blanket one).
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        assert raw_request(proc.port, "GET", "/metrics")[0] == 401
        assert raw_request(proc.port, "GET", "/metrics?x=1", headers=admin)[0] == 200
        assert raw_request(proc.port, "GET", "http://x/metrics")[0] == 401
        assert raw_request(proc.port, "GET", "http://x/metrics", headers=admin)[0] == 200
        assert raw_request(proc.port, "GET", "/api/v1/keys", headers=admin)[0] == 200
        # Nothing made a key.
        listed = httpx.get(f"{proc.url}/api/v1/keys", headers=admin).json()["keys"]
        assert [k["id"] for k in listed if k["source"] == "store"] == []
        # A model id holding a slash, as the SDK encodes it (vsr%2Fauto), is still found.
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        assert client.models.retrieve("vsr/auto").id == "vsr/auto"
        # Over HTTP/2 too.
        for path in ("//metrics", "/%6detrics", "/./metrics", "//api/v1/keys", "//v1/models"):
            assert h2_get(proc.port, path) in (400, 401, 404), path
        assert h2_get(proc.port, "/health") == 200


def test_the_serving_listener_serves_no_spelling_of_an_admin_path(mock, tmp_path, prefix):
    doc = _doc(mock, prefix)
    doc["listeners"] = [{"name": "main", "port": 0}, {"name": "ops", "role": "admin", "port": 0}]
    with router(write_config(doc, str(tmp_path))) as proc:
        admin_url = next(line for line in proc.lines if line.startswith("vsr-fast: admin on")).split()[-1]
        admin_port = int(admin_url.rsplit(":", 1)[1])
        auth = {"authorization": f"Bearer {ADMIN_KEY}"}
        for method, target, body in ADMIN_VARIANTS:
            # Even with an admin key: the serving listener does not serve the operator's routes at all.
            status, answer = raw_request(proc.port, method, target, body, headers=auth)
            assert status in (400, 404) and b'"error"' in answer, (method, target, status, answer)
        for method, target, body in CLIENT_VARIANTS:
            status, answer = raw_request(admin_port, method, target, body, headers=auth)
            assert status in (400, 404) and b'"error"' in answer, ("admin listener", method, target, status, answer)
        for path in ("//metrics", "/%6detrics", "//api/v1/keys"):
            assert h2_get(proc.port, path) in (400, 404), path
        assert raw_request(admin_port, "GET", "/metrics")[0] == 200
        assert [k["id"] for k in httpx.get(f"{admin_url}/api/v1/keys").json()["keys"] if k["source"] == "store"] == []


def _non_canonical_checked(raw_path: bytes, path: str) -> str | None:
    # non_canonical without its fast path: every check, on every path.
    from vsr_fast.server import paths
    if path == "*":
        return None
    if not path.startswith("/"):
        return "it does not start with a slash"
    for escape in paths._ESCAPE.finditer(raw_path):
        byte = int(escape.group(1), 16)
        if byte in paths._UNRESERVED:
            return f"{escape.group().decode()} encodes {chr(byte)!r}, which is sent as it is"
        if byte in paths._SEPARATORS and not (raw_path.startswith(paths._SLASHED_IDS)
                                              and escape.start() >= len(paths._SLASHED_IDS)):
            return f"{escape.group().decode()} encodes a path separator"
    if path != "/" and any(segment in ("", ".", "..") for segment in path[1:].split("/")):
        return "it holds repeated slashes, a trailing slash or a dot segment (. or ..)"
    return None


def test_the_fast_path_of_non_canonical_answers_as_every_check():
    from urllib.parse import unquote_to_bytes

    from vsr_fast.server.paths import non_canonical
    targets = [t.split("?")[0] for _, t, _ in ADMIN_VARIANTS] + [
        "/v1/chat/completions", "/", "*", "", "x", "/a.b/c", "/a/.b", "/a/..", "/a/.", "/a/b/", "/.well-known",
        "/v1/models/vsr%2Fauto", "/v1/models/a%2fb", "/v1/%41", "/v1/%zz", "/v1/a%20b", "/a//b", "//", "/..", "/.",
        "/v1/messages", "/v1/chat/completions/", "/ab.", "/a./b"]
    for target in targets:
        raw = target.encode()
        path = unquote_to_bytes(raw).decode("latin-1")
        assert non_canonical(raw, path) == _non_canonical_checked(raw, path), target
