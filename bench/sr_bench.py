"""sr-bench: the load and latency benchmark for the router, the floor proxy and the mock.

It drives Chat Completions traffic at a fixed concurrency, one keep-alive connection per
worker, and reports latency percentiles, time to first byte of streams, throughput, errors
and (with --pid) the CPU the servers spent per request. With --direct it also runs the mock
upstream itself, interleaved with the targets, and reports each target's added latency.

The client is a hand-written HTTP/1.1 client on raw trio sockets with pre-encoded requests:
httpx would cost ~1.5 ms of CPU per request on these 2 cores, taken from the servers
being measured. Its own CPU per request is reported so that this stays checked.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import msgspec
import trio

from bench import tier_probe
from bench._stats import percentile
from bench._http import PeerClosed, ProtocolError, Reader, content_length, is_chunked, parse_head, send_all, set_nodelay

DEFAULT_PATH = "/v1/chat/completions"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PADDING = (
    "Summarise the following notes about routing language-model traffic between providers, "
    "weighing latency, cost and answer quality for each kind of request. "
)


@dataclass
class Target:
    """One URL under test; `path` is where the Chat Completions requests go."""

    name: str
    url: str
    host: str
    port: int
    path: str
    addr: tuple | None = None


@dataclass
class RunResult:
    """What one or more measured runs of a (target, concurrency, stream) cell produced."""

    latencies: list[float] = field(default_factory=list)
    ttfbs: list[float] = field(default_factory=list)
    http_errors: int = 0
    conn_errors: int = 0
    error_kinds: Counter = field(default_factory=Counter)
    elapsed: float = 0.0
    server_cpu: float | None = None
    bench_cpu: float = 0.0
    # The host's CPU time while the cell ran, in /proc/stat ticks: steal is what the hypervisor gave other
    # guests while this one wanted to run. A VM's wake-ups slow under steal, so one-at-a-time cells move most.
    host_ticks: int = 0
    steal_ticks: int = 0
    rounds: list[tuple[int, float]] = field(default_factory=list)   # (answered, seconds) of each round

    @property
    def ok(self) -> int:
        """Successful requests."""
        return len(self.latencies)

    @property
    def attempts(self) -> int:
        """Every measured request, failed or not."""
        return self.ok + self.http_errors + self.conn_errors

    def merge(self, other: RunResult) -> None:
        """Add another run of the same cell (a later round)."""
        self.latencies += other.latencies
        self.ttfbs += other.ttfbs
        self.http_errors += other.http_errors
        self.conn_errors += other.conn_errors
        self.error_kinds.update(other.error_kinds)
        self.elapsed += other.elapsed
        self.bench_cpu += other.bench_cpu
        self.host_ticks += other.host_ticks
        self.steal_ticks += other.steal_ticks
        self.rounds += other.rounds
        if other.server_cpu is not None:
            self.server_cpu = (self.server_cpu or 0.0) + other.server_cpu


class Budget:
    """Hands out request slots until a count or a deadline runs out."""

    def __init__(self, requests: int | None, deadline: float) -> None:
        self.remaining = requests
        self.deadline = deadline

    def take(self) -> bool:
        """Claim one request; False once the run is over."""
        if time.perf_counter() >= self.deadline:
            return False
        if self.remaining is None:
            return True
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True


# --- targets and payloads -------------------------------------------------------------


def parse_target(spec: str, default_name: str) -> Target:
    """A target from `name=URL` or a bare URL; an empty path or `/v1` means the chat route."""
    name, sep, url = spec.partition("=")
    if not sep or "://" in name:
        name, url = default_name, spec
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"only http://host:port URLs are supported, got {url!r}")
    path = parts.path.rstrip("/")
    if not path:
        path = DEFAULT_PATH
    elif path.endswith("/v1"):
        path += "/chat/completions"
    if parts.query:
        path += "?" + parts.query
    return Target(name, url, parts.hostname, parts.port or 80, path)


def chat_body(model: str, stream: bool, body_bytes: int, template: dict | None) -> bytes:
    """A Chat Completions body of about body_bytes, or the template with model/stream set."""
    if template is not None:
        body = dict(template, model=model, stream=stream)
        return msgspec.json.encode(body)
    body = {"model": model, "messages": [{"role": "user", "content": ""}], "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    room = max(0, body_bytes - len(msgspec.json.encode(body)))
    text = (PADDING * (room // len(PADDING) + 1))[:room]
    body["messages"][0]["content"] = text
    return msgspec.json.encode(body)


def request_bytes(target: Target, body: bytes, stream: bool, headers: list[str]) -> bytes:
    """The whole pre-encoded request, sent as is by every worker."""
    netloc = f"{target.host}:{target.port}" if ":" not in target.host else f"[{target.host}]:{target.port}"
    lines = [
        f"POST {target.path} HTTP/1.1",
        f"Host: {netloc}",
        "Content-Type: application/json",
        f"Accept: {'text/event-stream' if stream else 'application/json'}",
        f"Content-Length: {len(body)}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def resolve(target: Target) -> None:
    """Resolve the target's address once, so that connecting never waits on DNS."""
    infos = await trio.socket.getaddrinfo(target.host, target.port, type=trio.socket.SOCK_STREAM)
    family, _, _, _, addr = infos[0]
    target.addr = (family, addr)


# --- the client ------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.reader = Reader(sock)

    @classmethod
    async def open(cls, target: Target) -> Connection:
        """Connect to the target with TCP_NODELAY."""
        family, addr = target.addr
        sock = trio.socket.socket(family, trio.socket.SOCK_STREAM)
        try:
            set_nodelay(sock)
            await sock.connect(addr)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    async def exchange(self, payload: bytes) -> tuple[int, float, bytes, bool]:
        """Send one request; returns status, time of the first body byte, body, keep-alive."""
        await send_all(self.sock, payload)
        reader = self.reader
        while True:
            head = await reader.read_head()
            if head is None:
                raise PeerClosed("connection closed before a response")
            line, headers = parse_head(head)
            status = int(line[9:12])
            if status >= 200:
                break
        keep = b"close" not in headers.get(b"connection", b"").lower()
        chunked = is_chunked(headers)
        framed = chunked or b"content-length" in headers
        expects_body = chunked or not framed or content_length(headers) > 0
        if expects_body and not reader.buf and not await reader.fill() and framed:
            raise PeerClosed("connection closed before the body")
        ttfb = time.perf_counter()
        if framed:
            body = await reader.read_body(headers)
        else:
            body, keep = await self.read_to_eof(), False
        return status, ttfb, body, keep

    async def read_to_eof(self) -> bytes:
        """A body delimited by the server closing the connection."""
        while await self.reader.fill():
            pass
        body = bytes(self.reader.buf)
        self.reader.buf.clear()
        return body


async def worker(target: Target, payload: bytes, stream: bool, budget: Budget, result: RunResult,
                 timeout: float, conn: Connection | None) -> Connection | None:
    """Send requests one after another until the budget runs out; returns the open connection."""
    while budget.take():
        start = time.perf_counter()
        try:
            with trio.fail_after(timeout):
                if conn is None:
                    conn = await Connection.open(target)
                status, ttfb, body, keep = await conn.exchange(payload)
        except (OSError, ProtocolError, trio.TooSlowError, ValueError) as exc:
            result.conn_errors += 1
            result.error_kinds[type(exc).__name__] += 1
            if conn is not None:
                conn.close()
                conn = None
            # A refused connection fails in microseconds; without a pause a --duration run
            # against a dead target would spin a core that the servers under test need.
            await trio.sleep(0.005)
            continue
        end = time.perf_counter()
        record(result, status, start, ttfb, end, body, stream)
        if not keep:
            conn.close()
            conn = None
    return conn


def record(result: RunResult, status: int, start: float, ttfb: float, end: float, body: bytes, stream: bool) -> None:
    """File one answered request as a success, an HTTP error or a broken stream."""
    if not 200 <= status < 300:
        result.http_errors += 1
        result.error_kinds[f"http {status}"] += 1
    elif stream and b"[DONE]" not in body[-32:]:
        # Cut streams (a proxy timeout, a dropped upstream) can still end in a clean chunked
        # terminator; only the missing [DONE] shows it.
        result.conn_errors += 1
        result.error_kinds["stream without [DONE]"] += 1
    else:
        result.latencies.append(end - start)
        if stream:
            result.ttfbs.append(ttfb - start)


async def run_phase(target: Target, payload: bytes, stream: bool, conns: list, budget: Budget,
                    result: RunResult, timeout: float) -> None:
    """Run every worker against one budget, keeping their connections for the next phase."""

    async def one(i: int) -> None:
        conns[i] = await worker(target, payload, stream, budget, result, timeout, conns[i])

    async with trio.open_nursery() as nursery:
        for i in range(len(conns)):
            nursery.start_soon(one, i)


# --- CPU accounting ----------------------------------------------------------------------


def read_proc_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime+stime in seconds) of a process, all its threads included."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def read_host_ticks() -> tuple[int, int]:
    """(all CPU ticks, steal ticks) of the whole host so far, from /proc/stat; zeros where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    # user nice system idle iowait irq softirq steal (guest and guest_nice are already inside user and nice)
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def process_tree_cpu(roots: list[int]) -> dict[int, float]:
    """CPU seconds of each root process and of every descendant (e.g. hypercorn workers)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    cpu, todo = {}, [p for p in roots if p in stats]
    while todo:
        pid = todo.pop()
        if pid not in cpu:
            cpu[pid] = stats[pid][1]
            todo += children.get(pid, [])
    return cpu


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU spent between two snapshots by the processes alive at the second one."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


# --- a measured run ------------------------------------------------------------------------


@dataclass
class Plan:
    """The settings shared by every run."""

    model: str
    body_bytes: int
    template: dict | None
    headers: list[str]
    requests: int | None
    duration: float | None
    max_duration: float
    warmup: int
    timeout: float
    rounds: int


async def measure(target: Target, plan: Plan, concurrency: int, stream: bool, pids: list[int],
                  requests: int | None, duration: float | None) -> RunResult:
    """Warm up one connection per worker, then measure one run against the target."""
    payload = request_bytes(target, chat_body(plan.model, stream, plan.body_bytes, plan.template), stream, plan.headers)
    conns: list[Connection | None] = [None] * concurrency
    warm = RunResult()
    warm_budget = Budget(plan.warmup * concurrency, time.perf_counter() + plan.max_duration)
    await run_phase(target, payload, stream, conns, warm_budget, warm, plan.timeout)
    result = RunResult()
    cpu_before = process_tree_cpu(pids) if pids else None
    own_before = time.process_time()
    host_before = read_host_ticks()
    start = time.perf_counter()
    limit = min(duration, plan.max_duration) if duration else plan.max_duration
    budget = Budget(None if duration else requests, start + limit)
    try:
        await run_phase(target, payload, stream, conns, budget, result, plan.timeout)
    finally:
        for conn in conns:
            if conn is not None:
                conn.close()
    result.elapsed = time.perf_counter() - start
    result.bench_cpu = time.process_time() - own_before
    host_after = read_host_ticks()
    result.host_ticks, result.steal_ticks = host_after[0] - host_before[0], host_after[1] - host_before[1]
    result.rounds.append((result.ok, result.elapsed))
    if cpu_before is not None:
        result.server_cpu = cpu_delta(cpu_before, process_tree_cpu(pids))
    return result


def split_requests(total: int | None, rounds: int, index: int) -> int | None:
    """This round's share of the request count."""
    if total is None:
        return None
    return total // rounds + (1 if index < total % rounds else 0)


async def run_matrix(targets: list[Target], plan: Plan, concurrencies: list[int], streams: list[bool],
                     pids: dict[str, list[int]], progress) -> dict[tuple[str, int, bool], RunResult]:
    """Every (target, concurrency, stream) cell, targets interleaved round by round."""
    for target in targets:
        await resolve(target)
    results: dict[tuple[str, int, bool], RunResult] = {}
    for concurrency in concurrencies:
        for stream in streams:
            for rnd in range(plan.rounds):
                requests = split_requests(plan.requests, plan.rounds, rnd)
                duration = plan.duration / plan.rounds if plan.duration else None
                for target in targets:
                    progress(f"{target.name}: concurrency {concurrency}, stream {'on' if stream else 'off'}, "
                             f"round {rnd + 1}/{plan.rounds}")
                    run = await measure(target, plan, concurrency, stream, pids.get(target.name, []), requests, duration)
                    results.setdefault((target.name, concurrency, stream), RunResult()).merge(run)
    return results


# --- reporting -------------------------------------------------------------------------------


def ms(seconds: float | None) -> float | None:
    """Seconds to milliseconds, passing None through."""
    return None if seconds is None else seconds * 1000


def summarise(name: str, concurrency: int, stream: bool, run: RunResult) -> dict:
    """One report row's numbers (times in ms) for a cell."""
    lat = sorted(run.latencies)
    ttfb = sorted(run.ttfbs)
    return {
        "target": name,
        "concurrency": concurrency,
        "stream": stream,
        "requests": run.attempts,
        "ok": run.ok,
        "p50_ms": ms(percentile(lat, 50)),
        "p95_ms": ms(percentile(lat, 95)),
        "p99_ms": ms(percentile(lat, 99)),
        "ttfb_p50_ms": ms(percentile(ttfb, 50)) if stream else None,
        "ttfb_p95_ms": ms(percentile(ttfb, 95)) if stream else None,
        "ttfb_p99_ms": ms(percentile(ttfb, 99)) if stream else None,
        "req_per_s": run.ok / run.elapsed if run.elapsed else 0.0,
        "http_errors": run.http_errors,
        "conn_errors": run.conn_errors,
        "error_kinds": dict(run.error_kinds),
        "elapsed_s": run.elapsed,
        "server_cpu_s": run.server_cpu,
        "cpu_us_per_req": run.server_cpu / run.ok * 1e6 if run.server_cpu is not None and run.ok else None,
        "bench_cpu_us_per_req": run.bench_cpu / run.ok * 1e6 if run.ok else None,
        "host_steal_pct": 100 * run.steal_ticks / run.host_ticks if run.host_ticks else None,
        "round_req_per_s": [ok / seconds if seconds else 0.0 for ok, seconds in run.rounds],
    }


def compare(rows: list[dict], direct_name: str | None) -> None:
    """Add the added-latency-vs-direct and CPU-vs-floor columns in place."""
    cells = {(r["target"], r["concurrency"], r["stream"]): r for r in rows}
    for row in rows:
        key = (row["concurrency"], row["stream"])
        direct = cells.get((direct_name, *key)) if direct_name and row["target"] != direct_name else None
        for pct in ("p50", "p95", "p99"):
            mine, base = row[f"{pct}_ms"], direct and direct[f"{pct}_ms"]
            row[f"added_{pct}_ms"] = mine - base if mine is not None and base is not None else None
        floor = cells.get(("floor", *key))
        mine, base = row["cpu_us_per_req"], floor and floor["cpu_us_per_req"]
        row["cpu_vs_floor"] = mine / base if mine is not None and base else None


def fmt(value, digits: int = 2) -> str:
    """A table cell: a number with the given decimals, or a dash."""
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(rows: list[dict]) -> str:
    """The report as a Markdown table."""
    head = ["target", "conc", "stream", "p50 ms", "p95 ms", "p99 ms", "TTFB p50 ms", "req/s",
            "errors non-2xx/conn", "added p50 ms", "added p99 ms", "CPU µs/req", "CPU × floor"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["target"], str(r["concurrency"]), "on" if r["stream"] else "off",
                 fmt(r["p50_ms"]), fmt(r["p95_ms"]), fmt(r["p99_ms"]), fmt(r["ttfb_p50_ms"]),
                 fmt(r["req_per_s"], 0), f"{r['http_errors']}/{r['conn_errors']}",
                 fmt(r["added_p50_ms"]), fmt(r["added_p99_ms"]), fmt(r["cpu_us_per_req"], 0),
                 fmt(r["cpu_vs_floor"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- command line --------------------------------------------------------------------------


def parse_pids(specs: list[str], names: list[str]) -> dict[str, list[int]]:
    """`name=PID` or a bare PID (only when there is a single target) to {target: [pids]}."""
    pids: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        if not sep:
            measured = [n for n in names if n != "direct"]
            if len(measured) != 1:
                raise ValueError(f"--pid {spec}: name the target (NAME=PID) when there are several")
            name = measured[0]
        if name not in names:
            raise ValueError(f"--pid {spec}: no target named {name!r} (targets: {', '.join(names)})")
        pids.setdefault(name, []).append(int(value))
    return pids


def parse_concurrency(text: str) -> list[int]:
    """`1,16,64` to [1, 16, 64]."""
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("concurrency must be a comma-separated list of positive integers")
    return values


def build_parser() -> argparse.ArgumentParser:
    """The sr-bench command line."""
    p = argparse.ArgumentParser(
        prog="sr-bench",
        description="Load and latency benchmark for OpenAI-compatible Chat Completions endpoints. "
        "Runs every (target, concurrency, stream) cell and prints a Markdown table.",
        epilog="Example: sr-bench --target router=http://127.0.0.1:8080 --target floor=http://127.0.0.1:8081 "
        "--direct http://127.0.0.1:8001 --pid router=1234 --pid floor=1235 --concurrency 1,16,64 "
        "--stream both --requests 2000. Exit status 1 when every request of some cell failed.",
    )
    p.add_argument("url", nargs="?", help="a single target URL (same as --target URL)")
    p.add_argument("--target", action="append", default=[], metavar="[NAME=]URL",
                   help="a target to measure; repeatable. A URL with no path (or ending in /v1) "
                   "gets /v1/chat/completions. A target named 'floor' is the CPU baseline")
    p.add_argument("--direct", metavar="URL",
                   help="the mock upstream hit directly; run interleaved with the targets, and "
                   "each target's added latency (target pXX - direct pXX) is reported")
    p.add_argument("--pid", action="append", default=[], metavar="[NAME=]PID",
                   help="a server process of target NAME ('direct' for the mock); its CPU time per "
                   "successful request is reported (utime+stime of it, its threads and its child processes "
                   "from /proc/PID/stat, in 10 ms ticks: give cells a second or more of server CPU); repeatable")
    p.add_argument("--concurrency", "-c", type=parse_concurrency, default=[1], metavar="N[,N...]",
                   help="concurrent workers, each with its own keep-alive connection (default 1)")
    p.add_argument("--stream", nargs="?", const="on", default="off", choices=["off", "on", "both"],
                   help="ask for SSE streams: off (default), on (the same as a bare --stream) or both")
    p.add_argument("--requests", "-n", type=int, default=2000,
                   help="measured requests per (target, concurrency, stream) cell (default %(default)s)")
    p.add_argument("--duration", "-d", type=float,
                   help="measure each cell for this many seconds instead of a request count")
    p.add_argument("--max-duration", type=float, default=120.0,
                   help="hard cap in seconds on each measured run (default %(default)s)")
    p.add_argument("--rounds", type=int, default=2,
                   help="split each cell into this many rounds, alternating targets between rounds, "
                   "so drift on the machine hits all targets alike (default %(default)s)")
    p.add_argument("--warmup", type=int, default=2,
                   help="unmeasured requests per connection before each run (default %(default)s)")
    p.add_argument("--model", default="gpt-4o-mini", help="the model field of the body (default %(default)s)")
    p.add_argument("--body-bytes", type=int, default=2048,
                   help="approximate size of the generated request body in bytes (default %(default)s)")
    p.add_argument("--body-file", metavar="PATH",
                   help="send this JSON body instead of a generated one (model and stream are overridden)")
    p.add_argument("--header", "-H", action="append", default=[], metavar="'NAME: VALUE'",
                   help="an extra request header; repeatable")
    p.add_argument("--api-key", default="sk-bench", help="sent as 'Authorization: Bearer KEY'")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds before a request counts as a connection error (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    return p


def make_targets(args: argparse.Namespace) -> list[Target]:
    """The direct target first (if any), then the measured ones, with unique names."""
    specs = ([args.url] if args.url else []) + args.target
    if not specs:
        raise ValueError("give a target URL (positional or --target)")
    targets = [parse_target(args.direct, "direct")] if args.direct else []
    if targets:
        targets[0].name = "direct"
    for i, spec in enumerate(specs):
        targets.append(parse_target(spec, "target" if len(specs) == 1 else f"target{i + 1}"))
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise ValueError(f"target names must be unique: {names}")
    return targets


def make_plan(args: argparse.Namespace) -> Plan:
    """The shared settings from the parsed arguments."""
    template = None
    if args.body_file:
        with open(args.body_file, "rb") as f:
            template = msgspec.json.decode(f.read())
        if not isinstance(template, dict):
            raise ValueError("--body-file must hold a JSON object")
    headers = [f"Authorization: Bearer {args.api_key}"] + [h for h in args.header if ":" in h]
    if args.requests < 1 or args.rounds < 1 or args.warmup < 0:
        raise ValueError("--requests and --rounds must be positive, --warmup not negative")
    return Plan(args.model, args.body_bytes, template, headers, args.requests, args.duration,
                args.max_duration, args.warmup, args.timeout, args.rounds)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `sr-bench` console script; ``sr-bench probe ...`` runs the tier probe (bench.tier_probe)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["probe"]:
        return tier_probe.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        targets = make_targets(args)
        plan = make_plan(args)
        pids = parse_pids(args.pid, [t.name for t in targets])
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    streams = {"off": [False], "on": [True], "both": [False, True]}[args.stream]
    progress = (lambda msg: None) if args.quiet else (lambda msg: print(f"sr-bench: {msg}", file=sys.stderr, flush=True))
    results = trio.run(run_matrix, targets, plan, args.concurrency, streams, pids, progress)
    rows = [summarise(name, c, s, run) for (name, c, s), run in results.items()]
    compare(rows, "direct" if args.direct else None)
    if args.json:
        settings = {"targets": {t.name: t.url for t in targets}, "concurrency": args.concurrency,
                    "stream": args.stream, "requests": None if args.duration else plan.requests,
                    "duration_s": args.duration, "rounds": plan.rounds, "body_bytes": plan.body_bytes,
                    "model": plan.model}
        report = msgspec.json.encode({"settings": settings, "rows": rows})
        print(msgspec.json.format(report, indent=2).decode())
    else:
        print(markdown(rows))
        bench_cpu = sum(r.bench_cpu for r in results.values()) / max(1, sum(r.ok for r in results.values()))
        print(f"\nsr-bench's own CPU: {bench_cpu * 1e6:.0f} µs per successful request")
    return 1 if any(r["ok"] == 0 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
