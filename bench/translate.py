"""Translation cost: per request and per streamed chunk, for every client API x backend api_format pair.

Request: decode the client's body and write the backend's (``Adapter.decode`` +
``Adapter.upstream``). Whole answer: the backend's answer in the client's
protocol (``Adapter.whole``). Per chunk: ``StreamTranslator.feed`` over the
backend's SSE events as the mock upstream writes them (one event a chunk),
including ``close``. Same-protocol pairs are the pass-through path.
"""
from __future__ import annotations

import statistics
import time

import msgspec

from bench import mock_upstream as mock
from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore

TEXT = "Summarise the design of a rate limiter for an API gateway, with its trade-offs. " * 8
CONTENT = "A token bucket per client refills at a fixed rate; bursts draw on the bucket. " * 12
CLIENT_BODY = {
    "chat": {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXT}],
             "max_tokens": 512},
    "messages": {"model": "m", "system": "Be brief.", "max_tokens": 512, "messages": [{"role": "user", "content": TEXT}]},
    "responses": {"model": "m", "instructions": "Be brief.", "input": TEXT, "max_output_tokens": 512},
}
FORMAT_API = {"openai": "chat", "anthropic": "messages", "responses": "responses"}
CHUNKS = 24


def backend_answer(api: str, stream: bool) -> tuple[bytes, list[bytes]]:
    """What the mock upstream answers on backend ``api``: a whole body and its SSE events."""
    body = msgspec.json.encode({**CLIENT_BODY[api], "stream": stream})
    plan = mock.make_plan(api, body)
    u = mock.usage(len(body), CONTENT)
    whole = {"chat": mock.chat_whole, "messages": mock.messages_whole, "responses": mock.responses_whole}[api]
    events = {"chat": mock.chat_events, "messages": mock.messages_events, "responses": mock.responses_events}[api]
    return whole(plan, 1, 0, u, CONTENT), events(plan, 1, 0, u, CONTENT, CHUNKS)


def us(samples: list[float]) -> float:
    return statistics.median(samples) / 1000


def main() -> None:
    adapters = make_adapters(MemoryResponseStore())
    print(f"| client → backend | request µs | whole answer µs | stream µs per chunk ({CHUNKS} text chunks) |")
    print("|---|---|---|---|")
    for client in ("chat", "messages", "responses"):
        adapter = adapters[client]
        for fmt, backend_api in FORMAT_API.items():
            raw = msgspec.json.encode(CLIENT_BODY[client])
            raw_stream = msgspec.json.encode({**CLIENT_BODY[client], "stream": True})
            whole, events = backend_answer(backend_api, True)
            req_t, whole_t, chunk_t = [], [], []
            for _ in range(2000):
                t = time.perf_counter_ns()
                req = adapter.decode(raw)
                adapter.upstream(req, fmt, "backend-model")
                req_t.append(time.perf_counter_ns() - t)
                t = time.perf_counter_ns()
                adapter.whole(req, fmt, 200, whole)
                whole_t.append(time.perf_counter_ns() - t)
            sreq = adapter.decode(raw_stream)
            for _ in range(300):
                tr = adapter.stream_translator(sreq, fmt)
                t = time.perf_counter_ns()
                for ev in events:
                    tr.feed(ev)
                tr.close()
                chunk_t.append((time.perf_counter_ns() - t) / len(events))
            print(f"| {client} → {fmt} | {us(req_t):.1f} | {us(whole_t):.1f} | {us(chunk_t):.2f} |")


if __name__ == "__main__":
    main()
