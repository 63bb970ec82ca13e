"""No scheduler pass for what is ready: locks taken at once when free, in line when not (a client connection's
send lock, httpcore's connection locks: vsr_fast.locks), and a request message already queued read at once;
checked with trio's own checkpoint assertions and over a real socket."""
from __future__ import annotations

import json

import httpcore
import pytest
import trio
import trio.testing
from httpcore._synchronization import AsyncLock

from vsr_fast.locks import FreeLock, acquire, quiet
from vsr_fast.server.asgi import lingering_close
from vsr_fast.upstream.transport import Origin, QuietPool, new_pool, send

from .procs import mock_upstream
from .turns import without_a_pass


async def test_a_free_lock_is_taken_without_a_checkpoint_and_a_held_one_in_arrival_order():
    lock = trio.Lock()
    await without_a_pass(acquire, lock)
    assert lock.locked()
    order: list[int] = []

    async def waiter(n: int) -> None:
        with trio.testing.assert_checkpoints():
            await acquire(lock)
        order.append(n)
        lock.release()

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(waiter, n)
            await trio.testing.wait_all_tasks_blocked()
        assert order == []          # all three wait while it is held
        lock.release()
    assert order == [0, 1, 2] and not lock.locked()


async def test_a_waiter_cancelled_leaves_the_line(autojump_clock):
    lock = trio.Lock()
    await acquire(lock)
    got: list[str] = []

    async def waiter(name: str, patience: float) -> None:
        with trio.move_on_after(patience):
            await acquire(lock)
            got.append(name)
            lock.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "impatient", 1)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waiter, "patient", 10)
        await trio.sleep(2)             # the first has given up; the second is still in line
        lock.release()
    assert got == ["patient"] and not lock.locked()


async def test_a_cancelled_task_stops_before_taking_a_free_lock():
    # trio's own acquire checks for cancellation first; taking a free lock at once must keep that check.
    lock = trio.Lock()
    with trio.CancelScope() as scope:
        scope.cancel()
        await acquire(lock)
    assert scope.cancelled_caught and not lock.locked()


async def test_quiet_gives_httpcore_s_lock_a_free_lock_that_still_excludes():
    lock = AsyncLock()
    assert quiet(lock) and isinstance(lock._trio_lock, FreeLock)
    assert quiet(lock)                          # again: already quiet, left as it is
    assert not quiet(trio.Lock()) and not quiet(None)
    inside = 0
    most = 0

    async def user() -> None:
        nonlocal inside, most
        async with lock:
            inside += 1
            most = max(most, inside)
            await trio.sleep(0)             # another user runs here, and must wait
            inside -= 1

    async def take_and_give_back() -> None:
        async with lock:
            pass

    await without_a_pass(take_and_give_back)
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(user)
    assert most == 1 and not lock._trio_lock.locked()
    used = AsyncLock()
    async with used:            # set up by httpcore on first use: a trio Lock, left as it is
        pass
    assert not quiet(used) and isinstance(used._trio_lock, trio.Lock)


async def test_the_pool_s_connections_take_quiet_locks_over_a_real_socket():
    # Fails when an httpcore release moves the locks this relies on (then they would silently stay trio's).
    with mock_upstream() as mock:
        pool = new_pool(2)
        origin = Origin(f"{mock.url}/v1")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        try:
            for _ in range(3):
                answer = await send(pool, origin, "/chat/completions", body, [(b"Content-Type", b"application/json")],
                                    {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}, "m")
                assert answer.status == 200
                assert json.loads(b"".join([chunk async for chunk in answer.chunks()]))["choices"]
                await answer.aclose()
            assert len(pool.connections) == 1       # kept alive and reused
            connection = pool.connections[0]
            assert type(connection) is httpcore.AsyncHTTPConnection      # plain again once connected
            assert isinstance(connection._request_lock._trio_lock, FreeLock)
            assert isinstance(connection._connection, httpcore.AsyncHTTP11Connection)
            assert isinstance(connection._connection._state_lock._trio_lock, FreeLock)
        finally:
            await pool.aclose()


@pytest.mark.parametrize("cancel_at", [0, 1])
async def test_a_request_cancelled_on_a_quiet_connection_leaves_it_usable_or_closed(cancel_at):
    # The lock still sits under httpcore's state machine: a request cut while sending or reading leaves the
    # connection either closed or idle, and the next request is answered.
    with mock_upstream("--chunks", "50", "--chunk-interval-ms", "20") as mock:
        pool = new_pool(1)
        origin = Origin(f"{mock.url}/v1")
        body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
        timeouts = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}
        try:
            with trio.CancelScope() as scope:
                answer = await send(pool, origin, "/chat/completions", body, [], timeouts, "m")
                try:
                    if cancel_at:
                        async for _ in answer.chunks():
                            scope.cancel()
                    else:
                        scope.cancel()
                        await trio.sleep(0)
                finally:
                    with trio.CancelScope(shield=True):
                        await answer.aclose()
            assert scope.cancelled_caught
            answer = await send(pool, origin, "/chat/completions", body, [], timeouts, "m")
            chunks = b"".join([chunk async for chunk in answer.chunks()])
            await answer.aclose()
            assert answer.status == 200 and chunks.rstrip().endswith(b"data: [DONE]")
        finally:
            await pool.aclose()


@pytest.mark.parametrize("channel", [True, False])
async def test_a_request_message_already_queued_is_read_without_a_checkpoint(channel):
    # hypercorn hands the app a memory channel's receive; any other receive is awaited as it is.
    send_channel, receive_channel = trio.open_memory_channel(4)

    async def plain_receive():
        return await receive_channel.receive()

    got: list[dict] = []

    async def app(scope, receive, send):
        if channel:
            got.append(await without_a_pass(receive))
        else:
            with trio.testing.assert_checkpoints():
                got.append(await receive())
        got.append(await receive())         # not sent yet: waits for it

    await send_channel.send({"type": "http.request", "body": b"a", "more_body": True})
    receive = receive_channel.receive if channel else plain_receive
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lingering_close(app), {"type": "http", "headers": []}, receive, None)
        await trio.testing.wait_all_tasks_blocked()
        assert [m["body"] for m in got] == [b"a"]
        await send_channel.send({"type": "http.request", "body": b"", "more_body": False})
    assert [m["body"] for m in got] == [b"a", b""]


async def test_a_cancelled_app_stops_at_receive_even_with_a_message_queued():
    send_channel, receive_channel = trio.open_memory_channel(4)
    await send_channel.send({"type": "http.request", "body": b"a", "more_body": False})
    outcome: list[str] = []

    async def app(scope, receive, send):
        with trio.CancelScope() as cut:
            cut.cancel()
            await receive()
        outcome.append("cancelled" if cut.cancelled_caught else "read")

    await lingering_close(app)({"type": "http", "headers": []}, receive_channel.receive, None)
    assert outcome == ["cancelled"]
    assert receive_channel.receive_nowait()["body"] == b"a"     # still queued for whoever reads next


def test_the_quiet_pool_refuses_http2():
    with pytest.raises(ValueError, match="HTTP/1.1 only"):
        QuietPool(http2=True)
