"""End to end, a real router subprocess, the openai and anthropic SDKs and the mock provider's log: the context
plugin's compress brings a request under its budget (spec 5.7, 6.4; trial 28).

``budget.max_tokens: auto`` reads the candidate's ``context_window_size`` (less the reserved output), so the
spec's own ``compress: {}`` compresses; without a window, ``config validate`` warns. A history over its budget
loses its least relevant earlier turns (whole: a tool call keeps its result), never the system prompt or the
last user turn, in each client API's order rules; what still does not fit is sent with a warning.
"""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
import yaml

from vsr_fast.routing.loaded import validate_bytes

from .procs import model, router, write_config
from .provider_rules import problems

WINDOW = 8000
SYSTEM = "You are a concise assistant for home appliances."
QUESTION = "How often should I descale the Aurora-7 espresso machine?"
RELEVANT = ("The Aurora-7 espresso machine wants descaling every 40 days with the citric descaler.",
            "Noted: descale the Aurora-7 every 40 days.")


def filler(i: int) -> tuple[str, str]:
    """An earlier turn about something else, ~320 characters a message (61 messages: ~19.5 KB)."""
    return (f"Turn {i}: tell me about tomato plant number {i} in my garden; " + "it grows tall and green. " * 10,
            f"Reply {i}: the tomato plant {i} wants sun and water; " + "keep the soil moist and warm. " * 10)


def history(relevant_at: int = 12) -> list[tuple[str, str]]:
    turns = [filler(i) for i in range(30)]
    turns[relevant_at] = RELEVANT
    return turns


def context(compress: dict) -> dict:
    return {"type": "context", "configuration": {"enabled": True, "compress": compress}}


HISTORY = {"mode": "always", "budget": {"max_tokens": 512}}
TIGHT = {"mode": "always", "budget": {"max_tokens": 256}}


def serve(mock, directory, models: list[dict], recipes: dict[str, tuple[str, dict]]):
    """A router whose every recipe (name: (model, compress)) is behind an entrypoint of its name."""
    doc = {"version": "v0.5", "providers": {"models": models}, "recipes": [], "entrypoints": [],
           "global": {"stores": {"event_stream": {"backend": "none"}}}}
    for i, (name, (target, compress)) in enumerate(recipes.items()):
        doc["recipes"].append({"name": name, "decisions": [{"name": name, "modelRefs": [{"model": target}],
                                                            "plugins": [context(compress)]}]})
        doc["entrypoints"].append({"api": "chat", "model_names": [name], "recipe": name,
                                   **({"default": True} if i == 0 else {})})
    return router(write_config(doc, str(directory)))


@pytest.fixture(scope="module")
def window_router(mock, tmp_path_factory):
    """``window``: the spec's compress: {} over a model with a context_window_size."""
    models = [{**model("windowed", f"{mock.url}/v1"), "context_window_size": WINDOW}]
    with serve(mock, tmp_path_factory.mktemp("window"), models, {"window": ("windowed", {})}) as proc:
        yield proc


@pytest.fixture(scope="module")
def budget_router(mock, tmp_path_factory):
    """``history-<fmt>`` (HISTORY over a <fmt>-format model) and ``tight`` (TIGHT)."""
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in ("openai", "anthropic", "responses")]
    recipes = {"tight": ("m-openai", TIGHT),
               **{f"history-{fmt}": (f"m-{fmt}", HISTORY) for fmt in ("openai", "anthropic", "responses")}}
    with serve(mock, tmp_path_factory.mktemp("budget"), models, recipes) as proc:
        yield proc


def last_body(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]


def chat(url: str, name: str, messages: list[dict], **extra):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    raw = client.chat.completions.with_raw_response.create(model=name, messages=messages, **extra)
    raw.parse()
    return raw.headers


def chat_history(turns: list[tuple[str, str]]) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": SYSTEM}]
    for user, reply in turns:
        out += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return [*out, {"role": "user", "content": QUESTION}]


def test_compress_with_max_tokens_auto_reads_the_models_context_window(mock, window_router):
    """Trial 28: ``compress: {}`` (max_tokens auto) never ran, the window being refused at load; a 203 KB tool
    output reached the upstream whole."""
    output = " ".join(f"Line {i} of the build log copied {i * 7} files into the staging area." for i in range(3000))
    output += " The linker failed because libssl was not found on the library path."
    assert len(output) > 200_000
    messages = [{"role": "user", "content": "Build the project."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "build", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": output},
                {"role": "user", "content": "Why did the linker fail to find libssl?"}]
    tools = [{"type": "function", "function": {"name": "build", "parameters": {"type": "object"}}}]
    chat(window_router.url, "window", messages, tools=tools, max_completion_tokens=500)
    sent = last_body(mock)["messages"][2]["content"]
    assert "libssl was not found" in sent
    assert len(sent) < 4 * 1000 * 2, "compressed to about target_tokens (1000)"


def test_max_tokens_auto_without_a_window_is_a_validate_warning_naming_the_model():
    doc = {"version": "v0.5",
           "providers": {"models": [model("bare", "http://127.0.0.1:9/v1"),
                                    {**model("sized", "http://127.0.0.1:9/v1"), "context_window_size": WINDOW}]},
           "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "bare"}, {"model": "sized"}],
                                                    "plugins": [context({})]}]}]}
    report = validate_bytes(yaml.safe_dump(doc).encode())
    assert report.errors == []
    lines = [w for w in report.warnings if "no_context_window" in w]
    assert len(lines) == 1, report.warnings
    assert lines[0].startswith("recipes[r].decisions[0].plugins[0].configuration.compress.budget.max_tokens: ")
    assert "'bare'" in lines[0] and "'sized'" not in lines[0]


def test_a_chat_history_over_its_budget_loses_its_least_relevant_earlier_turns(mock, budget_router):
    """Trial 28: a 61-message history of ~19.5 KB went whole to the upstream past a 256-token budget."""
    messages = chat_history(history())
    messages[5:5] = [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c9", "type": "function", "function": {"name": "garden", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c9", "content": "The garden has 30 tomato plants."}]
    messages[7:7] = [{"role": "assistant", "content": "Thirty plants."}, {"role": "user", "content": "More."}]
    assert len(messages) > 61
    tools = [{"type": "function", "function": {"name": "garden", "parameters": {"type": "object"}}}]
    headers = chat(budget_router.url, "history-openai", messages, tools=tools)
    sent = last_body(mock)["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM}
    assert sent[-1]["content"] == QUESTION
    assert len(sent) < 10
    assert any(RELEVANT[0] in (m.get("content") or "") for m in sent), "the turn about the question stays"
    assert any("earlier turns omitted ...]" in (m.get("content") or "") for m in sent if m["role"] == "user")
    assert len(str(sent)) // 4 <= 512 + 64
    assert problems(last_body(mock), "openai") == []
    assert "context_over_budget" not in headers.get("x-vsr-warnings", "")


def test_a_messages_history_keeps_anthropics_order_and_each_tool_use_with_its_result(mock, budget_router):
    turns = history()
    messages: list[dict] = []
    for i, (user, reply) in enumerate(turns):
        messages.append({"role": "user", "content": user})
        if i % 5 == 3:      # a tool exchange inside the turn
            messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "garden",
                                                            "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                       "content": f"Plant {i} is fine."}]}]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": QUESTION}]})
    client = anthropic.Anthropic(base_url=budget_router.url, api_key="unused", max_retries=0, timeout=30)
    client.messages.create(model="history-anthropic", max_tokens=200, system=SYSTEM, messages=messages,
                           tools=[{"name": "garden", "input_schema": {"type": "object"}}])
    body = last_body(mock)
    sent = body["messages"]
    assert body["system"] in (SYSTEM, [{"type": "text", "text": SYSTEM}]) or SYSTEM in str(body["system"])
    assert len(sent) < len(messages)
    assert sent[0]["role"] == "user" and sent[-1]["content"][-1]["text"] == QUESTION
    roles = [m["role"] for m in sent]
    assert all(a != b for a, b in zip(roles, roles[1:])), roles
    uses = {b["id"] for m in sent for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}
    results = {b["tool_use_id"] for m in sent for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
    assert uses == results
    assert RELEVANT[0] in str(sent)
    assert problems(body, "anthropic") == []


def test_a_responses_history_over_its_budget_is_trimmed_too(mock, budget_router):
    items: list[dict] = [{"role": "system", "content": SYSTEM}]
    for user, reply in history():
        items += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    items.append({"role": "user", "content": QUESTION})
    client = openai.OpenAI(base_url=f"{budget_router.url}/v1", api_key="unused", max_retries=0, timeout=30)
    client.responses.create(model="history-responses", input=items)
    sent = last_body(mock)["input"]
    assert sent[0]["content"] == SYSTEM or SYSTEM in str(sent[0])
    assert QUESTION in str(sent[-1]) and len(sent) < len(items)
    assert RELEVANT[0] in str(sent)


def test_a_request_that_cannot_fit_is_sent_with_a_warning(mock, budget_router):
    question = "Why is the sky blue? " * 100      # the last user turn alone is over 256 tokens
    headers = chat(budget_router.url, "tight", [*chat_history(history())[:-1], {"role": "user", "content": question}])
    sent = last_body(mock)["messages"]
    assert sent[0]["content"] == SYSTEM and sent[-1]["content"].endswith(question)
    assert len(sent) == 2, "every earlier turn dropped"
    warnings = headers.get("x-vsr-warnings", "")
    assert "context_over_budget;tokens=" in warnings and "budget=256" in warnings, warnings
