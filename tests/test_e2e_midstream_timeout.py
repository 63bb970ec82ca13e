"""A backend that stops sending mid-stream past its read_timeout_ms: the stream ends with the error the same
timeout gets whole, 504 ``upstream_timeout`` (outside-user trial: it was 502 ``upstream_failed``), counted and
logged with that status, as the README says a broken stream counts."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler

import httpx
import openai
import pytest

from .hostile_upstream import serving
from .procs import config, router, wait_for_value, write_config

CHUNK = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,'
         b'"delta":{"role":"assistant","content":"part"},"finish_reason":null}]}\n\n')
RELEASE = threading.Event()


class _Stalls(BaseHTTPRequestHandler):
    """Answers a chat stream's first events at once, then sends nothing until the test ends."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for _ in range(2):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
        self.wfile.flush()
        RELEASE.wait(60)


def test_a_midstream_read_timeout_is_a_504_upstream_timeout(tmp_path):
    with serving(_Stalls) as url:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{url}/v1", "read_timeout_ms": 1000}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"access_log": {"enabled": True}}}
        try:
            with router(write_config(doc, str(tmp_path))) as proc:
                client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
                got = []
                with pytest.raises(openai.APIError) as caught:
                    for chunk in client.chat.completions.create(model="m", stream=True,
                                                                messages=[{"role": "user", "content": "hi"}]):
                        got.append(chunk.choices[0].delta.content)
                assert got == ["part", "part"]      # mid-stream: the client had the answer's start
                assert caught.value.code == "upstream_timeout", caught.value.body
                line = wait_for_value(lambda: next((json.loads(x) for x in proc.lines if x.startswith("{")), None),
                                      "an access log line")
                assert (line["status"], line["cause"]) == (504, "midstream_read_timeout"), line
                metrics = httpx.get(f"{proc.url}/metrics").text
                assert re.search(r'^vsr_requests_total\{[^}]*model="m",status="504"\} 1', metrics, re.M), metrics
        finally:
            RELEASE.set()
