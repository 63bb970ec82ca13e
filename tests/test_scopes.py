"""``scopes.install`` keeps every cancel scope's deadline with the run loop as trio's own generator does: the same
steps (scopes entered and left, deadlines moved earlier, later and away, cancelled, shielded, expired, raised
through) leave the same run-loop state and the same cancellations, and trio's code it stands in for is pinned."""
from __future__ import annotations

import hashlib
import inspect
import math

import pytest
import trio
import trio.testing
from trio._core._run import GLOBAL_RUN_CONTEXT, CancelScope

from vsr_fast import scopes


def _state(label: str, scope: CancelScope | None = None) -> tuple:
    deadlines = GLOBAL_RUN_CONTEXT.runner.deadlines
    return (label, deadlines._active, deadlines.next_deadline(), trio.current_time(),
            None if scope is None else (scope._registered_deadline, scope.cancel_called, scope.cancelled_caught))


async def _steps() -> list:
    out = [_state("start")]
    with CancelScope() as plain:
        out.append(_state("plain in", plain))
    out.append(_state("plain out", plain))
    with CancelScope(deadline=trio.current_time() + 100) as moved:
        out.append(_state("deadline", moved))
        moved.deadline = trio.current_time() + 50
        out.append(_state("earlier", moved))
        moved.deadline += 200
        out.append(_state("later", moved))
        moved.deadline = math.inf
        out.append(_state("none", moved))
        moved.deadline = trio.current_time() + 1
        await trio.sleep(5)
    out.append(_state("expired", moved))
    with trio.move_on_after(3) as outer:
        with CancelScope(shield=True) as shield:
            await trio.sleep(1)
            out.append(_state("shielded", shield))
        with CancelScope(deadline=trio.current_time() + 10) as inner:
            inner.cancel()
            out.append(_state("cancelled", inner))
            await trio.sleep(0)
        out.append(_state("inner out", inner))
        await trio.sleep(10)
    out.append(_state("outer out", outer))
    with pytest.raises(ValueError):
        with CancelScope(deadline=trio.current_time() + 7) as raised:
            out.append(_state("raising", raised))
            raise ValueError("through the scope")
    out.append(_state("raised", raised))
    unentered = CancelScope(deadline=trio.current_time() + 4)
    unentered.deadline = trio.current_time() + 2
    out.append(_state("unentered", unentered))
    with unentered:
        await trio.sleep(3)
    out.append(_state("unentered expired", unentered))
    return out


def _run() -> list:
    return trio.run(_steps, clock=trio.testing.MockClock(autojump_threshold=0))


def test_installed_scopes_keep_their_deadlines_as_trio_does():
    theirs = _run()
    scopes.install()
    try:
        assert CancelScope._might_change_registered_deadline is not scopes.TRIOS
        ours = _run()
    finally:
        scopes.uninstall()
    assert ours == theirs
    assert [row[0] for row in theirs if row[-1] is not None and row[-1][2]] == \
        ["expired", "inner out", "outer out", "unentered expired"]     # the steps reached every kind of cut


def test_trios_deadline_bookkeeping_is_as_pinned():
    # DeadlineChange.__exit__ is this generator's ``finally``: a trio release that changes it fails here.
    assert hashlib.sha256(inspect.getsource(scopes.TRIOS).encode()).hexdigest()[:16] == "1fd62617aa69738b" == scopes.PINNED
    assert scopes.pinned()


def test_another_trio_source_is_left_unpatched(monkeypatch):
    monkeypatch.setattr(scopes, "PINNED", "0" * 16)
    before = trio.CancelScope._might_change_registered_deadline
    assert scopes.install() is False
    assert trio.CancelScope._might_change_registered_deadline is before
