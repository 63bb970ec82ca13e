"""End-to-end tests of the bench tools: mock upstream, floor proxy and sr-bench, as real processes."""
from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
import trio

from bench import sr_bench
from bench.mock_upstream import MockConfig, split_even, stream_deltas

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = {k: getattr(MockConfig(), k) for k in MockConfig.__struct_fields__}


class Server:
    """A tool started as `python -m MODULE`, its URL read from the readiness line."""

    def __init__(self, module: str, tag: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", "0", *args],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        # Draining stderr for the process's whole life keeps a chatty server from blocking on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = self._wait_ready(tag)
        self.port = int(self.url.rsplit(":", 1)[1])

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)

    def _wait_ready(self, tag: str) -> str:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            match = re.match(rf"{tag}: listening on (http://\S+)", line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError(f"{tag} did not become ready")

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it does not exit promptly; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


@pytest.fixture(scope="module")
def mock_server():
    server = Server("bench.mock_upstream", "mock_upstream")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def floor_server(mock_server):
    server = Server("bench.floor", "floor", "--upstream", mock_server.url)
    yield server
    server.stop()


def admin(server: Server, path: str, body: dict | None = None) -> dict:
    """GET (or POST body to) one of the mock's /_mock/ routes."""
    with httpx.Client(base_url=server.url, trust_env=False, timeout=5) as client:
        response = client.post(path, json=body or {}) if body is not None else client.get(path)
    response.raise_for_status()
    return response.json()


@pytest.fixture
def mock(mock_server):
    """The shared mock, with default knobs and zeroed counters."""
    admin(mock_server, "/_mock/config", DEFAULTS)
    admin(mock_server, "/_mock/reset", {})
    return mock_server


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=10)


def collect_stream(url: str) -> list:
    stream = sdk(url).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True},
    )
    return list(stream)


async def poll_stats(server: Server, key: str, want: int, timeout: float = 3.0) -> dict:
    """The mock's stats once stats[key] reaches want (or the last ones seen at the timeout)."""
    with trio.move_on_after(timeout):
        while True:
            stats = await trio.to_thread.run_sync(admin, server, "/_mock/stats")
            if stats[key] >= want:
                return stats
            await trio.sleep(0.05)
    return stats


async def start_stream_and_leave(port: int) -> None:
    """Open a stream, read its first bytes, then close the connection mid-stream."""
    body = b'{"model":"m","stream":true,"messages":[]}'
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        received = b""
        while b"data:" not in received:
            received += await stream.receive_some(65536)
    assert b"200" in received.split(b"\r\n", 1)[0]


# --- mock upstream -------------------------------------------------------------------------


def test_whole_answer_parses_with_the_openai_sdk(mock):
    answer = sdk(mock.url).chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert answer.object == "chat.completion"
    assert answer.model == "gpt-test"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == DEFAULTS["content"]
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    stats = admin(mock, "/_mock/stats")
    assert (stats["requests"], stats["completed"]) == (1, 1)
    assert stats["last_request"]["headers"]["authorization"] == "Bearer x"
    assert stats["last_request"]["body"]["model"] == "gpt-test"


def test_stream_parses_with_the_openai_sdk(mock):
    admin(mock, "/_mock/config", {"chunks": 5, "content": "one two three"})
    chunks = collect_stream(mock.url)
    assert len(chunks) == 6  # 5 chunks + the usage chunk
    assert all(c.object == "chat.completion.chunk" and c.model == "gpt-test" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert chunks[4].choices[0].finish_reason == "stop"
    assert chunks[5].choices == [] and chunks[5].usage.completion_tokens > 0
    assert admin(mock, "/_mock/stats")["streams_started"] == 1


def test_models_list(mock):
    assert [m.id for m in sdk(mock.url).models.list()] == ["mock-model"]


def test_fail_rate_one_gives_the_configured_status(mock):
    admin(mock, "/_mock/config", {"fail_rate": 1, "fail_status": 503})
    with pytest.raises(openai.APIStatusError) as caught:
        sdk(mock.url).chat.completions.create(model="m", messages=[])
    assert caught.value.status_code == 503
    assert "injected" in caught.value.body["message"]
    assert admin(mock, "/_mock/stats")["failures_injected"] == 1


def test_reset_and_midstream_failures_break_the_connection(mock):
    admin(mock, "/_mock/config", {"fail_rate": 1, "fail_mode": "reset"})
    with pytest.raises(openai.APIConnectionError):
        sdk(mock.url).chat.completions.create(model="m", messages=[])
    admin(mock, "/_mock/config", {"fail_mode": "midstream"})
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in sdk(mock.url).chat.completions.create(model="m", messages=[], stream=True):
            seen.append(chunk)
    assert len(seen) == 2


def test_seeded_failures_are_deterministic(mock):
    def pattern() -> list[int]:
        admin(mock, "/_mock/config", {"fail_rate": 0.5, "seed": 7})
        with httpx.Client(base_url=mock.url, trust_env=False) as client:
            return [client.post("/v1/chat/completions", json={"model": "m"}).status_code for _ in range(12)]

    first = pattern()
    assert first == pattern() and {200, 500} == set(first)


def test_keep_alive_chunked_request_and_connection_close(mock):
    body = b'{"model":"raw","messages":[]}'
    chunked = b"POST /chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    closing = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        sock.sendall(chunked + closing)
        received = b""
        while data := sock.recv(65536):  # ends only if the mock honours Connection: close
            received += data
    first, second = received.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"200") and b'"model":"raw"' in first
    assert second.startswith(b"200") and b"Connection: close" in second
    assert admin(mock, "/_mock/stats")["last_request"]["body"]["model"] == "raw"


async def test_a_client_leaving_mid_stream_counts_as_cancelled(mock):
    await trio.to_thread.run_sync(admin, mock, "/_mock/config", {"chunks": 500, "chunk_interval_ms": 20})
    await start_stream_and_leave(mock.port)
    stats = await poll_stats(mock, "cancelled", 1)
    assert (stats["cancelled"], stats["completed"], stats["streams_started"]) == (1, 0, 1)


def test_deltas_concatenate_to_the_content():
    for chunks in (1, 2, 3, 8, 40):
        tails = stream_deltas("abcdefghij", chunks)
        assert len(tails) == chunks
        text = "".join(json.loads(b'{"choices":[{"index":0,' + t)["choices"][0]["delta"].get("content", "") for t in tails)
        assert text == "abcdefghij"
    assert split_even("abcde", 2) == ["abc", "de"]


# --- floor --------------------------------------------------------------------------------


def test_floor_relays_whole_and_streamed_answers(mock, floor_server):
    answer = sdk(floor_server.url).chat.completions.create(model="via-floor", messages=[])
    assert answer.choices[0].message.content == DEFAULTS["content"]
    chunks = collect_stream(floor_server.url)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == DEFAULTS["content"]
    stats = admin(mock, "/_mock/stats")
    assert stats["completed"] == 2
    assert stats["last_request"]["headers"]["authorization"] == "Bearer x"


def test_floor_relays_upstream_errors(mock, floor_server):
    admin(mock, "/_mock/config", {"fail_rate": 1, "fail_status": 429})
    with pytest.raises(openai.RateLimitError):
        sdk(floor_server.url).chat.completions.create(model="m", messages=[])


async def test_floor_cancels_the_upstream_when_the_client_leaves(mock, floor_server):
    await trio.to_thread.run_sync(admin, mock, "/_mock/config", {"chunks": 500, "chunk_interval_ms": 20})
    await start_stream_and_leave(floor_server.port)
    stats = await poll_stats(mock, "cancelled", 1)
    assert (stats["cancelled"], stats["completed"]) == (1, 0)


# --- sr-bench -------------------------------------------------------------------------------


def run_bench(capsys, *args: str) -> tuple[int, dict]:
    status = sr_bench.main([*args, "--json", "--quiet"])
    return status, json.loads(capsys.readouterr().out)


def test_sr_bench_reports_a_clean_run(mock, capsys):
    status, report = run_bench(capsys, mock.url, "-n", "50", "-c", "4", "--stream", "both",
                               "--pid", str(mock.proc.pid))
    assert status == 0
    assert [(r["concurrency"], r["stream"]) for r in report["rows"]] == [(4, False), (4, True)]
    for row in report["rows"]:
        assert (row["ok"], row["http_errors"], row["conn_errors"]) == (50, 0, 0)
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert row["cpu_us_per_req"] is not None and row["req_per_s"] > 0
        # Each of the two rounds' own rate; the host's steal share, unless the cell ran within one clock tick.
        assert len(row["round_req_per_s"]) == 2 and all(r > 0 for r in row["round_req_per_s"])
        assert row["host_steal_pct"] is None or 0 <= row["host_steal_pct"] <= 100
    assert report["rows"][1]["ttfb_p50_ms"] <= report["rows"][1]["p50_ms"]
    assert admin(mock, "/_mock/stats")["completed"] >= 100


def test_steal_is_the_hosts_stolen_share_of_the_cells_ticks():
    total, steal = sr_bench.read_host_ticks()
    assert total > 0 and 0 <= steal <= total
    run = sr_bench.RunResult(latencies=[0.001] * 10, elapsed=1.0, host_ticks=200, steal_ticks=5)
    run.rounds = [(6, 0.5), (4, 0.5)]
    row = sr_bench.summarise("x", 1, False, run)
    assert row["host_steal_pct"] == 2.5 and row["round_req_per_s"] == [12.0, 8.0]
    assert sr_bench.summarise("x", 1, False, sr_bench.RunResult())["host_steal_pct"] is None


def test_sr_bench_compares_targets_with_direct(mock, floor_server, capsys):
    status, report = run_bench(capsys, "--target", f"floor={floor_server.url}", "--direct", mock.url,
                               "--pid", f"floor={floor_server.proc.pid}", "-n", "40", "-c", "1,2")
    assert status == 0
    rows = {(r["target"], r["concurrency"]): r for r in report["rows"]}
    assert set(rows) == {("direct", 1), ("floor", 1), ("direct", 2), ("floor", 2)}
    floor = rows[("floor", 2)]
    assert floor["added_p50_ms"] == pytest.approx(floor["p50_ms"] - rows[("direct", 2)]["p50_ms"])
    assert floor["cpu_vs_floor"] == pytest.approx(1.0)
    assert all(r["http_errors"] == r["conn_errors"] == 0 for r in rows.values())


def test_sr_bench_counts_http_errors_and_fails_when_nothing_succeeds(mock, capsys):
    admin(mock, "/_mock/config", {"fail_rate": 1, "fail_status": 502})
    status, report = run_bench(capsys, mock.url, "-n", "10", "--rounds", "1")
    assert status == 1
    assert report["rows"][0]["http_errors"] == 10
    assert report["rows"][0]["error_kinds"] == {"http 502": 10}


def test_sr_bench_table_and_target_parsing(mock, capsys):
    assert sr_bench.main([mock.url, "-n", "10", "-q"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| target | conc | stream | p50 ms")
    target = sr_bench.parse_target("r=http://h:81/v1", "x")
    assert (target.name, target.port, target.path) == ("r", 81, "/v1/chat/completions")
    assert sr_bench.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_mock_exits_cleanly_on_sigterm():
    server = Server("bench.mock_upstream", "mock_upstream")
    assert server.stop() == 0
