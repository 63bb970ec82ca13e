"""The access log: one structured line per inference request, JSON or logfmt, with the route and the cause."""
from __future__ import annotations

import contextlib
import hashlib
import json
import re
import signal
import socket
import time

import httpx
import openai
import pytest
import trio

from vsr_fast.server.access_log import logfmt

from .procs import config, refused_port, router, wait_for_value, wait_until, write_config
from .test_e2e_request_id_edge import raw_chat


def _config(tmp_path, endpoint: str, plugins: list[dict] | None = None, **access) -> str:
    doc = config([{"name": "m", "backend_refs": [{"endpoint": endpoint, "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, **access},
                                "upstream": {"retries": {"max_retries": 0}}}}
    if plugins:
        doc["global"]["plugins"] = plugins
    return write_config(doc, str(tmp_path))


@pytest.fixture(scope="module")
def stdout_json(mock, tmp_path_factory):
    """A router logging JSON lines to stderr (``_config``'s defaults), replay records on, for the tests that need
    no other setting; each reads only the lines its own requests added and counters as differences (``_json_since``,
    ``_series``)."""
    replay = [{"type": "router_replay", "configuration": {}}]
    with router(_config(tmp_path_factory.mktemp("stdout-json"), f"{mock.url}/v1", replay)) as proc:
        yield proc


def _json_since(proc, before: int) -> list[dict]:
    """The JSON access log lines among the router's stderr lines after the first ``before``."""
    return [json.loads(line) for line in proc.lines[before:] if line.startswith("{")]


def _series(metrics: str, series: str) -> float:
    """One series' value in a /metrics text (``series`` is its name and labels as written); 0 if absent."""
    found = re.search(r"^" + re.escape(series) + r" (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_one_json_line_per_request_with_route_tokens_and_cause(tmp_path, stdout_json):
    dead = f"http://127.0.0.1:{refused_port()}/v1"
    proc = stdout_json
    before, earlier = len(proc.lines), httpx.get(f"{proc.url}/metrics").text
    for i in range(3):
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-request-id": f"req-{i}"}, timeout=20,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}],
                             **({"stream": True, "stream_options": {"include_usage": True}} if i == 2 else {})})
        assert r.status_code == 200
    bad = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": []})
    assert bad.status_code == 400

    def lines():
        found = _json_since(proc, before)
        return found if len(found) == 4 else None

    logged = wait_for_value(lines, "four access log lines")
    metrics = httpx.get(f"{proc.url}/metrics").text
    # The same usage feeds the metrics: two whole answers and the stream's usage chunk.
    out = 'vsr_tokens_total{model="m",direction="output"}'
    assert _series(metrics, out) - _series(earlier, out) == sum(e["output_tokens"] for e in logged[:3]) > 0
    ttfb = 'vsr_time_to_first_byte_seconds_count{api="chat",model="m"}'
    assert _series(metrics, ttfb) - _series(earlier, ttfb) == 3
    assert [e.get("request_id") for e in logged[:3]] == ["req-0", "req-1", "req-2"]
    first = logged[0]
    assert (first["api"], first["recipe"], first["decision"], first["model"], first["status"], first["path"]) == \
        ("chat", "default", "d", "m", 200, "upstream")
    assert first["input_tokens"] > 0 and first["output_tokens"] > 0
    assert 0 < first["ttfb_s"] <= first["latency_s"] and first["time"].endswith("Z")
    assert logged[2]["output_tokens"] > 0 and logged[2]["status"] == 200     # read from the stream's usage
    assert 0 < logged[2]["ttfb_s"] <= logged[2]["latency_s"]
    assert logged[3]["status"] == 400 and logged[3]["error"] == "empty_array"

    # A dead backend: the cause (connection refused) is in the line.
    with router(_config(tmp_path, dead, format="logfmt", level="errors")) as proc:
        for _ in range(2):
            ok = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                            json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
            assert ok.status_code == 502
        line = wait_for_value(lambda: [x for x in proc.lines if x.startswith("time=")][1:2], "two logfmt lines")[0]
    assert "status=502" in line and "error=upstream_failed" in line and "ConnectError" in line


def test_logfmt_quotes_what_needs_it():
    assert logfmt({"a": "x y", "b": 3, "c": None, "d": 'q"', "e": 0.25}) == 'a="x y" b=3 d="q\\"" e=0.25'


def test_each_line_names_the_caller_by_key_id_never_by_key(tmp_path, mock):
    team_key, bare_key = "vsk-team-" + "t" * 32, "vsk-bare-" + "b" * 32
    keys = [{"id": "alice-key", "sha256": hashlib.sha256(team_key.encode()).hexdigest(), "user": "alice",
             "team": "web", "tenant": "tenA"},
            {"id": "bare", "sha256": hashlib.sha256(bare_key.encode()).hexdigest()}]
    log = tmp_path / "access.log"
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1", "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "path": str(log)},
                                "auth": {"enabled": True, "keys": keys}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        for key in (team_key, bare_key):
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=key, max_retries=0)
            client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "hi"}])
        wait_until(lambda: len(log.read_text().splitlines()) == 2, "two access log lines in the file")
    text = log.read_text()
    first, second = (json.loads(line) for line in text.splitlines())
    assert (first["key_id"], first["user"], first["team"], first["tenant"]) == ("alice-key", "alice", "web", "tenA")
    # A key naming no user is its own user; no team or tenant: left out of the line.
    assert (second["key_id"], second["user"]) == ("bare", "bare") and "team" not in second and "tenant" not in second
    for secret in (team_key, bare_key):
        assert secret not in text and hashlib.sha256(secret.encode()).hexdigest() not in text


def _lines(path) -> list[dict]:
    """Every line of an access log file, each one whole JSON (a split line fails here)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _chat(proc, rid: str) -> httpx.Response:
    r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-request-id": rid}, timeout=20,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and r.headers["x-request-id"] == rid
    return r


def test_sigusr1_reopens_a_renamed_log_as_nginx_does(tmp_path, mock):
    log = tmp_path / "access.log"
    with router(_config(tmp_path, f"{mock.url}/v1", path=str(log))) as proc:
        _chat(proc, "a-0")
        wait_until(lambda: len(_lines(log)) == 1, "a line in access.log")
        log.rename(tmp_path / "access.log.1")
        proc.signal(signal.SIGUSR1)
        wait_until(log.exists, "access.log created again at SIGUSR1, before any request")
        _chat(proc, "b-0")
        wait_until(lambda: len(_lines(log)) == 1, "the next line in the new access.log")
        assert proc.popen.poll() is None
    assert [e["request_id"] for e in _lines(tmp_path / "access.log.1")] == ["a-0"]
    assert [e["request_id"] for e in _lines(log)] == ["b-0"]


def test_a_renamed_log_is_reopened_at_reload_and_when_its_inode_changes(tmp_path, mock):
    """logrotate's way: rename, then SIGHUP (or nothing: the writer notices the path names another file)."""
    log = tmp_path / "access.log"
    path = _config(tmp_path, f"{mock.url}/v1", path=str(log))
    with router(path) as proc:
        for i in range(2):
            _chat(proc, f"a-{i}")
        wait_until(lambda: len(_lines(log)) == 2, "two lines in access.log")
        log.rename(tmp_path / "access.log.1")
        proc.signal(signal.SIGHUP)
        # Reopened by the reload itself, before any request: the new file is there, empty.
        wait_until(log.exists, "access.log created again at SIGHUP")
        for i in range(3):
            _chat(proc, f"b-{i}")
        wait_until(lambda: len(_lines(log)) == 3, "three lines in the new access.log")
        # No signal: the writer sees the path name another file (a new inode) and follows it.
        log.rename(tmp_path / "access.log.2")
        sent: list[str] = []

        def followed() -> bool:
            sent.append(f"c-{len(sent)}")
            _chat(proc, sent[-1])
            time.sleep(0.05)
            return log.exists() and len(_lines(log)) > 0
        wait_until(followed, "a line in the access.log created after the second rename")
    assert [e["request_id"] for e in _lines(tmp_path / "access.log.1")] == ["a-0", "a-1"]
    second = [e["request_id"] for e in _lines(tmp_path / "access.log.2")]
    third = [e["request_id"] for e in _lines(log)]
    assert second[:3] == ["b-0", "b-1", "b-2"]
    # Every line in exactly one file, in order, none lost.
    assert second[3:] + third == sent and third


def _no_stream_config(tmp_path, endpoint: str, log) -> str:
    doc = config([{"name": "m", "backend_refs": [{"endpoint": endpoint, "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "path": str(log)}},
                     "stores": {"event_stream": {"backend": "none"}}}
    return write_config(doc, str(tmp_path))


@pytest.fixture(scope="module")
def unjournaled(mock, tmp_path_factory):
    """(router, its access log): no event stream; each test reads the lines its own requests added."""
    d = tmp_path_factory.mktemp("unjournaled")
    log = d / "access.log"
    with router(_no_stream_config(d, f"{mock.url}/v1", log)) as proc:
        yield proc, log


def _new_lines(log, before: int, count: int) -> list[dict]:
    """The ``count`` lines written after the first ``before``, once they are all there."""
    wait_until(lambda: len(_lines(log)) == before + count, f"{count} more lines")
    return _lines(log)[before:]


def test_every_line_has_a_request_id_the_client_receives_too(unjournaled):
    proc, log = unjournaled
    before = len(_lines(log))
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": "hi"}])
    made = raw.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    mine = _chat(proc, "client-chose-this")
    assert "x-vsr-replay-id" not in mine.headers
    first, second = _new_lines(log, before, 2)
    assert first["request_id"] == made and second["request_id"] == "client-chose-this"
    # RFC 3339 with milliseconds, UTC.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert "replay_id" not in first


def test_the_line_carries_the_replay_id_the_client_received(stdout_json):
    proc = stdout_json
    before = len(proc.lines)
    r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
    line = wait_for_value(lambda: _json_since(proc, before)[:1], "one line")[0]
    assert line["replay_id"] == r.headers["x-vsr-replay-id"] and line["request_id"] == r.headers["x-request-id"]


def test_a_request_refused_before_routing_is_logged_and_counted(unjournaled):
    # The router's other test answers 200s only: the 415 and 405 series are this test's alone.
    proc, log = unjournaled
    before = len(_lines(log))
    media = httpx.post(f"{proc.url}/v1/chat/completions", content=b"hi", headers={"content-type": "text/plain"})
    assert media.status_code == 415
    method = httpx.get(f"{proc.url}/v1/messages", headers={"x-request-id": "get-1"})
    assert method.status_code == 405 and method.headers["x-request-id"] == "get-1"
    first, second = _new_lines(log, before, 2)
    metrics = httpx.get(f"{proc.url}/metrics").text
    assert (first["api"], first["status"], first["path"], first["error"]) == \
        ("chat", 415, "error", "unsupported_media_type")
    assert first["request_id"] == media.headers["x-request-id"]
    assert (second["api"], second["status"], second["request_id"]) == ("messages", 405, "get-1")
    assert re.search(r'^vsr_requests_total\{api="chat",recipe="",decision="",model="",status="415"\} 1$', metrics,
                     re.M)
    assert re.search(r'^vsr_requests_total\{api="messages",[^}]*status="405"\} 1$', metrics, re.M)
    assert "# HELP vsr_access_log_dropped_total " in metrics
    assert re.search(r'^vsr_access_log_dropped_total\{reason="queue_full"\} 0$', metrics, re.M)


def test_reopen_while_lines_are_written_loses_and_splits_none(tmp_path):
    """Rename and reopen 30 times while 3,000 lines go out in bursts: each line whole, once, in some file."""
    from vsr_fast.config.schema import AccessLogConfig
    from vsr_fast.server.access_log import AccessLog

    log = tmp_path / "access.log"
    access = AccessLog(AccessLogConfig(enabled=True, path=str(log)))
    access.open()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(access.run)
            for burst in range(30):
                for i in range(100):
                    access.log({"request_id": f"{burst}-{i}", "status": 200, "message": "x" * 200})
                    if i % 10 == 0:
                        await trio.sleep(0)
                log.rename(tmp_path / f"access.log.{burst}")
                access.reopen()
                for _ in range(1000):       # the writer creates the file anew at once, lines queued or not
                    if log.exists():
                        break
                    await trio.sleep(0.005)
            nursery.cancel_scope.cancel()

    trio.run(main)
    seen = [e["request_id"] for f in sorted(tmp_path.iterdir()) for e in _lines(f)]
    assert sorted(seen) == sorted(f"{b}-{i}" for b in range(30) for i in range(100))
    assert access.dropped == 0


def _raw(proc, request: bytes) -> bytes:
    """``request`` on a fresh connection; everything the router wrote before closing it."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as s:
        s.sendall(request)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def test_what_the_connection_layer_refuses_is_counted_and_logged_on_any_path(stdout_json):
    proc = stdout_json
    before, earlier = len(proc.lines), httpx.get(f"{proc.url}/metrics").text
    # h11 refuses both heads: a Content-Length that is not a number; a header line without a colon.
    chat = _raw(proc, b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length: abc\r\n\r\n")
    health = _raw(proc, b"GET /health HTTP/1.1\r\nHost: r\r\nno colon here\r\n\r\n")
    head, _, body = chat.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and json.loads(body)["error"]["code"] == "malformed_request"
    assert health.startswith(b"HTTP/1.1 400 ")
    rid = re.search(rb"\r\nx-request-id: (\S+)\r\n", head).group(1).decode()

    logged = wait_for_value(lambda: _json_since(proc, before)[1:] and _json_since(proc, before),
                            "the refusals' access log lines")
    metrics = httpx.get(f"{proc.url}/metrics").text
    # Each logged under the id its answer carried (nginx logs the 400s it answers itself); only the inference
    # path's refusal is a request of an API.
    assert len(logged) == 2, logged
    assert (logged[0]["request_id"], logged[0]["api"], logged[0]["status"], logged[0]["error"]) == \
        (rid, "chat", 400, "malformed_request")
    assert (logged[1].get("api"), logged[1]["status"], logged[1]["uri"]) == (None, 400, "/health"), logged[1]
    refusals = 'vsr_http_refusals_total{status="400"}'
    assert _series(metrics, refusals) - _series(earlier, refusals) == 2, metrics
    requests = 'vsr_requests_total{api="chat",recipe="",decision="",model="",status="400"}'
    assert _series(metrics, requests) - _series(earlier, requests) == 1, metrics


def test_logfmt_quotes_and_escapes_control_characters():
    assert logfmt({"ua": "a\tb", "x": "c\x01d", "y": "e\nf", "z": "plain"}) == \
        'ua="a\\tb" x="c\\u0001d" y="e\\nf" z=plain'


def test_each_line_says_who_called_as_nginx_does(tmp_path, mock):
    """The client's address, the method and the User-Agent ($remote_addr, $request_method, $http_user_agent);
    a client's control characters in logfmt are escaped inside quotes, the line stays one line of whole fields."""
    with router(_config(tmp_path, f"{mock.url}/v1", format="logfmt")) as proc:
        assert raw_chat(proc.port, b"User-Agent: probe\tv1\x01 x=y").startswith(b"HTTP/1.1 200")
        assert raw_chat(proc.port, b"User-Agent: sdk/1.0", "/v1/chat/completions?x=1").startswith(b"HTTP/1.1 200")
        wait_until(lambda: len([x for x in proc.lines if x.startswith("time=")]) == 2, "two lines")
        lines = [x for x in proc.lines if x.startswith("time=")]
    first = lines[0]
    assert 'user_agent="probe\\tv1\\u0001 x=y"' in first, first
    assert "remote_addr=127.0.0.1" in first and "method=POST" in first
    assert "\t" not in first and "\x01" not in first
    assert "user_agent=sdk/1.0" in lines[1]


def test_a_refused_request_says_who_called_too(stdout_json):
    proc = stdout_json
    before = len(proc.lines)
    r = httpx.put(f"{proc.url}/v1/chat/completions", headers={"user-agent": "curl/8"}, content=b"{}")
    assert r.status_code == 405
    line = wait_for_value(lambda: _json_since(proc, before)[:1], "a line")[0]
    assert (line["remote_addr"], line["method"], line["user_agent"], line["status"]) == ("127.0.0.1", "PUT", "curl/8",
                                                                                          405)


@pytest.mark.parametrize(("trusted", "expected"), [
    (None, "127.0.0.1"),                                  # the peer, whatever a header claims
    (["127.0.0.0/8"], "10.1.2.3"),                        # one trusted hop: the address it forwarded from
    (["127.0.0.0/8", "10.0.0.0/8"], "203.0.113.7"),       # every trusted hop skipped, right to left
])
def test_x_forwarded_for_is_the_client_only_from_trusted_proxies(request, tmp_path, mock, trusted, expected):
    """Trial 88: remote_addr was always the peer (a load balancer's). As nginx's real_ip (recursive) and Envoy's
    xff_num_trusted_hops: X-Forwarded-For is read only from a peer in ``trusted_proxies``, right to left, the
    first address not trusted being the client's."""
    serving = router(_config(tmp_path, f"{mock.url}/v1", trusted_proxies=trusted)) if trusted else \
        contextlib.nullcontext(request.getfixturevalue("stdout_json"))   # no trusted proxy: the defaults
    with serving as proc:
        before = len(proc.lines)
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=30,
                       headers={"x-forwarded-for": "198.51.100.9, 203.0.113.7, 10.1.2.3"},
                       json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
        line = wait_for_value(lambda: next(iter(_json_since(proc, before)), None), "a line")
    assert line["remote_addr"] == expected, line
    assert line.get("peer_addr") == (None if expected == "127.0.0.1" else "127.0.0.1"), line


def test_a_trusted_proxy_that_is_no_network_is_refused_at_load():
    doc = config([{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "trusted_proxies": ["10.0.0.0/8", "lb.internal"]}}}
    from vsr_fast.errors import ConfigError
    from vsr_fast.routing import load_raw
    with pytest.raises(ConfigError) as info:
        load_raw(doc)
    assert any("global.router.access_log.trusted_proxies[1]" in line and "lb.internal" in line
               for line in info.value.lines), info.value.lines
