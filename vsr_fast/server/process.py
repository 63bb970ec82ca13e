"""The process's signals from its first moment, and a worker's tie to its supervisor.

``vsr-fast serve`` imports for seconds before it serves; a signal's default action in that time ended the
process (SIGHUP: exit 129, SIGUSR1: 138). ``hold_signals`` runs before those imports and sets, until the
router's own receivers (``serve``) take over and again once they have closed:

- SIGHUP is held: the router reloads once it serves (the file may have changed after it was read);
- SIGUSR1 is logged and otherwise ignored (``serve.user1`` is its hook once serving);
- SIGTERM and SIGINT while starting end the process at once with code 0, as a drained stop does (nothing is
  served yet, nothing to drain; their default action's 143 read as a crash), and once the router drains, a
  repeated one is the same request: it is ignored, the drain goes on.

A third SIGTERM or SIGINT does not escalate either: the README names SIGTERM the graceful stop and nothing
faster, and conventions disagree on the fast one (nginx: TERM and INT fast, QUIT graceful; gunicorn: TERM
graceful, INT and QUIT quick). SIGKILL, or SIGQUIT's default action (left as it is), ends a process at once; a
supervisor takes SIGQUIT as the quick stop and kills its workers. A supervisor killed, its workers drain as at
SIGTERM (their parent-death signal). Whatever blocks a drain, the process ends HARD_EXIT_MARGIN_S past it
(``hard_exit_after``), and a supervisor kills a worker still running some seconds later.

A supervisor starts its workers with these four signals blocked (``spawn_blocked``): one sent on before the
worker's ``hold_signals`` ran stays pending, and takes its start-up meaning then, rather than killing the worker
by its default action. Each worker also gets a pipe it writes one line to once it serves (``serving``): a worker
that dies after that is restarted, one that dies before it refused to start (``serve._run_workers``).
"""
from __future__ import annotations

import ctypes
import math
import os
import signal
import subprocess
import sys
import time

# The signals held or ignored while starting (hold_signals), and those a worker starts with blocked until then.
HELD = frozenset({signal.SIGHUP, signal.SIGUSR1})
BLOCKED_AT_SPAWN = HELD | {signal.SIGTERM, signal.SIGINT}
# The supervisor's pid, in a worker's environment: the worker dies with it (die_with_supervisor).
SUPERVISOR_ENV = "VSR_SUPERVISOR_PID"
# The write end of the pipe a worker says it serves on (``serving``), in its environment.
READY_ENV = "VSR_READY_FD"
_PR_SET_PDEATHSIG = 1

# How long past its drain's end (drain delay plus graceful timeout) a stopping process may take to close its
# stores and exit before its hard deadline ends it (hard_exit_after); a supervisor waits this and more before
# it kills a worker (serve._run_workers).
HARD_EXIT_MARGIN_S = 10.0

_state = {"hangup": False, "draining": False, "supervisor": 0, "deadline": False, "ready_fd": -1}


def stamped(line: str, level: str = "INFO") -> str:
    """``line`` as a log line reads (``cli._main``'s format: time, logger, level, message), written without
    logging: signal handlers and the supervisor's loop say it, where no lock of logging's may be taken."""
    now = time.time()
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))},{int(now % 1 * 1000):03d} " \
           f"vsr_fast.process {level} {line}"


def say(line: str, level: str = "INFO") -> None:
    """One stamped line on stderr, in one write, newline included (workers share the supervisor's stderr); safe in
    a signal handler, which runs in the main thread between bytecodes."""
    try:
        sys.stderr.write(stamped(line, level) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _hold_hangup(signum, frame) -> None:
    if _state["draining"]:
        say("vsr-fast: SIGHUP while stopping: no reload")
        return
    _state["hangup"] = True
    say("vsr-fast: SIGHUP while starting: the configuration is reloaded once the router serves")


def _user1_early(signum, frame) -> None:
    say("vsr-fast: SIGUSR1 while starting or stopping: ignored")


def _stop(signum, frame) -> None:
    name = signal.Signals(signum).name
    if _state["draining"]:
        if not orphaned():      # a killed supervisor's second parent-death signal (orphaned) is no news
            say(f"vsr-fast: {name} again: already draining")
        return
    # Not serving yet: nothing to drain, and the stop asked for is a clean one (README: SIGTERM exits 0).
    say(f"vsr-fast: {name} while starting: exiting")
    os._exit(0)


def hold_signals() -> None:
    """Set the signals' start-up meanings (module docstring); from the main thread, before anything slow."""
    signal.signal(signal.SIGHUP, _hold_hangup)
    signal.signal(signal.SIGUSR1, _user1_early)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED_AT_SPAWN)
    ready = os.environ.pop(READY_ENV, None)
    if ready:
        # Its own children (a System One runner) never hold it: the supervisor reads its EOF as this exit.
        _state["ready_fd"] = int(ready)
        os.set_inheritable(int(ready), False)
    die_with_supervisor()


def hard_exit_after(seconds: float) -> None:
    """End this process by SIGALRM's default action ``seconds`` from now, unless it has exited by then: a drain
    that cannot finish (a thread trio cannot cancel, CPU work on the loop) must not keep it alive. The kernel
    delivers the alarm's default action: no lock, thread or loop of this process has to run. Armed once."""
    if _state["deadline"]:
        return
    _state["deadline"] = True
    whole = max(1, math.ceil(seconds))
    say(f"vsr-fast: stopping; ending at the latest {whole} s from now")
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(whole)


def arm_on(signums: tuple[int, ...], seconds: float) -> None:
    """Wrap the handlers now set for ``signums`` (a trio signal receiver's) so the first of them arms
    ``hard_exit_after(seconds)`` in the handler itself, which runs between two bytecodes of the main thread
    even while the loop that would read the receiver is blocked."""
    for signum in signums:
        inner = signal.getsignal(signum)

        def armed(received, frame, inner=inner) -> None:
            hard_exit_after(seconds)
            if callable(inner):
                inner(received, frame)
        signal.signal(signum, armed)


def take_held_hangup() -> bool:
    """Whether a SIGHUP came while the router was starting (and forget it)."""
    held, _state["hangup"] = _state["hangup"], False
    return held


def note_draining() -> None:
    """The router drains: a SIGTERM or SIGINT from now on is ignored, even once its receivers have closed."""
    _state["draining"] = True


def draining() -> bool:
    """Whether the router drains (from its first SIGTERM or SIGINT on)."""
    return _state["draining"]


def exiting() -> None:
    """The process is ending: every signal above is ignored from now on. The interpreter's finalization puts a
    Python handler back to the default action, so a repeated SIGTERM (or a SIGHUP) arriving while a drained
    process exits ended it by the signal instead of its code."""
    for signum in (signal.SIGTERM, signal.SIGINT, *HELD):
        signal.signal(signum, signal.SIG_IGN)


def die_with_supervisor() -> None:
    """In a worker: SIGTERM when the supervisor ends, however it ends (kill -9 included), so no orphan keeps
    serving the old configuration on the port (Linux's PR_SET_PDEATHSIG; gunicorn's workers watch their
    parent likewise). A supervisor already gone before this ran: exit now."""
    pid = os.environ.pop(SUPERVISOR_ENV, None)
    if not pid:
        return
    _state["supervisor"] = int(pid)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            say(f"vsr-fast: prctl(PR_SET_PDEATHSIG): {os.strerror(ctypes.get_errno())}")
    if orphaned():
        say(f"vsr-fast: worker: the supervisor (pid {pid}) is gone; exiting")
        os._exit(1)


def orphaned() -> bool:
    """Whether this is a worker whose supervisor has ended (or is ending: killed, its threads going)."""
    supervisor = _state["supervisor"]
    if not supervisor:
        return False
    if os.getppid() != supervisor:
        return True
    # The parent-death signal fires when the *thread* that started this worker ends: a supervisor killed with
    # SIGKILL loses its main thread first, and this worker is handed to one of its other threads (getppid
    # unchanged, a second signal when the last one ends). Its main thread gone, the supervisor reads as a zombie.
    try:
        with open(f"/proc/{supervisor}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X")


def spawn_blocked(argv: list[str], pass_fds: tuple[int, ...]) -> tuple[subprocess.Popen, int]:
    """A worker process, started with BLOCKED_AT_SPAWN blocked, dying with this process; and the read end of
    the pipe it says it serves on (``served``).

    From the main thread: the parent-death signal follows the thread that forked (trio's ``open_process``
    forks in a worker thread, which ends when idle), and the signal mask is the calling thread's."""
    ready, said = os.pipe()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_AT_SPAWN)
    try:
        proc = subprocess.Popen(argv, pass_fds=(*pass_fds, said),
                                env={**os.environ, SUPERVISOR_ENV: str(os.getpid()), READY_ENV: str(said)})
    except BaseException:
        os.close(ready)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        os.close(said)
    return proc, ready


def serving() -> None:
    """In a worker: tell the supervisor it serves (``spawn_blocked``'s pipe), once; nothing elsewhere."""
    fd, _state["ready_fd"] = _state["ready_fd"], -1
    if fd < 0:
        return
    try:
        os.write(fd, b"serving\n")
    except OSError:
        pass            # the supervisor is gone: the parent-death signal says the rest
    finally:
        os.close(fd)


def served(ready: int) -> bool:
    """In the supervisor, once a worker exited: whether it had said it serves (``serving``). Closes ``ready``."""
    try:
        os.set_blocking(ready, False)
        return os.read(ready, 64).startswith(b"serving")
    except OSError:         # BlockingIOError: a write end still open elsewhere, and nothing said
        return False
    finally:
        os.close(ready)
