"""A key's token budget under concurrency, and what its refusals say: a real router, a real Redis, the bench mock.

- Concurrent requests reserve their estimated tokens at admission and settle their usage at the end, so a
  burst cannot spend a budget many times over: with every request's reservation covering its usage, the
  requests served use less than the budget plus one request's tokens.
- A budget's 429 says which window refused and when it resets: the ``-tokens`` trio is the budget's, and
  ``x-ratelimit-reset-tokens`` is its Retry-After, on Chat and count_tokens alike.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from .procs import mock_upstream, redis_prefix, router, wait_until, write_config
from .test_e2e_auth import REDIS_URL, auth_doc, sha

BUDGET = 100
KEY = "vsk-budget-" + "b" * 32
CHAT = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory):
    """A router whose key has a daily budget of 100 tokens (and a generous rpm), in front of a mock that takes
    half a second per answer, so a burst is in flight at once."""
    with mock_upstream("--latency-ms", "500", "--content", "ok") as slow, redis_prefix("budget") as prefix:
        doc = auth_doc(slow.url, keys=[{"id": "budgeted", "sha256": sha(KEY),
                                        "limits": {"rpm": 1000, "budget": {"tokens": BUDGET, "period": "day"}}}],
                       store={"backend": "redis", "url": REDIS_URL, "prefix": prefix})
        with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-budget")))) as proc:
            yield proc


def seconds(duration: str) -> int:
    """``x-ratelimit-reset-*`` as OpenAI writes it ("0s", "17s", "1m0s", "8h1m17s") in seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(\d+)s", duration)
    assert m, duration
    h, mins, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mins * 60 + s


def post(proc, path: str = "/v1/chat/completions", body: dict = CHAT) -> httpx.Response:
    return httpx.post(f"{proc.url}{path}", json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=60)


def test_a_burst_does_not_spend_a_budget_many_times_over(budgeted):
    first = post(budgeted)
    assert first.status_code == 200, first.text
    tokens = first.json()["usage"]["total_tokens"]
    assert 0 < tokens < BUDGET // 4, "several requests fit in the budget"
    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(lambda _: post(budgeted), range(40)))
    served = [r for r in answers if r.status_code == 200]
    assert all(r.status_code in (200, 429) for r in answers), [r.status_code for r in answers]
    assert all(r.json()["usage"]["total_tokens"] == tokens for r in served), "identical requests, identical usage"
    spent = tokens * (1 + len(served))
    # Each request reserves at least what the key's earlier requests used, so no more are admitted than the
    # budget holds, plus the one admitted while some of it was left.
    assert spent < BUDGET + tokens, (len(served), tokens)
    assert served, "what the budget holds is served"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages/count_tokens"])
def test_a_budget_refusal_says_which_window_refused_and_its_reset(budgeted, path):
    spend = post(budgeted)
    while spend.status_code == 200:      # whatever the other test left: spend the rest of the day's budget
        spend = post(budgeted)

    def refused() -> httpx.Response | None:
        body = {**CHAT, "max_tokens": 8} if "count_tokens" not in path else {"model": "vsr/auto", **CHAT}
        r = post(budgeted, path, body)
        assert r.status_code == 429, r.text
        # Refused for the budget itself (not for what requests in flight reserved): its reset is the period's end.
        return r if int(r.headers["retry-after"]) > 60 else None

    wait_until(lambda: refused() is not None, "every reservation to settle")
    r = refused()
    assert r is not None
    assert "budget" in r.text
    retry = int(r.headers["retry-after"])
    assert r.headers["x-ratelimit-limit-tokens"] == str(BUDGET)
    assert r.headers["x-ratelimit-remaining-tokens"] == "0"
    assert seconds(r.headers["x-ratelimit-reset-tokens"]) == retry, dict(r.headers)
    # The requests window did not refuse: it says what it has (a place is free), not the budget's wait.
    assert int(r.headers["x-ratelimit-remaining-requests"]) > 0
    assert seconds(r.headers["x-ratelimit-reset-requests"]) <= 60
