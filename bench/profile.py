"""Where the router's CPU goes under load: a flame graph and a table of CPU by package.

``python -m bench.profile [--concurrency 4] [--seconds 20] [--stream] [--plugins] [--out DIR]``
starts the mock upstream and the router on the one-decision recipe of ``bench.compare``,
drives it with sr-bench, and samples the router with py-spy (idle threads excluded)
twice over the same load: once for ``DIR/router.svg`` (the flame graph), once as raw
collapsed stacks, from which it prints each package's share of the samples by the
innermost Python frame (self time). Native code (msgspec, the C kernels, the socket
calls) counts under the Python frame that called it.
"""
from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from ._procs import ROOT, Proc
from .compare import router_config

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]+?)(?::\d+)?\)$")


def package_of(frame: str) -> str:
    """The package of a collapsed-stack frame ``func (path:line)``; py-spy writes paths from the package root."""
    m = _FRAME.match(frame)
    if not m:
        return "native"
    parts = m.group("file").split("/")
    if parts[0] == "vsr_fast" and len(parts) > 2:
        return "vsr_fast." + parts[1]
    return parts[0].removesuffix(".py")


def by_package(collapsed: str) -> collections.Counter:
    """Samples per package of the innermost frame, from py-spy's raw (collapsed) output."""
    counts: collections.Counter = collections.Counter()
    for line in collapsed.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        counts[package_of(frames[-1]) if frames else "native"] += int(n)
    return counts


def record(pid: int, fmt: str, out: Path, seconds: int, rate: int) -> None:
    """One py-spy recording of ``pid`` in ``fmt`` (flamegraph or raw)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    subprocess.run([py_spy, "record", "--pid", str(pid), "--format", fmt, "--output", str(out),
                    "--duration", str(seconds), "--rate", str(rate), "--nonblocking", "--gil"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    """Profile the router under load; write the flame graph and print the package table."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--plugins", action="store_true")
    parser.add_argument("--events", choices=["embedded", "none"], default="embedded")
    parser.add_argument("--out", default=str(ROOT / "bench" / "profile-out"))
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="vsr-profile-") as tmp, \
            Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        config = Path(tmp) / "router.yaml"
        config.write_text(yaml.safe_dump(router_config(mock.url, args.events, args.plugins)))
        with Proc(["-m", "vsr_fast", "serve", "--config", str(config), "--port", "0"],
                  "vsr-fast: serving on") as router:
            assert router.popen
            load = subprocess.Popen(
                [sys.executable, "-m", "bench.sr_bench", "--target", f"router={router.url}", "-c",
                 str(args.concurrency), "--stream", "on" if args.stream else "off", "--model", "mock",
                 "--duration", str(2 * args.seconds + 6), "--rounds", "1", "--quiet"],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                record(router.popen.pid, "flamegraph", out / "router.svg", args.seconds, args.rate)
                record(router.popen.pid, "raw", out / "router.collapsed", args.seconds, args.rate)
            finally:
                load.terminate()
                load.wait(30)

    counts = by_package((out / "router.collapsed").read_text())
    total = sum(counts.values()) or 1
    print(f"router CPU by package (innermost Python frame), concurrency {args.concurrency}, "
          f"stream {'on' if args.stream else 'off'}, {total} samples; flame graph: {out / 'router.svg'}")
    print("| package | share |")
    print("|---|---|")
    for name, n in counts.most_common(args.top):
        print(f"| {name} | {100 * n / total:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
