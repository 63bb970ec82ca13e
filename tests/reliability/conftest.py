"""Hostile clients against a real router process, over raw sockets where HTTP libraries would be too polite."""
from __future__ import annotations

import socket
import time

import pytest

from ..procs import Proc, config, mock_upstream, model, router, write_config


@pytest.fixture(scope="module")
def upstream():
    with mock_upstream() as proc:
        yield proc


@pytest.fixture(scope="module")
def hostile():
    """tests/hostile_upstream.py: one real HTTP server playing every misbehaving backend."""
    with Proc(["-m", "tests.hostile_upstream"], "listening") as proc:
        yield proc


def edge_router(upstream, directory: str, cors: dict | None = None, **limits):
    """A router in front of ``upstream`` with ``global.router.limits`` set to ``limits`` (and ``cors``)."""
    doc = config([model("m", f"{upstream.url}/v1"),
                  {"name": "local-scripted", "api_format": "systemone", "deployment": "local"}],
                 [{"name": "only", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "m"}]}])
    doc["recipes"].append({"name": "native", "decisions": [{"name": "local",
                                                            "modelRefs": [{"model": "local-scripted"}]}]})
    doc["entrypoints"].append({"api": "systemone", "model_names": ["vsr/decide"], "recipe": "native"})
    doc["global"] = {"router": {"limits": limits, **({"cors": cors} if cors else {})}, "model_catalog": {"deployments": {
        "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}}}}
    return router(write_config(doc, directory))


def connect(proc) -> socket.socket:
    """A raw TCP connection to the router."""
    return socket.create_connection(("127.0.0.1", proc.port), timeout=30)


def read_until_closed(sock: socket.socket, bound_s: float = 30.0) -> bytes:
    """Everything the router writes until it closes the socket; fails if it is still open after ``bound_s``
    (a bound on a hang, never a measurement)."""
    out = b""
    deadline = time.monotonic() + bound_s
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return out
        except TimeoutError:
            raise AssertionError(f"the router kept the socket open past {bound_s} s; read so far: {out!r}")
        if not chunk:
            return out
        out += chunk
