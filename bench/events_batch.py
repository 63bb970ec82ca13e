"""The event writer's cost per batch and per empty poll, in instructions, in one process (callgrind).

``python -m bench.events_batch [--tree DIR ...] [--events 3]`` runs, for each tree (default: this one),
a child under ``valgrind --tool=callgrind`` that drives the writer's own code with no thread and no clock
between calls: ``--few`` then ``--many`` batches of ``--events`` encoded events, each taken from the deque,
sent to an embedded journal and finished, and as many empty polls (``POLL_S`` 0); the marks file is never
saved (``MARKS_EVERY_S`` infinite) so that wall time cannot enter. Callgrind counts only the loop (zeroed
at a marker call before it, dumped at one after it), and per batch = (many - few) / (many - few): what a
loop costs once (its first calls, the allocator's first blocks) cancels out.

Why not the router-level count (``bench.events_cost --callgrind``): under valgrind a request takes ~50x as
long, so how many requests share a batch, how many empty polls fall between them and how often the marks
are written depend on the machine's load; the same code moves ~20 k instructions a request between runs.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)


def child(what: str, n: int, events: int) -> None:
    """``n`` batches (or empty polls) of the writer in this process: what callgrind counts."""
    from vsr_fast.events import embedded, writer
    from vsr_fast.events.embedded import EmbeddedLog
    from vsr_fast.events.types import AnswerCompleted, encode_event

    embedded.MARKS_EVERY_S = float("inf")
    writer.POLL_S = 0.0
    payload = encode_event(AnswerCompleted(replay_id="0" * 24, request_id="r" * 32, model="mock", duration_ms=1.5,
                                           content_type="application/json"))
    with tempfile.TemporaryDirectory(prefix="vsr-evbatch-") as tmp:
        log = EmbeddedLog(Path(tmp) / "stream")
        sink = writer.EventSink(log, Path(tmp) / "spill")          # not started: this thread is the writer
        q = sink._queue
        os.getppid()                                   # callgrind zeroes its counters here (--zero-before)
        if what == "batch":
            once = getattr(sink, "_pass", None)
            for _ in range(n):
                q.extend([payload] * events)
                if once is not None:
                    once()
                else:                                              # a tree before _pass: _run's loop body
                    batch = sink._current()
                    added = log.send(batch.items)
                    sink._connected = True
                    sink._done(batch, added)
            assert not q and log.stats()["events"] == n * events
        elif hasattr(writer, "IDLE_POLLS"):
            # n polls inside one wait, then the idle wait, ended at once; a turn of the writer that finds nothing
            # (``_current``, ``_leave_spill``) now comes once a wait, not once a poll.
            writer.IDLE_POLLS = n
            bell = sink._bell

            class Bell:
                @staticmethod
                def acquire(timeout: float) -> bool:
                    sink._stopping = True
                    return True
            sink._bell = Bell()
            sink._sleep()
            sink._bell, sink._stopping = bell, False
        else:
            import time
            for _ in range(n):
                sink._last_work = time.monotonic()                 # still busy: one poll
                if sink._current() is None and not sink._leave_spill():
                    sink._sleep()
        os.getloadavg()                                # ... and dumps them here (--dump-before)
        sink.close()
        log.close()


def count(tree: str, what: str, n: int, events: int, out: Path) -> int:
    """Instructions of ``n`` batches (or empty polls): callgrind zeroed before the loop and dumped after it."""
    dump = out / f"cg.{what}.{n}.{os.getpid()}"
    # The main thread's count only: numpy's BLAS threads (imported by journal.py) spin for as long as the wall
    # time the loop takes, which the box's load decides.
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={dump}", "--dump-line=no",
                    "--separate-threads=yes", "--zero-before=os_getppid", "--dump-before=os_getloadavg",
                    f"--log-file={dump}.log", sys.executable, __file__, "--child", what, str(n), str(events)],
                   env=env, check=True, cwd=tree)
    for path in sorted(out.glob(f"{dump.name}*")):
        text = path.read_text(errors="replace")
        if "Trigger: --dump-before=os_getloadavg" in text and re.search(r"^thread:\s*1$", text, re.M):
            return int(_TOTALS.search(text).group(1))
    raise RuntimeError(f"callgrind wrote no dump after the loop ({dump})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", help="a checkout whose vsr_fast to run (default: this one)")
    parser.add_argument("--events", type=int, default=3, help="events a batch")
    parser.add_argument("--few", type=int, default=200)
    parser.add_argument("--many", type=int, default=1200)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    trees = args.tree or [str(Path(__file__).resolve().parents[1])]
    print(f"instructions, ({args.many} - {args.few}) / {args.many - args.few}, callgrind, {args.events} events a batch")
    print("| tree | a batch | an empty poll |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="vsr-evbatch-cg-") as tmp:
        for tree in trees:
            row = []
            for what in ("batch", "poll"):
                few = count(tree, what, args.few, args.events, Path(tmp))
                many = count(tree, what, args.many, args.events, Path(tmp))
                row.append((many - few) / (args.many - args.few))
            print(f"| {tree} | {row[0] / 1e3:.1f} k | {row[1] / 1e3:.2f} k |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
