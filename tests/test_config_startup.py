"""What ``serve`` opens at start is checked at load: each store's Redis URL and the access log's path are config
errors with their path, and ``serve`` refuses a file or directory it cannot open with one line and exit 2,
never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from vsr_fast.routing.loaded import validate_bytes

from .procs import ROOT, config


def _doc(global_: dict) -> dict:
    doc = config([{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = global_
    return doc


def _errors(global_: dict) -> list[str]:
    return validate_bytes(yaml.safe_dump(_doc(global_)).encode()).errors


BAD_URLS = [
    ({"stores": {"event_stream": {"backend": "redis", "url": "not-a-url"}}}, "global.stores.event_stream.url"),
    ({"stores": {"response_cache": {"backend_type": "redis", "url": "localhost:6379"}}},
     "global.stores.response_cache.url"),
    ({"stores": {"responses": {"url": "redis://"}}}, "global.stores.responses.url"),
    ({"stores": {"memory": {"url": "redis://host:port/0"}}}, "global.stores.memory.url"),
    ({"stores": {"vector_store": {"url": "unix://"}}}, "global.stores.vector_store.url"),
    ({"router": {"auth": {"store": {"url": "http://127.0.0.1:6379"}}}}, "global.router.auth.store.url"),
]


@pytest.mark.parametrize(("global_", "where"), BAD_URLS)
def test_a_store_url_redis_cannot_open_is_an_error_with_its_path(global_, where):
    errors = _errors(global_)
    assert len(errors) == 1 and errors[0].startswith(f"{where}: invalid_value: "), errors


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://cache.example:6380", "unix:///run/redis.sock",
                                 "redis://user:secret@[::1]:6379/2?socket_timeout=1"])
def test_the_urls_redis_opens_load(url):
    assert _errors({"stores": {"event_stream": {"backend": "redis", "url": url}}}) == []


def test_an_access_log_in_a_missing_directory_is_an_error_and_a_writable_one_loads(tmp_path):
    missing = str(tmp_path / "nope" / "access.log")
    assert _errors({"router": {"access_log": {"enabled": True, "path": missing}}}) == [
        f"global.router.access_log.path: file_unwritable: {missing}: directory {tmp_path / 'nope'} does not exist"]
    assert _errors({"router": {"access_log": {"enabled": True, "path": str(tmp_path)}}}) == [
        f"global.router.access_log.path: file_unwritable: {tmp_path}: is a directory"]
    assert _errors({"router": {"access_log": {"enabled": True, "path": str(tmp_path / "access.log")}}}) == []


def _serve(tmp_path, global_: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_doc(global_)))
    return subprocess.run([sys.executable, "-m", "vsr_fast", "serve", "--config", str(path), "--port", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VSR_STATE_DIR": str(tmp_path / "state")})


@pytest.mark.parametrize(("global_", "line"), [
    ({"stores": {"event_stream": {"backend": "redis", "url": "not-a-url"}}},
     "error: global.stores.event_stream.url: invalid_value: 'not-a-url' is not a Redis URL"),
    ({"router": {"access_log": {"enabled": True, "path": "/nonexistent/dir/access.log"}}},
     "error: global.router.access_log.path: file_unwritable: /nonexistent/dir/access.log: directory /nonexistent/dir "
     "does not exist"),
    # Writable by its mode bits to root, yet no directory can be made in /proc: refused when serve opens it.
    ({"stores": {"event_stream": {"path": "/proc/vsr-test/events"}}}, "/proc/vsr-test"),
])
def test_serve_refuses_what_it_cannot_open_with_one_line_and_exit_2(tmp_path, global_, line):
    done = _serve(tmp_path, global_)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
    assert "vsr-fast: refusing to start" in done.stderr and line in done.stderr, done.stderr
