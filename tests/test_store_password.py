"""A Redis store's password out of the configuration file (trial 10b finding 8): ``password_env`` or
``password_file`` (a mounted Secret, its trailing newline dropped), as the auth blocks' ``api_key_env`` and
``api_key_file``; the router then reaches a Redis that requires it."""
from __future__ import annotations

import subprocess

import httpx
import pytest
import redis

from vsr_fast.config.stores import with_password

from .procs import config, free_port, router, wait_for_value, wait_until, write_config
from .test_config_load import errors_of


@pytest.fixture(scope="module")
def locked_redis():
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass", "s3cr#t/pw",
                             "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password="s3cr#t/pw")
        wait_until(lambda: _pings(client), "the locked Redis to answer")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _pings(client) -> bool:
    try:
        return client.ping()
    except redis.ConnectionError:
        return False


def test_the_password_goes_into_the_url_quoted():
    assert with_password("redis://127.0.0.1:6379/0", "a/b#c") == "redis://:a%2Fb%23c@127.0.0.1:6379/0"
    assert with_password("redis://user@h:1/2", "p") == "redis://user:p@h:1/2"
    assert with_password("unix:///run/redis.sock?db=1", "p") == "unix:///run/redis.sock?db=1&password=p"
    assert with_password("redis://h/0", None) == "redis://h/0"


def test_an_event_stream_reaches_a_locked_redis_with_a_password_file(tmp_path, mock, locked_redis):
    secret = tmp_path / "redis-password"
    secret.write_text("s3cr#t/pw\n")
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"stores": {"event_stream": {
        "backend": "redis", "url": f"redis://127.0.0.1:{locked_redis}/0", "password_file": str(secret),
        "stream": "vsr-test-pw:events", "path": str(tmp_path / "spill")}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
        wait_for_value(lambda: "\nvsr_events_store_up 1\n" in httpx.get(f"{proc.url}/metrics").text,
                       "the event store up")
    written = redis.Redis(port=locked_redis, password="s3cr#t/pw").xlen("vsr-test-pw:events")
    assert written > 0


def test_a_missing_password_file_is_refused_with_its_path(tmp_path):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"auth": {"store": {"password_file": str(tmp_path / "none")}}}}
    lines = errors_of(doc)
    assert any(ln.startswith("global.router.auth.store.password_file: file_unreadable") for ln in lines), lines
