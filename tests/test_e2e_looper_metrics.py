"""The Looper's escalate, end to end (real router, two mock upstreams, the OpenAI SDK): every call's tokens and
cost reach vsr_tokens_total and vsr_cost_total under its model, whole and streamed, consistent with x-vsr-cost;
and the logprobs the router asks for to judge confidence reach the client only as the client asked for them."""
from __future__ import annotations

import re

import httpx
import pytest

from .procs import wait_for_value
from .test_e2e_looper import (CHAT, CHEAP, DEAR, ESCALATE, REFS, chat, cost_metric, hand_cost, start, stats, two,
                              unsure_and_sure)  # noqa: F401  (a fixture)


def tokens_metric(proc, name: str) -> float:
    text = httpx.get(f"{proc.url}/metrics").text
    return sum(float(v) for v in re.findall(rf'^vsr_tokens_total\{{model="{name}",direction="\w+"\}} (\S+)$',
                                            text, re.M))


def used(mock) -> int:
    u = stats(mock)["usage"]
    return u["input_tokens"] + u["output_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_every_escalate_call_is_counted_under_its_model(tmp_path, unsure_and_sure, stream):
    unsure, sure = unsure_and_sure
    with start(tmp_path, two(unsure, sure), REFS, ESCALATE) as proc:
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
        assert float(headers["x-vsr-cost"]) == pytest.approx(small + large, rel=1e-9)
        # Counted once the answer ended: polled.
        assert wait_for_value(lambda: tokens_metric(proc, "large") or None, "the answer's tokens") == used(sure)
        assert wait_for_value(lambda: tokens_metric(proc, "small") or None, "the rejected call's tokens") == \
            used(unsure)
        assert cost_metric(proc, "main", "small") == pytest.approx(small, rel=1e-9)
        assert cost_metric(proc, "main", "large") == pytest.approx(large, rel=1e-9)


# --- logprobs ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_returns_no_logprobs_the_client_did_not_ask_for(tmp_path, unsure_and_sure, stream):
    unsure, sure = unsure_and_sure
    with start(tmp_path, two(unsure, sure), REFS, ESCALATE) as proc:
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
def test_escalate_returns_the_top_logprobs_the_client_asked_for(tmp_path, unsure_and_sure, stream):
    unsure, sure = unsure_and_sure
    alg = {"type": "escalate", "escalate": {"accept": {"confidence": {"method": "hybrid", "gte": 0.5}}}}
    with start(tmp_path, two(unsure, sure), REFS, alg) as proc:
        client = chat(proc)
        kw = {"model": "vsr/auto", "messages": CHAT, "logprobs": True, "top_logprobs": 1}
        if stream:
            tokens = [t for chunk in client.chat.completions.create(stream=True, **kw) for c in chunk.choices
                      if c.logprobs is not None for t in c.logprobs.content or ()]
        else:
            tokens = client.chat.completions.create(**kw).choices[0].logprobs.content
        assert tokens and all(len(t.top_logprobs) == 1 for t in tokens)
        assert stats(sure)["last_request"]["body"]["top_logprobs"] == 2    # the router's own count, for margin
