"""Whether an awaited call gave the scheduler a pass: shared by the tests of what is taken at once when ready."""
from __future__ import annotations

import trio


class _StepsEnded(trio.abc.Instrument):
    """Counts the steps of one task that end: a task's step ends only when it gives the scheduler its turn."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task, self.ended = task, 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.ended += 1


async def without_a_pass(fn, *args):
    """Await ``fn(*args)``; its result, or AssertionError if the calling task gave up its turn meanwhile.

    trio's ``assert_no_checkpoints`` also counts ``checkpoint_if_cancelled`` (a cancellation check that never
    yields), which the code under test keeps on purpose; the end of the task's step is the scheduler pass
    itself, seen by an instrument (deterministic, where a sibling task's first turn depends on trio's
    shuffled batches)."""
    steps = _StepsEnded(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    try:
        result = await fn(*args)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert not steps.ended, f"{fn.__qualname__} gave the scheduler a pass"
    return result
