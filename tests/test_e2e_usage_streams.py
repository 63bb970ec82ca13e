"""What a streamed answer is charged, end to end: a real router, the mock upstream, a real Redis, the SDKs.

A Chat client that streams without ``stream_options`` (what the OpenAI SDK sends by default) is charged the
answer's real usage: the router asks an openai-format backend for it and drops the usage-only chunk from
what the client receives. Every other client/backend pair is charged the usage its stream reports. A model
with ``stream_usage: false`` is not asked; its streams are estimated from their text, never their framing.
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest
import redis

from .procs import config, mock_upstream, model, router, wait_for_value, wait_until, write_config
from .test_e2e_auth import REDIS_URL, prefix, sha  # noqa: F401  (prefix: a Redis prefix of the test's own)

KEY = "vsk-usage-" + "u" * 32
CANNED = "Hello! This is a canned answer from the mock upstream."
PRICE = {"input": 0.5, "output": 1.5}
HI = [{"role": "user", "content": "hi"}]


def _start(tmp_path, up, prefix, **openai_extra):
    models = [{**model(f"m-{fmt}", f"{up.url}/v1"), "api_format": fmt, "pricing": PRICE}
              for fmt in ("openai", "anthropic", "responses")]
    models[0].update(openai_extra)
    doc = config(models, [{"name": "d", "modelRefs": [{"model": "m-openai"}]}])
    doc["global"] = {"router": {
        "auth": {"enabled": True, "keys": [{"id": "metered", "sha256": sha(KEY),
                                             "limits": {"tpm": 1_000_000}, "admin": True}],
                 "store": {"backend": "redis", "url": REDIS_URL, "prefix": prefix}},
        "access_log": {"enabled": True}}}
    return router(write_config(doc, str(tmp_path)))


def _charged(prefix: str) -> int:
    r = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(int(v) for v in r.hvals(f"{prefix}limit:key:metered:tpm"))
    finally:
        r.close()


def _mock_tokens(up) -> int:
    u = httpx.get(f"{up.url}/_mock/stats").json()["usage"]
    return u["input_tokens"] + u["output_tokens"]


def _metric(proc, name: str, labels: str) -> float:
    m = re.search(rf'^{name}\{{{re.escape(labels)}\}} (\S+)$', httpx.get(f"{proc.url}/metrics", headers={"authorization": f"Bearer {KEY}"}).text, re.M)
    return float(m.group(1)) if m else 0.0


def test_a_chat_stream_without_include_usage_is_charged_its_real_usage(tmp_path, prefix):
    with mock_upstream() as up, _start(tmp_path, up, prefix) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        chunks = list(client.chat.completions.create(model="vsr/auto", stream=True, messages=HI))
        # The client sees what the backend would have sent it: no usage, no usage-only chunk.
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == CANNED
        assert all(c.usage is None and c.choices for c in chunks)
        asked = httpx.get(f"{up.url}/_mock/stats").json()["last_request"]["body"]
        assert asked["stream_options"] == {"include_usage": True}, "the router asks the backend for usage"
        wait_until(lambda: _charged(prefix) == _mock_tokens(up), "the real usage to reach the tpm window")

        # Byte for byte: the backend's stream less its usage chunk.
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"}, timeout=30,
                       json={"model": "vsr/auto", "stream": True, "messages": HI})
        sent = httpx.get(f"{up.url}/_mock/last_stream").content
        events = [e for e in sent.split(b"\n\n") if e and not (b'"choices":[]' in e and b'"usage"' in e)]
        assert len(events) == len([e for e in sent.split(b"\n\n") if e]) - 1
        assert r.content == b"\n\n".join(events) + b"\n\n"
        total = _mock_tokens(up)
        wait_until(lambda: _charged(prefix) == total, "the second answer's usage to reach the tpm window")

        wait_until(lambda: len([x for x in proc.lines if x.startswith("{")]) == 2, "two access log lines")
        logged = [json.loads(x) for x in proc.lines if x.startswith("{")]
        assert sum(e["input_tokens"] + e["output_tokens"] for e in logged) == total
        tokens = sum(_metric(proc, "vsr_tokens_total", f'model="m-openai",direction="{d}"')
                     for d in ("input", "output"))
        assert tokens == total
        u = httpx.get(f"{up.url}/_mock/stats").json()["usage"]
        cost = (u["input_tokens"] * PRICE["input"] + u["output_tokens"] * PRICE["output"]) / 1e6
        assert wait_for_value(lambda: _metric(proc, "vsr_cost_total", 'decision="d",model="m-openai",currency="USD"')
                              or None, "the cost metric") == pytest.approx(cost, rel=1e-9)


def test_every_client_and_backend_pair_is_charged_the_streams_usage(tmp_path, prefix):
    with mock_upstream() as up, _start(tmp_path, up, prefix) as proc:
        oa = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        an = anthropic.Anthropic(base_url=proc.url, api_key=KEY, max_retries=0)
        for backend in ("openai", "anthropic", "responses"):
            name = f"m-{backend}"
            list(oa.chat.completions.create(model=name, stream=True, messages=HI))
            wait_until(lambda: _charged(prefix) == _mock_tokens(up), f"chat <- {backend}: the stream's usage")
            with an.messages.stream(model=name, max_tokens=64, messages=HI) as s:
                assert s.get_final_text() == CANNED
            wait_until(lambda: _charged(prefix) == _mock_tokens(up), f"messages <- {backend}: the stream's usage")
            list(oa.responses.create(model=name, stream=True, input="hi"))
            wait_until(lambda: _charged(prefix) == _mock_tokens(up), f"responses <- {backend}: the stream's usage")


def test_a_model_not_asked_for_usage_is_estimated_from_the_text(tmp_path, prefix):
    with mock_upstream() as up, _start(tmp_path, up, prefix, stream_usage=False) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        chunks = list(client.chat.completions.create(model="vsr/auto", stream=True, messages=HI))
        assert all(c.usage is None for c in chunks)
        assert "stream_options" not in httpx.get(f"{up.url}/_mock/stats").json()["last_request"]["body"]
        # Four bytes a token of the request's text and the answer's (each rounded up, as the access log shows
        # them), never the JSON around them.
        wait_until(lambda: _charged(prefix) == -(-len("hi") // 4) + -(-len(CANNED) // 4),
                   "the estimate to reach the window")


def test_an_estimate_counts_every_text_the_request_carries_to_the_model(tmp_path, prefix):
    """Tool definitions (legacy functions too), earlier calls' arguments (tool_calls and the legacy function_call)
    and a response_format's schema are read by the model like the messages: an estimate that left them out
    under-charged a request carrying its bulk there (a 400 KB schema counted as ~2 tokens)."""
    bulk = {name: "x" * 40_000 for name in ("desc", "args", "legacy", "schema")}
    with mock_upstream() as up, _start(tmp_path, up, prefix, stream_usage=False) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        list(client.chat.completions.create(
            model="vsr/auto", stream=True,
            functions=[{"name": "f", "description": bulk["desc"], "parameters": {"type": "object"}}],
            response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": {
                "type": "object", "description": bulk["schema"]}}},
            messages=[{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": None,
                       "function_call": {"name": "f", "arguments": json.dumps({"a": bulk["legacy"]})}},
                      {"role": "function", "name": "f", "content": "ok"},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "c1", "type": "function", "function": {"name": "f",
                                                                        "arguments": json.dumps({"a": bulk["args"]})}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                      {"role": "user", "content": "hi"}]))
        # Each 40 KB text is 10 000 tokens at four bytes a token: all four counted, the JSON around them a little.
        wait_until(lambda: _charged(prefix) > 0, "the estimate to reach the window")
        assert 40_000 <= _charged(prefix) < 41_000, _charged(prefix)
