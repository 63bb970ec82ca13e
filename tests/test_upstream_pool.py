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
