"""x-vsr-response-path ``fallback`` says a later candidate than the first answered (outside-user trial: a recipe
with only ``fallback.modelRefs`` labelled every answer ``fallback``, so the label could not tell a failover);
``vsr_recovered_answers_total`` counts the answers served after a failed attempt, a retry's or a failover's."""
from __future__ import annotations

import re

import httpx
import openai

from .procs import mock_upstream, router, write_config

ASK = [{"role": "user", "content": "hi"}]


def _doc(first: str, second: str) -> dict:
    return {"version": "v0.5",
            "providers": {"models": [{"name": "first", "backend_refs": [{"endpoint": f"{first}/v1"}]},
                                     {"name": "second", "backend_refs": [{"endpoint": f"{second}/v1"}]}]},
            # No decision: the recipe's fallback answers every request.
            "recipes": [{"name": "default", "decisions": [],
                         "fallback": {"modelRefs": [{"model": "first"}, {"model": "second"}]}}],
            "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
            "global": {"router": {"upstream": {"retries": {"max_retries": 0},
                                               "outlier": {"consecutive_failures": 1000}}}}}


def _count(metrics: str, name: str, labels: str) -> float:
    found = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_the_recipes_fallback_is_upstream_until_a_later_candidate_answers(tmp_path):
    with mock_upstream() as first, mock_upstream() as second, \
            router(write_config(_doc(first.url, second.url), str(tmp_path))) as proc:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=ASK)
        assert raw.headers["x-vsr-response-path"] == "upstream"
        assert raw.headers["x-vsr-selected-model"] == "first" and "x-vsr-selected-decision" not in raw.headers
        # The preview says the path the request takes: upstream, as no preview can tell a failover.
        preview = httpx.post(f"{proc.url}/api/v1/routing/preview", json={"model": "vsr/auto", "messages": ASK})
        assert preview.json()["response_path"] == "upstream", preview.text
        metrics = httpx.get(f"{proc.url}/metrics").text
        assert _count(metrics, "vsr_responses_total", 'api="chat",path="upstream"') == 1
        assert _count(metrics, "vsr_recovered_answers_total", 'api="chat",model="first",how="failover"') == 0

        httpx.post(f"{first.url}/_mock/config", json={"fail_rate": 1, "fail_status": 500}).raise_for_status()
        raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=ASK)
        assert raw.headers["x-vsr-response-path"] == "fallback" and raw.headers["x-vsr-selected-model"] == "second"
        metrics = httpx.get(f"{proc.url}/metrics").text
        assert _count(metrics, "vsr_responses_total", 'api="chat",path="fallback"') == 1
        assert _count(metrics, "vsr_recovered_answers_total", 'api="chat",model="second",how="failover"') == 1
