"""Upstream clients are shared by every user: they must keep nothing one answer sets for the next request."""
from __future__ import annotations

import httpx
import msgspec

from vsr_fast.config.schema import ProviderModel
from vsr_fast.upstream.pool import Backend, base_url


async def test_a_backend_keeps_no_cookie():
    model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}, ProviderModel)
    backend = Backend(model, model.backend_refs[0], 0)
    try:
        for client in backend._clients:
            answer = httpx.Response(200, headers={"set-cookie": "session=alice; Path=/"},
                                    request=httpx.Request("POST", backend.chat_url))
            client.cookies.extract_cookies(answer)
            assert len(client.cookies) == 0
    finally:
        await backend.aclose()


def test_endpoint_forms():
    def url(endpoint: str) -> str:
        model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": endpoint}]}, ProviderModel)
        return base_url(model.backend_refs[0])

    assert url("127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert url("https://api.example.com") == "https://api.example.com/v1"
    assert url("http://h:1/openai/v1/") == "http://h:1/openai/v1"


async def test_a_backend_s_clients_take_its_timeouts_pool_size_and_shards():
    model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1", "connect_timeout_ms": 250,
                                                            "read_timeout_ms": 7_000, "max_connections": 3,
                                                            "pool_shards": 4}]}, ProviderModel)
    backend = Backend(model, model.backend_refs[0], 0)
    try:
        assert len(backend._clients) == 4
        for client in backend._clients:
            assert client.timeout == httpx.Timeout(connect=0.25, read=7.0, write=7.0, pool=7.0)
            pool = client._transport._pool
            assert (pool._max_connections, pool._max_keepalive_connections) == (3, 3)
        # Round robin: each request takes the next shard, all four in turn.
        assert [id(backend.client()) for _ in range(8)] == [id(c) for c in backend._clients] * 2
    finally:
        await backend.aclose()
