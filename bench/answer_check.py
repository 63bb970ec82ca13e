"""The cost of checking a whole upstream answer's top-level shape (vsr_fast.upstream.answers.check_shape),
and a streamed one's events (vsr_fast.upstream.answers.EventCheck).

``python -m bench.answer_check``: median µs per check of a chat completion of three sizes, next to a full
``json.loads`` of the same body for scale; then median µs per streamed chunk fed to EventCheck, one event a
chunk, for a Chat chunk and a Messages event, and for ten events in one chunk.
"""
from __future__ import annotations

import json
import statistics
import time

from vsr_fast.upstream.answers import EventCheck, check_shape


def answer(content_bytes: int) -> bytes:
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "x" * content_bytes}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


def median_us(fn, body: bytes, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        fn(body)
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def main() -> None:
    print("| answer | check_shape µs | json.loads µs |")
    print("|---|---:|---:|")
    for size, rounds in ((600, 20000), (64 << 10, 2000), (1 << 20, 200)):
        body = answer(size)
        check = median_us(lambda b: check_shape("/chat/completions", b, "bench"), body, rounds)
        full = median_us(json.loads, body, rounds)
        print(f"| {len(body):,} B | {check:.1f} | {full:.1f} |")
    chat = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,'
            b'"delta":{"content":"Hello there"},"finish_reason":null}]}\n\n')
    messages = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                b'"delta":{"type":"text_delta","text":"Hello there"}}\n\n')
    print()
    print("| streamed chunk | EventCheck.feed µs |")
    print("|---|---:|")
    for name, api_format, chunk in (("Chat chunk", "openai", chat), ("Messages event", "anthropic", messages),
                                    ("10 Chat chunks at once", "openai", chat * 10)):
        check = EventCheck(api_format, "bench")
        print(f"| {name}, {len(chunk)} B | {median_us(check.feed, chunk, 20000):.1f} |")


if __name__ == "__main__":
    main()
