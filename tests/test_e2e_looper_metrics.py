"""The Looper's escalate, end to end (real router, two mock upstreams, the OpenAI SDK): every call's tokens and
cost reach vsr_tokens_total and vsr_cost_total under its model, whole and streamed, consistent with x-vsr-cost;
and the logprobs the router asks for to judge confidence reach the client only as the client asked for them.

The router and mocks of test_e2e_looper's escalate tests serve here too (their own instances, for this module):
a test reads what its request added to the mocks' counters (reset before it) and to the router's metrics."""
from __future__ import annotations

import re

import httpx
import openai
import pytest

from .procs import config, router, wait_for_value, wait_until, write_config
from .test_e2e_auth import REDIS_URL, prefix, sha  # noqa: F401  (prefix: a Redis prefix of the test's own)
from .test_e2e_usage_streams import KEY, _charged as charged
from .test_e2e_looper import (  # noqa: F401  (fixtures: _escalating, escalating, sure, unsure)
    CHAT, CHEAP, DEAR, ESCALATE, REFS, _escalating, chat, cost_metric, escalating, fresh, hand_cost, stats, sure, two,
    unsure)


def tokens_metric(proc, name: str) -> float:
    text = httpx.get(f"{proc.url}/metrics").text
    return sum(float(v) for v in re.findall(rf'^vsr_tokens_total\{{model="{name}",direction="\w+"\}} (\S+)$',
                                            text, re.M))


def used(mock) -> int:
    u = stats(mock)["usage"]
    return u["input_tokens"] + u["output_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_every_escalate_call_is_counted_under_its_model(escalating, unsure, sure, stream):
    proc = escalating       # vsr/auto: ESCALATE over small (unsure), large (sure)
    before = {n: (tokens_metric(proc, n), cost_metric(proc, "main", n)) for n in ("small", "large")}
    client = chat(proc)
    if stream:      # the SDK's default: no stream_options
        with client.chat.completions.with_streaming_response.create(
                model="vsr/auto", messages=CHAT, stream=True) as resp:
            headers, chunks = resp.headers, list(resp.parse())
        assert all(c.usage is None for c in chunks)
    else:
        raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT)
        headers = raw.headers
    assert headers["x-vsr-selected-model"] == "large" and stats(unsure)["requests"] == 1
    small, large = hand_cost(unsure, CHEAP), hand_cost(sure, DEAR)
    assert small > 0 and large > 0
    # Omitted on a streamed answer (spec 5.10): its head leaves before the answer's own cost is known.
    if stream:
        assert "x-vsr-cost" not in headers
    else:
        assert float(headers["x-vsr-cost"]) == pytest.approx(small + large, rel=1e-9)
    # Counted once the answer ended: polled.
    assert wait_for_value(lambda: tokens_metric(proc, "large") - before["large"][0] or None,
                          "the answer's tokens") == used(sure)
    assert wait_for_value(lambda: tokens_metric(proc, "small") - before["small"][0] or None,
                          "the rejected call's tokens") == used(unsure)
    assert cost_metric(proc, "main", "small") - before["small"][1] == pytest.approx(small, rel=1e-9)
    assert cost_metric(proc, "main", "large") - before["large"][1] == pytest.approx(large, rel=1e-9)


# --- logprobs ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_returns_no_logprobs_the_client_did_not_ask_for(escalating, sure, stream):
    proc = escalating       # vsr/auto: ESCALATE over small (unsure), large (sure)
    client = chat(proc)
    if stream:
        chunks = list(client.chat.completions.create(model="vsr/auto", messages=CHAT, stream=True))
        choices = [c for chunk in chunks for c in chunk.choices]
        assert choices and all(c.logprobs is None for c in choices)
    else:
        done = client.chat.completions.create(model="vsr/auto", messages=CHAT)
        assert done.choices[0].logprobs is None
    assert stats(sure)["last_request"]["body"]["logprobs"] is True    # the router read them to judge


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_returns_the_top_logprobs_the_client_asked_for(escalating, sure, stream):
    proc = escalating       # vsr/hybrid: escalate on hybrid confidence gte 0.5 over small (unsure), large (sure)
    client = chat(proc)
    kw = {"model": "vsr/hybrid", "messages": CHAT, "logprobs": True, "top_logprobs": 1}
    if stream:
        tokens = [t for chunk in client.chat.completions.create(stream=True, **kw) for c in chunk.choices
                  if c.logprobs is not None for t in c.logprobs.content or ()]
    else:
        tokens = client.chat.completions.create(**kw).choices[0].logprobs.content
    assert tokens and all(len(t.top_logprobs) == 1 for t in tokens)
    assert stats(sure)["last_request"]["body"]["top_logprobs"] == 2    # the router's own count, for margin


# --- token limits ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_key_tpm_is_charged_every_escalate_call(tmp_path, unsure, sure, prefix, stream):
    """The rejected first answer cost tokens too: a caller's tpm window holds both calls' usage, not only the
    answer it received (the SDK's default stream: no stream_options)."""
    fresh(unsure, sure)
    doc = config(two(unsure, sure), [{"name": "main", "modelRefs": REFS, "algorithm": ESCALATE}])
    doc["global"] = {"router": {"auth": {
        "enabled": True, "keys": [{"id": "metered", "sha256": sha(KEY), "limits": {"tpm": 1_000_000}}],
        "store": {"backend": "redis", "url": REDIS_URL, "prefix": prefix}}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEY, max_retries=0)
        if stream:
            assert list(client.chat.completions.create(model="vsr/auto", messages=CHAT, stream=True))
        else:
            assert client.chat.completions.create(model="vsr/auto", messages=CHAT).choices
        assert stats(unsure)["requests"] == 1 and stats(sure)["requests"] == 1
        both = used(unsure) + used(sure)
        assert used(unsure) > 0 and used(sure) > 0
        wait_until(lambda: charged(prefix) == both, "both calls' usage to reach the tpm window")
