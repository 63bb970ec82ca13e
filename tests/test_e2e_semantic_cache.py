"""End to end, real router subprocesses and the openai SDK: the semantic response cache (spec 5.4, 5.7).

A paraphrase of a cached request is served from the cache; an unrelated request, a polarity flip and a
request of another user (scope: user) or another decision's parameters are not. Two routers sharing Redis
serve each other's entries: each follows the other's writes through the semantic stream.
"""
from __future__ import annotations

import uuid

import anthropic
import httpx
import openai
import pytest
import redis

from .procs import router, wait_until, write_config

ASKED = "How do I reverse a list in Python?"
PARAPHRASE = "How can I reverse a list in python"
UNRELATED = "Tell me about the history of Rome"
ENABLE = "How do I enable two-factor authentication on my account?"
DISABLE = "How do I disable two-factor authentication on my account?"


def config(mock_url: str, *, store: dict, events: dict | None = None, mode: str = "semantic") -> dict:
    return {
        "version": "v0.5",
        "listeners": [{"name": "main", "identity": {"trust_headers": True}}],
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"plugins": [{"type": "response_cache", "configuration": {"mode": mode, "ttl_seconds": 300}}],
                   "stores": {"event_stream": events or {"backend": "none"}, "response_cache": store}},
    }


def ask(url: str, text: str, user: str = "alice", **extra):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=20,
                           default_headers={"x-authz-user-id": user})
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": text}], **extra)
    raw.parse()
    return raw.headers


def ask_streamed(url: str, text: str, user: str = "alice") -> tuple[str, str]:
    """The response path and the text of a streamed Chat request."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=20,
                           default_headers={"x-authz-user-id": user})
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": text}], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    return raw.headers["x-vsr-response-path"], text


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{") and line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def metric_sum(url: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in httpx.get(f"{url}/metrics").text.splitlines()
               if line.startswith(prefix))


def stored(url: str, n: int) -> None:
    wait_until(lambda: metric(url, "llm_cache_writes_total") >= n, f"{n} answers stored")


def test_a_paraphrase_hits_an_unrelated_request_or_a_polarity_flip_or_another_user_does_not(mock, tmp_path):
    with router(write_config(config(mock.url, store={"backend_type": "memory"}), str(tmp_path))) as proc:
        assert ask(proc.url, ASKED)["x-vsr-response-path"] == "upstream"
        stored(proc.url, 1)
        hit = ask(proc.url, PARAPHRASE)
        assert hit["x-vsr-response-path"] == "cache"
        path, text = ask_streamed(proc.url, PARAPHRASE)
        assert path == "cache" and text, "a streamed request is served the whole answer's entry (trial 28)"
        assert ask(proc.url, UNRELATED)["x-vsr-response-path"] == "upstream"
        assert ask(proc.url, PARAPHRASE, user="bob")["x-vsr-response-path"] == "upstream", "scope user: no leak"
        assert ask(proc.url, PARAPHRASE, temperature=0.3)["x-vsr-response-path"] == "upstream", \
            "other parameters: another partition"
        assert ask(proc.url, ENABLE)["x-vsr-response-path"] == "upstream"
        stored(proc.url, 5)
        assert ask(proc.url, DISABLE)["x-vsr-response-path"] == "upstream", "the polarity check dropped it"
        assert metric_sum(proc.url, 'vsr_match_recall_total{feature="response_cache.semantic"') >= 6
        assert metric_sum(proc.url, 'vsr_match_judge_total{feature="response_cache.semantic",outcome="ok"}') >= 1
        assert metric_sum(proc.url, 'vsr_match_stage_duration_seconds_count{feature="response_cache.semantic"') >= 1


def test_exact_mode_never_serves_a_paraphrase(mock, tmp_path):
    with router(write_config(config(mock.url, store={"backend_type": "memory"}, mode="exact"), str(tmp_path))) as proc:
        ask(proc.url, ASKED)
        stored(proc.url, 1)
        assert ask(proc.url, ASKED)["x-vsr-response-path"] == "cache"
        assert ask(proc.url, PARAPHRASE)["x-vsr-response-path"] == "upstream"


@pytest.fixture
def prefix():
    name = f"vsr-test:{uuid.uuid4().hex}:semcache:"
    yield name
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    for key in r.scan_iter(f"{name}*"):
        r.delete(key)


def test_two_routers_sharing_redis_serve_each_others_entries(mock, tmp_path, prefix):
    store = {"backend_type": "redis", "prefix": prefix}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with router(write_config(config(mock.url, store=store), str(tmp_path / "a"))) as one, \
            router(write_config(config(mock.url, store=store), str(tmp_path / "b"))) as two:
        assert ask(one.url, ASKED)["x-vsr-response-path"] == "upstream"
        stored(one.url, 1)
        assert ask(two.url, PARAPHRASE)["x-vsr-response-path"] == "cache", "router two followed router one's write"
        assert ask(two.url, PARAPHRASE, user="bob")["x-vsr-response-path"] == "upstream"
        assert ask(two.url, ENABLE)["x-vsr-response-path"] == "upstream"
        stored(two.url, 2)
        assert ask(one.url, "How can I enable two-factor authentication for my account?")[
            "x-vsr-response-path"] == "cache"
        assert ask(one.url, DISABLE)["x-vsr-response-path"] == "upstream"


def test_a_request_about_another_country_is_not_served_the_cached_answer(mock, tmp_path, prefix):
    """An outside user asked about Austria after Australia's answer was cached and got Australia's answer."""
    with router(write_config(config(mock.url, store={"backend_type": "redis", "prefix": prefix}),
                             str(tmp_path))) as proc:
        assert ask(proc.url, "What is the capital of Australia?")["x-vsr-response-path"] == "upstream"
        stored(proc.url, 1)
        assert ask(proc.url, "What's the capital of Australia?")["x-vsr-response-path"] == "cache", \
            "a paraphrase still hits"
        assert ask(proc.url, "What is the capital of Austria?")["x-vsr-response-path"] == "upstream"


# Trial 28: the same words, another direction; each was served the first one's answer.
REVERSALS = [("find flights from London to Paris tomorrow", "find flights from Paris to London tomorrow"),
             ("convert 100 USD to EUR", "convert 100 EUR to USD"),
             ("translate hello from English to French", "translate hello from French to English")]


def test_a_reversed_request_is_not_served_the_cached_answer(mock, tmp_path, prefix):
    """The default match block (no ``semantic`` block): recall and the judge both read words, not their order, so
    the order check before the judge drops a reversal; a paraphrase keeping the direction still hits."""
    with router(write_config(config(mock.url, store={"backend_type": "redis", "prefix": prefix}),
                             str(tmp_path))) as proc:
        for n, (cached, reversed_) in enumerate(REVERSALS, 1):
            assert ask(proc.url, cached)["x-vsr-response-path"] == "upstream"
            stored(proc.url, n)
            assert ask(proc.url, reversed_)["x-vsr-response-path"] == "upstream", reversed_
        assert ask(proc.url, "Find me flights tomorrow from London to Paris")["x-vsr-response-path"] == "cache"


def test_a_malformed_cache_entry_is_skipped_and_counted_never_a_500(mock, tmp_path, prefix):
    """Entries another writer (or an operator) left in the semantic stream, and a stored answer overwritten with
    garbage: skipped and counted, the lookup that meets a stored one a miss. An entry of another embedding model's
    size is skipped uncounted (after a model change every old one is)."""
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    r.xadd(f"{prefix}semantic", {"v": "abc"})
    r.xadd(f"{prefix}semantic", {"foo": "bar"})
    r.xadd(f"{prefix}semantic", {"p": "x", "k": "y", "t": "z", "ttl": "soon", "v": b"\0" * 8})
    # Well formed, of another embedding model's size (the model changed): skipped, not counted.
    r.xadd(f"{prefix}semantic", {"p": "x", "k": "y", "t": "z", "ttl": "60", "v": b"\0" * 8})
    with router(write_config(config(mock.url, store={"backend_type": "redis", "prefix": prefix}),
                             str(tmp_path))) as proc:
        assert ask(proc.url, ASKED)["x-vsr-response-path"] == "upstream"
        stored(proc.url, 1)
        assert ask(proc.url, PARAPHRASE)["x-vsr-response-path"] == "cache", "the good entry after the bad ones"
        assert metric(proc.url, "vsr_response_cache_undecodable_total") == 3
        answers = [k for k in r.scan_iter(f"{prefix}*") if r.type(k) == b"string"]
        assert answers
        for key in answers:
            r.set(key, b"garbage")
        assert ask(proc.url, ASKED)["x-vsr-response-path"] == "upstream", "a stored answer unreadable: a miss"
        assert metric(proc.url, "vsr_response_cache_undecodable_total") == 4
    r.close()


# Cached request, then a request of the same words that asks for another command (the outside trial's pairs).
TOOL_PAIRS = [("Show the files in the dist folder using Bash.", "Delete the files in the dist folder using Bash."),
              ("Run the unit tests with Bash.", "Skip the unit tests and push to main with Bash."),
              ("Print the contents of app.yaml using Bash.", "Print the contents of prod-secrets.yaml using Bash.")]
BASH = {"name": "Bash", "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


def call_bash(url: str, text: str):
    """A Messages request offering Bash, which the mock calls (tool_choice any): the answer is a tool call."""
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=20,
                                 default_headers={"x-authz-user-id": "alice"})
    raw = client.messages.with_raw_response.create(model="auto", max_tokens=200, tools=[BASH],
                                                   tool_choice={"type": "any"},
                                                   messages=[{"role": "user", "content": text}])
    assert raw.parse().stop_reason == "tool_use"
    return raw.headers["x-vsr-response-path"]


def test_an_answer_that_calls_a_tool_is_served_again_only_to_the_same_request(mock, tmp_path):
    """The default exact_then_semantic mode: a cached tool call runs a command, so a request of near words that
    asks for another one (delete for show, another file) must reach the model; the same request still hits."""
    doc = config(mock.url, store={"backend_type": "memory"}, mode="exact_then_semantic")
    doc["providers"]["models"][0]["api_format"] = "anthropic"      # the mock honours tool_choice any there
    with router(write_config(doc, str(tmp_path))) as proc:
        for n, (cached, other) in enumerate(TOOL_PAIRS, 1):
            assert call_bash(proc.url, cached) == "upstream"
            stored(proc.url, 2 * n - 1)
            assert call_bash(proc.url, other) == "upstream", f"{other!r} was served {cached!r}'s tool call"
            stored(proc.url, 2 * n)
        assert call_bash(proc.url, TOOL_PAIRS[0][0]) == "cache", "an exact repeat is the same request"
