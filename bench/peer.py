"""vsr-fast against an installed LiteLLM proxy, side by side in one run (issue 14).

Installs LiteLLM's proxy, pinned, into its own venv (``.peer/venv``, outside the project's) on
first use; starts the mock upstream, the router (bench/compare.py's one-decision static recipe,
the default embedded event journal on) and LiteLLM's proxy (one uvicorn worker, one model routed
to the mock as an OpenAI-compatible endpoint, access log off, no database) in front of the same
mock; drives all three with sr-bench, targets interleaved round by round, with the CPU per request
of each server; prints the issue's table and its goal checks.

``--scaling`` measures instead the router with ``--workers 2`` against ``--workers 1`` with
sr-bench pinned to one core (taskset), and what sr-bench itself costs per request.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ._procs import ROOT, Proc
from .compare import router_config

# A release whose [proxy] extra installs here on Python 3.11: 1.108.13 to 1.110.2 (the newest on
# 2026-12-01) pin litellm-proxy / litellm-proxy-extras releases that PyPI does not carry.
LITELLM_VERSION = "1.106.12"
PEER_DIR = ROOT / ".peer"
VENV = PEER_DIR / "venv"
LITELLM = VENV / "bin" / "litellm"
GOAL_RATIO = 10.0            # vsr-fast req/s over LiteLLM's, at every concurrency
GOAL_ADDED_P50_SHARE = 0.1   # vsr-fast's added p50 at concurrency 1 over LiteLLM's

# Proc runs the project's interpreter; this replaces it with LiteLLM's own (same pid, so
# sr-bench's --pid and Proc.stop reach the proxy itself).
EXEC = "import os, sys; os.execv(sys.argv[1], sys.argv[1:])"

# LiteLLM at its leanest: no database, no callbacks, no telemetry, no cost map fetch, and no
# key check (it refuses to start without a master key unless told; the router checks none either).
LITELLM_ENV = {
    "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",
    "LITELLM_LOG": "ERROR",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
}


# --- installing the peer -----------------------------------------------------------------------


def installed_version() -> str | None:
    """The LiteLLM version in .peer/venv, from its stamp, or None."""
    stamps = sorted(VENV.glob("litellm-*.stamp")) if VENV.is_dir() else []
    return stamps[-1].name[len("litellm-"):-len(".stamp")] if stamps else None


def install(version: str) -> float | None:
    """Install ``litellm[proxy]==version`` into .peer/venv unless it is there; seconds taken, or None."""
    if installed_version() == version and LITELLM.exists():
        return None
    started = time.monotonic()
    # A different pin gets a fresh venv: pip would otherwise keep the old release's extra packages.
    shutil.rmtree(VENV, ignore_errors=True)
    # The base interpreter, not the project's venv: the peer shares nothing with vsr-fast's packages.
    base = getattr(sys, "_base_executable", sys.executable)
    print(f"peer: installing litellm[proxy]=={version} into {VENV} ...", file=sys.stderr, flush=True)
    subprocess.run([base, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, f"litellm[proxy]=={version}"], check=True)
    (VENV / f"litellm-{version}.stamp").write_text(f"{time.time()}\n")
    took = time.monotonic() - started
    print(f"peer: installed litellm {version} in {took:.0f} s", file=sys.stderr, flush=True)
    return took


# --- the servers ---------------------------------------------------------------------------------


def litellm_config(mock_url: str, model: str = "mock") -> dict:
    """One model, ``model``, routed to the mock as an OpenAI-compatible endpoint; nothing else on."""
    return {
        "model_list": [{"model_name": model, "litellm_params": {
            "model": f"openai/{model}", "api_base": f"{mock_url}/v1", "api_key": "sk-mock"}}],
        "litellm_settings": {"telemetry": False, "turn_off_message_logging": True, "callbacks": []},
        "general_settings": {"disable_spend_logs": True, "disable_error_logs": True},
    }


def uvicorn_log_config() -> dict:
    """uvicorn's startup lines on stderr (the readiness line is one); no access log."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
        "root": {"handlers": ["stderr"], "level": "WARNING"},
    }


def free_port() -> int:
    """A port free right now, for LiteLLM's --port: its readiness line would not name one it was given as 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_yaml(data: dict, directory: str, name: str) -> str:
    """``data`` as ``directory/name``; returns the path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


def litellm_proc(mock_url: str, directory: str) -> Proc:
    """LiteLLM's proxy, one worker, in front of the mock (not started)."""
    config = write_yaml(litellm_config(mock_url), directory, "litellm.yaml")
    log_config = os.path.join(directory, "uvicorn-log.json")
    with open(log_config, "w") as f:
        json.dump(uvicorn_log_config(), f)
    args = ["-c", EXEC, str(LITELLM), "--config", config, "--host", "127.0.0.1", "--port", str(free_port()),
            "--num_workers", "1", "--log_config", log_config]
    return Proc(args, "Uvicorn running on", env=LITELLM_ENV)


def router_proc(mock_url: str, directory: str, workers: int = 1, name: str = "router") -> Proc:
    """vsr-fast on the one-decision recipe, embedded event journal on (not started)."""
    config = write_yaml(router_config(mock_url, "embedded"), directory, f"{name}.yaml")
    args = ["-m", "vsr_fast", "serve", "--config", config, "--port", "0"]
    if workers == 1:
        return Proc(args, "vsr-fast: serving on")
    return Proc([*args, "--workers", str(workers)], "vsr-fast: supervisor of")


def wait_workers(proc: Proc, workers: int, timeout: float = 60.0) -> None:
    """Until every worker under a supervisor said it serves (the supervisor speaks before they do)."""
    deadline = time.monotonic() + timeout
    while sum("vsr-fast: serving on" in line for line in proc.lines) < workers:
        if proc.popen.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{workers} router workers did not start:\n" + "\n".join(proc.lines))
        time.sleep(0.05)


# --- measuring -----------------------------------------------------------------------------------


def run_sr_bench(targets: dict[str, str], pids: dict[str, int], direct: str | None, args: argparse.Namespace,
                 pin: str | None = None) -> dict:
    """sr-bench over the targets (JSON report); ``pin``: taskset's CPU list for the client."""
    cmd = [sys.executable, "-m", "bench.sr_bench", "--json", "--model", "mock",
           "-c", args.concurrency, "--stream", args.stream, "--rounds", str(args.rounds)]
    cmd += ["--duration", str(args.duration)] if args.duration else ["-n", str(args.requests)]
    if direct:
        cmd += ["--direct", direct]
    for name, url in targets.items():
        cmd += ["--target", f"{name}={url}"]
    for name, pid in pids.items():
        cmd += ["--pid", f"{name}={pid}"]
    if pin is not None:
        cmd = ["taskset", "-c", pin, *cmd]
    shown = " ".join(c.replace(sys.executable, "python") for c in cmd)
    print(f"$ {shown}", file=sys.stderr, flush=True)
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, check=False)
    if not out.stdout.strip():
        raise RuntimeError(f"sr-bench failed (exit {out.returncode})")
    return json.loads(out.stdout)


def load_average() -> str:
    """The 1/5/15-minute load averages: recorded beside every figure on this shared box."""
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def cell(row: dict | None) -> str:
    """One target at one concurrency: req/s, p50, p99, errors, CPU per request."""
    if row is None:
        return "—"
    errors = row["http_errors"] + row["conn_errors"]
    text = f"{row['req_per_s']:,.0f} req/s, p50 {fmt_ms(row['p50_ms'])}, p99 {fmt_ms(row['p99_ms'])}, {errors} errors"
    if row.get("cpu_us_per_req") is not None:
        text += f", CPU {row['cpu_us_per_req']:,.0f} µs/req"
    if row.get("host_steal_pct") is not None:
        text += f", steal {row['host_steal_pct']:.0f} %"
    return text


def round_ratios(rows: list[dict]) -> list[str]:
    """vsr-fast's req/s over LiteLLM's round by round (each pair ran back to back), per concurrency: on a shared
    host a noisy spell lands on one target's round, and these show how far that moved the pooled ratio."""
    cells = index(rows)
    lines = []
    for conc, stream in sorted({(r["concurrency"], r["stream"]) for r in rows}, key=lambda k: (k[1], k[0])):
        mine, theirs = cells.get(("vsr-fast", conc, stream)), cells.get(("litellm", conc, stream))
        pairs = list(zip((mine or {}).get("round_req_per_s", []), (theirs or {}).get("round_req_per_s", [])))
        ratios = sorted(m / t for m, t in pairs if t)
        if len(ratios) < 2:
            continue
        shown = ", ".join(f"{r:.1f}" for r in ratios)
        lines.append(f"- concurrency {conc}, stream {'on' if stream else 'off'}: {shown} "
                     f"(median {statistics.median(ratios):.1f}×)")
    return lines


def fmt_ms(value: float | None) -> str:
    """Milliseconds as the issue writes them: 0.08 ms, 23.6 ms, 1.87 s."""
    if value is None:
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def index(rows: list[dict]) -> dict[tuple[str, int, bool], dict]:
    """sr-bench's rows by (target, concurrency, stream)."""
    return {(r["target"], r["concurrency"], r["stream"]): r for r in rows}


def ratio(mine: dict | None, theirs: dict | None) -> float | None:
    """vsr-fast's req/s over LiteLLM's; None when either is missing or LiteLLM served nothing."""
    if mine is None or theirs is None or not theirs["req_per_s"]:
        return None
    return mine["req_per_s"] / theirs["req_per_s"]


def cpu_ratio(mine: dict | None, theirs: dict | None) -> float | None:
    """LiteLLM's CPU per request over vsr-fast's: the per-core throughput ratio, which a busy box
    (other processes taking the cores unevenly) moves far less than the req/s ratio."""
    if mine is None or theirs is None or not mine.get("cpu_us_per_req") or theirs.get("cpu_us_per_req") is None:
        return None
    return theirs["cpu_us_per_req"] / mine["cpu_us_per_req"]


def peer_table(rows: list[dict], version: str) -> str:
    """The issue's side-by-side table, one line per (concurrency, stream)."""
    cells = index(rows)
    keys = sorted({(r["concurrency"], r["stream"]) for r in rows}, key=lambda k: (k[1], k[0]))
    lines = [f"| concurrency | stream | direct mock | LiteLLM {version} proxy | vsr-fast | vsr-fast ÷ LiteLLM, req/s "
             "| LiteLLM ÷ vsr-fast, CPU per request |",
             "|---|---|---|---|---|---|---|"]
    for conc, stream in keys:
        mine, theirs = cells.get(("vsr-fast", conc, stream)), cells.get(("litellm", conc, stream))
        r, c = ratio(mine, theirs), cpu_ratio(mine, theirs)
        lines.append(f"| {conc} | {'on' if stream else 'off'} | {cell(cells.get(('direct', conc, stream)))} | "
                     f"{cell(theirs)} | {cell(mine)} | {'—' if r is None else f'{r:.1f}×'} | "
                     f"{'—' if c is None else f'{c:.1f}×'} |")
    return "\n".join(lines)


def goals(rows: list[dict]) -> list[tuple[str, bool, str]]:
    """Issue 14's checks on the non-streamed rows: (goal, met, the figures behind it)."""
    cells = index(rows)
    concs = sorted({r["concurrency"] for r in rows if not r["stream"]})
    checks = []
    for conc in concs:
        r = ratio(cells.get(("vsr-fast", conc, False)), cells.get(("litellm", conc, False)))
        checks.append((f"vsr-fast ≥ {GOAL_RATIO:g}× LiteLLM's req/s at concurrency {conc}",
                       r is not None and r >= GOAL_RATIO, "no figure" if r is None else f"{r:.2f}×"))
    mine = [cells[k] for k in cells if k[0] == "vsr-fast"]
    errors = sum(r["http_errors"] + r["conn_errors"] for r in mine)
    checks.append(("vsr-fast: zero errors", bool(mine) and errors == 0, f"{errors} errors"))
    mine1, theirs1 = cells.get(("vsr-fast", 1, False)), cells.get(("litellm", 1, False))
    added = (mine1 or {}).get("added_p50_ms"), (theirs1 or {}).get("added_p50_ms")
    if None in added or added[1] <= 0:
        checks.append(("vsr-fast's added p50 at concurrency 1 ≤ 1/10 of LiteLLM's", False, "no figure"))
    else:
        share = added[0] / added[1]
        checks.append((f"vsr-fast's added p50 at concurrency 1 ≤ 1/{1 / GOAL_ADDED_P50_SHARE:g} of LiteLLM's",
                       share <= GOAL_ADDED_P50_SHARE,
                       f"{added[0]:.2f} ms vs {added[1]:.2f} ms: 1/{1 / share:.1f}" if share > 0 else f"{added[0]:.2f} ms"))
    return checks


def peer(args: argparse.Namespace) -> int:
    """The side-by-side run: mock, LiteLLM and vsr-fast, driven by one sr-bench."""
    version = installed_version()
    with tempfile.TemporaryDirectory(prefix="vsr-peer-") as tmp, contextlib.ExitStack() as stack:
        mock = stack.enter_context(Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening"))
        router = router_proc(mock.url, tmp)
        stack.callback(router.stop)
        router.start(timeout=60)
        # LiteLLM imports for tens of seconds on a busy 2-core box.
        litellm = litellm_proc(mock.url, tmp)
        stack.callback(litellm.stop)
        litellm.start(timeout=300)
        before = load_average()
        report = run_sr_bench({"litellm": litellm.url, "vsr-fast": router.url},
                              {"direct": mock.popen.pid, "litellm": litellm.popen.pid, "vsr-fast": router.popen.pid},
                              mock.url, args)
        after = load_average()
    rows = report["rows"]
    print(peer_table(rows, version or "?"))
    print(f"\nload average (1/5/15 min) before: {before}; after: {after}; {os.cpu_count()} CPUs")
    paired = round_ratios(rows)
    if paired:
        print("vsr-fast ÷ LiteLLM, req/s, round by round (sorted):", *paired, sep="\n")
    client = [r["bench_cpu_us_per_req"] for r in rows if r["bench_cpu_us_per_req"] is not None]
    if client:
        print(f"sr-bench's own CPU: {min(client):.0f}-{max(client):.0f} µs per request")
    print("\nGoals (non-streamed):")
    checks = goals(rows)
    for goal, met, detail in checks:
        print(f"- {goal}: {'met' if met else 'NOT met'} ({detail})")
    return 0 if all(met for _, met, _ in checks) else 1


def scaling_table(rows: list[dict]) -> str:
    """1 worker against 2, with what the pinned client spent."""
    cells = index(rows)
    lines = ["| concurrency | stream | 1 worker | 2 workers | 2 ÷ 1 | sr-bench CPU µs/req, share of its core (1 / 2 workers) |",
             "|---|---|---|---|---|---|"]
    for conc, stream in sorted({(r["concurrency"], r["stream"]) for r in rows}, key=lambda k: (k[1], k[0])):
        one, two = cells.get(("vsr-fast-w1", conc, stream)), cells.get(("vsr-fast-w2", conc, stream))
        r = two["req_per_s"] / one["req_per_s"] if one and two and one["req_per_s"] else None
        # The client's CPU per request times its rate: how much of its pinned core it kept busy.
        client = " / ".join(f"{c['bench_cpu_us_per_req']:.0f} µs, {c['bench_cpu_us_per_req'] * c['req_per_s'] / 1e4:.0f} %"
                            if c and c["bench_cpu_us_per_req"] else "—" for c in (one, two))
        lines.append(f"| {conc} | {'on' if stream else 'off'} | {cell(one)} | {cell(two)} | "
                     f"{'—' if r is None else f'{r:.2f}×'} | {client} |")
    return "\n".join(lines)


def scaling(args: argparse.Namespace) -> int:
    """The router with 2 workers against 1, the client pinned to one core."""
    with tempfile.TemporaryDirectory(prefix="vsr-peer-") as tmp, contextlib.ExitStack() as stack:
        mock = stack.enter_context(Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening"))
        procs = {}
        for workers in (1, 2):
            proc = router_proc(mock.url, tmp, workers, name=f"w{workers}")
            stack.callback(proc.stop)
            proc.start(timeout=60)
            wait_workers(proc, workers)
            procs[f"vsr-fast-w{workers}"] = proc
        before = load_average()
        report = run_sr_bench({n: p.url for n, p in procs.items()}, {n: p.popen.pid for n, p in procs.items()},
                              None, args, pin=args.pin)
        after = load_average()
    print(scaling_table(report["rows"]))
    print(f"\nsr-bench pinned to CPU {args.pin} (taskset); servers unpinned")
    print(f"load average (1/5/15 min) before: {before}; after: {after}; {os.cpu_count()} CPUs")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--install", action="store_true",
                   help="install (or re-pin) LiteLLM's proxy into .peer/venv and exit")
    p.add_argument("--litellm-version", default=LITELLM_VERSION, help="the pinned release (default %(default)s)")
    p.add_argument("--print-litellm-config", metavar="MOCK_URL",
                   help="print the LiteLLM config used in front of MOCK_URL and exit")
    p.add_argument("--scaling", action="store_true",
                   help="measure the router with --workers 2 against --workers 1 instead (no LiteLLM)")
    p.add_argument("--pin", default="1", help="with --scaling: taskset CPU list for sr-bench (default %(default)s)")
    p.add_argument("--concurrency", "-c", default="1,16,64", help="sr-bench's -c (default %(default)s)")
    p.add_argument("--stream", default="off", choices=["off", "on", "both"], help="default %(default)s")
    p.add_argument("--duration", "-d", type=float, default=10.0,
                   help="seconds per (target, concurrency, stream) cell, split over the rounds (default %(default)s; "
                   "0: use --requests)")
    p.add_argument("--requests", "-n", type=int, default=2000, help="requests per cell when --duration is 0")
    p.add_argument("--rounds", type=int, default=2, help="sr-bench's --rounds (default %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Install the peer if needed, then run; exit 1 when a goal is not met."""
    args = build_parser().parse_args(argv)
    if args.print_litellm_config:
        yaml.safe_dump(litellm_config(args.print_litellm_config.rstrip("/")), sys.stdout)
        return 0
    if args.scaling:
        return scaling(args)
    install(args.litellm_version)
    if args.install:
        return 0
    return peer(args)


if __name__ == "__main__":
    sys.exit(main())
