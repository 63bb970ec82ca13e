"""Fixtures and helpers shared by the event-stream tests: real Redis, unique names, both backends."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
import trio
from redis.backoff import NoBackoff
from redis.retry import Retry

from vsr_fast.config.stores import EventStreamStore
from vsr_fast.events.types import AnswerCompleted, RequestReceived

from .procs import free_port

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def r() -> redis.Redis:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail("these tests need Redis on 127.0.0.1:6379 (make test starts one: tests/ensure_redis.sh)")
    yield client
    client.close()


@pytest.fixture
def stream_name(r: redis.Redis) -> str:
    """A stream key no other test uses; every key under it is deleted afterwards."""
    name = f"vsrtest:{uuid.uuid4().hex[:12]}"
    yield name
    keys = list(r.scan_iter(f"{name}*", count=1000))
    if keys:
        r.delete(*keys)


@pytest.fixture(params=["redis", "embedded"])
def stream_config(request, stream_name: str, tmp_path: Path) -> EventStreamStore:
    """The same stream on each backend."""
    return EventStreamStore(backend=request.param, url=REDIS_URL, stream=stream_name, path=str(tmp_path / "events"),
                            queue=10_000, batch=64)


def request_events(replay_id: str, n: int = 3, **common) -> list:
    """``n`` events of one request: received, then answers numbered 1..n-1."""
    base = {"replay_id": replay_id, "request_id": f"req-{replay_id}", "config_version": "test", "ts_ms": 1, **common}
    out: list = [RequestReceived(**base, seq=0, model="vsr/auto")]
    out += [AnswerCompleted(**base, seq=i, status=200) for i in range(1, n)]
    return out


async def wait_for(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` (sync) until true, on trio's clock."""
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(0.01)
        return
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class RedisServer:
    """A redis-server of our own on a free port: stop it, start it again, always kill it."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--dbfilename", "dump.rdb", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 5
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        client.close()
        return self

    def shutdown_saving(self) -> None:
        """Stop as an operator would, keeping the data on disk (``SHUTDOWN SAVE``) for the restart."""
        # No retries: redis-py retries the dropped connection SHUTDOWN ends with, backing off for seconds.
        client = redis.Redis(port=self.port, retry=Retry(NoBackoff(), 0))
        try:
            client.shutdown(save=True)
        except redis.ConnectionError:
            pass
        finally:
            client.close()
        assert self.proc is not None
        self.proc.wait(10)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(19)   # SIGSTOP: a Redis that accepts bytes and answers nothing

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(18)   # SIGCONT

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.resume()
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def own_redis(tmp_path: Path):
    directory = tmp_path / "redis"
    os.makedirs(directory)
    server = RedisServer(directory).start()
    try:
        yield server
    finally:
        server.kill()
