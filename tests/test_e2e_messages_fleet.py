"""End to end: a Messages client (Claude Code's shapes) over a mixed fleet (outside trial 10a).

A conversation started on an OpenAI-format reasoning model holds its reasoning as thinking blocks no Anthropic
model signed; when the next turn falls back to Claude, those blocks must not reach it (Anthropic answers 400
"Invalid signature in thinking block"), as on the Chat path. Claude Code's current block types (ToolSearch's
``tool_reference``, server tool results, MCP blocks) reach an Anthropic backend as sent and a translated one as
text or a listed drop. The scripted upstream of ``test_e2e_thinking`` plays both backends; the router runs as a real
process and the official anthropic SDK is the client.
"""
from __future__ import annotations

import json

import anthropic
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_protocols import warnings_of
from .test_e2e_thinking import BODIES, LOCK, REASONING, Scripted, sent

DOWN: list[bool] = []    # while true, the OpenAI-format model answers 503


class Fleet(Scripted):
    def do_POST(self) -> None:
        if self.path.startswith("/deepseek") and DOWN:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.whole(503, json.dumps({"error": {"message": "down", "type": "server_error", "code": None}}).encode())
            return
        super().do_POST()


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Fleet) as url:
        models = [{"name": "ds", "api_format": "openai", "capabilities": ["chat", "reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/deepseek/v1"}]},
                  {"name": "an", "api_format": "anthropic", "capabilities": ["reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/claude/v1"}]}]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "ds"}, {"model": "an"}]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("fleet")))) as proc:
            yield proc


@pytest.fixture
def client(gw):
    DOWN.clear()
    yield anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    DOWN.clear()


THINK = {"type": "enabled", "budget_tokens": 1024}
WEATHER = {"name": "get_weather", "description": "the weather", "input_schema": {"type": "object", "properties": {}}}


def test_unsigned_thinking_from_a_chat_model_is_dropped_when_the_turn_falls_back_to_claude(client):
    first = client.messages.create(model="vsr/auto", max_tokens=2048, messages=[{"role": "user", "content": "hi"}])
    thinking, text = first.content
    assert (thinking.type, thinking.thinking, thinking.signature) == ("thinking", REASONING, "")
    DOWN.append(True)
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [b.model_dump() for b in first.content]},
               {"role": "user", "content": "and tomorrow?"}]
    raw = client.messages.with_raw_response.create(model="vsr/auto", max_tokens=2048, messages=history,
                                                   thinking=THINK)
    assert raw.parse().content[-1].type == "tool_use"      # Claude answered: the body was one it takes
    body = sent()
    assert body["thinking"] == THINK
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text"]
    assert 'translation_loss;action="dropped";reason="unsigned";field="messages[1].content[0]"' in \
        warnings_of(raw.headers)


@pytest.mark.parametrize("signature", [None, ""], ids=["absent", "empty"])
def test_a_tool_loop_whose_thinking_was_unsigned_reaches_claude_without_thinking(client, signature):
    thought = {"type": "thinking", "thinking": REASONING, **({} if signature is None else {"signature": signature})}
    history = [{"role": "user", "content": "weather?"},
               {"role": "assistant", "content": [thought, {"type": "tool_use", "id": "toolu_A", "name": "get_weather",
                                                           "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "sunny"}]}]
    raw = client.messages.with_raw_response.create(model="an", max_tokens=2048, messages=history, thinking=THINK,
                                                   tools=[WEATHER])
    assert raw.parse().content[0].text == "Sunny in Paris."
    body = sent()
    assert "thinking" not in body
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use"]
    assert {'translation_loss;action="dropped";reason="unsigned";field="messages[1].content[0]"',
            'translation_loss;action="dropped";reason="no_thinking_block";field="thinking"'} <= \
        warnings_of(raw.headers)


def test_signed_thinking_reaches_claude_byte_for_byte(client):
    history = [{"role": "user", "content": "weather?"},
               {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "sig"},
                                                 {"type": "tool_use", "id": "toolu_A", "name": "get_weather",
                                                  "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A", "content": "sunny"}]}]
    raw = client.messages.with_raw_response.create(model="an", max_tokens=2048, messages=history, thinking=THINK,
                                                   tools=[WEATHER])
    assert raw.parse().content[0].text == "Sunny in Paris."
    assert sent()["messages"] == history
    assert warnings_of(raw.headers) == set()


# Claude Code's ToolSearch turn (beta advanced-tool-use-2025-11-20): deferred tools, the search's tool_use, and its
# tool_result of tool_reference blocks; then block types of Anthropic's current API the router does not translate.
TOOLS = [{"name": "ToolSearch", "description": "find deferred tools", "input_schema": {
             "type": "object", "properties": {"query": {"type": "string"}}}},
         {"name": "WebFetch", "description": "fetch a URL", "defer_loading": True,
          "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}}]
SEARCH = [{"role": "user", "content": "fetch example.com"},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_S", "name": "ToolSearch",
                                             "input": {"query": "select:WebFetch"}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_S",
                                        "content": [{"type": "tool_reference", "tool_name": "WebFetch"}]}]}]
OTHERS = [
    {"type": "search_result", "source": "https://example.com", "title": "Example",
     "content": [{"type": "text", "text": "Example Domain"}], "citations": {"enabled": True}},
    {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup", "server_name": "docs", "input": {}},
    {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "content": [{"type": "text", "text": "found"}]},
    {"type": "container_upload", "file_id": "file_1"},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {"url": "https://example.com"}},
    {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1", "content": {"type": "web_fetch_result",
                                                                               "url": "https://example.com"}},
    {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_2", "content": {
        "type": "code_execution_result", "stdout": "", "stderr": "", "return_code": 0, "content": []}},
    {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_3", "content": {
        "type": "bash_code_execution_result", "stdout": "", "stderr": "", "return_code": 0, "content": []}},
    {"type": "text_editor_code_execution_tool_result", "tool_use_id": "srvtoolu_4", "content": {
        "type": "text_editor_code_execution_view_result", "content": "", "file_type": "text"}},
    {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_5", "content": {
        "type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference",
                                                                        "tool_name": "WebFetch"}]}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_6", "content": []},
    {"type": "redacted_thinking", "data": "opaque"},
    {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "doc"}]}},
    {"type": "compaction", "content": "summary of earlier turns"},
]
BETA = {"anthropic-beta": "advanced-tool-use-2025-11-20"}


def test_claude_codes_tool_search_reaches_claude_as_sent(client):
    raw = client.messages.with_raw_response.create(model="an", max_tokens=256, messages=SEARCH, tools=TOOLS,
                                                   extra_headers=BETA)
    assert raw.parse().content[0].text == "Sunny in Paris."
    assert sent()["messages"] == SEARCH and sent()["tools"] == TOOLS
    assert warnings_of(raw.headers) == set()


def test_claude_codes_tool_search_reaches_a_chat_model_as_text(client):
    raw = client.messages.with_raw_response.create(model="ds", max_tokens=256, messages=SEARCH, tools=TOOLS,
                                                   extra_headers=BETA)
    assert raw.parse().content[-1].text == "Sunny."
    body = sent()
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "toolu_S", "content": "Tool loaded: WebFetch"}
    assert [t["function"]["name"] for t in body["tools"]] == ["ToolSearch", "WebFetch"]
    assert 'translation_loss;action="converted";reason="unsupported";field="messages[2].content[0].content[0]"' in \
        warnings_of(raw.headers)


@pytest.mark.parametrize("block", OTHERS, ids=[b["type"] for b in OTHERS])
def test_current_block_types_reach_claude_unchanged_and_count(client, block):
    role = "user" if block["type"] in ("search_result", "container_upload", "document") else "assistant"
    messages = [{"role": "user", "content": "go"}, {"role": role, "content": [block]},
                {"role": "user", "content": "go on"}]
    raw = client.messages.with_raw_response.create(model="an", max_tokens=256, messages=messages)
    assert raw.http_response.status_code == 200
    assert sent()["messages"] == messages
    counted = client.messages.count_tokens(model="an", messages=messages)
    assert counted.input_tokens > 0


@pytest.mark.parametrize("block", OTHERS, ids=[b["type"] for b in OTHERS])
def test_current_block_types_reach_a_chat_model_as_text_or_a_listed_drop(client, block):
    role = "user" if block["type"] in ("search_result", "container_upload", "document") else "assistant"
    messages = [{"role": "user", "content": "go"}, {"role": role, "content": [block, {"type": "text", "text": "x"}]},
                {"role": "user", "content": "go on"}]
    raw = client.messages.with_raw_response.create(model="ds", max_tokens=256, messages=messages)
    assert raw.parse().content[-1].text == "Sunny."
    field = 'field="messages[1].content[0]"'
    assert any(field in w for w in warnings_of(raw.headers)) or block["type"] in ("document", "redacted_thinking")
