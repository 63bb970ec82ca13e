"""The event stream's CPU per request: routers with ``--events embedded`` against ones with ``none``.

``python -m bench.events_cost [--requests 3000] [--rounds 6]`` starts the mock upstream and
routers on bench/compare.py's one-decision recipe (by default two with each backend, ABBA),
then sends sequential whole requests to each in turn, round after round, so that whatever
else the machine does falls on all alike. It reads each server's CPU per thread from
``/proc/PID/task/TID/stat`` around each round and prints CPU µs per request of each router,
where it went (the event writer thread, the main thread in user and kernel time, others)
and the mean difference to the ``none`` routers (the stream's cost). ``--variants
embedded@DIR,...`` runs DIR's vsr_fast in that router: a before/after in one run.

``--callgrind`` counts instructions per request of each router and thread instead
(deterministic; under valgrind the writer's batches are smaller than at full speed, so its
share is overstated). ``--calls`` counts Python calls per request on the main thread
(cProfile, ``--many`` minus ``--few`` requests, embedded minus none; trio's scheduling moves
the totals by tens of calls). ``--writer`` runs the writer thread alone in this process, fed
5 events a request at ``--rate``, and reads its own CPU clock, for each ``--poll`` interval.
"""
from __future__ import annotations

import argparse
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ._procs import Proc
from .compare import router_config
from .cost import Counted, send

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
VARIANTS = "embedded,none,none,embedded"


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of each thread of ``pid``, user and kernel apart (``NAME/user``, ``NAME/sys``),
    summed by thread name (``comm``; the main thread is ``main``)."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue                      # a worker thread that just ended
        name = raw[raw.index(b"(") + 1:raw.rindex(b")")].decode(errors="replace")
        name = "main" if tid == str(pid) else name
        fields = raw[raw.rindex(b")") + 2:].split()
        for part, ticks in (("user", fields[11]), ("sys", fields[12])):
            key = f"{name}/{part}"
            out[key] = out.get(key, 0.0) + int(ticks) * TICK_S
    return out


def router(mock_url: str, tmp: str, i: int, variant: str) -> tuple[list[str], dict]:
    """The serve arguments and Proc keywords of router ``i``: ``backend`` or ``backend@DIR``, where DIR's
    vsr_fast runs instead of this checkout's (a before/after in one run)."""
    events, _, tree = variant.partition("@")
    config = Path(tmp) / f"{i}.yaml"
    doc = router_config(mock_url, events)
    if events == "embedded":
        doc["global"]["stores"]["event_stream"]["path"] = f"{tmp}/events-{i}"
    config.write_text(yaml.safe_dump(doc))
    kw = {"env": {"PYTHONPATH": tree}, "cwd": tree} if tree else {}
    return ["-m", "vsr_fast", "serve", "--config", str(config), "--port", "0"], kw


def cpu_run(args: argparse.Namespace) -> int:
    variants = args.variants.split(",")
    with tempfile.TemporaryDirectory(prefix="vsr-evcost-") as tmp, \
            Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        routers: dict[str, Proc] = {}
        try:
            for i, variant in enumerate(variants):
                serve, kw = router(mock.url, tmp, i, variant)
                routers[f"{variant}#{i}"] = Proc(serve, "vsr-fast: serving on", **kw).start()
            for proc in routers.values():
                send(proc.url, False, args.warmup, args.body_bytes)
            totals: dict[str, dict[str, float]] = {name: {} for name in routers}   # router -> thread -> CPU s
            wall = {name: 0.0 for name in routers}
            for _ in range(args.rounds):
                for name, proc in routers.items():
                    assert proc.popen
                    before = thread_cpu(proc.popen.pid)
                    t0 = time.perf_counter()
                    send(proc.url, False, args.requests, args.body_bytes)
                    wall[name] += time.perf_counter() - t0
                    after = thread_cpu(proc.popen.pid)
                    for thread, secs in after.items():
                        totals[name][thread] = totals[name].get(thread, 0.0) + secs - before.get(thread, 0.0)
        finally:
            for proc in routers.values():
                proc.stop()
    n = args.requests * args.rounds
    print(f"{n} sequential whole requests per router ({args.rounds} interleaved rounds of {args.requests}), "
          f"{args.body_bytes}-byte body; CPU from /proc per thread ({TICK_S * 1e3:.0f} ms ticks)")
    print("| router | CPU µs/req | req/s | of it: event writer thread | main thread (user + kernel) "
          "| other threads |")
    print("|---|---|---|---|---|---|")
    by_backend: dict[str, list[float]] = {}
    for name, threads in totals.items():
        total = sum(threads.values()) / n * 1e6
        writer = sum(v for k, v in threads.items() if k.startswith("vsr-events")) / n * 1e6
        user, kernel = threads.get("main/user", 0.0) / n * 1e6, threads.get("main/sys", 0.0) / n * 1e6
        by_backend.setdefault(name.split("#")[0], []).append(total)
        print(f"| events {name} | {total:.0f} | {n / wall[name]:.0f} | {writer:.0f} | {user + kernel:.0f} "
              f"({user:.0f} + {kernel:.0f}) | {total - writer - user - kernel:.0f} |")
    means = {k: sum(v) / len(v) for k, v in by_backend.items()}
    print("mean CPU µs/req by backend: " + ", ".join(f"{k} {v:.0f}" for k, v in means.items()))
    off = [v for v in means if v.split("@")[0] == "none"]
    if off:
        base = sum(means[v] for v in off) / len(off)
        for variant, mean in means.items():
            if variant not in off:
                print(f"event stream cost ({variant} - none): {mean - base:.0f} µs CPU per request")
    return 0


def profiled_calls(mock_url: str, tmp: str, events: str, requests: int, body_bytes: int) -> dict:
    """Calls per function of a router's main thread under cProfile, after ``requests`` requests."""
    config = Path(tmp) / f"{events}-{requests}.yaml"
    doc = router_config(mock_url, events)
    if events == "embedded":
        doc["global"]["stores"]["event_stream"]["path"] = f"{tmp}/events-{requests}"
    config.write_text(yaml.safe_dump(doc))
    out = Path(tmp) / f"prof-{events}-{requests}"
    proc = Proc(["-m", "cProfile", "-o", str(out), "-m", "vsr_fast", "serve", "--config", str(config),
                 "--port", "0"], "vsr-fast: serving on").start(timeout=600)
    try:
        send(proc.url, False, requests, body_bytes)
        proc.signal(signal.SIGINT)
        proc.wait(120)
    finally:
        proc.stop()
    stats = pstats.Stats(str(out)).stats   # type: ignore[attr-defined]
    return {func: row[1] for func, row in stats.items()}


def calls_run(args: argparse.Namespace) -> int:
    per: dict[str, dict] = {}
    n = args.many - args.few
    with tempfile.TemporaryDirectory(prefix="vsr-evcalls-") as tmp, \
            Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        for events in ("embedded", "none"):
            few = profiled_calls(mock.url, tmp, events, args.few, args.body_bytes)
            many = profiled_calls(mock.url, tmp, events, args.many, args.body_bytes)
            per[events] = {f: (c - few.get(f, 0)) / n for f, c in many.items()}
    emb, none = per["embedded"], per["none"]
    rows = sorted(((emb.get(f, 0) - none.get(f, 0), f) for f in set(emb) | set(none)), reverse=True)
    rows = [(d, f) for d, f in rows if abs(d) >= 0.5]
    print(f"Python calls per request on the main thread, ({args.many} - {args.few}) whole requests: "
          f"events embedded {sum(emb.values()):.0f}, none {sum(none.values()):.0f}, "
          f"difference {sum(emb.values()) - sum(none.values()):.0f}")
    print("| calls/req, embedded - none | function |")
    print("|---|---|")
    for diff, (path, line, name) in rows:
        where = path.split("/vsr_fast/")[-1] if "/vsr_fast/" in path else path.split("site-packages/")[-1]
        print(f"| {diff:+.1f} | {where}:{line} {name} |")
    return 0


def callgrind_run(args: argparse.Namespace) -> int:
    """Instructions per whole request of each router, per thread (callgrind, deterministic)."""
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="vsr-evgrind-") as tmp, \
            Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        out = Path(args.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        for i, variant in enumerate(args.variants.split(",")):
            serve, kw = router(mock.url, str(out), i, variant)
            print(f"router, events {variant}: starting under callgrind", file=sys.stderr, flush=True)
            with Counted(f"r{i}", serve, "vsr-fast: serving on", out, ["--separate-threads=yes"], **kw) as server:
                send(server.proc.url, False, args.warmup, args.body_bytes)
                server.zero()
                send(server.proc.url, False, args.requests, args.body_bytes)
                rows[variant] = {t: v / args.requests for t, v in server.dump_threads().items()}
    print(f"instructions per whole request, {args.requests} sequential requests after {args.warmup} warm-up "
          "(callgrind; under it the writer's batches are smaller than at full speed)")
    print("| router | total | main thread | other threads |")
    print("|---|---|---|---|")
    for variant, threads in rows.items():
        total, main_ = sum(threads.values()), threads.get(1, 0.0)
        print(f"| events {variant} | {total / 1e6:.3f} M | {main_ / 1e6:.3f} M | {(total - main_) / 1e6:.3f} M |")
    off = [v for v in rows if v.split("@")[0] == "none"]
    if off:
        base = sum(sum(rows[v].values()) for v in off) / len(off)
        for variant, threads in rows.items():
            if variant not in off:
                print(f"event stream cost ({variant} - none): {(sum(threads.values()) - base) / 1e3:.0f} k "
                      "instructions per request")
    return 0


def writer_run(args: argparse.Namespace) -> int:
    """The writer thread's CPU per request in this process: 5 encoded events a request at ``--rate``."""
    from vsr_fast.events import writer
    from vsr_fast.events.embedded import EmbeddedLog
    from vsr_fast.events.types import AnswerCompleted, encode_event

    payload = encode_event(AnswerCompleted(replay_id="0" * 24, request_id="r" * 32, model="mock", duration_ms=1.5,
                                           content_type="application/json"))
    print(f"writer thread CPU per request, {args.rate} requests/s of 5 events ({len(payload)} B each), "
          f"{args.seconds} s each")
    print("| POLL_S | transport | requests | writer µs/req |")
    print("|---|---|---|---|")

    class Nothing:
        """A transport that takes every batch and does nothing: the writer loop's own cost."""

        def send(self, items: list) -> int:
            return len(items)

        def close(self) -> None:
            pass

    for poll, kind in ((float(p), k) for p in args.poll.split(",") for k in ("embedded", "nothing")):
        writer.POLL_S = poll
        with tempfile.TemporaryDirectory(prefix="vsr-evwriter-") as tmp:
            log = EmbeddedLog(Path(tmp) / "stream") if kind == "embedded" else Nothing()
            sink = writer.EventSink(log, Path(tmp) / "spill").start()
            clock = time.pthread_getcpuclockid(sink._thread.ident)   # the writer thread's own CPU clock
            start, t0, n = time.clock_gettime(clock), time.monotonic(), 0
            while time.monotonic() - t0 < args.seconds:
                for _ in range(5):
                    sink.record_encoded(payload)
                n += 1
                time.sleep(max(0.0, t0 + n / args.rate - time.monotonic()))
            sink.wait_drained(30)
            used = time.clock_gettime(clock) - start
            sink.close()
            log.close()
        print(f"| {poll} | {kind} | {n} | {used / n * 1e6:.1f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.events_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="requests per router per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--body-bytes", type=int, default=1024)
    # Two routers of each backend, in the order ABBA: which process is which moved one router's CPU per
    # request by ~40 µs against an identical one (none,none), as much as the figure measured.
    parser.add_argument("--variants", default=VARIANTS,
                        help="the routers' event_stream backends, in order (none,none: the harness's noise); "
                        "backend@DIR runs DIR's vsr_fast (PYTHONPATH)")
    parser.add_argument("--writer", action="store_true", help="the writer thread alone, in this process")
    parser.add_argument("--poll", default="0.02,0.05", help="with --writer: POLL_S values")
    parser.add_argument("--rate", type=int, default=400, help="with --writer: requests per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="with --writer: seconds per value")
    parser.add_argument("--callgrind", action="store_true", help="count instructions per request instead")
    parser.add_argument("--keep", metavar="DIR", help="with --callgrind: keep the dumps here (callgrind_annotate)")
    parser.add_argument("--calls", action="store_true", help="count Python calls per request instead (cProfile)")
    parser.add_argument("--few", type=int, default=40)
    parser.add_argument("--many", type=int, default=140)
    args = parser.parse_args(argv)
    if args.writer:
        return writer_run(args)
    if args.callgrind:
        if args.variants == VARIANTS:
            args.variants = "embedded,none"   # deterministic: one router of each is enough
        return callgrind_run(args)
    return calls_run(args) if args.calls else cpu_run(args)


if __name__ == "__main__":
    sys.exit(main())
