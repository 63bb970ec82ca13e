"""The upstream stream (vsr_fast.upstream.stream): a request's writes leave in one send at the first read of
its answer; httpcore's timeouts and errors come out as before. A scripted trio stream counts the sends; the
pool's own connections are checked over real sockets, plain and TLS."""
from __future__ import annotations

import json
import ssl
import subprocess

import httpcore
import pytest
import trio
import trio.testing
from httpcore._async.http11 import AsyncHTTP11Connection
from httpcore._backends.trio import TrioStream

from vsr_fast.upstream.stream import JOIN_MAX_BYTES, Backend, Stream
from vsr_fast.upstream.transport import Origin, QuietPool, _Exact, new_pool, send

from .procs import Proc, mock_upstream


class Scripted(trio.abc.Stream):
    """A trio stream that records each send_all and answers reads from a list (then waits forever)."""

    def __init__(self, answers: list[bytes] = (), broken_send: bool = False, stuck_send: bool = False) -> None:
        self.sends: list[bytes] = []
        self.answers = list(answers)
        self.broken_send = broken_send
        self.stuck_send = stuck_send

    async def send_all(self, data) -> None:
        if self.stuck_send:
            await trio.sleep_forever()
        if self.broken_send:
            raise trio.BrokenResourceError("reset by peer")
        self.sends.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        return None

    async def receive_some(self, max_bytes=None) -> bytes:
        if self.answers:
            return self.answers.pop(0)
        await trio.sleep_forever()

    async def aclose(self) -> None:
        return None


async def test_a_request_s_writes_leave_in_one_send_when_its_answer_is_read():
    raw = Scripted([b"HTTP/1.1 200 OK\r\n"])
    stream = Stream(raw)
    await stream.write(b"POST / HTTP/1.1\r\n\r\n", timeout=1)
    await stream.write(b"", timeout=1)              # h11's end of a sized body: nothing
    await stream.write(b"{}", timeout=1)
    assert raw.sends == []
    assert await stream.read(100, timeout=1) == b"HTTP/1.1 200 OK\r\n"
    assert raw.sends == [b"POST / HTTP/1.1\r\n\r\n{}"]


async def test_a_large_body_is_sent_as_it_came_with_no_copy():
    raw = Scripted([b"x"])
    stream = Stream(raw)
    body = b"b" * (JOIN_MAX_BYTES + 1)
    await stream.write(b"head", timeout=1)
    await stream.write(body, timeout=1)
    await stream.read(100, timeout=1)
    assert raw.sends == [b"head", body]


async def test_a_read_past_its_timeout_is_httpcore_s_read_timeout(autojump_clock):
    stream = Stream(Scripted())
    with pytest.raises(httpcore.ReadTimeout):
        await stream.read(100, timeout=5)
    assert trio.current_time() == 5


async def test_a_send_past_the_write_timeout_is_httpcore_s_write_timeout(autojump_clock):
    stream = Stream(Scripted([b"never read"], stuck_send=True))
    await stream.write(b"head", timeout=2)
    with pytest.raises(httpcore.WriteTimeout):
        await stream.read(100, timeout=30)
    assert trio.current_time() == 2


async def test_a_failed_send_is_dropped_and_what_the_server_answered_is_read():
    # httpcore drops a request's write error to read an answer sent before the server closed (a 413, say).
    stream = Stream(Scripted([b"HTTP/1.1 413 Too Large\r\n"], broken_send=True))
    await stream.write(b"head", timeout=1)
    assert await stream.read(100, timeout=1) == b"HTTP/1.1 413 Too Large\r\n"


async def test_a_broken_read_is_httpcore_s_read_error():
    class Broken(Scripted):
        async def receive_some(self, max_bytes=None) -> bytes:
            raise trio.BrokenResourceError("reset by peer")

    with pytest.raises(httpcore.ReadError):
        await Stream(Broken()).read(100, timeout=1)


async def _three_requests(pool, origin: Origin, count: int = 3) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    for _ in range(count):
        answer = await send(pool, origin, "/chat/completions", body, [(b"Content-Type", b"application/json")],
                            {"connect": 10.0, "read": 10.0, "write": 10.0, "pool": 10.0}, "m")
        content = b"".join([chunk async for chunk in answer.chunks()])
        await answer.aclose()
        assert answer.status == 200 and json.loads(content)["choices"]


async def test_the_pool_s_connections_read_and_write_through_it_over_a_real_socket():
    with mock_upstream() as mock:
        pool = new_pool(2)
        try:
            await _three_requests(pool, Origin(f"{mock.url}/v1"))
            assert len(pool.connections) == 1
            assert isinstance(pool.connections[0]._connection._network_stream, Stream)
        finally:
            await pool.aclose()


async def test_an_expired_connection_is_still_closed():
    made = []

    class Recording(QuietPool):
        def create_connection(self, origin):
            made.append(super().create_connection(origin))
            return made[-1]

    with mock_upstream() as mock:
        pool = Recording(max_connections=2, network_backend=Backend(), keepalive_expiry=0.0)
        try:
            await _three_requests(pool, Origin(f"{mock.url}/v1"), 2)
            assert len(made) == 2 and all(c.is_closed() for c in made), "each expired at once, and was closed"
            assert pool.connections == []
        finally:
            await pool.aclose()


async def test_a_tls_backend_s_connection_reads_and_writes_through_it(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    with mock_upstream() as mock, Proc(["-m", "tests.tls_proxy", "--cert", str(cert), "--key", str(key),
                                        "--target", mock.url.removeprefix("http://")], "tls_proxy: listening") as proxy:
        pool = new_pool(2, ssl.create_default_context(cafile=str(cert)))
        try:
            await _three_requests(pool, Origin(f"https://127.0.0.1:{proxy.port}/v1"))
            stream = pool.connections[0]._connection._network_stream
            assert isinstance(stream, Stream) and stream.get_extra_info("ssl_object") is not None
        finally:
            await pool.aclose()


async def _answered(cls, answers: list[bytes]) -> tuple:
    """What an HTTP/1.1 connection of class ``cls`` makes of ``answers`` read from the backend: the answer, or the
    error with its message and cause."""
    conn = cls(httpcore.Origin(b"http", b"h", 80), TrioStream(Scripted(answers)))
    request = httpcore.Request(b"POST", "http://h/x", headers=[(b"Host", b"h"), (b"Content-Length", b"2")],
                               content=b"{}")
    try:
        response = await conn.handle_async_request(request)
        body = b"".join([chunk async for chunk in response.stream])
        await response.aclose()
        return ("ok", response.status, response.headers, body, conn.is_idle())
    except Exception as exc:
        return (type(exc), str(exc), type(exc.__cause__), str(exc.__cause__), conn.is_closed())


@pytest.mark.parametrize("answers", [
    [b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc"],
    [b"HTTP/1.1 200 OK\r\ntransfer-", b"encoding: chunked\r\n\r\n3\r\nabc\r\n", b"0\r\n\r\n"],
    [b"HTTP/1.1 2000 OK\r\n\r\n"],                                     # h11 refuses it: httpcore's protocol error
    [b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nab", b""],           # cut mid-body
    [b""],                                                              # gone before answering
    [b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n"],
])
async def test_the_exact_connection_reads_answers_and_maps_errors_as_httpcore(answers):
    assert await _answered(_Exact, answers) == await _answered(AsyncHTTP11Connection, answers)
