"""Whether an awaited call gave the scheduler a pass: shared by the tests of what is taken at once when ready."""
from __future__ import annotations

import trio


async def without_a_pass(fn, *args):
    """Await ``fn(*args)``; its result, or AssertionError if another runnable task got a turn meanwhile.

    trio's ``assert_no_checkpoints`` also counts ``checkpoint_if_cancelled`` (a cancellation check that never
    yields), which the code under test keeps on purpose; a sibling task that is runnable and has not run is the
    scheduler pass itself."""
    ran = False

    async def sibling() -> None:
        nonlocal ran
        ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sibling)
        result = await fn(*args)
        assert not ran, f"{fn.__qualname__} gave the scheduler a pass"
    return result
