"""What a drain answers and logs (an outside SRE's trial): a keep-alive request sent behind an in-flight answer,
the Connection: close of answers in flight at SIGTERM, the connections queued when the listener closes."""
from __future__ import annotations

import json
import re
import signal
import socket
from collections import Counter

import httpx
import pytest

from ..procs import Proc, config, mock_upstream, model, wait_until, write_config
from .conftest import read_until_closed



def post(model_name: str = "vsr/auto") -> bytes:
    """A whole HTTP/1.1 Chat Completions request for ``model_name``."""
    body = json.dumps({"model": model_name, "messages": [{"role": "user", "content": "hello there"}]}).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


POST = post()


@pytest.fixture(scope="module")
def slow():
    """An upstream whose answers come after 3 s: in flight when the test signals the router."""
    with mock_upstream("--latency-ms", "3000") as proc:
        yield proc


def draining_router(tmp_path, upstream, graceful_s: int = 60) -> tuple[Proc, str]:
    """A router in front of ``upstream`` with a JSON access log; the graceful timeout long enough that a process
    exiting well within the test's bounds exited because nothing was left in flight."""
    doc = config([model("m", f"{upstream.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    log_path = str(tmp_path / "access.log")
    doc["global"] = {"router": {"access_log": {"enabled": True, "format": "json", "path": log_path}}}
    proc = Proc(["-m", "vsr_fast", "serve", "--config", write_config(doc, str(tmp_path)), "--port", "0",
                 "--host", "127.0.0.1", "--graceful-timeout", str(graceful_s)], "vsr-fast: serving on",
                env={"VSR_STATE_DIR": str(tmp_path / "state")}).start()
    return proc, log_path


def log_lines(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def one_answer(sock: socket.socket) -> bytes:
    """One whole answer with a Content-Length body, read off ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, data
        body += chunk
    return head + b"\r\n\r\n" + body


def in_flight_then_sigterm(proc: Proc, upstream, sock: socket.socket, pipelined: bytes = b"") -> None:
    """Send one request on ``sock``, and ``pipelined`` behind it once the upstream holds it; then SIGTERM, and
    wait for the drain."""
    before = httpx.get(f"{upstream.url}/_mock/stats").json()["requests"]
    sock.sendall(POST)
    wait_until(lambda: httpx.get(f"{upstream.url}/_mock/stats").json()["requests"] > before, "the upstream holds it")
    if pipelined:
        sock.sendall(pipelined)
    proc.signal(signal.SIGTERM)
    wait_until(lambda: any("SIGTERM: draining" in line for line in proc.lines), "the drain")


def test_a_request_pipelined_behind_an_in_flight_answer_does_not_hold_the_drain(tmp_path, slow):
    # The second request is read (h11 holds it) while the first waits on its upstream: once the first is answered
    # the connection closes (the router stops) and the process exits, rather than wait out the graceful timeout
    # with nothing in flight.
    proc, log_path = draining_router(tmp_path, slow)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock:
            in_flight_then_sigterm(proc, slow, sock, pipelined=POST)
            answers = read_until_closed(sock)
        assert answers.startswith(b"HTTP/1.1 200"), answers
        assert answers.count(b"HTTP/1.1 ") == 1 or b"HTTP/1.1 503" in answers, answers
        assert proc.wait(30) == 0, "\n".join(proc.lines[-20:])
        assert [line["status"] for line in log_lines(log_path)][0] == 200
    finally:
        proc.stop()


def test_a_request_whose_head_came_as_the_drain_began_is_answered_503_and_logged(tmp_path, slow):
    # A kept-alive connection has sent part of its next request's head when SIGTERM comes: the router does not close
    # it as idle (the client would see its request dropped with no answer); the request is answered 503
    # shutting_down, closing, logged once, and the process still exits as soon as nothing is in flight.
    proc, log_path = draining_router(tmp_path, slow)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as held, \
                socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock:
            head, rest = POST[:40], POST[40:]
            sock.sendall(head)
            # One in flight at SIGTERM, so the router is still draining when the head completes.
            in_flight_then_sigterm(proc, slow, held)
            sock.sendall(rest)
            second = read_until_closed(sock)
            first = read_until_closed(held)
        assert first.startswith(b"HTTP/1.1 200"), first
        assert second.startswith(b"HTTP/1.1 503"), second
        lowered = second.lower()
        assert b"\r\nconnection: close\r\n" in lowered and b"\r\nretry-after: 1\r\n" in lowered, second
        assert b"shutting_down" in second, second
        assert proc.wait(30) == 0, "\n".join(proc.lines[-20:])
        lines = log_lines(log_path)
        assert sorted(line["status"] for line in lines) == [200, 503], lines
        refused = next(line for line in lines if line["status"] == 503)
        assert refused["request_id"].encode() in second
    finally:
        proc.stop()


def test_a_keep_alive_request_sent_after_an_in_flight_answer_is_answered_or_closed_unread(tmp_path, slow):
    # The SRE's ka3: the next request on the same connection right after the in-flight answer. Either it is answered
    # 503 shutting_down (closing) and logged, or the connection closed before it was read; never held.
    proc, log_path = draining_router(tmp_path, slow)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock:
            in_flight_then_sigterm(proc, slow, sock)
            first = one_answer(sock)
            assert first.startswith(b"HTTP/1.1 200"), first
            try:
                sock.sendall(POST)
                second = read_until_closed(sock)
            except (BrokenPipeError, ConnectionResetError):
                second = b""
        if second:
            assert second.startswith(b"HTTP/1.1 503"), second
            assert b"\r\nconnection: close\r\n" in second.lower(), second
            assert b"shutting_down" in second, second
        assert proc.wait(30) == 0, "\n".join(proc.lines[-20:])
        statuses = [line["status"] for line in log_lines(log_path)]
        assert statuses == ([200, 503] if second else [200]), statuses
    finally:
        proc.stop()


def test_answers_in_flight_at_sigterm_carry_connection_close(tmp_path, slow, silent):
    # README: from SIGTERM on, every HTTP/1 answer carries Connection: close (Envoy's drain). Both requests began
    # before it: one answered by its upstream, one cut by the graceful timeout (503 shutting_down).
    doc = config([model("m", f"{slow.url}/v1"), model("held", f"{silent.url}/v1")],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    proc = Proc(["-m", "vsr_fast", "serve", "--config", write_config(doc, str(tmp_path)), "--port", "0",
                 "--host", "127.0.0.1", "--graceful-timeout", "6"], "vsr-fast: serving on",
                env={"VSR_STATE_DIR": str(tmp_path / "state")}).start()
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as answered, \
                socket.create_connection(("127.0.0.1", proc.port), timeout=30) as cut:
            before = httpx.get(f"{silent.url}/_mock/stats").json()["requests"]
            cut.sendall(post("held"))
            wait_until(lambda: httpx.get(f"{silent.url}/_mock/stats").json()["requests"] > before, "the silent one")
            in_flight_then_sigterm(proc, slow, answered)
            whole, refused = one_answer(answered), one_answer(cut)
        assert whole.startswith(b"HTTP/1.1 200"), whole
        assert refused.startswith(b"HTTP/1.1 503") and b"shutting_down" in refused, refused
        for answer in (whole, refused):
            assert b"\r\nconnection: close\r\n" in answer.split(b"\r\n\r\n")[0].lower() + b"\r\n", answer
        assert proc.wait(30) == 0
    finally:
        proc.stop()


def test_connections_queued_when_the_listener_closes_are_answered_not_reset(tmp_path, upstream):
    # README: a new connection is refused, never queued and dropped. Connections the kernel accepted into the
    # listen queue while the router could not run (SIGSTOP) are still queued when SIGTERM closes the listener:
    # each gets an HTTP answer (served, or 503 and closed) rather than the close's reset.
    proc, log_path = draining_router(tmp_path, upstream)
    queued: list[socket.socket] = []
    try:
        proc.signal(signal.SIGSTOP)
        try:
            for _ in range(40):
                queued.append(socket.create_connection(("127.0.0.1", proc.port), timeout=30))
                queued[-1].sendall(POST)
        finally:
            proc.signal(signal.SIGTERM)
            proc.signal(signal.SIGCONT)
        answers = [read_until_closed(sock) for sock in queued]      # a reset reads as b""
        assert all(a.startswith((b"HTTP/1.1 200", b"HTTP/1.1 503")) for a in answers), \
            Counter(a[:12] for a in answers)
        assert all(b"\r\nconnection: close\r\n" in a.lower() for a in answers), answers
        assert proc.wait(30) == 0
        # Each answer has its access log line, those the listener answered before reading a request too.
        logged = {line["request_id"]: line for line in log_lines(log_path)}
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        for answer in refused:
            rid = re.search(rb"\r\nx-request-id: (\S+)\r\n", answer).group(1).decode()
            assert (logged[rid]["status"], logged[rid]["error"]) == (503, "shutting_down"), logged.get(rid)
        assert len(logged) == len(answers), (len(logged), Counter(a[:12] for a in answers))
    finally:
        for sock in queued:
            sock.close()
        proc.stop()
