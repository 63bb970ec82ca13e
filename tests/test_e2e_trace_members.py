"""``x-vsr-trace`` carries what the router knows of a request (spec 5.10): the decision's output modality, what the
tools policy kept and removed, what the prompt_cache plugin did, a cache hit's kind and a semantic hit's
similarity; its members in the registry's priority order, an RFC 8941 dictionary of at most 4 KB. Over real
sockets: a router process, the bench mock upstream, the official SDKs as clients."""
from __future__ import annotations

import http_sf
import openai
import pytest

from vsr_fast.headers.registry import TRACE_MEMBERS

from .procs import model, router, wait_until, write_config
from .test_e2e_semantic_cache import metric

ASKED = "How do I reverse a list in Python?"
PARAPHRASE = "How can I reverse a list in python"
ORDER = [m.name for m in TRACE_MEMBERS]


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def traced(tmp_path_factory, mock):
    models = [{**model("m-an", f"{mock.url}/v1"), "api_format": "anthropic"}, model("m-oa", f"{mock.url}/v1")]
    decisions = [
        {"name": "governed", "priority": 20, "output": {"kind": "text"},
         "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "tools"}]},
         "plugins": [{"type": "tools", "configuration": {"policy": {"mode": "filtered",
                                                                     "allow_tools": ["docs.search"]}}},
                     {"type": "prompt_cache", "configuration": {"enabled": True}}],
         "modelRefs": [{"model": "m-an"}]},
        {"name": "cached", "priority": 10,
         "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "python"}]},
         "plugins": [{"type": "response_cache", "configuration": {"mode": "exact_then_semantic",
                                                                  "ttl_seconds": 300}}],
         "modelRefs": [{"model": "m-oa"}]},
    ]
    doc = {
        "version": "v0.5",
        "listeners": [{"name": "main", "identity": {"trust_headers": True}}],
        "providers": {"models": models},
        "recipes": [{"name": "r", "decisions": decisions, "signals": {"keywords": [
            {"name": "tools", "operator": "OR", "keywords": ["look it up"]},
            {"name": "python", "operator": "OR", "keywords": ["python"]}]}}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "r", "default": True}],
        "global": {"router": {"headers": {"debug": "any"}},
                   "stores": {"event_stream": {"backend": "none"}, "response_cache": {"backend_type": "memory"}}},
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("trace")))) as proc:
        yield proc


def _client(proc) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0, timeout=30,
                         default_headers={"x-vsr-debug": "1", "x-authz-user-id": "alice"})


def _members(trace: str) -> dict:
    """The dictionary as RFC 8941 reads it (a parse error fails the test), in its order."""
    assert len(trace.encode()) <= 4096
    parsed = http_sf.parse(trace.encode(), tltype="dictionary")
    names = list(parsed)
    assert names == sorted(names, key=ORDER.index), f"members out of the registry's order: {names}"
    return parsed


def _strings(member) -> list[str]:
    return [str(item[0]) for item in member[0]]


def test_the_trace_names_the_modality_the_tools_kept_and_removed_and_the_prompt_cache_markers(traced):
    raw = _client(traced).chat.completions.with_raw_response.create(
        model="vsr/auto", tools=[_tool(n) for n in ("docs.search", "admin.delete", "weather")],
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Please look it up."}])
    assert raw.headers["x-vsr-selected-decision"] == "governed"
    members = _members(raw.headers["x-vsr-trace"])
    assert str(members["modality"][0]) == "text"
    assert _strings(members["tools"]) == ["policy filtered: kept 1 of 3, removed admin.delete, weather"]
    said = _strings(members["prompt_cache"])
    assert len(said) == 1 and said[0].startswith("m-an: markers on tools, system"), said


def test_a_cache_hit_says_its_kind_and_a_semantic_one_its_similarity(traced):
    client = _client(traced)
    first = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": ASKED}])
    assert first.headers["x-vsr-response-path"] == "upstream" and "cache" not in _members(first.headers["x-vsr-trace"])
    wait_until(lambda: metric(traced.url, "llm_cache_writes_total") >= 1, "the answer stored")
    again = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": ASKED}])
    assert again.headers["x-vsr-response-path"] == "cache"
    exact = _members(again.headers["x-vsr-trace"])["cache"]
    assert (str(exact[0]), dict(exact[1])) == ("exact", {})
    similar = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": PARAPHRASE}])
    assert similar.headers["x-vsr-response-path"] == "cache"
    kind, params = _members(similar.headers["x-vsr-trace"])["cache"]
    assert str(kind) == "semantic" and 0.5 < float(params["similarity"]) <= 1.0, similar.headers["x-vsr-trace"]
