"""A streamed answer gives its upstream connection back: the router reads the end of the backend's body after the
stream's terminator (bounded), so sequential streams, Chat and translated alike, ride one keep-alive connection
instead of a connect each (a closed connection per stream once cost ~40 % more CPU per streamed request)."""
from __future__ import annotations

import anthropic
import httpx
import openai

from .procs import config, mock_upstream, model, router, write_config

HI = [{"role": "user", "content": "hi"}]


def _connections(up, stats: httpx.Client) -> int:
    """Connections the mock accepted (the test's own stats reads ride one kept-alive connection)."""
    return stats.get(f"{up.url}/_mock/stats").json()["connections"]


def test_sequential_streams_reuse_one_upstream_connection(tmp_path):
    with mock_upstream() as up, httpx.Client() as stats:
        models = [{**model(f"m-{fmt}", f"{up.url}/v1"), "api_format": fmt} for fmt in ("openai", "anthropic")]
        doc = config(models, [{"name": "d", "modelRefs": [{"model": "m-openai"}]}])
        with router(write_config(doc, str(tmp_path))) as proc:
            oa = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="none")
            an = anthropic.Anthropic(base_url=proc.url, api_key="none")
            before = _connections(up, stats)
            for _ in range(6):
                text = "".join(c.choices[0].delta.content or "" for c in
                               oa.chat.completions.create(model="m-openai", messages=HI, stream=True) if c.choices)
                assert text.startswith("Hello")
            assert _connections(up, stats) - before == 1      # the first stream opened it; the other five reused it
            before = _connections(up, stats)
            for _ in range(6):
                with an.messages.stream(model="m-anthropic", max_tokens=64, messages=HI) as stream:
                    assert "".join(stream.text_stream).startswith("Hello")
            assert _connections(up, stats) - before == 1
