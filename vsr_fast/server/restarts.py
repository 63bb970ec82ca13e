"""A supervisor's worker restarts: when a worker that served dies, and when to stop trying.

One OOM kill or crash of a worker must not take the router down (nginx's master and gunicorn's arbiter start
a crashed worker again): the supervisor starts it again, same index and listening socket, after a backoff
that doubles from ``BACKOFF_FIRST_S`` to ``BACKOFF_MAX_S`` and starts over once a worker stayed up
``STEADY_S``. A worker that dies more than ``LOOP_DEATHS`` times in ``LOOP_WINDOW_S`` (systemd's
StartLimitBurst in StartLimitIntervalSec), or whose last ``LOOP_DEATHS`` starts all died before serving (a
file broken since, a port taken: each start refused, however slowly it starts), is a crash loop: the
supervisor stops every worker and exits non-zero, so the process manager sees it.

A worker started again reads the configuration file as it is then, as each worker's reload does: after a
SIGHUP it serves what the others serve; a file broken since the last reload refuses every restart (a crash
loop, the others' drain, exit non-zero), as gunicorn halts on a worker that fails to boot.
"""
from __future__ import annotations

import signal
from collections import deque

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
STEADY_S = 30.0
LOOP_DEATHS = 5
LOOP_WINDOW_S = 60.0


class Restarts:
    """One worker index's deaths, and the wait before its next start."""

    def __init__(self) -> None:
        self.count = 0                  # how many times this index was started again
        self._deaths: deque[float] = deque()
        self._unserved = 0              # starts in a row that died before serving
        self._backoff = 0.0
        self.loop = ""                  # why the last death made a crash loop

    def died(self, now: float, up_s: float, served: bool) -> float | None:
        """The wait before starting the worker again, which died at ``now`` after ``up_s`` seconds up (having
        served or not); None when this death makes a crash loop."""
        self._deaths.append(now)
        while self._deaths[0] < now - LOOP_WINDOW_S:
            self._deaths.popleft()
        self._unserved = 0 if served else self._unserved + 1
        if len(self._deaths) > LOOP_DEATHS:
            self.loop = f"more than {LOOP_DEATHS} deaths in {LOOP_WINDOW_S:g} s: a crash loop"
            return None
        if self._unserved >= LOOP_DEATHS:
            self.loop = f"{LOOP_DEATHS} starts in a row ended before serving: a crash loop"
            return None
        if up_s >= STEADY_S or not self._backoff:
            self._backoff = BACKOFF_FIRST_S
        else:
            self._backoff = min(BACKOFF_MAX_S, self._backoff * 2)
        return self._backoff


def how_ended(code: int) -> str:
    """A worker's exit as the log says it: its signal's name (Popen's negative code), or its code."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} (code {code})"
        except ValueError:
            return f"killed by signal {-code} (code {code})"
    return f"exited with code {code}"
