"""What response_guard costs: the time to first byte of a held stream vs true streaming, and the guard's CPU.

Starts a mock upstream that streams its answer in ``--chunks`` events ``--interval-ms``
apart, the fake System One (answering at once), and three routers on the same
recipe: ``none`` (no guard), ``unheld`` (an annotate-only guard: true streaming, the
verdict recorded after the end) and ``held`` (a block rule: the stream is held until
the guard has read it). For each client API it sends ``--requests`` sequential
streamed requests, each with its own text (so no System One answer is reused), and
prints the median time to the first body byte and to the end.

Then the guard's CPU: ``--cpu-requests`` whole answers to ``none`` and to ``held``
(the mock answers at once), the router process's CPU (``/proc/PID/stat``) per request,
and the difference; and in process, the guard's own Python per answer (reading the
answer's text and evaluating two rules, the System One call replaced by a stub).

    python -m bench.guard [--requests 20] [--chunks 20] [--interval-ms 25] [--cpu-requests 400]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

import httpx
import trio
import yaml

from ._procs import Proc
from .sr_bench import cpu_delta, process_tree_cpu

APIS = {
    "chat": ("openai", "/v1/chat/completions", lambda text: {"messages": [{"role": "user", "content": text}]}),
    "messages": ("anthropic", "/v1/messages",
                 lambda text: {"max_tokens": 64, "messages": [{"role": "user", "content": text}]}),
    "responses": ("responses", "/v1/responses", lambda text: {"input": text}),
}
GUARDS = {
    "none": None,
    "unheld": {"rules": [{"when": {"type": "refusal", "name": "refused"}, "action": "annotate"}]},
    "held": {"rules": [{"when": {"type": "jailbreak", "name": "unsafe"}, "action": "block"},
                       {"when": {"type": "refusal", "name": "refused"}, "action": "annotate"}]},
}
FAKE_RULES = [{"question": "preset:jailbreak", "answer": {"choice": {"benign": 0.99, "jailbreak": 0.01}}},
              {"question": "preset:refusal", "answer": {"choice": {"compliance": 0.99, "refusal": 0.01}}}]


def _config(upstream: str, s1: str, guard: dict | None) -> str:
    models = [{"name": f"{api}-model", "api_format": fmt, "backend_refs": [{"endpoint": f"{upstream}/v1"}]}
              for api, (fmt, _, _) in APIS.items()]
    plugins = [{"type": "response_guard", "configuration": guard}] if guard else []
    signals = {"jailbreak": [{"name": "unsafe", "stage": "response", "predicate": {"gte": 0.9}}],
               "refusal": [{"name": "refused", "predicate": {"gte": 0.9}}]}
    doc = {"version": "v0.5",
           "global": {"stores": {"event_stream": {"backend": "none"}},
                      "model_catalog": {"deployments": {"s1": {
                          "provider": "systemone", "endpoint": f"{s1}/v1/systemone", "model": "fake",
                          "capabilities": {"question_types": ["choice", "noul", "score", "set", "span"]}}},
                          "system": {"decision_model": {"deployment": "s1"}}}},
           "providers": {"models": models},
           "recipes": [{"name": api, "signals": signals, "decisions": [
               {"name": api, "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": f"{api}-model"}],
                "plugins": plugins}]} for api in APIS],
           "entrypoints": [{"model_names": [api], "recipe": api, "default": api == "chat"} for api in APIS]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(doc, f)
    return f.name


def _timed_stream(url: str, body: dict) -> tuple[float, float]:
    """(time to the first body byte, time to the end) of one streamed request, seconds."""
    started = time.perf_counter()
    first = None
    with httpx.stream("POST", url, json=body, timeout=60) as r:
        for chunk in r.iter_raw():
            if chunk and first is None:
                first = time.perf_counter() - started
        assert r.status_code == 200, r.status_code
    return first or 0.0, time.perf_counter() - started


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


def stream_table(routers: dict[str, Proc], requests: int) -> None:
    print("| api | guard | TTFB p50 ms | end p50 ms |")
    print("|---|---|---|---|")
    for api, (_, path, body_of) in APIS.items():
        for name, proc in routers.items():
            ttfb, end = [], []
            for _ in range(requests):
                body = {"model": api, "stream": True, **body_of(f"tell me a story {uuid.uuid4().hex}")}
                a, b = _timed_stream(f"{proc.url}{path}", body)
                ttfb.append(a)
                end.append(b)
            print(f"| {api} | {name} | {_ms(ttfb)} | {_ms(end)} |")


def cpu_table(routers: dict[str, Proc], requests: int) -> None:
    print()
    print("| api | guard | router CPU µs/req (whole) |")
    print("|---|---|---|")
    for api, (_, path, body_of) in APIS.items():
        per = {}
        for name in ("none", "held"):
            proc = routers[name]
            assert proc.popen is not None
            with httpx.Client(timeout=30) as client:
                for _ in range(20):   # warm up
                    client.post(f"{proc.url}{path}", json={"model": api, **body_of(f"warm {uuid.uuid4().hex}")})
                before = process_tree_cpu([proc.popen.pid])
                for _ in range(requests):
                    r = client.post(f"{proc.url}{path}", json={"model": api, **body_of(f"q {uuid.uuid4().hex}")})
                    assert r.status_code == 200, r.text
                per[name] = cpu_delta(before, process_tree_cpu([proc.popen.pid])) / requests * 1e6
            print(f"| {api} | {name} | {per[name]:.0f} |")
        print(f"| {api} | held - none | {per['held'] - per['none']:.0f} |")


def in_process(iterations: int = 2000) -> None:
    """The guard's own Python per answer: the answer's text read, two rules evaluated, the call stubbed."""
    from vsr_fast.protocol.adapters import ChatAdapter
    from vsr_fast.routing import load_raw
    from vsr_fast.routing.guard import run
    from vsr_fast.signals.base import Outcome

    doc = yaml.safe_load(open(_config("http://127.0.0.1:1", "http://127.0.0.1:2", GUARDS["held"])))
    guard = load_raw(doc).table.recipes["chat"].guards["chat"]
    body = (b'{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":'
            b'{"role":"assistant","content":"' + b"word " * 200 + b'"},"finish_reason":"stop"}]}')
    adapter = ChatAdapter()
    answers = {k: Outcome(False, value=0.01) for k in guard.response}

    async def ask(rules):
        return {(r.condition_type, r.name): answers[(r.condition_type, r.name)] for r in rules}

    async def loop() -> float:
        started = time.process_time()
        for _ in range(iterations):
            adapter.answer_text(body)
            await run(guard, None, ask)
        return (time.process_time() - started) / iterations

    print(f"\nin process: {trio.run(loop) * 1e6:.1f} µs of CPU per answer (text read + two rules, call stubbed)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.guard", description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--chunks", type=int, default=20)
    p.add_argument("--interval-ms", type=float, default=25)
    p.add_argument("--cpu-requests", type=int, default=400)
    args = p.parse_args(argv)
    with Proc(["-m", "bench.mock_upstream", "--port", "0", "--chunks", str(args.chunks),
               "--chunk-interval-ms", str(args.interval_ms)], "listening") as mock, \
            Proc(["-m", "bench.fake_systemone", "--host", "127.0.0.1", "--port", "0"],
                 "fake_systemone: listening") as fake:
        httpx.post(f"{fake.url}/_fake/rules", json={"rules": FAKE_RULES}).raise_for_status()
        routers = {name: Proc(["-m", "vsr_fast", "serve", "--config", _config(mock.url, fake.url, guard),
                               "--host", "127.0.0.1", "--port", "0"], "vsr-fast: serving on").start()
                   for name, guard in GUARDS.items()}
        try:
            stream_table(routers, args.requests)
            httpx.post(f"{mock.url}/_mock/config", json={"chunk_interval_ms": 0}).raise_for_status()
            cpu_table(routers, args.cpu_requests)
        finally:
            for proc in routers.values():
                proc.stop()
    in_process()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
