"""Upstream pools are shared by every user and drive httpcore directly: they keep nothing one answer sets
for the next request, take each backend's limits, and read what a backend sends beside what was asked."""
from __future__ import annotations

import httpcore
import httpx
import msgspec
import pytest
import trio
import trio.testing

from vsr_fast.config.schema import ProviderModel
from vsr_fast.upstream.pool import Backend, base_url
from vsr_fast.upstream.transport import ssl_context

from .procs import Proc, config, router, write_config


def test_endpoint_forms():
    def url(endpoint: str) -> str:
        model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": endpoint}]}, ProviderModel)
        return base_url(model.backend_refs[0])

    assert url("127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert url("https://api.example.com") == "https://api.example.com/v1"
    assert url("http://h:1/openai/v1/") == "http://h:1/openai/v1"


def test_the_origin_is_parsed_once_with_its_host_header():
    def origin(endpoint: str):
        model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": endpoint}]}, ProviderModel)
        return Backend(model, model.backend_refs[0], 0, ssl_context()).origin

    o = origin("http://127.0.0.1:8000/openai/v1/")
    assert (o.scheme, o.host, o.port, o.host_header) == (b"http", b"127.0.0.1", 8000, b"127.0.0.1:8000")
    url = o.url("/chat/completions")
    assert url.target == b"/openai/v1/chat/completions" and o.url("/chat/completions") is url
    o = origin("https://api.example.com")
    assert (o.port, o.host_header, o.url("/messages").target) == (None, b"api.example.com", b"/v1/messages")
    assert origin("https://api.example.com:443/v1").host_header == b"api.example.com"


async def test_a_backend_s_pools_take_its_timeouts_pool_size_and_shards():
    model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1", "connect_timeout_ms": 250,
                                                            "read_timeout_ms": 7_000, "max_connections": 3,
                                                            "pool_shards": 4}]}, ProviderModel)
    backend = Backend(model, model.backend_refs[0], 0, ssl_context())
    try:
        assert backend.timeouts == {"connect": 0.25, "read": 7.0, "write": 7.0, "pool": 7.0}
        assert len(backend._pools) == 4
        for pool in backend._pools:
            assert (pool._max_connections, pool._max_keepalive_connections) == (3, 3)
        # Each lease takes a connection of the shard with the most free: all four in turn, then again.
        leases = [await backend.lease() for _ in range(8)]
        assert [lease.shard for lease in leases] == [0, 1, 2, 3] * 2
        assert backend.pending == 8 and backend._shards.free() == [1, 1, 1, 1]
        leases[1].release()
        leases[1].release()                 # once only
        assert backend.pending == 7 and backend._shards.free() == [1, 2, 1, 1]
        assert (await backend.lease()).shard == 1
    finally:
        await backend.aclose()


def _backend(connections: int, shards: int, read_ms: int = 60_000) -> Backend:
    model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1", "pool_shards": shards,
                                                            "max_connections": connections,
                                                            "read_timeout_ms": read_ms}]}, ProviderModel)
    return Backend(model, model.backend_refs[0], 0, ssl_context())


async def test_by_default_64_requests_lease_at_once_spread_over_32_shards_and_the_65th_waits():
    model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}, ProviderModel)
    backend = Backend(model, model.backend_refs[0], 0, ssl_context())
    try:
        leases = [await backend.lease() for _ in range(64)]
        # Each takes the shard with the most free: every shard's first connection before any shard's second.
        assert [lease.shard for lease in leases] == [*range(32), *range(32)]
        assert backend._shards.take() == -1 and backend.max_pending == 256
        leases[40].release()
        assert backend._shards.take() == 8
    finally:
        await backend.aclose()


async def test_waiters_get_connections_back_in_arrival_order_and_newcomers_queue_behind_them():
    backend = _backend(1, 2)
    first, second = await backend.lease(), await backend.lease()
    got: list[tuple[str, int]] = []

    async def waiter(name: str) -> None:
        lease = await backend.lease()
        got.append((name, lease.shard))

    async with trio.open_nursery() as nursery:
        for name in ("a", "b", "c"):
            nursery.start_soon(waiter, name)
            await trio.testing.wait_all_tasks_blocked()
        assert backend.pending == 5 and got == []
        second.release()
        await trio.testing.wait_all_tasks_blocked()
        assert backend._shards.take() == -1, "a newcomer does not pass the two still waiting"
        first.release()
        await trio.testing.wait_all_tasks_blocked()
        assert got == [("a", 1), ("b", 0)]
        nursery.cancel_scope.cancel()          # c leaves the line
    assert backend.pending == 2            # a's and b's, never released here
    assert backend._shards.free() == [0, 0]


async def test_a_lease_taken_at_once_is_the_one_lease_would_give_and_none_while_others_wait():
    backend = _backend(1, 2)
    first = backend.lease_now()
    assert first is not None and first.shard == 0 and backend.pending == 1
    second = await backend.lease()
    assert second.shard == 1 and backend.lease_now() is None and backend.pending == 2, "none free: none at once"
    got: list[int] = []

    async def waiter() -> None:
        got.append((await backend.lease()).shard)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert backend.lease_now() is None and backend.pending == 3, "a lease at once does not pass a waiter"
        first.release()
        await trio.testing.wait_all_tasks_blocked()
    assert got == [0] and backend.pending == 2
    second.release()
    assert backend.lease_now().shard == 1 and backend.pending == 2


async def test_a_wait_past_the_pool_timeout_is_httpcore_s_pool_timeout_and_leaves_the_line(autojump_clock):
    backend = _backend(1, 1, read_ms=5_000)
    held = await backend.lease()
    with pytest.raises(httpcore.PoolTimeout):
        await backend.lease()
    assert trio.current_time() == pytest.approx(5.0)
    assert backend.pending == 1
    held.release()
    assert backend._shards.free() == [1] and (await backend.lease()).shard == 0


async def test_a_connection_handed_to_a_waiter_cancelled_in_the_same_instant_goes_to_the_next(autojump_clock):
    backend = _backend(1, 1)
    held = await backend.lease()
    got: list[str] = []
    doomed = trio.CancelScope()

    async def waiter(name: str, scope: trio.CancelScope) -> None:
        with scope:
            await backend.lease()
            got.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "doomed", doomed)
        await trio.testing.wait_all_tasks_blocked()
        # On the virtual clock: were the connection lost with the doomed waiter, "next" would time out here.
        nursery.start_soon(waiter, "next", trio.CancelScope(deadline=trio.current_time() + 10))
        await trio.testing.wait_all_tasks_blocked()
        doomed.cancel()         # its wait ends with Cancelled...
        held.release()          # ...and, before it runs again, the connection is handed to it, first in line
    assert got == ["next"] and doomed.cancelled_caught and trio.current_time() == 0
    assert backend.pending == 1 and backend._shards.free() == [0]


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    with Proc(["-m", "tests.hostile_upstream"], "listening") as hostile:
        models = [{"name": f"m-{mode}", "backend_refs": [{"endpoint": f"{hostile.url}/{mode}/v1"}]}
                  for mode in ("cookie", "gzip", "brotli")]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "m-cookie"}]}])
        with router(write_config(doc, str(tmp_path_factory.mktemp("pool")))) as proc:
            yield proc


def chat(edge, model: str) -> httpx.Response:
    return httpx.post(f"{edge.url}/v1/chat/completions", timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": "hello"}]})


def test_a_cookie_one_answer_sets_never_rides_on_the_next_request(edge):
    for _ in range(3):
        r = chat(edge, "m-cookie")
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "no cookie"


def test_a_gzip_answer_sent_anyway_is_read(edge):
    r = chat(edge, "m-gzip")
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "fine"


def test_a_coding_the_router_cannot_read_is_a_502_naming_it(edge):
    r = chat(edge, "m-brotli")
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_invalid_answer" and "'br'" in error["message"]
    assert chat(edge, "m-gzip").status_code == 200


def _backends(*weights: int) -> list[Backend]:
    refs = [{"endpoint": f"127.0.0.1:{9000 + i}", "name": f"b{i}", "weight": w} for i, w in enumerate(weights)]
    model = msgspec.convert({"name": "m", "backend_refs": refs}, ProviderModel)
    context = ssl_context()
    return [Backend(model, ref, i, context) for i, ref in enumerate(model.backend_refs)]


def test_smooth_weighted_round_robin_interleaves_by_weight():
    from vsr_fast.upstream.pool import order

    a, b, c = _backends(5, 1, 1)
    picks = [order([a, b, c], 0.0)[0].label for _ in range(7)]
    # nginx's smooth sequence for 5/1/1: the heavy backend never takes the whole burst at once.
    assert picks == ["b0", "b0", "b1", "b0", "b2", "b0", "b0"]
    first = [order([a, b, c], 0.0) for _ in range(700)]
    assert [o[0].label for o in first].count("b0") == 500
    assert all(len(o) == 3 and len(set(map(id, o))) == 3 for o in first)    # the rest follow as fallbacks


def test_consecutive_failures_eject_for_a_doubling_time_and_a_success_resets():
    from vsr_fast.config.schema import Outlier
    from vsr_fast.upstream.pool import order

    policy = Outlier(consecutive_failures=3, base_ejection_ms=1000, max_ejection_ms=3000)
    a, b = _backends(1, 1)
    assert [a.failed(policy, 0.0) for _ in range(3)] == [False, False, True]
    assert not a.up(0.5) and a.up(1.0) and a.ejections == 1
    assert [x.label for x in order([a, b], 0.5)] == ["b1", "b0"]     # ejected: last, still a fallback
    # Back in the rotation, failing again: two seconds, then the cap.
    assert [a.failed(policy, 1.0) for _ in range(3)] == [False, False, True] and a.ejected_until == 3.0
    assert not a.failed(policy, 2.0) and a.failures == 0                # tried while ejected: no longer sentence
    for _ in range(3):
        a.failed(policy, 3.0)
    assert a.ejected_until == 6.0 and a.ejections == 3
    a.succeeded()
    assert a.up(3.0) and a.level == 0 and a.failures == 0


def test_retry_after_forms():
    from vsr_fast.upstream.dispatch import retry_after_seconds

    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
