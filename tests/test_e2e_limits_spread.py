"""A key's traffic spread over two routers sharing Redis is held to its limits, not below them: real routers, a real
Redis (a prefix of this module's own), the bench mock, the OpenAI SDK.

- A ``concurrent`` place frees in the shared store when its request ends (LiteLLM's parallel-request limit), so
  strictly sequential requests alternating routers are never refused by a place the other router holds idle.
- Near a limit the routers lease one place at a time, so a router that leased ahead holds no idle places there:
  99 of 100 requests a minute on one router leave the hundredth to the other, and the 101st is refused.
"""
from __future__ import annotations

import httpx
import openai
import pytest

from .procs import mock_upstream, redis_prefix, router, write_config
from .test_e2e_auth import REDIS_URL, auth_doc, sha

KEYS = {name: (f"vsk-spread-{name}-" + "s" * 32, limits)
        for name, limits in (("henry", {"concurrent": 1}), ("duo", {"concurrent": 2}), ("hundred", {"rpm": 100}))}
BODY = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """(router a, router b): one file, one Redis prefix, a mock whose streams last a few seconds."""
    with mock_upstream("--chunk-interval-ms", "400") as slow, redis_prefix("spread") as prefix:
        doc = auth_doc(slow.url, keys=[{"id": name, "sha256": sha(key), "limits": limits}
                                       for name, (key, limits) in KEYS.items()],
                       store={"backend": "redis", "url": REDIS_URL, "prefix": prefix})
        path = write_config(doc, str(tmp_path_factory.mktemp("cfg-spread")))
        with router(path) as a, router(path) as b:
            yield a, b


def send(proc, name: str) -> httpx.Response:
    return httpx.post(f"{proc.url}/v1/chat/completions", json=BODY,
                      headers={"authorization": f"Bearer {KEYS[name][0]}"}, timeout=60)


def test_sequential_requests_alternating_routers_fit_one_place(spread):
    a, b = spread
    codes = [send((a, b)[i % 2], "henry").status_code for i in range(10)]
    assert codes == [200] * 10


def test_a_place_freed_on_one_router_serves_the_other(spread):
    """concurrent 2: one request ends on a, then two at once on b (a stream held open, and one more)."""
    a, b = spread
    assert send(a, "duo").status_code == 200
    client = openai.OpenAI(base_url=f"{b.url}/v1", api_key=KEYS["duo"][0], max_retries=0)
    stream = client.chat.completions.create(model="vsr/auto", stream=True, messages=BODY["messages"])
    with stream:                                # in flight on b (its head came) until it is read out
        assert send(b, "duo").status_code == 200, "the place a's request held is free again"


def test_the_last_places_of_a_minute_go_to_whichever_router_asks(spread):
    a, b = spread
    assert [send(a, "hundred").status_code for _ in range(99)] == [200] * 99
    assert send(b, "hundred").status_code == 200, "a holds no place it leased ahead and did not spend"
    over = send(a, "hundred")
    assert over.status_code == 429 and send(b, "hundred").status_code == 429
    assert int(over.headers["retry-after"]) > 1, "the places are spent, not reserved: they free with the window"
