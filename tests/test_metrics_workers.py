"""One view of the metrics under ``--workers``: whichever worker a scrape reaches adds up every worker's."""
from __future__ import annotations

import re

import httpx

from vsr_fast.server.metrics_view import merge

from .procs import config, router, wait_for_value, write_config


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


def test_two_workers_counters_add_up_exactly(tmp_path, mock):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with router(write_config(doc, str(tmp_path)), "--workers", "2") as proc:
        wait_for_value(lambda: "\nvsr_workers 2\n" in httpx.get(f"{proc.url}/metrics").text, "both workers' series")
        for _ in range(11):
            # A new connection each time: the kernel hands them to either worker.
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200
        for _ in range(6):
            text = httpx.get(f"{proc.url}/metrics").text
            assert "\nvsr_workers 2\n" in text
            assert _requests_total(text) == 11
