"""What a key's token budget and tpm window are charged on every way a request ends: a real router, real Redis
(a prefix of the module's own), the bench mock as the backends, the official SDKs as clients.

A request reserves its estimated tokens at admission and settles to what answers used: an answer's reported
usage (or its text's estimate). A request no backend billed costs nothing: a refusal of the router's own
(validation, a body too large, a routing error), a backend's error answer, a connection refused, a
fast_response and a cache hit. One cut short after it reached a backend (its deadline, its client leaving)
costs its prompt's estimate at least, as the provider bills the prompt; a stream that delivered tokens before
its client left costs what it delivered besides.
"""
from __future__ import annotations

import tempfile
import time

import anthropic
import httpx
import openai
import pytest
import redis

from .procs import Proc, mock_upstream, model, redis_prefix, refused_port, wait_until, write_config
from .test_e2e_auth import REDIS_URL, sha

BUDGET = 100_000
LONG = "x" * 150
PROMPT = -(-(len("late ") + len(LONG)) // 4)  # a cut request's prompt estimate: its text at 4 bytes a token, rounded up
# What each failing request of a case costs: nothing where no backend billed it, its prompt where one may have.
CASES = {"validation": 0, "too_large": 0, "messages_invalid": 0, "backend_400": 0, "all_failed": 0, "fast": 0,
         "cache_hit": 0, "not_allowed": 0, "deadline": PROMPT, "client_left": PROMPT, "looper_deadline": PROMPT}
KEYS = {case: f"vsk-spend-{case}-" + "s" * 32 for case in (*CASES, "repro", "dropped")}
SMALL = {"repro"}       # the trial's key: 200 tokens a day


def _doc(good: str, failing: str, slow: str, prefix: str) -> dict:
    def on(word: str) -> dict:
        return {"operator": "AND", "conditions": [{"type": "keyword", "name": word}]}

    decisions = [
        {"name": "closed", "priority": 10, "rules": on("closed"), "modelRefs": [],
         "plugins": [{"type": "fast_response", "configuration": {"message": "Closed today."}}]},
        {"name": "cached", "priority": 10, "rules": on("cacheme"), "modelRefs": [{"model": "m"}],
         "plugins": [{"type": "response_cache", "configuration": {"ttl_seconds": 300}}]},
        {"name": "reject", "priority": 10, "rules": on("reject"), "modelRefs": [{"model": "m-400"}]},
        {"name": "dead", "priority": 10, "rules": on("dead"), "modelRefs": [{"model": "m-dead"}]},
        {"name": "late", "priority": 10, "rules": on("late"), "modelRefs": [{"model": "m-slow"}],
         "request_timeout_ms": 800},
        {"name": "loop", "priority": 10, "rules": on("loop"), "modelRefs": [{"model": "m-slow"}, {"model": "m"}],
         "algorithm": {"type": "escalate", "escalate": {"accept": {"refusal": False}}}, "request_timeout_ms": 800},
        {"name": "drip", "priority": 10, "rules": on("drip"), "modelRefs": [{"model": "m-slow"}]},
        {"name": "all", "priority": 1, "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "m"}]},
    ]
    keys = [{"id": f"k-{case}", "sha256": sha(key),
             "limits": {"tpm": 1_000_000, "budget": {"tokens": 200 if case in SMALL else BUDGET, "period": "day"}}}
            for case, key in KEYS.items()]
    keys[list(KEYS).index("not_allowed")]["models"] = ["m"]          # routed to m-400 by "reject": refused after routing
    return {
        "version": "v0.5",
        "providers": {"models": [model("m", f"{good}/v1"), model("m-400", f"{failing}/v1"),
                                 model("m-dead", f"http://127.0.0.1:{refused_port()}/v1"),
                                 model("m-slow", f"{slow}/v1")]},
        "recipes": [{"name": "default", "decisions": decisions, "signals": {"keywords": [
            {"name": w, "operator": "OR", "keywords": [w]}
            for w in ("closed", "cacheme", "reject", "dead", "late", "loop", "drip")]}}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "listeners": [{"name": "main", "address": "127.0.0.1", "port": 0}, {"name": "ops", "role": "admin", "port": 0}],
        "global": {"router": {"auth": {"enabled": True, "keys": keys, "store": {
            "backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100}},
            "limits": {"max_body_bytes": 64 * 1024}}},
    }


@pytest.fixture(scope="module")
def spend(tmp_path_factory):
    """(router, its admin URL, the Redis prefix)."""
    with mock_upstream("--content", "ok") as good, \
            mock_upstream("--fail-rate", "1", "--fail-status", "400") as failing, \
            mock_upstream("--latency-ms", "2000", "--chunks", "30", "--chunk-interval-ms", "300") as slow, \
            redis_prefix("key-spend") as prefix:
        path = write_config(_doc(good.url, failing.url, slow.url, prefix), str(tmp_path_factory.mktemp("cfg-spend")))
        with Proc(["-m", "vsr_fast", "serve", "--config", path], "vsr-fast: serving on",
                  env={"VSR_STATE_DIR": tempfile.mkdtemp(prefix="vsr-state-")}) as proc:
            admin = next(line for line in proc.lines if line.startswith("vsr-fast: admin on")).split()[-1]
            yield proc, admin, prefix


def charged(prefix: str, key_id: str) -> tuple[int, int]:
    """What Redis holds for the key: (its budget's tokens this period, its tpm window's tokens)."""
    r = redis.Redis.from_url(REDIS_URL)
    try:
        # The period's budget: each router's share, a field of its hash.
        budget = sum(int(v) for k in r.scan_iter(match=f"{prefix}limit:key:{key_id}:spent:*") for v in r.hvals(k))
        tpm = sum(int(v) for v in r.hgetall(f"{prefix}limit:key:{key_id}:tpm").values())
        return budget, tpm
    finally:
        r.close()


def _oa(proc, case: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEYS[case], max_retries=0, timeout=30)


def _ok(proc, case: str, word: str = "hello") -> int:
    """One answered request; its reported usage."""
    done = _oa(proc, case).chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": word}])
    assert done.usage is not None and done.usage.total_tokens > 0
    return done.usage.total_tokens


def _settled_at(prefix: str, key_id: str, tokens: int) -> tuple[int, int]:
    """(budget, tpm) once the budget holds ``tokens``: the tpm window forgets after 60 s, so a caller compares it
    only over a test known to take less."""
    wait_until(lambda: charged(prefix, key_id)[0] >= tokens, f"{key_id}'s {tokens} tokens to reach Redis")
    return charged(prefix, key_id)


def _fail(proc, case: str) -> None:
    """The request of ``case`` that no model answers, as a client sends it; asserts how it fails."""
    client = _oa(proc, case)
    chat = client.chat.completions
    long_text = LONG
    if case == "validation":
        with pytest.raises(openai.BadRequestError):
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": long_text}], temperature=5)
    elif case == "too_large":
        with pytest.raises(openai.APIStatusError) as info:
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": "y" * 400_000}])
        assert info.value.status_code == 413, info.value.response.text
    elif case == "messages_invalid":
        an = anthropic.Anthropic(base_url=proc.url, api_key=KEYS[case], max_retries=0)
        with pytest.raises(anthropic.BadRequestError):
            an.messages.create(model="vsr/auto", max_tokens=-3, messages=[{"role": "user", "content": long_text}])
    elif case == "backend_400":
        with pytest.raises(openai.BadRequestError):
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": "reject " + long_text}])
    elif case == "all_failed":
        with pytest.raises(openai.APIStatusError) as info:
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": "dead " + long_text}])
        assert info.value.status_code >= 500, info.value.response.text
    elif case == "deadline":
        with pytest.raises(openai.APIStatusError) as info:
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": "late " + long_text}])
        assert info.value.status_code == 504, info.value.response.text
    elif case == "looper_deadline":     # a Looper's call, cut by the deadline as the backend answers
        with pytest.raises(openai.APIStatusError) as info:
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": "loop " + long_text}])
        assert info.value.status_code == 504, info.value.response.text
    elif case == "client_left":       # leaves while the backend is still answering (2 s before its head)
        with pytest.raises(openai.APITimeoutError):
            client.with_options(timeout=1.0).chat.completions.create(
                model="vsr/auto", messages=[{"role": "user", "content": "drip " + long_text}])
    elif case == "fast":
        raw = chat.with_raw_response.create(model="vsr/auto", messages=[{"role": "user", "content": "closed " + long_text}])
        assert raw.headers["x-vsr-response-path"] == "fast_response"
    elif case == "cache_hit":
        raw = chat.with_raw_response.create(model="vsr/auto", messages=[{"role": "user", "content": "cacheme " + long_text}])
        assert raw.headers["x-vsr-response-path"] == "cache", dict(raw.headers)
    elif case == "not_allowed":
        with pytest.raises(openai.PermissionDeniedError):
            chat.create(model="vsr/auto", messages=[{"role": "user", "content": "reject " + long_text}])


@pytest.mark.parametrize("case", CASES)
def test_a_request_no_backend_billed_costs_nothing_one_cut_short_its_prompt(spend, case):
    proc, _, prefix = spend
    key_id = f"k-{case}"
    expected = 0            # the usage of every answer a model gave: all the key is charged
    if case == "cache_hit":
        cache = _oa(proc, case).chat.completions.with_raw_response

        def hit() -> bool:
            nonlocal expected
            raw = cache.create(model="vsr/auto", messages=[{"role": "user", "content": "cacheme " + "x" * 150}])
            if raw.headers["x-vsr-response-path"] == "cache":
                return True
            expected += raw.parse().usage.total_tokens      # a miss: the model answered
            return False
        wait_until(hit, "the answer to be cached")
    expected += _ok(proc, case)
    assert _settled_at(prefix, key_id, expected)[0] == expected
    for _ in range(3):
        _fail(proc, case)
    expected += 3 * CASES[case] + _ok(proc, case)
    assert _settled_at(prefix, key_id, expected)[0] == expected     # the budget only: the case spans waits


def test_the_trials_invalid_requests_do_not_lock_a_key_out(spend):
    """The trial's repro: a 200-token budget, eight invalid requests of 150 bytes (the router's own 400, no
    backend called). Each used to charge its estimate, the sixth left 0 and the next was a 429 for the day."""
    proc, _, prefix = spend
    chat = _oa(proc, "repro").chat.completions
    body = {"model": "vsr/auto", "messages": [{"role": "user", "content": "z" * 90}], "temperature": 5}
    left = []
    for _ in range(8):
        with pytest.raises(openai.BadRequestError) as info:
            chat.create(**body)
        left.append(int(info.value.response.headers["x-ratelimit-remaining-tokens"]))
    assert len(set(left)) == 1, left
    used = _ok(proc, "repro")
    assert _settled_at(prefix, "k-repro", used) == (used, used)


def test_a_stream_its_client_left_costs_what_it_delivered(spend):
    """The tokens a stream delivered before its client left are charged (estimated from its text: the usage
    chunk never came)."""
    proc, _, prefix = spend
    client = _oa(proc, "dropped")
    stream = client.chat.completions.create(model="vsr/auto", stream=True,
                                            messages=[{"role": "user", "content": "drip " + "x" * 400}])
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()
    budget, tpm = _settled_at(prefix, "k-dropped", 1)
    assert budget == tpm and budget >= 100, "the request's text at least (400 bytes at 4 a token)"


def test_the_admin_routes_show_each_keys_spend(spend):
    """LiteLLM's /key/info: the admin list has every key, declared ones included and marked by source, never a
    secret, each with its budget's use this period (and when the period ends) and its tpm window's use; one
    key's answer is at ``GET /api/v1/keys/{id}``."""
    proc, admin, prefix = spend
    made = httpx.post(f"{admin}/api/v1/keys", json={"id": "k-stored", "limits": {
        "rpm": 30, "tpm": 50_000, "budget": {"tokens": 1_000, "period": "hour"}}})
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=key, max_retries=0)
    wait_until(lambda: client.models.with_raw_response.list().http_response.status_code == 200, "the key's arrival")
    used = client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "hi"}]).usage
    assert used is not None
    _settled_at(prefix, "k-stored", used.total_tokens)
    # The day's and month's counts reach Redis with the tally's next flush, apart from the budget: read once there,
    # so the list and the one key's answer below see the same counts.
    wait_until(lambda: httpx.get(f"{admin}/api/v1/keys/k-stored").json()["counts"]["day"]["requests"] == 1,
               "k-stored's request in the tally's counts")

    listed = httpx.get(f"{admin}/api/v1/keys")
    assert listed.status_code == 200, listed.text
    rows = {row["id"]: row for row in listed.json()["keys"]}
    assert key not in listed.text and not any(k in listed.text for k in KEYS.values())
    assert rows["k-validation"]["source"] == "config" and rows["k-stored"]["source"] == "store"
    assert set(rows) >= {f"k-{case}" for case in KEYS} | {"k-stored"}
    one = httpx.get(f"{admin}/api/v1/keys/k-stored")
    assert one.status_code == 200, one.text
    row = one.json()
    assert row == rows["k-stored"]
    assert row["counts"]["month"] == {"requests": 1, "tokens": used.total_tokens}, row["counts"]
    budget = row["usage"]["budget"]
    assert (budget["tokens"], budget["period"], budget["used"]) == (1_000, "hour", used.total_tokens)
    assert budget["remaining"] == 1_000 - used.total_tokens
    # The hour's end (a date), not a wait.
    assert budget["period_end_ms"] % 3_600_000 == 0 and 0 < budget["period_end_ms"] - time.time() * 1000 <= 3_600_000
    assert row["usage"]["tpm"] == {"limit": 50_000, "used": used.total_tokens}
    assert row["usage"]["rpm"] == {"limit": 30, "used": 1}
    assert httpx.get(f"{admin}/api/v1/keys/k-nobody").status_code == 404
    declared = httpx.get(f"{admin}/api/v1/keys/k-dropped").json()
    assert declared["source"] == "config" and declared["usage"]["budget"]["tokens"] == BUDGET
    assert "sha256" in declared and KEYS["dropped"] not in str(declared)
