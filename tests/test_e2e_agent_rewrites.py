"""Every request rewrite on the bodies real agents send (``tests/fixtures/clients``): Claude Code's beta fields
(``output_config`` on a mid-conversation ``role: "system"`` message, named by its ``anthropic-beta``) and Codex's
lite body (``additional_tools`` items, namespaces, a freeform tool) through the tools policy, context,
system_prompt, masking and an executor's own rewrites, to a backend of each format. A real router subprocess, the
bench mock upstream, the agents' own bytes and headers: a rewrite re-reads the body as the client's decode read
it, never more strictly (it answered 500 ``unknown field 'output_config'``)."""
from __future__ import annotations

import json

import httpx
import pytest

from .client_shapes import FIXTURES
from .procs import mock_upstream, model, router, write_config

FORMATS = ("anthropic", "openai", "responses")
AGENTS = {"claude_code": ("/v1/messages?beta=true", "Agent"), "codex": ("/v1/responses", "clock")}
PLUGINS = {
    "tools": lambda blocked: [{"type": "tools", "configuration": {"policy": {"mode": "passthrough",
                                                                             "block_tools": [blocked]}}}],
    "context": lambda _: [{"type": "context", "configuration": {"sources": [
        {"type": "rag", "backend": "vectorstore", "match": {"recall": {"method": "bm25", "top_k": 1}}}]}}],
    "system_prompt": lambda _: [{"type": "system_prompt", "configuration": {
        "mode": "insert", "system_prompt": "Operator note: be brief."}}],
    "masking": lambda _: [{"type": "masking", "configuration": {"enabled": True, "signal": "personal",
                                                                "entity_types": ["EMAIL_ADDRESS"]}}],
}
EXECUTOR = {"type": "remom", "remom": {"breadth_schedule": [1]}}
WHAT = [*PLUGINS, "executor"]
NOTE = "The tool runs in the work tree: use your first tool once."


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    """One recipe per (rewrite, agent, backend format), behind an entrypoint named ``<rewrite>-<agent>-<fmt>``."""
    directory = tmp_path_factory.mktemp("agents")
    (directory / "notes.md").write_text(NOTE)
    with mock_upstream() as upstream:
        doc = {"version": "v0.5",
               "providers": {"models": [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt}
                                        for fmt in FORMATS]},
               "recipes": [], "entrypoints": [],
               "global": {"stores": {"event_stream": {"backend": "none"},
                                     "vector_store": {"files": [str(directory / "notes.md")]}}}}
        for what in WHAT:
            for agent, (_, blocked) in AGENTS.items():
                for fmt in FORMATS:
                    name = f"{what}-{agent}-{fmt}"
                    decision = {"name": name, "modelRefs": [{"model": f"m-{fmt}"}]}
                    if what == "executor":
                        decision["algorithm"] = EXECUTOR
                    else:
                        decision["plugins"] = PLUGINS[what](blocked)
                    recipe = {"name": name, "decisions": [decision]}
                    if what == "masking":
                        recipe["signals"] = {"pii": [{"name": "personal"}]}
                    doc["recipes"].append(recipe)
                    doc["entrypoints"].append({"api": "chat", "model_names": [name], "recipe": name,
                                               "default": not doc["entrypoints"]})
        with router(write_config(doc, str(directory))) as proc:
            yield proc, upstream


def sent(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]["body"]


def tool_names(body: dict) -> list[str]:
    """The tools a provider-bound body offers, in any format: Codex's namespaces as ``ns.name``, its
    ``additional_tools`` items' too."""
    lists = [body.get("tools") or []]
    lists += [item["tools"] for item in body.get("input") or () if isinstance(item, dict)
              and item.get("type") == "additional_tools"]
    out = []
    for tools in lists:
        for tool in tools:
            if tool.get("type") == "namespace":
                out += [f"{tool['name']}.{t['name']}" for t in tool["tools"]]
            else:
                out.append((tool.get("function") or tool).get("name") or tool["type"])
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("agent", ["claude_code.first", "claude_code.tool_result", "codex.first",
                                   "codex.tool_result"])
@pytest.mark.parametrize("what", WHAT)
def test_each_rewrite_serves_the_agents_own_body(routed, what, agent, fmt):
    proc, upstream = routed
    doc = fixture(agent)
    kind = agent.split(".")[0]
    path, blocked = AGENTS[kind]
    body = {**doc["body"], "model": f"{what}-{kind}-{fmt}"}
    r = httpx.post(f"{proc.url}{path}", content=json.dumps(body).encode(), headers=doc["headers"], timeout=30)
    assert r.status_code == 200, r.text
    end = b"event: message_stop" if kind == "claude_code" else b"event: response.completed"
    assert end in r.content, r.text
    got = json.dumps(sent(upstream))
    if what == "tools":
        names = tool_names(sent(upstream))
        assert names and not [n for n in names if n == blocked or n.startswith((f"{blocked}.", f"{blocked}__"))], names
    if kind == "claude_code" and fmt == "anthropic" and what != "executor":
        # Claude Code's beta field reached its own format as the client wrote it.
        def configs(messages: list) -> list:
            return [m.get("output_config") for m in messages if m["role"] == "system"]
        assert configs(sent(upstream)["messages"]) == configs(doc["body"]["messages"]) != []
