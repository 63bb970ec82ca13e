"""A request body already queued for the app is read without waiting (asgi.take_queued, read_body's ``first``): the
messages hypercorn queued are joined, nothing is lost when the rest is still to come, and a client that left is
seen. hypercorn's own app channel (a trio memory channel) carries the messages, through lingering_close's receive
as the router's app gets it."""
from __future__ import annotations

import pytest
import trio

from vsr_fast.errors import BodyTooLarge
from vsr_fast.server.asgi import BodyPace, ClientGone, is_whole, lingering_close, read_body, take_queued

from .turns import without_a_pass

SCOPE = {"type": "http", "headers": [], "path": "/v1/chat/completions"}
PACE = BodyPace(grace_s=30.0, min_rate=0)


def _body(data: bytes, more: bool) -> dict:
    return {"type": "http.request", "body": data, "more_body": more}


async def _as_the_app(messages: list[dict], check) -> None:
    """Queue ``messages`` on a memory channel, then run ``check(receive)`` as the app behind lingering_close."""
    put, take = trio.open_memory_channel(10)
    for message in messages:
        put.send_nowait(message)

    async def app(scope, receive, send) -> None:
        await check(receive, put)

    async def send(message) -> None:
        pass

    await lingering_close(app)(SCOPE, take.receive, send)


async def test_a_body_and_its_end_already_queued_are_one_whole_message_read_with_no_pass():
    async def check(receive, put) -> None:
        first = take_queued(receive)
        assert first == _body(b'{"a": 1}', False) and is_whole(first)
        assert await without_a_pass(read_body, SCOPE, receive, 1024, PACE, first) == b'{"a": 1}'

    await _as_the_app([_body(b'{"a": 1}', True), _body(b"", False)], check)


async def test_the_rest_of_a_body_still_to_come_is_read_after_what_was_queued():
    async def check(receive, put) -> None:
        first = take_queued(receive)
        assert first == _body(b"abcdef", True), "two queued parts joined, the end still to come"
        assert take_queued(receive) is None

        async def later() -> None:
            await trio.sleep(0)
            await put.send(_body(b"gh", False))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            assert await read_body(SCOPE, receive, 1024, PACE, first) == b"abcdefgh"

    await _as_the_app([_body(b"abc", True), _body(b"def", True)], check)


async def test_nothing_queued_is_none_and_a_receive_without_a_queue_is_awaited_as_before():
    async def check(receive, put) -> None:
        assert take_queued(receive) is None
        await put.send(_body(b"x", False))
        assert await read_body(SCOPE, receive, 1024, PACE, None) == b"x"

    await _as_the_app([], check)

    async def plain() -> dict:
        return _body(b"y", False)
    assert take_queued(plain) is None
    assert await read_body(SCOPE, plain, 1024, PACE, take_queued(plain)) == b"y"


async def test_a_client_that_left_after_part_of_its_body_is_seen():
    async def check(receive, put) -> None:
        first = take_queued(receive)
        assert first == {"type": "http.disconnect"}
        with pytest.raises(ClientGone):
            await read_body(SCOPE, receive, 1024, PACE, first)

    await _as_the_app([_body(b"abc", True), {"type": "http.disconnect"}], check)


async def test_a_queued_body_past_the_limit_is_refused():
    async def check(receive, put) -> None:
        with pytest.raises(BodyTooLarge):
            await read_body(SCOPE, receive, 4, PACE, take_queued(receive))

    await _as_the_app([_body(b"abc", True), _body(b"def", False)], check)
