"""trio's cancel scopes with their deadline bookkeeping in a plain context manager instead of a generator one.

Every cancel scope's enter and exit, and every move of its deadline, runs ``CancelScope._might_change_registered_deadline``,
a ``@contextmanager`` generator whose ``finally`` re-registers the scope's deadline with the run loop: per use a
generator, contextlib's wrapper object and two resumptions, ~6.4 k instructions (callgrind, trio 0.35) for a few
comparisons. A whole request uses it ~17 times (five scopes, the idle timer's two moves). ``install`` gives the
class a method returning ``DeadlineChange``, whose ``__exit__`` is that ``finally`` word for word, under the same
KeyboardInterrupt protection; ``tests/test_scopes.py`` pins trio's source and holds the two to the same run-loop
state through the same steps.
"""
from __future__ import annotations

import hashlib
import inspect
from math import inf

from trio._core._ki import enable_ki_protection
from trio._core._run import GLOBAL_RUN_CONTEXT, CancelScope

__all__ = ["DeadlineChange", "install"]

TRIOS = CancelScope._might_change_registered_deadline
# The sha256 (first 16 hex digits) of trio 0.35's source of that method: another source is not patched.
PINNED = "1fd62617aa69738b"


class DeadlineChange:
    """trio 0.35's ``CancelScope._might_change_registered_deadline``: its ``finally`` as ``__exit__``."""

    __slots__ = ("scope",)

    def __init__(self, scope: CancelScope) -> None:
        self.scope = scope

    def __enter__(self) -> None:
        return None

    @enable_ki_protection
    def __exit__(self, *exc_info: object) -> bool:
        scope = self.scope
        old = scope._registered_deadline
        if scope._cancel_status is None or scope._cancel_called:
            new = inf
        else:
            new = scope._deadline
        if old != new:
            scope._registered_deadline = new
            runner = GLOBAL_RUN_CONTEXT.runner
            if runner.is_guest:
                old_next_deadline = runner.deadlines.next_deadline()
            if old != inf:
                runner.deadlines.remove(old, scope)
            if new != inf:
                runner.deadlines.add(new, scope)
            if runner.is_guest:
                new_next_deadline = runner.deadlines.next_deadline()
                if old_next_deadline != new_next_deadline:
                    runner.force_guest_tick_asap()
        return False


def _might_change_registered_deadline(self: CancelScope) -> DeadlineChange:
    return DeadlineChange(self)


def pinned() -> bool:
    """Whether trio's method is the source ``DeadlineChange`` copies (a trio release may change it)."""
    try:
        source = inspect.getsource(TRIOS)
    except (OSError, TypeError):
        return False
    return hashlib.sha256(source.encode()).hexdigest()[:16] == PINNED


def install() -> bool:
    """Every cancel scope in this process keeps its deadline through ``DeadlineChange`` (the router's, at start).

    Only over the trio source it copies: another is left as it is (False), the router as correct and a little slower.
    """
    if not pinned():
        return False
    CancelScope._might_change_registered_deadline = _might_change_registered_deadline
    return True


def uninstall() -> None:
    CancelScope._might_change_registered_deadline = TRIOS
