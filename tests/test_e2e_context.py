"""End to end, real router subprocesses, the openai SDK and the mock provider's log: the context plugin (spec 5.7).

RAG: a request about a document in the vector store reaches the provider with that document's chunks
injected (a tool exchange after the last user message where the request declares tools, else the system
prompt); a judge whose max_candidates
is below the recall count reads only the first ones, counts the truncation and notes it in the trace.
Memory: what a user said in one turn reaches the provider in that user's next turn, never in another
user's; an anonymous caller has none.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import httpx
import openai
import pytest
import redis
import yaml

from .procs import config as recipe_config
from .procs import model, refused_port, router, wait_until, write_config
from .provider_rules import problems
from .test_e2e_semantic_cache import metric, metric_sum, prefix  # noqa: F401  (prefix: a fixture)

ESPRESSO = """# The Aurora-7 espresso machine

Descale the Aurora-7 every 40 days with the citric descaler that ships in the box. Run three tanks of clean
water through the group head afterwards.

The Aurora-7's boiler holds 1.2 litres and reaches brewing temperature in 90 seconds.
"""
OTHERS = {
    "garden.md": "Tomatoes want six hours of sun a day and deep watering twice a week in summer.",
    "bikes.md": "Check a road bike's tyre pressure weekly; 80 psi suits most riders on 28 mm tyres.",
    "taxes.md": "Quarterly estimated taxes are due in April, June, September and January.",
    "piano.md": "Tune an upright piano twice a year, after the heating season starts and after it ends.",
}
QUESTION = "How often should I descale my Aurora-7 espresso machine?"
WEATHER = {"name": "weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
FUNCTION = {"type": "function", "function": {"name": WEATHER["name"], "description": WEATHER["description"],
                                             "parameters": WEATHER["input_schema"]}}


def config(mock_url: str, context: dict, *, stores: dict | None = None) -> dict:
    doc = {
        "version": "v0.5",
        "listeners": [{"name": "main", "identity": {"trust_headers": True}}],
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}],
                                                 "plugins": [{"type": "context", "configuration": context}]}]}],
        "global": {"stores": {"event_stream": {"backend": "none"}, **(stores or {})}},
    }
    return doc


def ask(url: str, text: str, user: str | None = "alice", history: list | None = None, tools: list | None = None,
        model_name: str = "auto"):
    headers = {"x-vsr-debug": "1", **({"x-authz-user-id": user} if user else {})}
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30, default_headers=headers)
    raw = client.chat.completions.with_raw_response.create(
        model=model_name, messages=[*(history or []), {"role": "user", "content": text}],
        **({"tools": tools} if tools else {}))
    raw.parse()
    return raw.headers


def sent(mock) -> list[dict]:
    """The messages of the last request the mock provider received."""
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]["messages"]


def documents(tmp_path) -> list[str]:
    paths = []
    for name, text in {"aurora.md": ESPRESSO, **OTHERS}.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    return paths


RAG_STORED = {"sources": [{"type": "rag", "backend": "vectorstore"}]}     # the default match: recall, then judge
RAG_JUDGE = {"sources": [{"type": "rag", "match": {
    "recall": {"method": "bm25", "top_k": 5, "min_similarity": 0},
    "judge": {"preset": "relevance", "max_candidates": 2, "min_score": 0}}}]}
RAG_TOP1 = {"sources": [{"type": "rag", "match": {"recall": {"method": "bm25", "top_k": 1}}}]}
MODES = ("skip", "warn", "block")
OPERATOR = "You are ACME's helpful assistant."
# Decisions whose system_prompt replaces the caller's, by their context's injection mode.
REPLACED = {"replaced": {}, "replaced-system": {"injection": {"mode": "system_prompt"}}}


def compress_context(mode: str) -> dict:
    compress = {"mode": mode, "targets": {"tool_outputs": {"min_tokens": 200, "target_tokens": 40}}}
    if mode == "auto":
        compress["budget"] = {"max_tokens": 256, "reserve_output_tokens": 0}
    return {"compress": compress}


@pytest.fixture(scope="module")
def library(mock, tmp_path_factory):
    """One router over the documents (a vector store of their files) and a memory store whose Redis does not
    answer, debug headers on. ``vsr/auto`` picks a decision by a keyword (see ``call``); every other context
    configuration of these tests is a recipe of its own behind an entrypoint of its name: ``stored``
    (RAG_STORED), ``judge`` (RAG_JUDGE), ``top1`` (RAG_TOP1), ``compress-always`` and ``compress-auto``, and
    ``failing-<mode>`` (a memory source with that on_failure). Counters are read as deltas."""
    directory = tmp_path_factory.mktemp("library")
    rag = {"type": "context", "configuration": {"sources": [
        {"type": "rag", "backend": "vectorstore", "match": {"recall": {"method": "bm25", "top_k": 2}}}]}}
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt, "capabilities": ["reasoning"]}
              for fmt in ("anthropic", "openai")]
    decisions = [{"name": f"to-{fmt}", "priority": 10, "plugins": [rag], "modelRefs": [{"model": f"m-{fmt}"}],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": fmt}]}}
                 for fmt in ("anthropic", "openai")]
    # The quickstart's deep tier on a Messages backend: the decision turns thinking on.
    thinking = {"type": "request_params", "configuration": {"generation": {
        "thinking": True, "thinking_budget": 1024, "max_tokens": 4000}}}
    decisions.append({"name": "to-thinking", "priority": 10, "plugins": [rag, thinking],
                      "modelRefs": [{"model": "m-anthropic"}],
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "thinking"}]}})
    models.append({"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]})
    doc = recipe_config(models, decisions, signals={"keywords": [{"name": k, "operator": "OR", "keywords": [k]}
                                                                  for k in ("anthropic", "openai", "thinking")]})
    contexts = {"stored": RAG_STORED, "judge": RAG_JUDGE, "top1": RAG_TOP1,
                **{f"compress-{mode}": compress_context(mode) for mode in ("always", "auto")},
                **{f"failing-{mode}": {"sources": [{"type": "memory", "on_failure": mode}]} for mode in MODES}}
    for name, context in contexts.items():
        doc["recipes"].append({"name": name, "decisions": [{"name": name, "modelRefs": [{"model": "m"}],
                                                            "plugins": [{"type": "context", "configuration": context}]}]})
        doc["entrypoints"].append({"api": "chat", "model_names": [name], "recipe": name})
    for name, injection in REPLACED.items():
        # system_prompt listed first, then context last: the order the config lists them in does not matter.
        plugins = [{"type": "system_prompt", "configuration": {"mode": "replace", "system_prompt": OPERATOR}},
                   {"type": "context", "configuration": {**RAG_TOP1, **injection}}]
        doc["recipes"].append({"name": name, "decisions": [{"name": name, "modelRefs": [{"model": "m"}],
                                                            "plugins": plugins}]})
        doc["entrypoints"].append({"api": "chat", "model_names": [name], "recipe": name})
    doc["listeners"] = [{"name": "main", "identity": {"trust_headers": True}}]
    doc["global"] = {"stores": {"event_stream": {"backend": "none"},
                                "vector_store": {"files": documents(directory)},
                                "memory": {"backend_type": "redis", "url": "redis://127.0.0.1:1/0"}},
                     "router": {"headers": {"debug": "any"}}}
    with router(write_config(doc, str(directory))) as proc:
        yield proc


@pytest.fixture
def both_formats(library):
    """The router whose keyword-picked decisions (``vsr/auto``) send a Messages and a Chat backend the default
    tool_role injection of a rag source."""
    return library


def test_a_request_about_a_stored_document_reaches_the_provider_with_its_chunks(mock, library):
    recalled = 'vsr_match_recall_total{feature="context.rag",method="embedding",outcome="hit"}'
    judged = 'vsr_match_judge_total{feature="context.rag",outcome="ok"}'
    before = metric_sum(library.url, recalled), metric_sum(library.url, judged)
    ask(library.url, QUESTION, tools=[FUNCTION], model_name="stored")
    messages = sent(mock)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"], messages
    assert messages[0]["content"] == QUESTION
    call = messages[1]["tool_calls"][0]
    assert call["function"]["name"] == "vsr_context" and messages[2]["tool_call_id"] == call["id"]
    assert "every 40 days with the citric descaler" in messages[2]["content"]
    assert "Tomatoes" not in messages[2]["content"], "the judge kept an unrelated chunk"
    assert metric_sum(library.url, recalled) == before[0] + 1
    assert metric_sum(library.url, judged) == before[1] + 1
    listed = httpx.get(f"{library.url}/api/v1/context/chunks").json()["chunks"]
    assert {c["document"] for c in listed} == {"aurora.md", *OTHERS}


INGESTED = {"sources": [{"type": "rag", "match": {"recall": {"method": "bm25", "top_k": 2}}}],
            "injection": {"mode": "system_prompt"}}
REMEMBERED = {"sources": [{"type": "memory", "store": {"auto": True},
                           "match": {"recall": {"method": "embedding", "top_k": 3, "min_similarity": 0.2}}}]}
STREAMED = {"sources": [{"type": "memory", "store": {"auto": True}, "match": {"recall": {"min_similarity": 0.2}}}]}


@pytest.fixture(scope="module")
def personal(mock, tmp_path_factory):
    """One router with an in-memory memory store and a vector store that starts empty (no files, nothing
    ingested but by the admin-API test); each configuration a recipe behind an entrypoint of its name:
    ``ingested`` (INGESTED), ``remembered`` (REMEMBERED) and ``streamed`` (STREAMED). Each test has users of
    its own, waits for its memory writes to land and reads the counters as deltas."""
    doc = config(mock.url, INGESTED, stores={"memory": {"backend_type": "memory"}})
    doc["recipes"] = [{"name": name, "decisions": [{"name": name, "modelRefs": [{"model": "m"}],
                                                    "plugins": [{"type": "context", "configuration": context}]}]}
                      for name, context in (("ingested", INGESTED), ("remembered", REMEMBERED),
                                            ("streamed", STREAMED))]
    doc["entrypoints"] = [{"api": "chat", "model_names": [name], "recipe": name, "default": name == "ingested"}
                          for name in ("ingested", "remembered", "streamed")]
    directory = tmp_path_factory.mktemp("personal")
    with router(write_config(doc, str(directory))) as proc:
        yield proc


def test_documents_ingested_over_the_admin_api_are_recalled_and_injected_in_the_system_prompt(mock, personal):
    proc = personal
    assert httpx.get(f"{proc.url}/api/v1/context/chunks").json() == {"chunks": []}
    # The first ingest loads the embedded model whose table embeds it (vsr-static-11: ~1 s CPU, 4 s on a busy box).
    made = httpx.post(f"{proc.url}/api/v1/context/documents", json={"name": "aurora.md", "text": ESPRESSO},
                      timeout=60)
    assert made.status_code == 201 and made.json()["chunks_added"] >= 1
    again = httpx.post(f"{proc.url}/api/v1/context/documents", json={"name": "aurora.md", "text": ESPRESSO})
    assert again.json()["chunks_added"] == 0, "the same chunks are held once"
    bad = httpx.post(f"{proc.url}/api/v1/context/documents", json={"name": "x"})
    assert bad.status_code == 400 and "text" in bad.json()["error"]["message"]
    ask(proc.url, QUESTION, model_name="ingested")
    messages = sent(mock)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "every 40 days" in messages[0]["content"] and messages[1]["content"] == QUESTION


def test_a_judge_reading_fewer_candidates_than_recall_truncates_counts_and_traces(mock, library):
    truncated = 'vsr_match_judge_truncated_total{feature="context.rag"}'
    before = metric(library.url, truncated)
    headers = ask(library.url, QUESTION, model_name="judge")
    assert 'match_judge_truncated="context.rag 5 candidates, judge read 2"' in headers["x-vsr-trace"]
    assert metric(library.url, truncated) == before + 1
    injected = sent(mock)[0]["content"]     # no tools: the system prompt
    assert injected.count("\n[") + injected.startswith("[") <= 2, "at most the two candidates the judge read"
    assert "every 40 days" in injected, "recall ranked the Aurora chunk first; the judge read it"


@contextmanager
def remembering(request, mock, tmp_path, prefix: str, backend: str) -> Iterator:
    """A router whose decision is REMEMBERED (entrypoint ``remembered``): the module's ``personal`` for the
    in-memory store, a router of its own for Redis (its keys are counted under ``prefix``)."""
    if backend == "memory":
        yield request.getfixturevalue("personal")
        return
    doc = config(mock.url, REMEMBERED, stores={"memory": {"backend_type": backend, "prefix": prefix}})
    doc["entrypoints"] = [{"api": "chat", "model_names": ["remembered"], "recipe": "r"}]
    with router(write_config(doc, str(tmp_path))) as proc:
        yield proc


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_memory_follows_one_user_across_turns_and_never_another(request, mock, tmp_path, prefix, backend):
    fact = "My favourite colour is teal, please remember it."
    writes = 'vsr_context_memory_writes_total{outcome="ok"}'
    injected = 'vsr_context_sources_total{source="memory",outcome="injected"}'
    with remembering(request, mock, tmp_path, prefix, backend) as proc:
        def ask_as(text: str, user: str | None) -> None:
            ask(proc.url, text, user=user, model_name="remembered")

        before = metric(proc.url, writes), metric(proc.url, injected)
        ask_as(fact, "alice")
        assert [m["role"] for m in sent(mock)] == ["user"], "no memory yet"
        # Written after the response: the client may ask again before it lands.
        wait_until(lambda: metric(proc.url, writes) == before[0] + 1, "the memory write")
        ask_as("What is my favourite colour?", "alice")
        messages = sent(mock)
        assert [m["role"] for m in messages] == ["system", "user"], messages
        assert f"User: {fact}" in messages[0]["content"]
        assert "Assistant: Hello! This is a canned answer" in messages[0]["content"], "the turn's answer is kept"
        for other in ("bob", None):
            ask_as("What is my favourite colour?", other)
            assert all("teal" not in str(m.get("content")) for m in sent(mock)), f"{other} read alice's memory"
        # alice's two turns and bob's; an anonymous caller has no memory to write to.
        wait_until(lambda: metric(proc.url, writes) == before[0] + 3, "the writes")
        assert metric(proc.url, injected) == before[1] + 1
    if backend == "redis":
        r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        keys = list(r.scan_iter(f"{prefix}*"))
        r.close()
        assert len(keys) == 2 and not any(b"alice" in k or b"bob" in k for k in keys), keys


def test_a_failing_source_skips_warns_or_blocks(mock, library):
    """A memory store whose Redis does not answer: skip sends the request as written, warn adds a warning,
    block refuses it with context_failed."""
    for mode in MODES:
        if mode == "block":
            with pytest.raises(openai.APIStatusError) as info:
                ask(library.url, QUESTION, model_name=f"failing-{mode}")
            assert info.value.status_code == 503 and info.value.body["code"] == "context_failed"
            continue
        headers = ask(library.url, QUESTION, model_name=f"failing-{mode}")
        assert [m["role"] for m in sent(mock)] == ["user"]
        assert ("context_unavailable;source=memory" in headers.get("x-vsr-warnings", "")) == (mode == "warn")


def test_two_routers_sharing_a_redis_vector_store_read_each_others_documents(mock, tmp_path, prefix):
    context = {"sources": [{"type": "rag", "match": {"recall": {"method": "bm25", "top_k": 1}}}]}
    stores = {"vector_store": {"backend_type": "redis", "prefix": prefix}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with router(write_config(config(mock.url, context, stores=stores), str(tmp_path / "a"))) as one, \
            router(write_config(config(mock.url, context, stores=stores), str(tmp_path / "b"))) as two:
        made = httpx.post(f"{one.url}/api/v1/context/documents", json={"name": "aurora.md", "text": ESPRESSO},
                          timeout=60)      # loads the embedded model first, as above
        assert made.status_code == 201
        ask(two.url, QUESTION)
        assert "every 40 days" in sent(mock)[0]["content"], "router two read router one's chunks"
        assert [c["document"] for c in httpx.get(f"{two.url}/api/v1/context/chunks").json()["chunks"]] == \
            ["aurora.md"] * made.json()["chunks_added"]


LOG = " ".join(f"Step {i} of the build copied {i * 7} files into the staging area." for i in range(1, 60))
FAILURE = "The linker failed because libssl was not found on the library path."


@pytest.mark.parametrize("mode", ["always", "auto"])
def test_a_long_tool_output_reaches_the_provider_compressed_to_what_the_question_needs(mock, library, mode):
    output = f"{LOG[:len(LOG) // 2]} {FAILURE} {LOG[len(LOG) // 2:]}"
    history = [{"role": "user", "content": "Build the project."},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "build", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": output}]
    recalled = 'vsr_match_recall_total{feature="context.compress",method="bm25"'
    judged = 'vsr_match_judge_total{feature="context.compress",outcome="ok"}'
    before = metric_sum(library.url, recalled), metric_sum(library.url, judged)
    ask(library.url, "Why did the linker fail to find libssl?", history=history, model_name=f"compress-{mode}")
    sent_output = sent(mock)[2]["content"]
    assert FAILURE in sent_output and "sentences omitted ..." in sent_output
    assert len(sent_output) < len(output) // 4, "compressed to about target_tokens"
    assert metric_sum(library.url, recalled) == before[0] + 1
    assert metric_sum(library.url, judged) == before[1] + 1
    ask(library.url, "Why did the linker fail?", history=[{"role": "user", "content": "Build."},
                                                         *history[1:2], {**history[2], "content": FAILURE}],
        model_name=f"compress-{mode}")
    assert sent(mock)[2]["content"] == FAILURE, "an output under min_tokens stays whole"


def test_a_streamed_answer_is_written_to_memory_as_its_text(mock, personal):
    writes = 'vsr_context_memory_writes_total{outcome="ok"}'
    before = metric(personal.url, writes)
    client = openai.OpenAI(base_url=f"{personal.url}/v1", api_key="unused", max_retries=0, timeout=30,
                           default_headers={"x-authz-user-id": "dana"})
    stream = client.chat.completions.create(model="streamed", stream=True, messages=[
        {"role": "user", "content": "My favourite colour is teal, please remember it."}])
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    wait_until(lambda: metric(personal.url, writes) == before + 1, "the memory write")
    ask(personal.url, "What is my favourite colour?", user="dana", model_name="streamed")
    assert f"Assistant: {streamed}" in sent(mock)[0]["content"]
    # The second turn's write too, so that the shared router is quiet for the next test's counts.
    wait_until(lambda: metric(personal.url, writes) == before + 2, "the second turn's memory write")


def test_a_messages_client_gets_the_chunks_through_translation(mock, library):
    """The exchange is injected in the client's Messages format; the OpenAI-format provider receives it
    translated: a tool call and its result after the user's message."""
    client = anthropic.Anthropic(base_url=library.url, api_key="unused", max_retries=0, timeout=30)
    client.messages.create(model="top1", max_tokens=64, messages=[{"role": "user", "content": QUESTION}],
                           tools=[WEATHER])
    messages = sent(mock)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"], messages
    assert "every 40 days" in messages[2]["content"]


@pytest.mark.parametrize(("name", "tools"), [("replaced", False), ("replaced-system", False),
                                            ("replaced-system", True)])
@pytest.mark.parametrize("api", ["messages", "chat"])
def test_a_replaced_system_prompt_keeps_the_context_injected_into_it(mock, library, api, name, tools):
    """system_prompt replace drops the caller's system prompt, never the context the context plugin put in
    the system prompt: the operator's prompt, then the documents, whatever order the config lists them in."""
    own = "You are a pirate."
    if api == "messages":
        client = anthropic.Anthropic(base_url=library.url, api_key="k", max_retries=0, timeout=30)
        client.messages.create(model=name, max_tokens=64, system=own, messages=[{"role": "user", "content": QUESTION}],
                               **({"tools": [WEATHER]} if tools else {}))
    else:
        client = openai.OpenAI(base_url=f"{library.url}/v1", api_key="k", max_retries=0, timeout=30)
        client.chat.completions.create(model=name, messages=[{"role": "system", "content": own},
                                                             {"role": "user", "content": QUESTION}],
                                       **({"tools": [FUNCTION]} if tools else {}))
    messages = sent(mock)
    assert [m["role"] for m in messages] == ["system", "user"], messages
    system = messages[0]["content"]
    assert system.startswith(OPERATOR) and "every 40 days with the citric descaler" in system, system
    assert own not in str(messages) and "vsr_context" not in str(messages)


# --- a tool exchange only where the request declares tools -------------------------------------------------



def call(url: str, api: str, backend: str, stream: bool, tools: bool) -> None:
    """Ask about the Aurora-7 as the official SDK of ``api`` would, through the decision for ``backend``."""
    text = f"{QUESTION} ({backend})"
    if api == "messages":
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=30)
        args = {"model": "vsr/auto", "max_tokens": 64, "messages": [{"role": "user", "content": text}],
                **({"tools": [WEATHER]} if tools else {})}
        if stream:
            with client.messages.stream(**args) as events:
                assert events.get_final_message().content
        else:
            assert client.messages.create(**args).content
        return
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=30)
    args = {"model": "vsr/auto", "messages": [{"role": "user", "content": text}],
            **({"tools": [FUNCTION]} if tools else {})}
    if stream:
        assert [chunk for chunk in client.chat.completions.create(**args, stream=True)]
    else:
        assert client.chat.completions.create(**args).choices


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("backend", ["anthropic", "openai"])
@pytest.mark.parametrize("api", ["messages", "chat"])
def test_context_for_a_request_without_tools_goes_in_the_system_prompt_not_an_undeclared_tool_exchange(
        both_formats, mock, api, backend, stream):
    """Anthropic refuses tool_use/tool_result blocks in a request that defines no tools (Bedrock too), and
    declaring the router's own tool would let the model call it: without the client's tools the context goes
    in the system prompt, which every backend takes."""
    call(both_formats.url, api, backend, stream, tools=False)
    body = httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]
    assert problems(body, backend) == [], body
    assert "vsr_context" not in str(body) and "tools" not in body
    system = body["system"] if backend == "anthropic" else body["messages"][0]["content"]
    if backend == "openai":
        assert body["messages"][0]["role"] == "system"
    assert "every 40 days with the citric descaler" in str(system)
    assert [m["role"] for m in body["messages"]][-1] == "user"


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
@pytest.mark.parametrize("api", ["messages", "chat"])
def test_context_for_a_request_with_tools_stays_a_tool_exchange_beside_them(both_formats, mock, api, backend):
    call(both_formats.url, api, backend, False, tools=True)
    body = httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]
    assert problems(body, backend) == [], body
    assert len(body["tools"]) == 1, "the client's tools, and no tool of the router's"
    result = body["messages"][-1]
    if backend == "anthropic":
        assert body["messages"][-2]["content"][0]["name"] == "vsr_context"
        assert "every 40 days" in str(result["content"][0]["content"])
    else:
        assert body["messages"][-2]["tool_calls"][0]["function"]["name"] == "vsr_context"
        assert result["role"] == "tool" and "every 40 days" in result["content"]


@pytest.mark.parametrize("api", ["messages", "chat"])
def test_context_for_a_thinking_messages_backend_goes_in_the_system_prompt_though_tools_are_declared(
        both_formats, mock, api):
    """With thinking on, Anthropic wants the assistant message of the last tool exchange to start with a thinking
    block, which only the model can write (it is signed): the injected vsr_context exchange would be refused
    ("When thinking is enabled, a final assistant message must start with a thinking block"). The decision's
    generation turns thinking on here, so the context goes in the system prompt, tools or not."""
    call(both_formats.url, api, "thinking", False, tools=True)
    body = httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]
    assert body["thinking"]["type"] == "enabled"
    assert problems(body, "anthropic") == [], body
    assert "vsr_context" not in str(body) and len(body["tools"]) == 1
    assert "every 40 days with the citric descaler" in str(body["system"])
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_a_messages_clients_own_thinking_gets_the_context_in_the_system_prompt(both_formats, mock):
    """The same for thinking the client asked for itself, passed to a Messages backend."""
    client = anthropic.Anthropic(base_url=both_formats.url, api_key="k", max_retries=0, timeout=30)
    client.messages.create(model="vsr/auto", max_tokens=4000, tools=[WEATHER],
                           thinking={"type": "enabled", "budget_tokens": 1024},
                           messages=[{"role": "user", "content": f"{QUESTION} (anthropic)"}])
    body = httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]
    assert body["thinking"]["type"] == "enabled"
    assert problems(body, "anthropic") == [], body
    assert "every 40 days with the citric descaler" in str(body["system"]) and "vsr_context" not in str(body)


# --- a context source added by a reload -------------------------------------------------------------------------


def reloaded_with_context(path: str, doc: dict, url: str) -> httpx.Response:
    """Rewrite the router's file with decision ``d`` injecting its rag source (``on_failure: block``) in the
    system prompt, and reload it."""
    doc["recipes"][0]["decisions"][0]["plugins"] = [{"type": "context", "configuration": {
        "sources": [{**RAG_TOP1["sources"][0], "on_failure": "block"}], "injection": {"mode": "system_prompt"}}}]
    with open(path + ".new", "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(path + ".new", path)
    return httpx.post(f"{url}/admin/reload", timeout=60)


def test_a_reload_that_adds_a_context_source_opens_its_store_and_serves_it(mock, tmp_path):
    """The router started with no context plugin, so no store open: the reload opens the stores the file
    declared at start and the new source is served at once, nothing left for a restart."""
    doc = config(mock.url, {})
    doc["recipes"][0]["decisions"][0]["plugins"] = []
    doc["global"]["stores"]["vector_store"] = {"files": documents(tmp_path)}
    path = write_config(doc, str(tmp_path))
    with router(path) as proc:
        ask(proc.url, QUESTION)
        assert [m["role"] for m in sent(mock)] == ["user"]
        done = reloaded_with_context(path, doc, proc.url)
        assert done.status_code == 200 and done.json()["restart_required"] == [], done.text
        ask(proc.url, QUESTION)
        messages = sent(mock)
        assert [m["role"] for m in messages] == ["system", "user"], messages
        assert "every 40 days with the citric descaler" in messages[0]["content"]
        assert metric(proc.url, 'vsr_context_sources_total{source="rag",outcome="injected"}') == 1


def test_a_reload_whose_context_store_cannot_open_is_refused_and_the_old_decision_serves(mock, tmp_path):
    """A vector store on a Redis that refuses connections cannot take the files: the reload is refused with why,
    and the decision keeps serving as it was (no decision half applied without its blocking source)."""
    doc = config(mock.url, {})
    doc["recipes"][0]["decisions"][0]["plugins"] = []
    doc["global"]["stores"]["vector_store"] = {"backend_type": "redis", "files": documents(tmp_path),
                                               "url": f"redis://127.0.0.1:{refused_port()}/0"}
    path = write_config(doc, str(tmp_path))
    with router(path) as proc:
        refused = reloaded_with_context(path, doc, proc.url)
        assert refused.status_code == 422, refused.text
        message = refused.json()["error"]["message"]
        assert "recipes[r].decisions[d].plugins[0] (context)" in message and "vector store" in message, message
        assert "ConnectionError" in message or "Connection refused" in message, message
        served = httpx.post(f"{proc.url}/v1/chat/completions", timeout=30,
                            json={"model": "auto", "messages": [{"role": "user", "content": QUESTION}]})
        assert served.status_code == 200 and "x-vsr-warnings" not in served.headers
        assert [m["role"] for m in sent(mock)] == ["user"]
        assert metric(proc.url, 'vsr_config_reloads_total{outcome="failed"}') == 1
