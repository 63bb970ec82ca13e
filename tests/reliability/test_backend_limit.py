"""The per-backend pending-request limit (issue 13): past ``max_pending`` a backend is skipped at once, the next
one serves, and with none left the client gets 503 (Anthropic's 529) with Retry-After instead of a queue."""
from __future__ import annotations

import json
import socket

import anthropic
import httpx
import openai
import pytest

from ..procs import config, mock_upstream, router, wait_until, write_config

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def stalled():
    """A backend that takes a minute to answer: every request to it stays pending."""
    with mock_upstream("--latency-ms", "60000") as proc:
        yield proc


@pytest.fixture(scope="module")
def edge(stalled, upstream, tmp_path_factory):
    models = [
        {"name": "held", "backend_refs": [{"endpoint": f"{stalled.url}/v1", "max_pending": 2}]},
        {"name": "held-or-ok", "backend_refs": [{"endpoint": f"{stalled.url}/v1", "max_pending": 1},
                                                {"endpoint": f"{upstream.url}/v1"}]},
    ]
    doc = config(models, [{"name": "only", "modelRefs": [{"model": "held"}]}])
    # The deadline never ends a held request here: the test releases them itself (the client leaves), so a slow
    # machine cannot free a slot before the check that needs it full.
    doc["global"] = {"router": {"limits": {"request_timeout_ms": 120_000}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("limit")))) as proc:
        yield proc


def received(stalled) -> int:
    return httpx.get(f"{stalled.url}/_mock/stats", timeout=10).json()["requests"]


def hold(edge, stalled, model: str, count: int) -> list[socket.socket]:
    """``count`` requests to ``model`` left waiting on the stalled backend, each on a raw connection of its own:
    closing it is the client leaving, which cancels the upstream attempt and frees its slot."""
    before = received(stalled)
    body = json.dumps({"model": model, "messages": MESSAGES}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", edge.port), timeout=30)
        sock.sendall(head + body)
        held.append(sock)
    wait_until(lambda: received(stalled) >= before + count, f"{count} requests pending at the stalled backend")
    return held


def unanswered(held: list[socket.socket]) -> bool:
    """Whether every held request is still waiting: nothing has come back on any of their connections."""
    for sock in held:
        sock.setblocking(False)
        try:
            if sock.recv(1, socket.MSG_PEEK):
                return False
        except BlockingIOError:
            pass
        finally:
            sock.setblocking(True)
    return True


def release(held: list[socket.socket]) -> None:
    for sock in held:
        sock.close()


def test_past_the_limit_the_client_gets_503_with_retry_after_at_once(edge, stalled):
    held = hold(edge, stalled, "held", 2)
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="held", messages=MESSAGES)
    assert caught.value.status_code == 503
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.body["code"] == "backends_busy"
    # The held requests are still waiting on the backend: the 503 did not queue behind them.
    assert unanswered(held)

    claude = anthropic.Anthropic(base_url=edge.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        claude.messages.create(model="held", max_tokens=16, messages=MESSAGES)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert caught.value.response.headers["retry-after"] == "1"
    release(held)

    # The slots came back when the held requests ended: the next ones reach the backend again.
    release(hold(edge, stalled, "held", 2))


def test_a_full_backend_is_skipped_for_the_next_one(edge, stalled):
    held = hold(edge, stalled, "held-or-ok", 1)
    r = httpx.post(f"{edge.url}/v1/chat/completions", json={"model": "held-or-ok", "messages": MESSAGES}, timeout=30)
    assert r.status_code == 200, r.text
    assert unanswered(held)
    assert 'cause="backends_busy"' in httpx.get(f"{edge.url}/metrics").text
    release(held)
