"""Fallback before the first byte, in-stream errors after it, disconnects and shutdown, over real processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import time

import httpx
import openai
import pytest

from bench._procs import children

from .procs import config, free_port, mock_upstream, model, refused_port, router, write_config

CHAT = [{"role": "user", "content": "Say hello"}]


def post(proc, **extra):
    return httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT, **extra}, timeout=20)


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# One process per role, shared by the file's tests: each test sets the knobs it needs and zeroes the counters
# (configure), so no test sees another's. Router starts were the file's cost (about 19 processes).
FAILING = {"fail_rate": 1, "fail_status": 500, "fail_mode": "status", "chunks": 8, "chunk_interval_ms": 0}
HEALTHY = {"fail_rate": 0, "fail_status": 500, "fail_mode": "status", "chunks": 8, "chunk_interval_ms": 0}


def configure(mock, **knobs) -> None:
    """Set ``mock``'s knobs (POST /_mock/config merges them into its current ones) and zero its counters."""
    httpx.post(f"{mock.url}/_mock/config", json=knobs).raise_for_status()
    httpx.post(f"{mock.url}/_mock/reset").raise_for_status()


def metric_total(proc, line_start: str, label: str = "") -> float:
    """The sum of the router's metric lines that start with ``line_start`` and hold ``label``."""
    text = httpx.get(f"{proc.url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(line_start) and label in line)


@pytest.fixture(scope="module")
def primary_mock():
    with mock_upstream() as proc:
        yield proc


@pytest.fixture(scope="module")
def secondary_mock():
    with mock_upstream() as proc:
        yield proc


@pytest.fixture(scope="module")
def pair(primary_mock, secondary_mock, tmp_path_factory):
    """A router over two models, primary then secondary, each on a mock of its own. Passive health never ejects
    primary here: tests before this one make it fail, and ejection would change which model a later test sees
    first (outlier ejection has tests of its own, test_e2e_pools)."""
    doc = config(
        [model("primary", f"{primary_mock.url}/v1", upstream_name="up-primary"),
         model("secondary", f"{secondary_mock.url}/v1", upstream_name="up-secondary")],
        [{"name": "main", "modelRefs": [{"model": "primary"}, {"model": "secondary"}]}],
    )
    doc["global"] = {"router": {"upstream": {"outlier": {"consecutive_failures": 1000}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("pair")))) as proc:
        yield proc


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_500_falls_back_to_next_model(pair, primary_mock, secondary_mock, stream):
    configure(primary_mock, **FAILING)
    configure(secondary_mock, **HEALTHY)
    r = post(pair, stream=stream)
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "secondary"
    assert r.headers["x-vsr-response-path"] == "fallback"
    assert r.headers["x-vsr-selected-decision"] == "main"
    assert stats(primary_mock)["failures_injected"] >= 1
    body = r.text
    assert ("[DONE]" in body) if stream else ("up-secondary" in body)
    metrics = httpx.get(f"{pair.url}/metrics").text
    assert 'vsr_upstream_errors_total{model="primary",backend="primary[0]",cause="status_5xx"}' in metrics


@pytest.fixture(scope="module")
def down_then_alive(tmp_path_factory):
    """(router, the alive mock): one model whose first backend refuses connections."""
    with mock_upstream() as alive:
        dead = f"http://127.0.0.1:{refused_port()}/v1"
        doc = config([{"name": "m", "backend_refs": [{"endpoint": dead, "name": "dead"},
                                                     {"endpoint": f"{alive.url}/v1", "name": "alive"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        with router(write_config(doc, str(tmp_path_factory.mktemp("down")))) as proc:
            yield proc, alive


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down_falls_back_to_next_backend(down_then_alive, stream):
    proc, alive = down_then_alive
    configure(alive)
    r = post(proc, stream=stream)
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "m"
    assert r.headers["x-vsr-response-path"] == "upstream"   # same model, another backend
    assert stats(alive)["requests"] == 1, "the alive backend answered"


def test_every_upstream_down_is_502_in_openai_shape(tmp_path):
    dead = f"http://127.0.0.1:{refused_port()}/v1"
    doc = config([model("m", dead)], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with router(write_config(doc, str(tmp_path))) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="vsr/auto", messages=CHAT)
        assert info.value.status_code == 502
        assert info.value.body["code"] == "upstream_failed"
        assert info.value.response.headers["x-vsr-response-path"] == "error"
        assert info.value.response.headers["x-vsr-selected-decision"] == "d"
        r = post(proc, stream=True)
        assert r.status_code == 502 and r.json()["error"]["type"] == "server_error"


def test_all_upstreams_failing_with_500_is_the_last_ones_500(pair, primary_mock, secondary_mock):
    configure(primary_mock, **FAILING)
    configure(secondary_mock, **FAILING)
    r = post(pair)
    # The last backend's answer, as nginx and Envoy pass it on, its message naming every attempt: each model
    # and what it answered; its backends' names stay in the log.
    assert r.status_code == 500 and r.headers["x-vsr-response-path"] == "error"
    error = r.json()["error"]
    assert error["message"].startswith("injected failure (status 500) (every upstream attempt failed: "), error
    assert "primary: HTTP 500" in error["message"] and "secondary: HTTP 500" in error["message"]
    assert error["type"] == "server_error"


def test_upstream_4xx_is_relayed_without_fallback(pair, primary_mock, secondary_mock):
    configure(primary_mock, **{**FAILING, "fail_status": 400})
    configure(secondary_mock, **HEALTHY)
    r = post(pair)
    assert r.status_code == 400
    assert r.headers["x-vsr-selected-model"] == "primary"
    assert stats(secondary_mock)["requests"] == 0


def test_midstream_failure_ends_with_an_error_event(pair, primary_mock, secondary_mock):
    configure(primary_mock, **{**FAILING, "fail_mode": "midstream", "chunks": 6})
    configure(secondary_mock, **HEALTHY)
    client = openai.OpenAI(base_url=f"{pair.url}/v1", api_key="x", max_retries=0)
    got = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client.chat.completions.create(model="vsr/auto", messages=CHAT, stream=True):
            got.append(chunk)
    assert got, "the chunks before the failure reached the client"
    assert "mid-stream" in str(info.value)
    assert stats(secondary_mock)["requests"] == 0, "no fallback after the first byte"


@pytest.fixture(scope="module")
def paced(tmp_path_factory):
    """(router, its one model's mock): the tests set the mock's stream pace (configure)."""
    with mock_upstream() as mock:
        doc = config([model("m", f"{mock.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
        with router(write_config(doc, str(tmp_path_factory.mktemp("paced")))) as proc:
            yield proc, mock


def test_client_disconnect_mid_stream_cancels_upstream(paced):
    proc, slow = paced
    configure(slow, chunks=200, chunk_interval_ms=50)
    disconnects = metric_total(proc, 'vsr_client_disconnects_total{api="chat"}')
    answered_499 = metric_total(proc, 'vsr_requests_total{api="chat",', 'status="499"')
    body = json.dumps({"model": "vsr/auto", "messages": CHAT, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", proc.port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
    # The mock counts the stream as cancelled only when the router hung up on it mid-way.
    assert wait_for(lambda: stats(slow)["cancelled"] == 1, timeout=20), stats(slow)
    assert stats(slow)["completed"] == 0, "the 10 s stream was cut, not finished"
    assert metric_total(proc, 'vsr_client_disconnects_total{api="chat"}') == disconnects + 1
    assert metric_total(proc, 'vsr_requests_total{api="chat",', 'status="499"') == answered_499 + 1


def test_a_stream_its_client_abandons_mid_way_is_a_cancelled_attempt_not_an_ok_one(paced):
    # Trial 27: the access log said 499 and the attempt was counted ok, as if the stream had ended whole.
    proc, slow = paced
    configure(slow, chunks=200, chunk_interval_ms=50)
    attempts = 'vsr_upstream_attempts_total{model="m",'
    ok, cancelled = metric_total(proc, attempts, 'outcome="ok"'), metric_total(proc, attempts, 'outcome="cancelled"')
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(model="vsr/auto", messages=CHAT, stream=True)
    assert next(iter(stream)).choices is not None       # the stream has started: the attempt answered
    stream.close()                                      # and the client leaves it
    assert wait_for(lambda: stats(slow)["cancelled"] == 1, timeout=20), stats(slow)
    assert wait_for(lambda: metric_total(proc, attempts, 'outcome="cancelled"') == cancelled + 1, timeout=20)
    assert metric_total(proc, attempts, 'outcome="ok"') == ok
    assert metric_total(proc, 'vsr_upstream_errors_total{model="m"') == 0     # the router's cut, not the model's


def test_a_stream_the_deadline_cuts_mid_way_is_a_deadline_attempt(tmp_path):
    with mock_upstream("--chunks", "200", "--chunk-interval-ms", "50") as slow:
        doc = config([model("m", f"{slow.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"limits": {"request_timeout_ms": 1000}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.APIError):
                for _ in client.chat.completions.create(model="vsr/auto", messages=CHAT, stream=True):
                    pass
            attempts = 'vsr_upstream_attempts_total{model="m",'
            assert wait_for(lambda: metric_total(proc, attempts, 'outcome="deadline"') == 1, timeout=20)
            assert metric_total(proc, attempts, 'outcome="ok"') == 0


def test_sigterm_drains_an_inflight_stream(tmp_path):
    with mock_upstream("--chunks", "20", "--chunk-interval-ms", "50") as slow:
        doc = config([model("m", f"{slow.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
        proc = router(write_config(doc, str(tmp_path))).start()
        try:
            with httpx.Client(timeout=20) as client:
                with client.stream("POST", f"{proc.url}/v1/chat/completions",
                                   json={"model": "vsr/auto", "messages": CHAT, "stream": True}) as r:
                    chunks = r.iter_raw()
                    received = next(chunks)
                    proc.signal(signal.SIGTERM)
                    for chunk in chunks:
                        received += chunk
            assert received.rstrip().endswith(b"data: [DONE]")
            assert received.count(b"chat.completion.chunk") == 20
            assert proc.wait(20) == 0
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{proc.url}/health")
        finally:
            proc.stop()


def test_several_workers_share_the_port_and_stop_together(tmp_path, secondary_mock):
    healthy = secondary_mock
    configure(healthy, **HEALTHY)
    port = free_port()
    doc = config([model("m", f"{healthy.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    from .procs import Proc
    proc = Proc(["-m", "vsr_fast", "serve", "--config", write_config(doc, str(tmp_path)),
                 "--port", str(port), "--workers", "2"], "supervisor of 2 workers").start()
    workers: list[int] = []
    try:
        url = f"http://127.0.0.1:{port}"
        # A bound, not a measurement: two workers import and load the model at once, slowly on a loaded box.
        assert wait_for(lambda: sum("vsr-fast: serving on" in line for line in proc.lines) == 2, timeout=120), proc.lines
        workers = children(proc.popen.pid)
        assert len(workers) == 2, workers
        # Each worker alone: the other is stopped (SIGSTOP), so only this one can accept; every
        # request on a fresh connection is answered, so each of the two processes serves.
        for serving, stopped in (workers, workers[::-1]):
            os.kill(stopped, signal.SIGSTOP)
            try:
                for _ in range(5):
                    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT}, timeout=20)
                    assert r.status_code == 200
            finally:
                os.kill(stopped, signal.SIGCONT)
        assert _ready(url)
        proc.signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")], "the workers stopped with the supervisor"
    finally:
        for pid in workers:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        proc.stop()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _h2_client():
    """A client HTTP/2 connection, preface queued, and the streamed Chat body its tests POST."""
    import h2.config
    import h2.connection

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    return conn, json.dumps({"model": "vsr/auto", "messages": CHAT, "stream": True}).encode()


def _h2_post(conn, stream_id: int, body: bytes) -> None:
    """Open stream ``stream_id`` with a Chat Completions POST of ``body``, whole."""
    conn.send_headers(stream_id, [(":method", "POST"), (":path", "/v1/chat/completions"), (":scheme", "http"),
                                  (":authority", "x"), ("content-type", "application/json"),
                                  ("content-length", str(len(body)))])
    conn.send_data(stream_id, body, end_stream=True)


def _h2_events(sock, conn, until):
    """Read frames until ``until(events)`` holds; every event h2 parsed, in order."""
    events = []
    while not until(events):
        data = sock.recv(65536)
        assert data, "the router closed the HTTP/2 connection"
        events += conn.receive_data(data)
        sock.sendall(conn.data_to_send())
    return events


def test_an_http2_stream_reset_alone_cancels_its_upstream(paced):
    # HTTP/2 (prior knowledge, as hypercorn takes it on a plain socket): a client can reset one stream and keep
    # the connection. Only that stream's http.disconnect says so; the connection's close never comes.
    import h2.events

    proc, slow = paced
    configure(slow, chunks=200, chunk_interval_ms=50)
    conn, body = _h2_client()
    with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
        _h2_post(conn, 1, body)
        s.sendall(conn.data_to_send())
        events = _h2_events(s, conn, lambda ev: any(isinstance(e, h2.events.DataReceived) for e in ev))
        status = next(e for e in events if isinstance(e, h2.events.ResponseReceived)).headers
        assert (b":status", b"200") in status
        conn.reset_stream(1)
        s.sendall(conn.data_to_send())
        assert wait_for(lambda: stats(slow)["cancelled"] == 1, timeout=20), stats(slow)
        # The connection stays up: a second stream on it is answered.
        conn.send_headers(3, [(":method", "GET"), (":path", "/health"), (":scheme", "http"),
                              (":authority", "x")], end_stream=True)
        s.sendall(conn.data_to_send())
        events = _h2_events(s, conn, lambda ev: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == 3
                                                    for e in ev))
        assert (b":status", b"200") in next(e for e in events if isinstance(e, h2.events.ResponseReceived)
                                            and e.stream_id == 3).headers
    assert stats(slow)["completed"] == 0, "the 10 s stream was cut, not finished"


def test_http2_streams_answered_at_once_on_one_connection_each_arrive_whole(paced):
    # Several streams of one HTTP/2 connection write at the same time: their writes wait in line on the connection's
    # send lock (vsr_fast.locks), and every stream's events arrive whole and in order.
    import h2.events

    streams = (1, 3, 5, 7, 9, 11)
    proc, mock = paced
    configure(mock, chunks=40, chunk_interval_ms=2)
    conn, body = _h2_client()
    with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
        for sid in streams:
            _h2_post(conn, sid, body)
        s.sendall(conn.data_to_send())
        ended: set[int] = set()
        data: dict[int, bytes] = {sid: b"" for sid in streams}

        def done(events) -> bool:
            for e in events[len(done.seen):]:
                if isinstance(e, h2.events.DataReceived):
                    data[e.stream_id] += e.data
                    conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    ended.add(e.stream_id)
            done.seen = events[:]
            return ended == set(streams)

        done.seen = []
        _h2_events(s, conn, done)
    for sid in streams:
        events = [part for part in data[sid].split(b"\n\n") if part.strip()]
        assert events[-1] == b"data: [DONE]", (sid, data[sid][-200:])
        chunks = [json.loads(part[len(b"data: "):]) for part in events[:-1]]
        assert len(chunks) == 40 and len({c["id"] for c in chunks}) == 1, sid
