"""What a key is charged is what the access log shows, on answers the client never read whole: a real router, a
real Redis (a prefix of the module's own), the bench mock and the fake System One as real HTTP servers, the OpenAI
SDK and httpx as clients.

- A whole answer the response guard blocks was billed by its provider: the key's budget is charged its usage, and
  the access log's line shows it (not estimated), as a blocked stream's does.
- A client that leaves before the first byte of a slow backend's answer is charged its prompt's estimate, and the
  499 line shows that estimate, marked ``usage_estimated``, as a mid-stream disconnect's does.
"""
from __future__ import annotations

import json

import httpx
import openai
import pytest
import redis

from .procs import mock_upstream, redis_prefix, router, wait_for_value, wait_until, write_config
from .test_e2e_auth import REDIS_URL, sha
from .test_e2e_guard import RULES, UNSAFE, answer_with, guard_config, set_rules

KEY = "vsk-charged-" + "c" * 32
SLOW_KEY = "vsk-charged-slow-" + "c" * 32


@pytest.fixture(scope="module")
def charged_router(mock, fake, tmp_path_factory):
    """(router, prefix): the guard's configuration with keys on, a budget each, the access log in JSON, and one
    more entrypoint on a backend that waits 3 s before its head."""
    with mock_upstream("--latency-ms", "3000") as slow, redis_prefix("charged") as prefix:
        doc = guard_config(mock.url, fake.url)
        doc["providers"]["models"].append({"name": "slow-model", "backend_refs": [{"endpoint": f"{slow.url}/v1"}]})
        doc["recipes"].append({"name": "slow", "decisions": [
            {"name": "slow", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "slow-model"}]}]})
        doc["entrypoints"].append({"model_names": ["slow"], "recipe": "slow"})
        budget = {"budget": {"tokens": 1_000_000, "period": "day"}}
        doc["global"]["router"]["auth"] = {"enabled": True, "store": {"backend": "redis", "url": REDIS_URL,
                                                                      "prefix": prefix},
                                           "keys": [{"id": "guarded", "sha256": sha(KEY), "limits": budget},
                                                    {"id": "leaver", "sha256": sha(SLOW_KEY), "limits": budget}]}
        doc["global"]["router"]["access_log"] = {"enabled": True, "format": "json"}
        with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-charged")))) as proc:
            yield proc, prefix


def budget_used(prefix: str, key_id: str) -> int:
    r = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(int(v) for k in r.scan_iter(match=f"{prefix}limit:key:{key_id}:spent:*") for v in r.hvals(k))
    finally:
        r.close()


def access_line(proc, request_id: str) -> dict:
    def found():
        for line in proc.lines:
            if line.startswith("{") and request_id in line:
                doc = json.loads(line)
                if doc.get("request_id") == request_id:
                    return doc
        return None
    return wait_for_value(found, f"the access log line of {request_id}")


def test_a_blocked_whole_answer_is_charged_and_logged_as_billed(charged_router, mock, fake):
    proc, prefix = charged_router
    set_rules(fake, RULES)
    answer_with(mock, UNSAFE)
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
    messages = [{"role": "user", "content": "Tell me how (blocked, charged)."}]
    with client.chat.completions.with_streaming_response.create(
            model="guard-chat", messages=messages, stream=True, extra_headers={"x-request-id": "blocked-stream"}) as s:
        assert s.headers["x-vsr-response-path"] == "blocked"
        s.read()
    streamed = access_line(proc, "blocked-stream")
    assert streamed["input_tokens"] > 0 and streamed["output_tokens"] > 0 and not streamed.get("usage_estimated")
    tokens = streamed["input_tokens"] + streamed["output_tokens"]
    wait_until(lambda: budget_used(prefix, "guarded") == tokens, "the blocked stream's usage to reach Redis")

    with pytest.raises(openai.PermissionDeniedError) as caught:
        client.chat.completions.create(model="guard-chat", messages=messages,
                                       extra_headers={"x-request-id": "blocked-whole"})
    assert caught.value.response.headers["x-vsr-response-path"] == "blocked"
    whole = access_line(proc, "blocked-whole")
    # The mock's usage (the stream's input counts its framing too): reported, so not estimated.
    assert whole["status"] == 403 and not whole.get("usage_estimated"), whole
    assert whole.get("input_tokens", 0) > 0 and whole.get("output_tokens") == streamed["output_tokens"], whole
    billed = tokens + whole["input_tokens"] + whole["output_tokens"]
    wait_until(lambda: budget_used(prefix, "guarded") == billed, "the blocked answer's usage to reach Redis")


def test_a_client_gone_before_the_first_byte_is_logged_with_what_it_was_charged(charged_router):
    proc, prefix = charged_router
    text = "y" * 400
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{proc.url}/v1/chat/completions", timeout=httpx.Timeout(30, read=1.0),
                   headers={"authorization": f"Bearer {SLOW_KEY}", "x-request-id": "gone-early"},
                   json={"model": "slow", "messages": [{"role": "user", "content": text}]})
    line = access_line(proc, "gone-early")
    assert line["status"] == 499 and line.get("usage_estimated") is True, line
    assert line.get("output_tokens") == 0 and line.get("input_tokens") == len(text) // 4, line
    wait_until(lambda: budget_used(prefix, "leaver") == line["input_tokens"], "the prompt's charge to reach Redis")
