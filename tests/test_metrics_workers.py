"""One view of the metrics under ``--workers``: whichever worker a scrape reaches adds up every worker's."""
from __future__ import annotations

import os
import re
import signal
import socket

import httpx
import pytest

from bench._procs import children
from vsr_fast.server.metrics_view import merge, socket_path

from .procs import config, redis_prefix, replay_record, router, wait_for_value, write_config


def test_merge_adds_series_up_and_keeps_backend_up_at_the_lowest():
    a = (b"# HELP vsr_requests_total Requests.\n# TYPE vsr_requests_total counter\n"
         b'vsr_requests_total{api="chat"} 6\n# TYPE vsr_backend_up gauge\nvsr_backend_up{backend="b"} 1\n'
         b'# TYPE vsr_request_duration_seconds histogram\nvsr_request_duration_seconds_bucket{le="+Inf"} 6\n'
         b"vsr_request_duration_seconds_sum 0.5\n")
    b = (b"# HELP vsr_requests_total Requests.\n# TYPE vsr_requests_total counter\n"
         b'vsr_requests_total{api="chat"} 5\nvsr_requests_total{api="messages"} 2\n'
         b'# TYPE vsr_backend_up gauge\nvsr_backend_up{backend="b"} 0\n'
         b'# TYPE vsr_request_duration_seconds histogram\nvsr_request_duration_seconds_bucket{le="+Inf"} 5\n'
         b"vsr_request_duration_seconds_sum 0.25\n")
    assert merge([a, b]).decode().splitlines() == [
        "# HELP vsr_requests_total Requests.", "# TYPE vsr_requests_total counter",
        'vsr_requests_total{api="chat"} 11', 'vsr_requests_total{api="messages"} 2',
        "# TYPE vsr_backend_up gauge", 'vsr_backend_up{backend="b"} 0',
        "# TYPE vsr_request_duration_seconds histogram", 'vsr_request_duration_seconds_bucket{le="+Inf"} 11',
        "vsr_request_duration_seconds_sum 0.75",
    ]


def _requests_total(text: str) -> int:
    return sum(int(float(v)) for v in re.findall(r"^vsr_requests_total\{[^}]*\} (\S+)$", text, re.M))


@pytest.fixture(scope="module")
def two_workers(mock, tmp_path_factory):
    """A router of two workers, the replay plugin on, both workers' series in its /metrics."""
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {}}]}
    with router(write_config(doc, str(tmp_path_factory.mktemp("two-workers"))), "--workers", "2") as proc:
        wait_for_value(lambda: "\nvsr_workers 2\n" in httpx.get(f"{proc.url}/metrics").text, "both workers' series")
        yield proc


def test_two_workers_counters_add_up_exactly(two_workers):
    proc = two_workers
    before = _requests_total(httpx.get(f"{proc.url}/metrics").text)     # the module's router: a delta
    for _ in range(11):
        # A new connection each time: the kernel hands them to either worker.
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                       json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
    for _ in range(6):
        text = httpx.get(f"{proc.url}/metrics").text
        assert "\nvsr_workers 2\n" in text
        assert _requests_total(text) - before == 11


def test_merge_keeps_store_up_at_the_lowest_and_reloads_at_the_highest():
    a = (b"# TYPE vsr_events_store_up gauge\nvsr_events_store_up 1\n"
         b'# TYPE vsr_config_reloads_total counter\nvsr_config_reloads_total{outcome="ok"} 3\n')
    b = (b"# TYPE vsr_events_store_up gauge\nvsr_events_store_up 0\n"
         b'# TYPE vsr_config_reloads_total counter\nvsr_config_reloads_total{outcome="ok"} 2\n')
    lines = merge([a, b]).decode().splitlines()
    assert "vsr_events_store_up 0" in lines and 'vsr_config_reloads_total{outcome="ok"} 3' in lines


_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _families(text: str) -> tuple[dict[str, set[str]], set[str]]:
    """Each family's HELP/TYPE lines seen, and every sample's family (a histogram's _bucket/_sum/_count: its own)."""
    meta: dict[str, set[str]] = {}
    sampled: set[str] = set()
    kinds: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# "):
            _, what, name, *rest = line.split(" ", 3)
            meta.setdefault(name, set()).add(what)
            if what == "TYPE":
                kinds[name] = rest[0]
        elif line:
            name = line.split("{", 1)[0].split(" ", 1)[0]
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            sampled.add(base if kinds.get(base) == "histogram" else name)
    return meta, sampled


def test_a_busy_two_worker_router_every_series_described_replay_whole_and_a_stopped_worker_counted(tmp_path, mock):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {"capture_request_body": True}}]}
    with router(write_config(doc, str(tmp_path)), "--workers", "2") as proc:
        wait_for_value(lambda: "\nvsr_workers 2\n" in httpx.get(f"{proc.url}/metrics").text, "both workers' series")
        ids = []
        for _ in range(8):
            # A new connection each time: the kernel hands them to either worker.
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, json=_CHAT)
            assert r.status_code == 200
            ids.append(r.headers["x-vsr-replay-id"])
        # Each worker records the requests it served; either answers for both.
        for replay_id in ids:
            assert replay_record(proc, replay_id)["id"] == replay_id
        for _ in range(4):
            listed = httpx.get(f"{proc.url}/api/v1/replay").json()["records"]
            assert sorted(row["id"] for row in listed) == sorted(ids)
            assert len(httpx.get(f"{proc.url}/api/v1/replay?limit=3").json()["records"]) == 3

        text = httpx.get(f"{proc.url}/metrics").text
        meta, sampled = _families(text)
        assert {name for name in sampled if meta.get(name) != {"HELP", "TYPE"}} == set()
        assert "vsr_connections_active" in sampled and "vsr_connections_refused_total" in sampled
        assert 'vsr_time_to_first_byte_seconds_bucket{api="chat",model="m",le="600"} 8' in text
        # A 0/1 gauge is the lowest of the workers', not their sum.
        assert "\nvsr_events_store_up 1\n" in text

        stopped = children(proc.popen.pid)[1]
        os.kill(stopped, signal.SIGSTOP)
        try:
            for _ in range(2):
                # The stopped worker's series are the last it gave out: no counter goes back.
                text = httpx.get(f"{proc.url}/metrics", timeout=20).text
                assert _requests_total(text) == 8
                assert "\nvsr_workers 2\n" in text and "\nvsr_workers_stale 1\n" in text
        finally:
            os.kill(stopped, signal.SIGCONT)
        text = httpx.get(f"{proc.url}/metrics", timeout=20).text
        assert _requests_total(text) == 8 and "\nvsr_workers_stale 0\n" in text


def test_an_event_store_never_reached_is_not_up(tmp_path, mock):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"stores": {"event_stream": {"backend": "redis", "url": "redis://127.0.0.1:1/0",
                                                 "stream": "vsr-test-25:down", "path": str(tmp_path / "spill")}}}
    with router(write_config(doc, str(tmp_path)), "--workers", "2") as proc:
        # No request yet: nothing was written, and the store never answered.
        text = wait_for_value(lambda: (lambda t: t if "\nvsr_workers 2\n" in t else None)(
            httpx.get(f"{proc.url}/metrics").text), "both workers' series")
        assert "\nvsr_events_store_up 0\n" in text


def test_replay_listing_with_the_redis_event_stream_lists_each_record_once(tmp_path, mock):
    # Every worker reads the one Redis store: asking the peers too would list each record once per worker.
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with redis_prefix("replay-workers") as prefix:
        doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {}}],
                         "stores": {"event_stream": {"backend": "redis", "url": "redis://127.0.0.1:6379/0",
                                                     "stream": f"{prefix}events", "path": str(tmp_path / "spill")}}}
        with router(write_config(doc, str(tmp_path)), "--workers", "2") as proc:
            wait_for_value(lambda: "\nvsr_workers 2\n" in httpx.get(f"{proc.url}/metrics").text, "both workers")
            ids = [httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, json=_CHAT).headers["x-vsr-replay-id"]
                   for _ in range(4)]
            for replay_id in ids:
                assert replay_record(proc, replay_id)["id"] == replay_id
            for _ in range(4):
                listed = httpx.get(f"{proc.url}/api/v1/replay").json()["records"]
                assert sorted(row["id"] for row in listed) == sorted(ids)


def _worker_socket(pid: int) -> str:
    argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
    return socket_path(argv[argv.index("--metrics-dir") + 1], int(argv[argv.index("--worker-index") + 1]))


def _peer_ask(path: str, ask: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(ask)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_a_bad_peer_ask_is_answered_as_an_error_and_the_worker_keeps_serving(two_workers):
    proc = two_workers
    workers = children(proc.popen.pid)
    path = _worker_socket(workers[0])
    for garbage in (b"replay-list {not json\n", b"replay-list {\"nope\": 1}\n", b"replay-get \xff\xfe\n"):
        assert _peer_ask(path, garbage).startswith(b"!error ")
    assert b"\nvsr_workers 1\n" in _peer_ask(path, b"metrics\n")
    assert children(proc.popen.pid) == workers and proc.popen.poll() is None
    for _ in range(3):
        text = httpx.get(f"{proc.url}/metrics").text
        assert "\nvsr_workers 2\n" in text and "\nvsr_workers_stale 0\n" in text


def test_a_stopped_worker_never_scraped_is_counted_stale(tmp_path, mock):
    """A worker stopped before any scrape asked it has no series given out yet: it is still one of the workers,
    counted in vsr_workers_stale (README), never left out of the view (trial 10b: vsr_workers 1, stale 0)."""
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with router(write_config(doc, str(tmp_path)), "--workers", "2") as proc:
        wait_for_value(lambda: sum("vsr-fast: serving on" in x for x in proc.lines) == 2, "both workers to serve")
        stopped = children(proc.popen.pid)[1]
        os.kill(stopped, signal.SIGSTOP)
        try:
            text = httpx.get(f"{proc.url}/metrics", timeout=20).text
            assert "\nvsr_workers_stale 1\n" in text and "\nvsr_workers 2\n" in text, \
                [x for x in text.splitlines() if "vsr_workers" in x]
        finally:
            os.kill(stopped, signal.SIGCONT)
