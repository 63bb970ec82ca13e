"""The context plugin's configuration (spec 5.7): each bad form one line with its path and code; the resolved
policy takes each feature's default match and the memory store's recall bounds; injection into each client
format."""
from __future__ import annotations

import pytest

from vsr_fast.plugins import context as cp
from vsr_fast.plugins.match import FEATURES
from vsr_fast.server.pipeline.context import inject, render

from .test_match_config import AT
from .test_plugins_config import doc, errors_of


def strings(value) -> list[str]:
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [s for item in items for s in strings(item)]


def ctx(configuration: dict) -> dict:
    return doc([{"type": "context", "configuration": configuration}])


@pytest.mark.parametrize(("d", "line"), [
    (ctx({"sources": [{"type": "rag"}, {"type": "rag"}]}),
     f"{AT}.sources[1].type: invalid_value: a context block has at most one rag source"),
    (ctx({"sources": [{"type": "memory", "backend": "vectorstore"}]}), f"{AT}.sources[0].backend: invalid_value"),
    (ctx({"sources": [{"type": "rag", "store": {"auto": True}}]}), f"{AT}.sources[0].store: invalid_value"),
    (ctx({"sources": [{"type": "wiki"}]}), f"{AT}.sources[0].type: invalid_value"),
    (ctx({"sources": [{"type": "rag", "backend": "milvus"}]}), f"{AT}.sources[0].backend: invalid_value"),
    (ctx({"sources": [{"type": "rag", "on_failure": "ignore"}]}), f"{AT}.sources[0].on_failure: invalid_value"),
    (ctx({"sources": [{"type": "rag", "match": {}}]}), f"{AT}.sources[0].match: match_empty"),
    (ctx({"sources": [{"type": "memory", "match": {"recall": {"method": "bm25", "top_k": 3}}}]}),
     f"{AT}.sources[0].match.recall.method: invalid_value: context.memory recalls by embedding or no recall, not 'bm25'"),
    (ctx({"sources": [{"type": "rag", "match": {"judge": {"preset": "tool_rank"}}}]}),
     f"{AT}.sources[0].match.judge.preset: invalid_value: context.rag judges with relevance"),
    (ctx({"sources": [{"type": "rag", "match": {"judge": {"max_candidates": 5000}}}]}),
     f"{AT}.sources[0].match.judge.max_candidates: invalid_value: a noul judge reads 1 to 4096 candidates"),
    (ctx({"injection": {"mode": "user_message"}}), f"{AT}.injection.mode: invalid_value"),
    (ctx({"sources": [{"type": "rag"}], "compression": {}}), f"{AT}.compression: unknown_field"),
    (ctx({"compress": {"mode": "sometimes"}}), f"{AT}.compress.mode: invalid_value"),
    (doc([], recipe_plugins=[{"type": "context", "configuration": {"compress": {"signals": {
        "skip_signals": ["jailbreak", "jailbrake"]}}}}]),
     "recipes[default].plugins[0].configuration.compress.signals.skip_signals[1]: invalid_value: 'jailbrake' is "
     "not a signal type"),
    (ctx({"compress": {"signals": {"enabled": True}}}),
     f"{AT}.compress.signals: invalid_value: signals run before a decision is chosen"),
    (ctx({"compress": {"match": {"recall": {"method": "embedding", "top_k": 3}}}}),
     f"{AT}.compress.match.recall.method: invalid_value: context.compress recalls by bm25 or no recall"),
    (ctx({"compress": {"targets": {"tool_outputs": {"min_tokens": 100, "target_tokens": 100}}}}),
     f"{AT}.compress.targets.tool_outputs.target_tokens: invalid_value: an output is compressed from min_tokens"),
    (ctx({"compress": {"budget": {"max_tokens": 100}}}), f"{AT}.compress.budget.max_tokens: invalid_value"),
    (ctx({"compress": {"failure_mode": "fail_soft"}}), f"{AT}.compress.failure_mode: invalid_value"),
])
def test_each_bad_context_form_is_one_line_with_its_path_and_code(d, line):
    lines = errors_of(d)
    assert any(got.startswith(line) for got in lines), lines


def test_the_vector_store_files_must_be_readable(tmp_path):
    d = ctx({"sources": [{"type": "rag"}]})
    d["global"]["stores"] = {"vector_store": {"files": [str(tmp_path / "missing.md")]}}
    assert any(line.startswith("global.stores.vector_store.files[0]: file_unreadable:") for line in errors_of(d))


def test_sources_take_their_feature_defaults_and_the_memory_store_bounds():
    policy = cp.resolve(cp.ContextConfig(sources=[cp.Source(type="rag"), cp.Source(type="memory")]),
                        memory_limit=9, memory_threshold=0.4)
    assert policy is not None and policy.injection == "tool_role" and not policy.writes_memory
    rag, memory = policy.sources
    assert rag.match == FEATURES[cp.RAG].default
    assert (memory.match.recall.top_k, memory.match.recall.min_similarity, memory.match.judge) == (9, 0.4, None)
    assert cp.resolve(cp.ContextConfig(enabled=False, sources=[cp.Source(type="rag")])) is None
    assert cp.resolve(cp.ContextConfig(), None) is None
    written = cp.resolve(cp.ContextConfig(sources=[cp.Source(type="memory", store=cp.MemoryWrite(auto=True))]))
    assert written is not None and written.writes_memory


def test_compress_runs_its_default_match_and_reads_its_budget_from_the_window_or_the_block():
    policy = cp.resolve(cp.ContextConfig(compress=cp.Compress()))
    assert policy is not None and policy.sources == () and policy.compress is not None
    auto = policy.compress
    assert auto.match == FEATURES[cp.COMPRESS].default and not auto.always and not auto.fail_closed
    assert auto.budget([], None) is None, "max_tokens auto with no window: no budget"
    assert auto.budget([32000, 8000], None) == 8000 - cp.DEFAULT_RESERVE_OUTPUT_TOKENS, "the smallest window"
    assert auto.budget([8000], 500) == 7500, "reserve auto: the request's own output limit"
    sized = cp.resolve(cp.ContextConfig(compress=cp.Compress(mode="always", budget=cp.Budget(
        max_tokens=8000, reserve_output_tokens=1000))))
    assert sized is not None and sized.compress is not None and sized.compress.always
    assert sized.compress.budget([100], 50) == 7000, "a written max_tokens wins over the window"
    assert cp.resolve(cp.ContextConfig(compress=cp.Compress(budget=cp.Budget(max_tokens=8000)))).compress.budget(
        [], 500) == 8000, "a written max_tokens is the input's budget: reserve auto reserves nothing from it"


TOOL = [{"name": "t"}]     # the client's tools, as little of them as injection reads


@pytest.mark.parametrize(("fmt", "body", "roles"), [
    ("openai", {"tools": TOOL, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                                            {"role": "assistant", "content": "prefill"}]},
     ["system", "user", "assistant", "tool", "assistant"]),
    ("anthropic", {"tools": TOOL, "messages": [{"role": "user", "content": "q"}]}, ["user", "assistant", "user"]),
    ("responses", {"tools": TOOL, "input": "q"}, ["user", "function_call", "function_call_output"]),
])
def test_tool_role_injection_follows_the_last_user_message_in_each_format(fmt, body, roles):
    assert inject(body, fmt, "rag", render("rag", ["chunk one", "chunk two"]), "tool_role") == "tool_role"
    items = body.get("messages") or body["input"]
    assert [m.get("role") or m.get("type") for m in items] == roles
    assert any("[1] chunk one\n\n[2] chunk two" in text for text in strings(items))


@pytest.mark.parametrize(("fmt", "body"), [
    ("openai", {"messages": [{"role": "user", "content": "q"}], "tools": []}),
    ("anthropic", {"messages": [{"role": "user", "content": "q"}]}),
    ("responses", {"input": "q"}),
])
def test_tool_role_injection_into_a_request_without_tools_goes_in_the_system_prompt(fmt, body):
    """A tool exchange in a request that defines no tools is a 400 at Anthropic and Bedrock."""
    mode = inject(body, fmt, "rag", render("rag", ["chunk one"]), "tool_role")
    assert mode == "system_prompt: the request declares no tools"
    assert "vsr_context" not in str(body)
    system = {"openai": lambda: body["messages"][0]["content"], "anthropic": lambda: body["system"],
              "responses": lambda: body["instructions"]}[fmt]()
    assert "[1] chunk one" in system


def test_system_prompt_injection_keeps_the_callers_prompt():
    body = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}]}
    inject(body, "openai", "memory", render("memory", ["User: I like teal"]), "system_prompt")
    assert [m["role"] for m in body["messages"]] == ["system", "system", "user"]
    assert "I like teal" in body["messages"][0]["content"] and body["messages"][1]["content"] == "be brief"


def test_documents_are_cut_at_the_coarsest_break_that_fits():
    from vsr_fast.events.vector_store import chunks_of
    text = "First paragraph, one line.\n\nSecond paragraph. It has two sentences.\n\n" + "word " * 60
    pieces = chunks_of(text, 100)
    assert pieces[0] == "First paragraph, one line.\nSecond paragraph. It has two sentences."
    assert all(len(p) <= 100 for p in pieces) and "".join(pieces).replace("\n", "").replace(" ", "") == \
        text.replace("\n", "").replace(" ", "")
    assert chunks_of("x" * 250, 100) == ["x" * 100, "x" * 100, "x" * 50]
    assert chunks_of("  ", 100) == []
