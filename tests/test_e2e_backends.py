"""A backend's transport settings, end to end: connect and read timeouts, pool size and shards.

Each test runs the router as a real process against real sockets: the mock upstream
(silent, for the read timeout), a listening socket whose accept queue is full (a connect
that never completes), and a small HTTP server of the test's own that counts the
connections it accepts and holds its answers until the test lets them go.
"""
from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from .procs import config, model, router, wait_until, write_config

CHAT = [{"role": "user", "content": "Say hello"}]
ANSWER = json.dumps({"id": "chatcmpl-gate", "object": "chat.completion", "model": "gate",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "from the gate"},
                                  "finish_reason": "stop"}]}).encode()


def post(proc, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT}, timeout=timeout)


@contextmanager
def blackhole() -> Iterator[str]:
    """An endpoint whose TCP connect never completes: a listener with a full accept queue."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(4):                     # past the backlog, the kernel drops every further SYN
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for s in fillers:
            s.close()
        server.close()


# --- pool size and shards -------------------------------------------------------------------------


class Gate:
    """An HTTP/1.1 upstream of the test's own: counts accepted connections, answers once opened."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/v1"
        self.accepted = 0
        self.waiting = 0                  # requests read and held at the gate
        self.answered = 0
        self.opened = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._sockets.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        try:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                while len(data) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                data = data[length:]
                with self._lock:
                    self.waiting += 1
                self.opened.wait()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(ANSWER), ANSWER))
                with self._lock:
                    self.answered += 1
        except OSError:
            return

    def close(self) -> None:
        self.opened.set()
        self.server.close()
        with self._lock:
            for s in self._sockets:
                s.close()


# --- one router, a model per case -----------------------------------------------------------------

POOLS = [(1, 1, 3), (2, 1, 4), (1, 3, 3), (2, 2, 6)]     # (max_connections, pool_shards, concurrent requests)


@pytest.fixture(scope="module")
def gates():
    made = {pool: Gate() for pool in POOLS}
    yield made
    for gate in made.values():
        gate.close()


@pytest.fixture(scope="module")
def busy_gate():
    gate = Gate()
    yield gate
    gate.close()


@pytest.fixture(scope="module")
def backends(mock, silent, gates, busy_gate, tmp_path_factory):
    """One router whose models each exercise one transport setting; a request names the model directly."""
    with blackhole() as hole:
        models = [
            model("slow", f"{silent.url}/v1", read_timeout_ms=300),
            model("quick", f"{mock.url}/v1"),
            # The read timeout is an hour: only the connect timeout can end an attempt on the hole.
            model("hole", hole, connect_timeout_ms=300, read_timeout_ms=3_600_000),
            {"name": "hole-then-alive", "backend_refs": [
                {"endpoint": hole, "name": "hole", "connect_timeout_ms": 300, "read_timeout_ms": 3_600_000},
                {"endpoint": f"{mock.url}/v1", "name": "alive"}]},
            *(model(f"pool-{m}x{s}", gate.url, max_connections=m, pool_shards=s)
              for (m, s, _), gate in gates.items()),
            model("pool-busy", busy_gate.url, max_connections=1, pool_shards=1, max_pending=2),
        ]
        doc = config(models, [{"name": "d", "modelRefs": [{"model": "slow"}, {"model": "quick"}]}])
        with router(write_config(doc, str(tmp_path_factory.mktemp("backends")))) as proc:
            yield proc


def ask(proc, model_name: str, stream: bool = False, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", timeout=timeout,
                      json={"model": model_name, "messages": CHAT, "stream": stream})


# --- timeouts --------------------------------------------------------------------------------------


def test_read_timeout_ms_ends_a_silent_backend_with_504(backends, silent):
    httpx.post(f"{silent.url}/_mock/reset")
    r = ask(backends, "slow")
    assert r.status_code == 504, r.text
    assert r.json()["error"]["code"] == "upstream_timeout"
    assert r.headers["x-vsr-response-path"] == "error"
    # The backend had the request (so the connect and the write were done) and was holding the
    # answer back: it was the read that timed out, and the router hung up on it.
    wait_until(lambda: httpx.get(f"{silent.url}/_mock/stats").json()["cancelled"] >= 1, "the mock to see it leave")
    assert httpx.get(f"{silent.url}/_mock/stats").json()["completed"] == 0
    metrics = httpx.get(f"{backends.url}/metrics").text
    assert 'vsr_upstream_errors_total{model="slow",backend="slow[0]",cause="read_timeout"}' in metrics


@pytest.mark.parametrize("stream", [False, True])
def test_a_timed_out_model_falls_back_to_the_next(backends, stream):
    r = ask(backends, "vsr/auto", stream=stream)
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-response-path"] == "fallback"
    assert r.headers["x-vsr-selected-model"] == "quick"
    assert ("[DONE]" in r.text) if stream else r.json()["choices"][0]["message"]["content"]


def test_connect_timeout_ms_gives_up_on_a_backend_that_never_accepts(backends):
    r = ask(backends, "hole")
    assert r.status_code == 504, r.text              # no connection, so the connect timed out
    assert r.json()["error"]["code"] == "upstream_timeout"
    r = ask(backends, "hole-then-alive")
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-response-path"] == "upstream"     # the same model's next backend
    metrics = httpx.get(f"{backends.url}/metrics").text
    assert 'vsr_upstream_errors_total{model="hole-then-alive",backend="hole",cause="connect_timeout"}' in metrics


@pytest.mark.parametrize("max_connections, pool_shards, requests", POOLS)
def test_max_connections_and_pool_shards_bound_the_connections_to_a_backend(
        backends, gates, max_connections, pool_shards, requests):
    limit = max_connections * pool_shards
    gate = gates[(max_connections, pool_shards, requests)]
    statuses: list[int] = []
    clients = [threading.Thread(target=lambda: statuses.append(
                   ask(backends, f"pool-{max_connections}x{pool_shards}", timeout=60).status_code))
               for _ in range(requests)]
    for c in clients:
        c.start()
    # Every connection the pools allow is busy with a held request; the other requests
    # wait for one of them (each request takes a connection of the shard with the most free).
    wait_until(lambda: gate.waiting == limit, f"{limit} requests held at the gate")
    held_on = gate.accepted
    gate.opened.set()
    for c in clients:
        c.join(60)
    assert statuses == [200] * requests
    # The gate counts an answer after its write, which the client may have read first.
    wait_until(lambda: gate.answered == requests, f"the gate to count its {requests} answers")
    assert held_on == limit and gate.accepted == limit, (held_on, gate.accepted)


def _pending(proc, model_name: str) -> int:
    line = f'vsr_backend_pending{{model="{model_name}",backend="{model_name}[0]"}} '
    text = httpx.get(f"{proc.url}/metrics").text
    return int(next(row for row in text.splitlines() if row.startswith(line)).rsplit(" ", 1)[1])


def test_max_pending_refuses_at_once_past_it_and_every_lease_comes_back(backends, busy_gate):
    # One connection, two pending at most: one request at the gate, one waiting its turn for the connection,
    # and a third refused at once with 503 backends_busy, never queued.
    statuses: list[int] = []
    clients = [threading.Thread(target=lambda: statuses.append(ask(backends, "pool-busy", timeout=60).status_code))
               for _ in range(2)]
    for c in clients:
        c.start()
    wait_until(lambda: busy_gate.waiting == 1 and _pending(backends, "pool-busy") == 2,
               "one request at the gate and one waiting for the connection")
    r = ask(backends, "pool-busy")
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "backends_busy" and r.headers["retry-after"] == "1"
    busy_gate.opened.set()
    for c in clients:
        c.join(60)
    assert statuses == [200, 200] and busy_gate.accepted == 1       # both on the one connection, in turn
    assert _pending(backends, "pool-busy") == 0
    assert ask(backends, "pool-busy").status_code == 200
