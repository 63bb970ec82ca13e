"""End to end, a real router, real Redis and two mock upstreams: an answer the Looper served though its accept check
refused it (escalate, ``on_error: last_attempt``) is never cached (trial 28).

small answers with a low logprob (rejected by ``accept: {confidence: {gte: -0.5}}``); flaky fails, then recovers.
The cached degraded answer used to be served for the whole TTL after flaky came back.
"""
from __future__ import annotations

import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, redis_prefix, router, wait_until, write_config

CHAT = [{"role": "user", "content": "Summarise the quarterly report"}]
ESCALATE = {"type": "escalate", "on_error": "last_attempt",
            "escalate": {"accept": {"confidence": {"method": "avg_logprob", "gte": -0.5}}}}


@pytest.fixture(scope="module")
def small():
    with mock_upstream("--logprob", "-2.0") as proc:
        yield proc


@pytest.fixture(scope="module")
def flaky():
    with mock_upstream("--logprob", "-0.1", "--fail-rate", "1", "--fail-status", "500") as proc:
        yield proc


def metric(url: str, line_start: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in httpx.get(f"{url}/metrics").text.splitlines()
               if line.startswith(line_start))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_degraded_last_attempt_is_served_but_never_cached(small, flaky, tmp_path, stream):
    decision = {"name": "main", "modelRefs": [{"model": "small"}, {"model": "flaky"}], "algorithm": ESCALATE,
                "plugins": [{"type": "response_cache", "configuration": {"enabled": True, "mode": "exact"}}]}
    httpx.post(f"{flaky.url}/_mock/config", json={"fail_rate": 1.0}).raise_for_status()
    with redis_prefix("notaccepted") as prefix:
        doc = config([model("small", f"{small.url}/v1"), model("flaky", f"{flaky.url}/v1")], [decision])
        doc["global"] = {"stores": {"response_cache": {"backend_type": "redis", "prefix": prefix}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)

            def ask() -> httpx.Headers:
                raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT,
                                                                       stream=stream)
                answer = raw.parse()
                if stream:
                    list(answer)
                return raw.headers

            first = ask()
            assert (first["x-vsr-response-path"], first["x-vsr-selected-model"]) == ("looper", "small")
            # The cache writer has seen the answer once it counts it: a skip, not a write.
            wait_until(lambda: metric(proc.url, 'llm_cache_write_skipped_total{reason="not_accepted"}') == 1,
                       "the rejected answer counted as a not_accepted skip")
            assert metric(proc.url, "llm_cache_writes_total") == 0
            httpx.post(f"{flaky.url}/_mock/config", json={"fail_rate": 0.0}).raise_for_status()
            again = ask()
            assert (again["x-vsr-response-path"], again["x-vsr-selected-model"]) == ("looper", "flaky"), \
                "the recovered model answers; the degraded answer was not kept"
