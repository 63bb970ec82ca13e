"""A pooled connection its backend closed while idle is closed by the router soon after, with no request to that
backend needed, over real sockets: the backend (``hostile_upstream``'s ``idle-close``) answers, then closes the
connection 0.3 s later, as a backend whose keep-alive timeout is shorter than the router's does. The router's end
of it sat in CLOSE-WAIT until a request used that pool again (trial 20), one socket per connection and shard.
"""
from __future__ import annotations

import httpx
import pytest

from .hostile_upstream import Handler, serving
from .procs import config, router, wait_until, write_config

CLOSE_WAIT = "08"


def close_waits(port: int) -> int:
    """Sockets in CLOSE-WAIT whose peer is 127.0.0.1:``port`` (the router's ends of the backend's connections)."""
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == CLOSE_WAIT and remote == f"0100007F:{port:04X}":
                count += 1
    return count


@pytest.fixture(scope="module")
def backend():
    with serving(Handler) as url:
        yield url


def test_an_idle_connection_the_backend_closed_is_closed_without_a_request(backend, tmp_path):
    port = int(backend.rsplit(":", 1)[1])
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{backend}/idle-close/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=30,
                       json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
        wait_until(lambda: close_waits(port) >= 1, "the backend closing its idle connection")
        # No request comes: the router finds the closed connections on its own and closes its ends.
        wait_until(lambda: close_waits(port) == 0, "the router closing its end of the dropped connection")
        assert httpx.post(f"{proc.url}/v1/chat/completions", timeout=30,
                          json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}).status_code == 200
