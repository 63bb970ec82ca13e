"""Where a request's CPU goes, by Python function: the router's main thread under cProfile, its clock the thread's CPU.

``python -m bench.hotspots [--tree DIR] [--requests 2000] [--warmup 200] [--stream] [--events none]`` starts the mock
upstream and the router on bench/compare.py's one-decision recipe (``--tree``: the vsr_fast of that checkout), sends
the warm-up requests, turns the profiler on (SIGURG), sends ``--requests`` sequential requests, turns it off
(SIGUSR2) and prints per request: each package's share of the self time, then the functions by self and by
cumulative time. ``--keep FILE`` keeps the pstats file.

Why another profile beside ``bench.cost``: callgrind counts instructions per C function, and on CPython 3.11 nearly
all of them land in the interpreter's loop, not in the Python function that ran them. cProfile names the function,
at a cost of its own per call (so many small calls read larger than they are: rank with it, measure with
``bench.cost``). Its clock is the main thread's CPU time, not the wall's, so the box's load and the event writer's
thread stay out of it. Start-up and warm-up are not profiled.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path


def _serve_profiled() -> None:
    """In the router's process: ``vsr_fast`` with the profiler switched by SIGURG (on) and SIGUSR2 (off, dump)."""
    # Run as a script, this file's directory leads sys.path, where bench/profile.py would shadow the standard one.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    import cProfile
    import runpy

    out = os.environ["VSR_HOTSPOTS_OUT"]
    profile = cProfile.Profile(time.thread_time)

    def off(*_: object) -> None:
        profile.disable()
        profile.dump_stats(out)
        Path(out + ".done").touch()

    signal.signal(signal.SIGURG, lambda *_: profile.enable())    # SIGUSR1 is the router's own (log reopen)
    signal.signal(signal.SIGUSR2, off)
    sys.argv = ["vsr_fast", *sys.argv[2:]]
    runpy.run_module("vsr_fast", run_name="__main__", alter_sys=True)


def _where(func: tuple) -> str:
    path, line, name = func
    short = path.split("/vsr_fast/")[-1] if "/vsr_fast/" in path else path.split("site-packages/")[-1]
    return f"{short}:{line} {name}"


_PACKAGES = ["trio", "h11", "httpcore", "hypercorn", "msgspec", "contextlib", "vsr_fast/events", "vsr_fast/headers",
             "vsr_fast/server", "vsr_fast/upstream", "vsr_fast"]


def main(argv: list[str] | None = None) -> int:
    import pstats

    import yaml

    from ._procs import ROOT, Proc
    from .compare import router_config
    from .cost import send

    parser = argparse.ArgumentParser(prog="python -m bench.hotspots", description=__doc__)
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose vsr_fast the router runs")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--stream", action="store_true", help="streamed requests instead of whole ones")
    parser.add_argument("--events", choices=["embedded", "none"], default="embedded")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--keep", metavar="FILE", help="keep the pstats file here")
    args = parser.parse_args(argv)
    tree = str(Path(args.tree).resolve())

    with tempfile.TemporaryDirectory(prefix="vsr-hotspots-") as tmp, \
            Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        config = Path(tmp) / "router.yaml"
        config.write_text(yaml.safe_dump(router_config(mock.url, args.events)))
        out = args.keep or str(Path(tmp) / "profile")
        env = {"VSR_HOTSPOTS_OUT": out, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"}
        with Proc([str(Path(__file__).resolve()), "--serve-profiled", "serve", "--config", str(config), "--port", "0"],
                  "vsr-fast: serving on", env=env, cwd=tree) as router:
            send(router.url, args.stream, args.warmup, args.body_bytes)
            router.signal(signal.SIGURG)
            send(router.url, args.stream, args.requests, args.body_bytes)
            router.signal(signal.SIGUSR2)
            deadline = time.monotonic() + 60
            while not Path(out + ".done").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        stats = pstats.Stats(out).stats     # type: ignore[attr-defined]

    n = args.requests
    total = sum(row[2] for row in stats.values())
    print(f"{tree}: {sum(row[1] for row in stats.values()) / n:.0f} Python calls and {total / n * 1e6:.0f} us of "
          f"profiled main-thread CPU per {'streamed' if args.stream else 'whole'} request (the profiler's own cost "
          "included), events " + args.events)
    print("| package | self time share |\n|---|---|")
    for package in _PACKAGES:
        own = sum(row[2] for func, row in stats.items() if f"/{package}" in func[0])
        print(f"| {package} | {own / total * 100:.1f} % |")
    builtin = sum(row[2] for func, row in stats.items() if func[0] == "~")
    print(f"| C functions and methods | {builtin / total * 100:.1f} % |")
    for title, key in (("self", 2), ("cumulative", 3)):
        print(f"\nby {title} time: self us, cumulative us, calls, per request")
        for func, row in sorted(stats.items(), key=lambda item: -item[1][key])[:args.top]:
            print(f"{row[2] / n * 1e6:8.1f} {row[3] / n * 1e6:8.1f} {row[1] / n:6.1f}  {_where(func)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-profiled":
        _serve_profiled()
    else:
        sys.exit(main())
