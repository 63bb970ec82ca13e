"""The access log when its file cannot be written (a full disk, a reader of stderr gone): lines are dropped and
counted, a warning is logged now and then, writing resumes, and the writer (so the router) keeps running."""
from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys

import httpx
import trio

from vsr_fast.config.schema import AccessLogConfig
from vsr_fast.server.access_log import AccessLog

from .disk import fill, small_disk
from .procs import ROOT, config, free_port, router, wait_until, write_config


async def _burst(access: AccessLog, n: int, tag: str, handled) -> None:
    """Queue ``n`` lines one at a time, each once the writer has handled the one before (``handled()`` counts)."""
    for i in range(n):
        access.log({"request_id": f"{tag}-{i}", "status": 200})
        with trio.fail_after(20):
            while handled() < i + 1:
                await trio.sleep(0.002)


def _dropped(access: AccessLog, reason: str) -> int:
    text = "\n".join(access.prometheus_lines())
    return int(re.search(rf'^vsr_access_log_dropped_total{{reason="{reason}"}} (\d+)$', text, re.M).group(1))


def test_a_full_disk_drops_and_counts_lines_then_writing_resumes_after_a_reopen(tmp_path, caplog):
    log = tmp_path / "access.log"
    log.symlink_to("/dev/full")            # every write: ENOSPC
    access = AccessLog(AccessLogConfig(enabled=True, path=str(log)))
    access.open()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(access.run)
            await _burst(access, 20, "full", lambda: _dropped(access, "write_error"))
            assert _dropped(access, "write_error") == 20
            log.unlink()                   # room again: rotation reopens at the path
            access.reopen()
            await _burst(access, 3, "room", lambda: len(log.read_text().splitlines()) if log.exists() else 0)
            nursery.cancel_scope.cancel()

    with caplog.at_level(logging.WARNING, logger="vsr_fast.access_log"):
        trio.run(main)
    assert [line.split('"request_id":"')[1].split('"')[0] for line in log.read_text().splitlines()] == \
        ["room-0", "room-1", "room-2"]
    assert _dropped(access, "write_error") == 20 and _dropped(access, "queue_full") == 0
    warnings = [r for r in caplog.records if "access log" in r.getMessage()]
    assert 1 <= len(warnings) < 20, [r.getMessage() for r in warnings]    # rate-limited, not one per line
    assert "No space left" in warnings[0].getMessage()


def test_a_reader_of_stderr_gone_drops_and_counts_lines(monkeypatch):
    read, write = os.pipe()
    os.close(read)                          # `router 2>&1 | head -c 300` after head exited
    broken = io.TextIOWrapper(io.FileIO(write, "w"), write_through=True)
    monkeypatch.setattr(sys, "stderr", broken)
    access = AccessLog(AccessLogConfig(enabled=True))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(access.run)
            await _burst(access, 5, "gone", lambda: _dropped(access, "write_error"))
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert _dropped(access, "write_error") == 5


def _chat(url: str, rid: str) -> int:
    return httpx.post(f"{url}/v1/chat/completions", headers={"x-request-id": rid}, timeout=20,
                      json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}).status_code


def _log_config(tmp_path, endpoint: str, **access) -> str:
    doc = config([{"name": "m", "backend_refs": [{"endpoint": endpoint, "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "format": "json", **access}},
                     "stores": {"event_stream": {"backend": "none"}}}
    return write_config(doc, str(tmp_path))


def _write_errors(url: str) -> int:
    metrics = httpx.get(f"{url}/metrics").text
    return int(re.search(r'^vsr_access_log_dropped_total\{reason="write_error"\} (\d+)$', metrics, re.M).group(1))


def test_the_router_serves_on_when_its_access_log_disk_is_full_and_writes_again_once_it_has_room(tmp_path, mock):
    with small_disk("256k") as disk:
        log = disk / "access.log"
        with router(_log_config(tmp_path, f"{mock.url}/v1", path=str(log))) as proc:
            assert _chat(proc.url, "before") == 200
            wait_until(lambda: "before" in log.read_text(), "the first line")
            filler = fill(disk)
            # The file's last page still takes a few lines: send until some are dropped.
            sent = 0
            while _write_errors(proc.url) < 5:
                assert sent < 500, "no line dropped on a full disk"
                assert _chat(proc.url, f"full-{sent}") == 200
                sent += 1
            filler.unlink()
            assert _chat(proc.url, "after") == 200
            wait_until(lambda: "after" in log.read_text(), "a line once the disk has room")
            assert proc.popen.poll() is None
        ids = [json.loads(x)["request_id"] for x in log.read_text().splitlines()]
        assert ids[0] == "before" and ids[-1] == "after"
        assert sum("access log: cannot write" in x for x in proc.lines) == 1, proc.lines


def test_the_router_serves_on_when_the_reader_of_its_stderr_goes_away(tmp_path, mock):
    """``vsr-fast serve ... 2>&1 | head -c 300``: the access log (on stderr) meets EPIPE once head exits."""
    port = free_port()
    popen = subprocess.Popen([sys.executable, "-m", "vsr_fast", "serve", "--config",
                              _log_config(tmp_path, f"{mock.url}/v1"), "--host", "127.0.0.1", "--port", str(port)],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "VSR_STATE_DIR": str(tmp_path / "state")})
    url = f"http://127.0.0.1:{port}"
    try:
        for line in popen.stderr:       # bounded by the pytest timeout: it prints this line or exits
            if b"serving on" in line:
                break
        popen.stderr.close()            # head has what it wanted and exits
        assert _up(url)
        for i in range(5):
            assert _chat(url, f"gone-{i}") == 200
        wait_until(lambda: _write_errors(url) >= 5, "the dropped lines counted")
        assert popen.poll() is None
    finally:
        popen.terminate()
        popen.wait(20)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
