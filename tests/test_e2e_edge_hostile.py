"""The edge against a hostile client, over real sockets (the router and the bench mock as processes):

- a DATA frame on a stream the router has already answered is refused on that stream alone (RST_STREAM) and the
  router keeps serving (hypercorn raised KeyError through the connection's task, which ended the process);
- a client that grants no flow-control window holds back the relay: the router stops reading the backend (its
  stream never completes) and ``send_timeout_ms`` cuts the stream, recorded 408 ``send_timeout``; past the request's
  deadline (and its grace) first, the stream is reset then;
- streams the client resets in the read that opened them never reach the backend, and a connection that resets
  too many is closed with GOAWAY ENHANCE_YOUR_CALM (CVE-2023-44487, as nginx and Envoy do), counted.
"""
from __future__ import annotations

import json
import socket

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import httpx
import pytest
import trio
import trio.testing

from vsr_fast.server import listen

from .procs import config, mock_upstream, router, wait_until, write_config

CHAT = [{"role": "user", "content": "Say hello"}]
# Far more than the sockets between the backend and the router hold (a few MB on loopback), less than the 64 MiB cut.
BIG = "x" * (24 << 20)


@pytest.fixture(scope="module")
def small():
    with mock_upstream() as mock:
        yield mock


@pytest.fixture(scope="module")
def big():
    with mock_upstream() as mock:
        httpx.post(f"{mock.url}/_mock/config", json={"content": BIG, "chunks": 6000}, timeout=30).raise_for_status()
        yield mock


@pytest.fixture(scope="module")
def edge(small, big, tmp_path_factory):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{small.url}/v1"}]},
                  {"name": "big", "backend_refs": [{"endpoint": f"{big.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True},
                                "limits": {"body_timeout_ms": 300, "send_timeout_ms": 2000},
                                "upstream": {"retries": {"max_retries": 0}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("h2edge")))) as proc:
        yield proc


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats", timeout=10).json()


def reset(mock) -> None:
    httpx.post(f"{mock.url}/_mock/reset", timeout=10).raise_for_status()


def metric(proc, name: str) -> float:
    """The sum of the router's samples of ``name`` (``name`` may end in a label set's start)."""
    text = httpx.get(f"{proc.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and line[len(name)] in " {,}")


def client(window: int | None = None) -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    return conn


def chat_head(length: int | None = None) -> list[tuple[str, str]]:
    head = [(":method", "POST"), (":path", "/v1/chat/completions"), (":scheme", "http"), (":authority", "x"),
            ("content-type", "application/json")]
    return head + ([("content-length", str(length))] if length is not None else [])


def send_chat(sock, conn, model: str, stream: bool = False) -> None:
    """A whole chat request on stream 1."""
    body = json.dumps({"model": model, "messages": CHAT, **({"stream": True} if stream else {})}).encode()
    conn.send_headers(1, chat_head(len(body)))
    conn.send_data(1, body, end_stream=True)
    sock.sendall(conn.data_to_send())


def events_until(sock, conn, until) -> list:
    """Frames read until ``until(events)`` holds (every event so far, in order)."""
    events: list = []
    while not until(events):
        data = sock.recv(65536)
        assert data, "the router closed the HTTP/2 connection"
        events += conn.receive_data(data)
        try:
            sock.sendall(conn.data_to_send())
        except BrokenPipeError:     # the router ended the connection: what it said before is in ``events``
            pass
    return events


def ended(stream_id: int):
    return lambda events: any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset))
                              and e.stream_id == stream_id for e in events)


def status_of(events, stream_id: int) -> bytes:
    return dict(next(e for e in events if isinstance(e, h2.events.ResponseReceived)
                     and e.stream_id == stream_id).headers)[b":status"]


def health(sock, conn, stream_id: int) -> bytes:
    conn.send_headers(stream_id, [(":method", "GET"), (":path", "/health"), (":scheme", "http"),
                                  (":authority", "x")], end_stream=True)
    sock.sendall(conn.data_to_send())
    return status_of(events_until(sock, conn, ended(stream_id)), stream_id)


def test_data_on_a_stream_already_answered_resets_that_stream_and_the_router_serves_on(edge):
    conn = client()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        conn.send_headers(1, chat_head())
        conn.send_data(1, b"{")
        s.sendall(conn.data_to_send())
        events = events_until(s, conn, ended(1))
        assert status_of(events, 1) == b"408"       # body_timeout_ms: the body never came
        conn.send_data(1, b" ")                    # the client's side of stream 1 is still open
        s.sendall(conn.data_to_send())
        events = events_until(s, conn, ended(1))
        # RFC 9113 8.1: after a complete answer, RST_STREAM NO_ERROR asks the client to stop sending its request.
        assert [e.error_code for e in events if isinstance(e, h2.events.StreamReset)] == [h2.errors.ErrorCodes.NO_ERROR]
        assert health(s, conn, 3) == b"200"         # the same connection serves on
    assert edge.popen.poll() is None
    assert httpx.get(f"{edge.url}/health", timeout=10).status_code == 200


def test_a_client_that_grants_no_window_stalls_the_backend_until_send_timeout_cuts_the_stream(edge, big):
    reset(big)
    cut = metric(edge, 'vsr_request_timeouts_total{api="chat",stage="send"')
    conn = client(window=0)
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        send_chat(s, conn, "big", stream=True)
        events = events_until(s, conn, lambda ev: any(isinstance(e, h2.events.ResponseReceived) for e in ev))
        assert status_of(events, 1) == b"200"
        # The router reads the backend only as far as its client takes the answer: the backend's 24 MB never all
        # leave it, and send_timeout_ms (2 s) cuts the stream, letting the backend go.
        wait_until(lambda: (st := stats(big))["completed"] + st["cancelled"] >= 1, "the backend's stream to end")
        assert (stats(big)["completed"], stats(big)["cancelled"]) == (0, 1)
        events = events_until(s, conn, ended(1))
        assert [e for e in events if isinstance(e, h2.events.StreamReset)], "the cut stream is reset"
        assert health(s, conn, 3) == b"200"         # the connection serves on
    assert metric(edge, 'vsr_request_timeouts_total{api="chat",stage="send"') == cut + 1


def test_streams_reset_in_the_read_that_opened_them_never_reach_the_backend(edge, small):
    reset(small)
    unserved = metric(edge, "vsr_http2_streams_reset_unserved_total")
    conn = client()
    body = json.dumps({"model": "m", "messages": CHAT}).encode()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        for sid in range(1, 41, 2):
            conn.send_headers(sid, chat_head(len(body)))
            conn.send_data(sid, body, end_stream=True)
            conn.reset_stream(sid)
        s.sendall(conn.data_to_send())             # one write: the router reads each stream with its reset
        assert health(s, conn, 41) == b"200"
    assert metric(edge, "vsr_http2_streams_reset_unserved_total") == unserved + 20
    assert stats(small)["requests"] == 0


def test_a_connection_resetting_streams_past_the_limit_gets_goaway_enhance_your_calm(edge, small):
    calmed = metric(edge, "vsr_http2_rapid_reset_closes_total")
    conn = client()
    body = json.dumps({"model": "m", "messages": CHAT}).encode()
    terminated: list = []

    def read_while_window_short(s) -> None:
        # The router hands the connection's window back as it reads; a closed connection ends the wait.
        while conn.outbound_flow_control_window < 50 * len(body) and not terminated:
            data = s.recv(65536)
            if not data:
                terminated.append(None)
                return
            terminated.extend(e for e in conn.receive_data(data) if isinstance(e, h2.events.ConnectionTerminated))
            s.sendall(conn.data_to_send())

    def read_to_the_close(s) -> None:
        # Closed while this wrote: its GOAWAY is in what is left to read, if the close did not reset it away.
        try:
            while data := s.recv(65536):
                terminated.extend(e for e in conn.receive_data(data) if isinstance(e, h2.events.ConnectionTerminated))
        except ConnectionResetError:
            pass
        terminated.append(None)

    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        for i in range(2000):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, chat_head(len(body)))
            conn.send_data(sid, body, end_stream=True)
            conn.reset_stream(sid)
            if i % 50 == 49:
                try:
                    s.sendall(conn.data_to_send())
                    read_while_window_short(s)
                except (BrokenPipeError, ConnectionResetError):
                    read_to_the_close(s)
                if terminated:
                    break
        assert terminated[0].error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, terminated
    assert metric(edge, "vsr_http2_rapid_reset_closes_total") == calmed + 1
    assert httpx.get(f"{edge.url}/health", timeout=10).status_code == 200


def test_a_busy_connection_whose_resets_are_a_minority_of_its_streams_stays_open(edge, small):
    # A proxy carrying many users, or an editor cancelling completions as its user types on: past 200 resets in
    # the window, but each beside two streams served to their end. Only a connection resetting most of what it
    # opens is the attack.
    calmed = metric(edge, "vsr_http2_rapid_reset_closes_total")
    conn = client()
    body = json.dumps({"model": "m", "messages": CHAT}).encode()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        for _ in range(45):                         # 225 resets among 675 streams, in one burst each
            served = []
            for i in range(15):
                sid = conn.get_next_available_stream_id()
                if i % 3 == 2:
                    conn.send_headers(sid, chat_head(len(body)))
                    conn.reset_stream(sid)
                else:
                    conn.send_headers(sid, [(":method", "GET"), (":path", "/health"), (":scheme", "http"),
                                            (":authority", "x")], end_stream=True)
                    served.append(sid)
            s.sendall(conn.data_to_send())
            events = events_until(s, conn, lambda ev: all(ended(sid)(ev) for sid in served))
            assert {status_of(events, sid) for sid in served} == {b"200"}
        assert health(s, conn, conn.get_next_available_stream_id()) == b"200"
    assert metric(edge, "vsr_http2_rapid_reset_closes_total") == calmed


def test_an_http2_head_past_16_kib_is_a_431_and_past_the_advertised_64_kib_ends_the_connection(edge, small):
    # README: 431 over HTTP/2 too, within the header list size the connection's SETTINGS advertise (64 KiB). Past
    # it h2 stops decoding mid-block, which leaves the connection's HPACK table unknown: only the connection can
    # end (RFC 9113 4.3), with GOAWAY ENHANCE_YOUR_CALM.
    body = json.dumps({"model": "m", "messages": CHAT}).encode()
    for size, expected in ((20_000, "431"), (70_000, "goaway")):
        conn = client()
        with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
            conn.send_headers(1, chat_head(len(body)) + [("x-big", "a" * size)])
            conn.send_data(1, body, end_stream=True)
            s.sendall(conn.data_to_send())
            events = events_until(s, conn, lambda ev: any(isinstance(e, (h2.events.StreamEnded,
                                                                         h2.events.ConnectionTerminated)) for e in ev))
        if expected == "431":
            assert status_of(events, 1) == b"431"
        else:
            assert [e.error_code for e in events if isinstance(e, h2.events.ConnectionTerminated)] == \
                [h2.errors.ErrorCodes.ENHANCE_YOUR_CALM]


def test_a_body_in_one_byte_chunks_is_refused_before_any_backend(edge, small):
    reset(small)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 6000}]}).encode()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        # One write, under one read's 64 KiB: nothing is left unread in the router's socket when it closes.
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(b"1\r\n%c\r\n" % b for b in body) + b"0\r\n\r\n")
        answer = b""
        while b"}}" not in answer and (data := s.recv(65536)):
            answer += data
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_body_fragmented"
    assert stats(small)["requests"] == 0


async def test_a_connection_whose_handling_raises_is_closed_alone_and_counted():
    # Whatever a defect raises in one connection's task (hypercorn's KeyError came wrapped by its task group)
    # ends that connection, never the listener's nursery.
    connections = listen.Connections(None)

    async def handler(stream) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.receive_some, 10)
            raise KeyError(1)

    ours, theirs = trio.testing.memory_stream_pair()
    connections.active = 1
    await listen._run(ours, handler, connections)
    assert (connections.active, connections.failed) == (0, 1)
    assert await theirs.receive_some(10) == b"", "the connection was closed"
    assert "vsr_connections_failed_total 1" in connections.prometheus_lines()


def test_a_client_reading_a_large_answer_steadily_is_not_cut_by_send_timeout(tmp_path):
    # send_timeout_ms is time without progress (as on HTTP/1): a client that takes a frame at a time, each well
    # within it, gets the whole answer however long the whole takes (here past send_timeout_ms several times).
    with mock_upstream() as mock:
        answer = "y" * (256 << 10)
        httpx.post(f"{mock.url}/_mock/config", json={"content": answer}, timeout=30).raise_for_status()
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"limits": {"send_timeout_ms": 1000}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            conn = client(window=16384)
            got = bytearray()
            with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
                send_chat(s, conn, "m")
                events: list = []
                while not ended(1)(events):
                    data = s.recv(65536)
                    assert data, "the router closed the HTTP/2 connection"
                    new = conn.receive_data(data)
                    events += new
                    for e in new:
                        if isinstance(e, h2.events.DataReceived):
                            got += e.data
                            trio.run(trio.sleep, 0.15)      # a slow reader: a frame's window back at a time
                            conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    s.sendall(conn.data_to_send())
            assert not [e for e in events if isinstance(e, h2.events.StreamReset)], "the stream was cut"
            assert status_of(events, 1) == b"200"
            assert json.loads(bytes(got))["choices"][0]["message"]["content"] == answer


def test_a_stream_its_client_grants_no_window_is_reset_at_the_request_deadline(tmp_path):
    """The trial's case: a streamed request whose client grants no window, past the request's deadline. The access
    log said 504 but the stream stayed open, no RST_STREAM, until the connection's idle timer: HTTP/1 closes the
    connection of an answer cut unfinished; here its stream is reset (send_timeout_ms is far later) and the
    connection serves on."""
    with mock_upstream() as mock:
        httpx.post(f"{mock.url}/_mock/config", json={"chunks": 1000, "chunk_interval_ms": 50},
                   timeout=30).raise_for_status()
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"access_log": {"enabled": True},
                                    "limits": {"request_timeout_ms": 1500, "send_timeout_ms": 600_000}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            conn = client(window=0)
            with socket.create_connection(("127.0.0.1", proc.port), timeout=60) as s:
                send_chat(s, conn, "m", stream=True)
                events = events_until(s, conn, ended(1))
                assert status_of(events, 1) == b"200"
                assert not [e for e in events if isinstance(e, h2.events.ConnectionTerminated)], events
                resets = [e for e in events if isinstance(e, h2.events.StreamReset) and e.stream_id == 1]
                assert [e.error_code for e in resets] == [h2.errors.ErrorCodes.CANCEL], events
                conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
                assert health(s, conn, 3) == b"200"         # the connection serves on
            wait_until(lambda: any('"status": 504' in line or '"status":504' in line for line in proc.lines),
                       "the access log's 504")


def test_a_stream_past_max_concurrent_streams_is_refused_alone_and_the_connection_serves_on(edge):
    """RFC 9113 5.1.2: a stream past SETTINGS_MAX_CONCURRENT_STREAMS (hypercorn's 100) is refused with RST_STREAM
    REFUSED_STREAM, the connection kept, as nginx does; it was GOAWAY PROTOCOL_ERROR, every request on it lost. The
    headers are sent before the router's SETTINGS are read, so the client's own h2 does not hold the 101st back."""
    conn = client()
    opened = [1 + 2 * i for i in range(101)]
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        for stream_id in opened:        # each request's body left unfinished: all 101 open at once
            conn.send_headers(stream_id, chat_head(100))
        s.sendall(conn.data_to_send())
        events = events_until(s, conn, ended(opened[-1]))
        assert not [e for e in events if isinstance(e, h2.events.ConnectionTerminated)], events
        refused = [e for e in events if isinstance(e, h2.events.StreamReset)]
        assert [(e.stream_id, e.error_code) for e in refused] == [(opened[-1], h2.errors.ErrorCodes.REFUSED_STREAM)]
        events += events_until(s, conn, lambda ev: all(ended(i)(events + ev) for i in opened[:-1]))
        assert {status_of(events, i) for i in opened[:-1]} == {b"408"}     # body_timeout_ms: each answered
        for stream_id in opened[:-1]:   # the client's side of each, still open, closed: room for one more
            conn.reset_stream(stream_id)
        assert health(s, conn, opened[-1] + 2) == b"200"                    # and the connection serves on
