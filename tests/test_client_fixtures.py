"""Request bodies recorded from real clients (Claude Code, Codex CLI): decoded, routed, translated.

The fixtures in ``tests/fixtures/clients/`` are what the agents sent (``tests/clients/record.py``):
Claude Code's system messages in the middle of ``messages`` and its beta fields with their
``anthropic-beta`` header; Codex's tools in an ``additional_tools`` input item, grouped in
``namespace`` tools, its first a freeform ``custom`` tool. For each one:

- its own protocol decodes it, the canonical request sees every tool and tool result, and a
  recipe that routes on them picks the decision they call for;
- translated to each backend ``api_format`` it compares with ``expected/<fixture>.json``
  (shapes: ``tests/client_shapes.py``): the body unchanged and the client's protocol headers
  forwarded for its own format; elsewhere every system text, turn, tool call, tool result and
  tool carried, no whole tool dropped, and no field the target API does not define.
"""
from __future__ import annotations

import json
import re

import anthropic.types.message_create_params as anthropic_params
import openai.types.chat.completion_create_params as chat_params
import openai.types.responses.response_create_params as responses_params
import pytest

from vsr_fast.routing import load_raw
from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore
from vsr_fast.signals.conversation import TOOL_RESULT_ROLES

from .client_shapes import EXPECTED, FORMATS, NATIVE, READERS, fixtures, marks, render

ADAPTERS = make_adapters(MemoryResponseStore())
UPSTREAM = "upstream-model"
# Each API's top-level request fields, as its official SDK declares them.
KNOWN = {
    "openai": set(chat_params.CompletionCreateParamsBase.__annotations__) | {"stream"},
    "responses": set(responses_params.ResponseCreateParamsBase.__annotations__) | {"stream"},
    "anthropic": set(anthropic_params.MessageCreateParamsBase.__annotations__) | {"stream"},
}
WHOLE_TOOL = re.compile(r"(tools|input\[\d+\]\.tools)\[\d+\](\.tools\[\d+\])?")
CONDITION = {"operator": "AND", "conditions": []}


def conversation_rule(name: str, feature: dict, predicate: dict | None = None) -> dict:
    return {"name": name, "feature": feature, **({"predicate": predicate} if predicate else {})}


CONFIG = load_raw({
    "version": "v0.5",
    "providers": {"models": [{"name": f"m-{fmt}", "api_format": fmt,
                              "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]} for fmt in FORMATS]},
    "recipes": [{
        "name": "agents",
        "signals": {"conversation": [
            conversation_rule("tools", {"type": "count", "source": {"type": "tool_definition"}}, {"gte": 1}),
            conversation_rule("results", {"type": "exists", "source": {"type": "tool_result"}}),
        ]},
        "decisions": [
            {"name": "after_tool_result", "priority": 30, "modelRefs": [{"model": "m-openai"}],
             "rules": {"operator": "AND", "conditions": [{"type": "conversation", "name": "results"}]}},
            {"name": "agentic", "priority": 20, "modelRefs": [{"model": "m-anthropic"}],
             "rules": {"operator": "AND", "conditions": [{"type": "conversation", "name": "tools"}]}},
            {"name": "general", "priority": 10, "modelRefs": [{"model": "m-responses"}], "rules": CONDITION},
        ],
    }],
    "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "agents", "default": True}],
}).table

NAMES = [p.stem for p in fixtures()]


def load(name: str) -> tuple[dict, dict]:
    doc = json.loads((EXPECTED.parent / f"{name}.json").read_text())
    return doc, json.loads((EXPECTED / f"{name}.json").read_text())


def decode(doc: dict):
    """The fixture through its protocol's decoder, with the headers the client sent."""
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in doc["headers"].items()]
    return ADAPTERS[doc["api"]].decode(json.dumps(doc["body"]).encode(), headers)


def test_every_fixture_has_its_expected_file():
    assert NAMES, "no recorded client fixtures"
    assert sorted(p.stem for p in EXPECTED.glob("*.json")) == NAMES


@pytest.mark.parametrize("name", NAMES)
async def test_decodes_and_routes_on_every_tool(name):
    doc, expected = load(name)
    adapter = ADAPTERS[doc["api"]]
    req = decode(doc)
    canonical = adapter.canonical(req)
    results = sum(1 for m in canonical.messages if m.role in TOOL_RESULT_ROLES)
    assert {"tools": canonical.tool_count, "tool_results": results} == expected["canonical"]
    assert any("Use your first tool once" in turn for turn in canonical.user_turns)
    route = await CONFIG.route(adapter.model(req), lambda: canonical)
    assert (route.recipe, route.decision) == ("agents", expected["decision"])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", NAMES)
def test_translates_to_each_format(name, fmt):
    doc, expected = load(name)
    want = expected["targets"][fmt]
    # The models the agents talk to (gpt-5, Claude) reason: their efforts reach them.
    out = ADAPTERS[doc["api"]].upstream(decode(doc), fmt, UPSTREAM, reasoning="reasoning_effort")
    body = json.loads(out.body)
    headers = {k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in out.headers}
    assert out.stream == want["stream"]
    assert headers == want["headers"]
    if want.get("unchanged"):
        assert body == {**doc["body"], "model": UPSTREAM}
        return
    assert body["model"] == UPSTREAM
    assert sorted(set(body) - KNOWN[fmt]) == [], f"fields the {fmt} API does not define"
    dropped = [loss for loss in out.losses if loss.action == "dropped" and WHOLE_TOOL.fullmatch(loss.field)]
    assert dropped == [], "whole tools dropped"
    source = READERS[NATIVE[doc["api"]]](doc["body"])
    got = render(READERS[fmt](body), fmt, marks(source), as_target=False)
    assert got == {k: want[k] for k in ("system", "turns", "tools")}
