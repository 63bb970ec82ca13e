"""A worker that cannot drain still ends: its own hard deadline after the graceful timeout (a kernel alarm, so no
loop or lock of its own has to run), the supervisor's SIGKILL after it, SIGQUIT at once, and a worker whose
supervisor was killed with kill -9 ends by its deadline too.

The wedge is a real one: the configuration path is made a FIFO no one writes, and a reload's thread blocks in
its open(); trio cannot cancel a thread, so the drain never finishes on its own. A worker stopped with SIGSTOP
is the other: it cannot act on any signal but SIGKILL."""
from __future__ import annotations

import contextlib
import os
import re
import signal

import pytest

from .procs import config, mock_upstream, router, wait_until, write_config


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def _workers(proc) -> list[int]:
    """The supervisor's workers, once both serve (a SIGTERM while starting is its default action: exit 15)."""
    wait_until(lambda: sum("vsr-fast: serving on" in x for x in proc.lines) == 2, "both workers to serve")
    supervisor = proc.popen.pid
    return sorted(int(t) for task in os.listdir(f"/proc/{supervisor}/task")
                  for t in open(f"/proc/{supervisor}/task/{task}/children").read().split())


def _opening_fifo(pid: int) -> bool:
    """Whether a thread of ``pid`` waits in the kernel for the FIFO's writer."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            wchan = open(f"/proc/{pid}/task/{task}/wchan").read()
        except OSError:
            continue
        if "fifo" in wchan or "partner" in wchan or "pipe" in wchan:
            return True
    return False


def _wedge(path: str, *pids: int, hangup: int) -> None:
    """Make ``path`` a FIFO and SIGHUP ``hangup``: each of ``pids`` blocks in its reload's open()."""
    os.unlink(path)
    os.mkfifo(path)
    os.kill(hangup, signal.SIGHUP)
    for pid in pids:
        wait_until(lambda: _opening_fifo(pid), f"worker {pid} to block opening the FIFO")


def _wait_gone(pid: int, what: str, timeout: float = 90.0) -> None:
    wait_until(lambda: _gone(pid), what, timeout=timeout)


def _doc(upstream) -> dict:
    return config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                  [{"name": "d", "modelRefs": [{"model": "m"}]}])


@pytest.fixture(scope="module")
def stopping(tmp_path_factory):
    """The three wedged stops, each begun before any test waits for its end: their waits (the worker's deadline
    HARD_EXIT_MARGIN_S past its 1 s graceful timeout, the supervisor's kill twice that) overlap rather than add up.
    The longest begins first."""
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(mock_upstream())

        def begin(name: str, *flags: str):
            path = write_config(_doc(upstream), str(tmp_path_factory.mktemp(name)))
            return path, stack.enter_context(router(path, "--graceful-timeout", "1", *flags))

        # The supervisor's SIGKILL: one worker stopped, so it acts on neither SIGTERM nor its own deadline.
        _, undrained = begin("undrained", "--workers", "2")
        undrained_workers = _workers(undrained)
        os.kill(undrained_workers[1], signal.SIGSTOP)
        undrained.signal(signal.SIGTERM)
        # Both workers wedged, their supervisor killed.
        path, orphaning = begin("orphaned", "--workers", "2")
        orphans = _workers(orphaning)
        assert len(orphans) == 2
        _wedge(path, *orphans, hangup=orphaning.popen.pid)
        orphaning.popen.kill()
        # One process wedged.
        path, single = begin("single")
        _wedge(path, single.popen.pid, hangup=single.popen.pid)
        single.signal(signal.SIGTERM)
        # Started during those waits too, and stopped by its test alone: the default graceful timeout (30 s).
        quitting = stack.enter_context(router(write_config(_doc(upstream), str(tmp_path_factory.mktemp("quit"))),
                                              "--workers", "2"))
        yield {"undrained": (undrained, undrained_workers), "orphaned": (orphaning, orphans), "single": single,
               "quitting": quitting}


def test_a_wedged_single_process_ends_after_its_graceful_timeout(stopping):
    proc = stopping["single"]
    assert proc.popen.wait(timeout=90) == -signal.SIGALRM
    assert any("ending at the latest" in x for x in proc.lines), proc.lines


def test_wedged_workers_end_after_their_supervisor_is_killed(stopping):
    proc, workers = stopping["orphaned"]
    proc.popen.wait(timeout=30)
    for pid in workers:
        _wait_gone(pid, f"orphaned worker {pid} to end")


def test_the_supervisor_kills_a_worker_that_does_not_drain(stopping):
    proc, workers = stopping["undrained"]
    assert proc.popen.wait(timeout=90) == signal.SIGKILL, proc.lines
    killed = r"worker \d still running past the graceful timeout; SIGKILL"
    assert any(re.search(killed, x) for x in proc.lines), proc.lines
    for pid in workers:
        _wait_gone(pid, f"worker {pid} to end")


def test_sigquit_ends_the_supervisor_and_its_workers_at_once(stopping):
    proc = stopping["quitting"]     # the default graceful timeout: 30 s
    workers = _workers(proc)
    os.kill(workers[0], signal.SIGSTOP)
    proc.signal(signal.SIGQUIT)
    proc.popen.wait(timeout=90)
    for pid in workers:
        _wait_gone(pid, f"worker {pid} to end")
    assert any("SIGQUIT: ending 2 workers at once" in x for x in proc.lines), proc.lines
    # Not the drain: no worker was asked to drain (the stopped one could only have ended by SIGKILL, which a
    # drain sends 20 s after its 30 s; the supervisor said neither).
    assert not any("draining" in x or "past the graceful timeout" in x for x in proc.lines), proc.lines
