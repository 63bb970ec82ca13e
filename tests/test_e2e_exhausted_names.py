"""When every attempt fails, what names the failure names one attempt: the model and backend whose answer the
client got (outside-user trial: the access log, vsr_requests_total and x-vsr-selected-model paired the first
candidate's model with the last backend, ``"model":"openai-gpt-4o","backend":"anthropic"`` for Anthropic's 529)."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from .procs import config, mock_upstream, router, wait_for_value, write_config


def test_the_relayed_answers_model_is_named_with_its_backend(tmp_path):
    with mock_upstream("--fail-rate", "1", "--fail-status", "500") as oa, \
            mock_upstream("--fail-rate", "1", "--fail-status", "529") as an:
        doc = config([{"name": "openai-gpt-4o", "backend_refs": [{"endpoint": f"{oa.url}/v1", "name": "openai"}]},
                      {"name": "claude", "api_format": "anthropic",
                       "backend_refs": [{"endpoint": f"{an.url}/v1", "name": "anthropic"}]}],
                     [{"name": "d", "modelRefs": [{"model": "openai-gpt-4o"}, {"model": "claude"}]}])
        doc["global"] = {"router": {"access_log": {"enabled": True},
                                    "upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.APIStatusError) as caught:
                client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "hi"}])
            assert caught.value.status_code == 529
            assert caught.value.response.headers["x-vsr-selected-model"] == "claude"
            line = wait_for_value(lambda: next((json.loads(x) for x in proc.lines if x.startswith("{")), None),
                                  "an access log line")
            assert (line["model"], line["backend"], line["status"]) == ("claude", "anthropic", 529), line
            metrics = httpx.get(f"{proc.url}/metrics").text
            assert 'model="claude",status="529"}' in metrics
            assert 'model="openai-gpt-4o",status="529"' not in metrics
