"""Instructions per request, router vs floor proxy, counted by callgrind.

``python -m bench.cost [--plugins] [--requests 200]`` starts the mock upstream natively
and each server (the floor proxy, the router, the router with the four shaping plugins)
under ``valgrind --tool=callgrind``, warms it up, zeroes the counters, sends
``--requests`` sequential requests (whole, then streamed), dumps the counters and prints
instructions per request and the ratio to the floor.

Why instructions and not CPU seconds: on a shared 2-core box the CPU-time ratio of
``bench.compare`` moves by ±0.2 from run to run, as large as the differences it is
meant to show. Callgrind counts every instruction of every thread of the server
process, the same count whatever else the machine does, so a change of a few percent
is visible. It does not see cache misses or syscall time inside the kernel; the wall
and CPU-time figures stay with ``bench.compare``.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import yaml

from ._procs import ROOT, Proc
from .compare import router_config
from .sr_bench import chat_body

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)


class Counted:
    """A server process running under callgrind, whose counters can be zeroed and dumped."""

    def __init__(self, name: str, args: list[str], ready: str, outdir: Path, options: list[str] = (),
                 **proc: object) -> None:
        self.name = name
        self.outdir = outdir
        prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={outdir}/{name}.%p",
                  "--dump-line=no", "--log-file=" + str(outdir / f"{name}.valgrind.log"), *options]
        self.proc = Proc(args, ready, prefix=prefix, **proc)  # type: ignore[arg-type]

    def __enter__(self) -> "Counted":
        # Under valgrind on a busy 2-core box the router takes many minutes to import and load its model.
        self.proc.start(timeout=2400.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stop()

    def _control(self, flag: str) -> None:
        assert self.proc.popen
        subprocess.run(["callgrind_control", flag, str(self.proc.popen.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    def zero(self) -> None:
        self._control("-z")

    def dump(self) -> int:
        """Dump the counters; the instructions since the last zero."""
        return sum(self.dump_threads().values())

    def dump_threads(self) -> dict[int, int]:
        """Dump the counters; the instructions since the last zero, by thread number (1: the main
        thread; one entry unless callgrind runs with ``--separate-threads=yes``)."""
        before = set(glob.glob(f"{self.outdir}/{self.name}.*.[0-9]*"))
        self._control("-d")
        new = sorted(set(glob.glob(f"{self.outdir}/{self.name}.*.[0-9]*")) - before, key=os.path.getmtime)
        if not new:
            raise RuntimeError(f"{self.name}: callgrind wrote no dump")
        out: dict[int, int] = {}
        for path in new:
            text = Path(path).read_text(errors="replace")
            match = _TOTALS.search(text)
            if not match:
                raise RuntimeError(f"{self.name}: no totals in {path}")
            thread = re.search(r"^thread:\s*(\d+)", text, re.M)
            out[int(thread.group(1)) if thread else 1] = int(match.group(1))
        return out


def send(url: str, stream: bool, count: int, body_bytes: int) -> None:
    """``count`` sequential Chat Completions requests; every one must succeed."""
    body = chat_body("mock", stream, body_bytes, None)
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=300.0) as client:
        for _ in range(count):
            r = client.post(f"{url}/v1/chat/completions", content=body, headers=headers)
            if r.status_code != 200 or (stream and b"[DONE]" not in r.content[-32:]):
                raise RuntimeError(f"{url}: HTTP {r.status_code}: {r.content[:200]!r}")


def measure(server: Counted, requests: int, warmup: int, body_bytes: int) -> dict[bool, float]:
    """Instructions per request, whole (False) and streamed (True); with ``--by-thread``, the main thread's too
    (keys "main False", "main True")."""
    per_request: dict = {}
    for stream in (False, True):
        send(server.proc.url, stream, warmup, body_bytes)
        server.zero()
        send(server.proc.url, stream, requests, body_bytes)
        threads = server.dump_threads()
        per_request[stream] = sum(threads.values()) / requests
        per_request[f"main {stream}"] = threads.get(1, 0) / requests
    return per_request


def main(argv: list[str] | None = None) -> int:
    """Measure floor, router and (with --plugins) router with the shaping plugins; print a table."""
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--events", choices=["embedded", "none"], default="embedded")
    parser.add_argument("--plugins", action="store_true", help="also the router with the four shaping plugins")
    parser.add_argument("--keep", metavar="DIR", help="keep callgrind's dumps here (callgrind_annotate reads them)")
    parser.add_argument("--tree", action="append", metavar="DIR",
                        help="measure the router (and --plugins) of this checkout, repeatable: a before/after in one run "
                             "(--tree /work/main --tree .); each server runs in its checkout, which ``-m`` imports first")
    parser.add_argument("--by-thread", action="store_true",
                        help="also the main thread's count alone (the request path): the other threads' (the event "
                             "writer's) count moves with the wall time a request takes, so with the box's load")
    args = parser.parse_args(argv)
    trees = [Path(tree).resolve() for tree in args.tree or [ROOT]]

    rows: list[tuple[str, dict[bool, float]]] = []
    with tempfile.TemporaryDirectory(prefix="vsr-cost-") as tmp, \
            Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        outdir = Path(args.keep or tmp)
        outdir.mkdir(parents=True, exist_ok=True)
        servers = [("floor", ["-m", "bench.floor", "--port", "0", "--upstream", mock.url], "listening", ROOT)]
        variants = [("router", False)] + ([("router+plugins", True)] if args.plugins else [])
        for tree in trees:
            for name, plugins in variants:
                if len(trees) > 1:
                    name = f"{name} {tree}"
                config = outdir / f"{name.replace('/', '_').replace(' ', '')}.yaml"
                config.write_text(yaml.safe_dump(router_config(mock.url, args.events, plugins)))
                servers.append((name, ["-m", "vsr_fast", "serve", "--config", str(config), "--port", "0"],
                                "vsr-fast: serving on", tree))
        for name, server_args, ready, tree in servers:
            print(f"{name}: starting under callgrind", file=sys.stderr, flush=True)
            options = ["--separate-threads=yes"] if args.by_thread else []
            with Counted(name.replace("/", "_").replace(" ", ""), server_args, ready, outdir, options,
                         cwd=tree) as server:
                rows.append((name, measure(server, args.requests, args.warmup, args.body_bytes)))

    floor = rows[0][1]
    print(f"instructions per request, {args.requests} sequential requests after {args.warmup} warm-up, "
          f"{args.body_bytes}-byte body, events {args.events}")
    print("| server | whole | × floor | streamed | × floor |")
    print("|---|---|---|---|---|")
    for name, counts in rows:
        print(f"| {name} | {counts[False] / 1e6:.3f} M | {counts[False] / floor[False]:.2f} "
              f"| {counts[True] / 1e6:.3f} M | {counts[True] / floor[True]:.2f} |")
    if args.by_thread:
        print("\nthe main thread alone (the request path)")
        print("| server | whole | streamed |")
        print("|---|---|---|")
        for name, counts in rows:
            print(f"| {name} | {counts['main False'] / 1e6:.3f} M | {counts['main True'] / 1e6:.3f} M |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
