"""sr-bench probe: the tier report's probe (shared/spec/conversation-tier-budgets.md) against a router.

``sr-bench probe URL --case NAME=PROMPT[@DECISION] ... [--cases FILE] [--repeat N] [--metrics-url URL]``

Each case is sent ``--repeat`` times, one at a time, as a streamed Chat request.
Per decision (the case's expected one, else the one the router chose) it reports
first-useful-token p50/p95 (the first answer-text or tool-call delta, never a
reasoning delta), total p50/p95, completion-token range, retries (the probe's own,
after a connection error, a 429 or a 5xx), fallbacks (``x-vsr-response-path:
fallback``), malformed stream chunks and route validity (``x-vsr-selected-decision``
against the expected decision). It never prints a prompt or an answer. With
``--metrics-url`` it reads the backend's Prometheus gauges (``--gauge``; vLLM's
running and waiting requests and KV-cache use by default) before every request and
reports their maximum per case, so that a loaded sample cannot pass for an idle one.

A cases file is JSON or YAML: a list of ``{name, prompt | messages, expect?, body?}``
(``body``: extra request fields, such as ``max_tokens`` or ``chat_template_kwargs``).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field

import httpx
import msgspec
import yaml

from bench._stats import percentile

DEFAULT_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc")
RETRY_STATUS = frozenset({429, 500, 502, 503, 504, 529})


@dataclass
class Case:
    name: str
    messages: list[dict]
    expect: str | None = None
    body: dict = field(default_factory=dict)


@dataclass
class Sample:
    """One request's measurements (never its text)."""

    status: int
    decision: str | None
    first_useful: float | None
    total: float
    completion_tokens: int | None
    reasoning_tokens: int | None
    finish: str | None
    retries: int
    fallback: bool
    malformed: int
    gauges: dict[str, float]


def parse_case(spec: str) -> Case:
    """``NAME=PROMPT[@DECISION]``."""
    name, sep, rest = spec.partition("=")
    if not sep or not name:
        raise ValueError(f"a case is NAME=PROMPT[@DECISION], got {spec!r}")
    prompt, _, expect = rest.rpartition("@") if "@" in rest else (rest, "", "")
    return Case(name, [{"role": "user", "content": prompt}], expect or None)


def load_cases(path: str) -> list[Case]:
    with open(path) as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, list):
        raise ValueError(f"{path}: a list of cases")
    out = []
    for i, item in enumerate(doc):
        if not isinstance(item, dict) or "name" not in item or not ("prompt" in item or "messages" in item):
            raise ValueError(f"{path}[{i}]: a case needs name and prompt or messages")
        messages = item.get("messages") or [{"role": "user", "content": item["prompt"]}]
        out.append(Case(str(item["name"]), messages, item.get("expect"), dict(item.get("body") or {})))
    return out


def read_gauges(client: httpx.Client, url: str, names: tuple[str, ...]) -> dict[str, float]:
    """The named gauges of a Prometheus text page, summed over their label sets; a gauge not found is left out."""
    found: dict[str, float] = {}
    for line in client.get(url).text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        metric, _, value = line.rpartition(" ")
        name = metric.split("{", 1)[0]
        if name in names:
            try:
                found[name] = found.get(name, 0.0) + float(value)
            except ValueError:
                continue
    return found


def useful(delta: dict) -> bool:
    """Whether a Chat delta carries answer text or a tool call (a reasoning delta does not count)."""
    return bool(delta.get("content")) or bool(delta.get("tool_calls"))


def measure(client: httpx.Client, url: str, model: str, case: Case, retries: int, timeout: float,
            gauges: dict[str, float]) -> Sample:
    """One streamed request; retried after a connection error, a 429 or a 5xx, at most ``retries`` times."""
    body = {"model": model, "messages": case.messages, "stream": True, "stream_options": {"include_usage": True},
            **case.body}
    tried = 0
    while True:
        started = time.perf_counter()
        try:
            with client.stream("POST", url, json=body, headers={"x-vsr-debug": "1"}, timeout=timeout) as resp:
                if resp.status_code in RETRY_STATUS and tried < retries:
                    tried += 1
                    continue
                first, malformed, usage, finish = None, 0, {}, None
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        continue          # read to the end: the connection stays reusable
                    try:
                        doc = msgspec.json.decode(data)
                    except msgspec.DecodeError:
                        malformed += 1
                        continue
                    for choice in doc.get("choices") or ():
                        if first is None and useful(choice.get("delta") or {}):
                            first = time.perf_counter() - started
                        finish = choice.get("finish_reason") or finish
                    usage = doc.get("usage") or usage
                total = time.perf_counter() - started
                details = usage.get("completion_tokens_details") or {}
                return Sample(resp.status_code, resp.headers.get("x-vsr-selected-decision"), first, total,
                              usage.get("completion_tokens"), details.get("reasoning_tokens"), finish, tried,
                              resp.headers.get("x-vsr-response-path") == "fallback", malformed, gauges)
        except httpx.TransportError:
            if tried >= retries:
                raise
            tried += 1


def summarise(case: Case, samples: list[Sample]) -> dict:
    """One row: the case's decision, route validity, first-useful and total p50/p95 (s), tokens, and counts."""
    ok = [s for s in samples if s.status == 200]
    firsts = sorted(s.first_useful for s in ok if s.first_useful is not None)
    totals = sorted(s.total for s in ok)
    tokens = [s.completion_tokens for s in ok if s.completion_tokens is not None]
    seen = sorted({s.decision or "-" for s in samples})
    gauges: dict[str, float] = {}
    for s in samples:
        for k, v in s.gauges.items():
            gauges[k] = max(v, gauges.get(k, v))
    return {
        "case": case.name, "decision": case.expect or ",".join(seen), "routed": seen,
        "valid": sum(1 for s in samples if s.status == 200 and (case.expect is None or s.decision == case.expect)),
        "n": len(samples), "first_useful_p50": percentile(firsts, 50), "first_useful_p95": percentile(firsts, 95),
        "total_p50": percentile(totals, 50), "total_p95": percentile(totals, 95),
        "completion_tokens": [min(tokens), max(tokens)] if tokens else None,
        "finish": sorted({s.finish or "-" for s in ok}), "retries": sum(s.retries for s in samples),
        "fallbacks": sum(s.fallback for s in samples), "malformed": sum(s.malformed for s in samples),
        "errors": len(samples) - len(ok), "gauges_max": gauges,
    }


def table(rows: list[dict]) -> str:
    def s(v) -> str:
        return "-" if v is None else f"{v:.3f}"

    out = ["| case | decision | valid route | first useful p50 / p95 s | total p50 / p95 s | completion tok | "
           "retries | fallbacks | malformed | gauges (max) |", "|" + "---|" * 10]
    for r in rows:
        tok = "-" if r["completion_tokens"] is None else "–".join(str(t) for t in r["completion_tokens"])
        gauges = ", ".join(f"{k.split(':')[-1]}={v:g}" for k, v in r["gauges_max"].items()) or "-"
        out.append(f"| {r['case']} | {r['decision']} | {r['valid']}/{r['n']} | {s(r['first_useful_p50'])} / "
                   f"{s(r['first_useful_p95'])} | {s(r['total_p50'])} / {s(r['total_p95'])} | {tok} | {r['retries']} "
                   f"| {r['fallbacks']} | {r['malformed']} | {gauges} |")
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sr-bench probe", description=__doc__.split("\n\n")[0])
    p.add_argument("url", help="the router, e.g. http://127.0.0.1:8801 (the Chat route is added)")
    p.add_argument("--case", action="append", default=[], metavar="NAME=PROMPT[@DECISION]")
    p.add_argument("--cases", metavar="FILE", help="a JSON or YAML list of cases")
    p.add_argument("--repeat", "-n", type=int, default=5, help="requests per case (default %(default)s)")
    p.add_argument("--model", default="vsr/auto", help="the model field (default %(default)s)")
    p.add_argument("--retries", type=int, default=1, help="retries after a transport error, 429 or 5xx")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default %(default)s)")
    p.add_argument("--metrics-url", help="a backend's Prometheus /metrics, read before every request")
    p.add_argument("--gauge", action="append", default=[], help=f"a gauge to read (default {', '.join(DEFAULT_GAUGES)})")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        cases = [parse_case(c) for c in args.case] + (load_cases(args.cases) if args.cases else [])
    except (ValueError, OSError, yaml.YAMLError) as exc:
        parser.error(str(exc))
    if not cases:
        parser.error("no cases: give --case or --cases")
    url = args.url.rstrip("/")
    url = url if url.endswith("/chat/completions") else url.removesuffix("/v1") + "/v1/chat/completions"
    names = tuple(args.gauge) or DEFAULT_GAUGES
    rows = []
    with httpx.Client() as client:
        for case in cases:
            samples = []
            for _ in range(args.repeat):
                gauges = read_gauges(client, args.metrics_url, names) if args.metrics_url else {}
                samples.append(measure(client, url, args.model, case, args.retries, args.timeout, gauges))
            rows.append(summarise(case, samples))
    print(msgspec.json.format(msgspec.json.encode(rows), indent=2).decode() if args.json else table(rows))
    return 0 if all(r["valid"] == r["n"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
