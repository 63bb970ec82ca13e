"""SIGTERM under load (issue 13): the router refuses new connections while it drains, one worker or two (a
connection the kernel would queue and then drop is refused instead), and a request still running when the
graceful timeout nears is answered 503 shutting_down in its protocol (a stream: its error event) rather than
cut with no status."""
from __future__ import annotations

import errno
import json
import signal
import socket
import threading
import time

import httpx
import pytest

from ..procs import Proc, config, free_port, mock_upstream, model, wait_until, write_config

GRACEFUL_S = 6
CHAT = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def trickle():
    """A stream of 200 chunks, one each 100 ms: 20 s, longer than the graceful timeout."""
    with mock_upstream("--chunks", "200", "--chunk-interval-ms", "100") as proc:
        yield proc


def refused(port: int) -> bool:
    """Whether a connection to ``port`` is refused; a connection that is accepted is closed unused."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    except OSError as exc:
        assert exc.errno == errno.ECONNREFUSED, exc
        return True
    return False


class InFlight(threading.Thread):
    """One request held open by its upstream; keeps what came back and when it ended."""

    def __init__(self, url: str, model_name: str, stream: bool) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.stream = url, model_name, stream
        self.status = 0
        self.headers: httpx.Headers | None = None
        self.body = b""
        self.ended = 0.0

    def run(self) -> None:
        with httpx.stream("POST", f"{self.url}/v1/chat/completions", timeout=60,
                          json={"model": self.model, "messages": CHAT, "stream": self.stream}) as r:
            self.status, self.headers = r.status_code, r.headers
            for chunk in r.iter_bytes():
                self.body += chunk
        self.ended = time.monotonic()


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_refuses_new_connections_while_draining_and_answers_what_the_timeout_cuts(
        tmp_path, silent, trickle, workers):
    port = free_port()
    doc = config([model("held", f"{silent.url}/v1"), model("streamed", f"{trickle.url}/v1")],
                 [{"name": "d", "modelRefs": [{"model": "held"}]}])
    args = ["-m", "vsr_fast", "serve", "--config", write_config(doc, str(tmp_path)), "--port", str(port),
            "--graceful-timeout", str(GRACEFUL_S)]
    ready = "vsr-fast: serving on"
    if workers > 1:
        args += ["--workers", str(workers)]
    proc = Proc(args, ready, env={"VSR_STATE_DIR": str(tmp_path / "state")}).start()
    try:
        wait_until(lambda: sum(ready in line for line in proc.lines) == workers, f"{workers} workers serving")
        url = f"http://127.0.0.1:{port}"
        before = [httpx.get(f"{m.url}/_mock/stats").json()["requests"] for m in (silent, trickle)]
        flights = [InFlight(url, "held", False), InFlight(url, "held", False), InFlight(url, "streamed", True)]
        for f in flights:
            f.start()
        wait_until(lambda: [httpx.get(f"{m.url}/_mock/stats").json()["requests"] for m in (silent, trickle)]
                   == [before[0] + 2, before[1] + 1], "the three requests at their upstreams")
        wait_until(lambda: flights[2].body, "the stream's first chunk")
        assert not refused(port)

        proc.signal(signal.SIGTERM)
        wait_until(lambda: refused(port), "new connections refused")
        refused_at = time.monotonic()
        # Refused while the drain still holds the three requests, and every later attempt too.
        assert all(f.is_alive() for f in flights), [f.status for f in flights]
        assert all(refused(port) for _ in range(20))

        for f in flights:
            f.join(GRACEFUL_S + 10)
            assert not f.is_alive()
            assert f.ended > refused_at
        for f in flights[:2]:
            assert f.status == 503, f.body
            assert f.headers["retry-after"] == "1"
            assert json.loads(f.body)["error"]["code"] == "shutting_down"
        stream = flights[2]
        assert stream.status == 200
        events = [e for e in stream.body.split(b"\n\n") if e]
        assert b"chat.completion.chunk" in events[0]
        assert b"shutting_down" in events[-1] and b"[DONE]" not in stream.body
        assert proc.wait(20) == 0
    finally:
        proc.stop()


def test_sigterm_closes_an_idle_kept_alive_connection_at_once(tmp_path, trickle):
    # The connection answered one request and waits, kept alive, for the next: the drain closes it at once
    # rather than at its idle timeout (a minute) or the graceful timeout (a minute too), and the router exits.
    port = free_port()
    doc = config([model("m", f"{trickle.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    args = ["-m", "vsr_fast", "serve", "--config", write_config(doc, str(tmp_path)), "--port", str(port),
            "--graceful-timeout", "60"]
    proc = Proc(args, "vsr-fast: serving on", env={"VSR_STATE_DIR": str(tmp_path / "state")}).start()
    try:
        body = json.dumps({"model": "vsr/auto", "messages": CHAT}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                answer += s.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer
            proc.signal(signal.SIGTERM)
            s.settimeout(20)        # a bound on a hang, not a measurement: the timeouts above are 60 s
            assert s.recv(65536) == b"", "the idle connection was closed, with nothing more sent"
        assert proc.wait(20) == 0
    finally:
        proc.stop()
