"""tools end to end (spec 5.7): policy allow/block/strip and select over a catalog, with real router and mock
upstream processes and the official SDKs; what the provider received is read from the mock upstream's log."""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, refused_port, replay_record, router, write_config

FORMATS = ("openai", "anthropic", "responses")
POLICY = {"mode": "filtered", "allow_tools": ["docs.search", "tickets.lookup", "functions", "apply_patch"],
          "block_tools": ["admin.delete", "functions.shell"], "strip_tool_history": True}


def sent(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]["body"]


def names(body: dict) -> list[str]:
    """The tool names a provider-bound body offers, whatever its format."""
    out = []
    for tool in body.get("tools") or ():
        if "function" in tool:
            out.append(tool["function"]["name"])
        elif tool.get("type") == "namespace":
            out += [f"{tool['name']}.{t['name']}" for t in tool["tools"]]
        else:
            out.append(tool.get("name") or tool["type"])
    return out


def metric(proc, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in httpx.get(f"{proc.url}/metrics").text.splitlines()
               if line.startswith(name + "{"))


@pytest.fixture(scope="module")
def governed(tmp_path_factory):
    with mock_upstream() as upstream:
        models = [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt} for fmt in FORMATS]
        decisions = [{"name": f"to-{fmt}", "priority": 10,
                      "plugins": [{"type": "tools", "configuration": {"policy": POLICY}}],
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": fmt}]},
                      "modelRefs": [{"model": f"m-{fmt}"}]} for fmt in FORMATS]
        doc = config(models, decisions, signals={"keywords": [
            {"name": fmt, "operator": "OR", "keywords": [f"via {fmt}"]} for fmt in FORMATS]})
        doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {"enabled": True}}]}
        with router(write_config(doc, str(tmp_path_factory.mktemp("tools")))) as proc:
            yield proc, upstream


def chat_tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_chat_clients_tools_are_allowed_and_blocked_by_name_for_every_backend(governed, fmt):
    proc, upstream = governed
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", tools=[chat_tool(n) for n in ("docs.search", "admin.delete", "weather", "tickets.lookup")],
        tool_choice={"type": "function", "function": {"name": "docs.search"}},
        messages=[{"role": "user", "content": "Delete it."},
                  {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                        "function": {"name": "admin.delete", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "deleted"},
                  {"role": "user", "content": f"Now look it up via {fmt}."}])
    body = sent(upstream)
    assert names(body) == ["docs.search", "tickets.lookup"]
    assert "docs.search" in json.dumps(body["tool_choice"])     # a forced tool the policy keeps, in fmt's shape
    assert "deleted" not in json.dumps(body) and "c1" not in json.dumps(body)   # strip_tool_history
    record = replay_record(proc, raw.headers["x-vsr-replay-id"])
    assert any("tools: policy filtered: removed admin.delete, weather" in p for p in record["plugins"]), record


def test_a_client_forcing_a_tool_the_policy_removes_is_refused_in_its_own_protocol(governed):
    """Sent on, the request would have the model call some other tool; the client learns which field to fix."""
    proc, _ = governed
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(
            model="vsr/auto", tools=[chat_tool("docs.search"), chat_tool("admin.delete")],
            tool_choice={"type": "function", "function": {"name": "admin.delete"}},
            messages=[{"role": "user", "content": "Delete it via openai."}])
    assert chat.value.body["param"] == "tool_choice" and "admin.delete" in chat.value.body["message"]
    messages = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as msgs:
        messages.messages.create(model="vsr/auto", max_tokens=20, tool_choice={"type": "tool", "name": "other"},
                                 messages=[{"role": "user", "content": "Go via anthropic."}],
                                 tools=[{"name": n, "input_schema": {"type": "object"}}
                                        for n in ("tickets.lookup", "other")])
    assert "tool_choice" in str(msgs.value)


def test_a_client_requiring_a_tool_call_none_of_its_allowed_tools_can_make_is_refused(governed):
    """tool_choice required (Chat, Responses) or any (Messages) with every offered tool removed by the policy:
    the client demanded a tool call, so the same 400 as forcing a removed tool, and no model is asked."""
    proc, upstream = governed
    before = httpx.get(f"{upstream.url}/_mock/stats").json()["requests"]
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model="vsr/auto", tools=[chat_tool("other")], tool_choice="required",
                                       messages=[{"role": "user", "content": "Look it up via openai."}])
    assert (chat.value.body["code"], chat.value.body["param"]) == ("invalid_value", "tool_choice"), chat.value.body
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model="vsr/auto", input="Look it up via responses.", tool_choice="required",
                                tools=[{"type": "function", "name": "other", "parameters": {"type": "object"}}])
    assert (responses.value.body["code"], responses.value.body["param"]) == ("invalid_value", "tool_choice")
    messages = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as msgs:
        messages.messages.create(model="vsr/auto", max_tokens=20, tool_choice={"type": "any"},
                                 messages=[{"role": "user", "content": "Go via anthropic."}],
                                 tools=[{"name": "other", "input_schema": {"type": "object"}}])
    assert "tool_choice" in str(msgs.value)
    assert httpx.get(f"{upstream.url}/_mock/stats").json()["requests"] == before


def test_a_messages_client_keeps_only_its_allowed_tools(governed):
    proc, upstream = governed
    client = anthropic.Anthropic(base_url=proc.url, api_key="k")
    client.messages.create(model="vsr/auto", max_tokens=20, messages=[{"role": "user", "content": "Go via anthropic."}],
                           tools=[{"name": n, "input_schema": {"type": "object"}}
                                  for n in ("admin.delete", "tickets.lookup", "other")])
    assert names(sent(upstream)) == ["tickets.lookup"]


def test_codex_namespace_and_custom_tools_are_governed_by_their_names(governed):
    """A namespace is allowed as a whole and one of its tools blocked by ns.name; a freeform custom tool
    is allowed by its name; an additional_tools item is filtered like the top level."""
    proc, upstream = governed
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    client.responses.create(model="vsr/auto", input=[
        {"role": "user", "content": "Patch it via responses."},
        {"type": "additional_tools", "tools": [{"type": "function", "name": "admin.delete",
                                                "parameters": {"type": "object"}}]},
    ], tools=[{"type": "namespace", "name": "functions", "description": "Codex",
               "tools": [{"type": "function", "name": "exec", "parameters": {"type": "object"}},
                         {"type": "function", "name": "shell", "parameters": {"type": "object"}}]},
              {"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
              {"type": "custom", "name": "rm_rf"}])
    body = sent(upstream)
    assert names(body) == ["functions.exec", "apply_patch"]
    assert not any(isinstance(i, dict) and i.get("type") == "additional_tools" for i in body["input"])


def test_a_codex_request_to_a_chat_backend_gets_the_filtered_tools_as_functions(governed):
    proc, upstream = governed
    r = httpx.post(f"{proc.url}/v1/responses", json={
        "model": "vsr/auto", "input": "Patch it via openai.",
        "tools": [{"type": "namespace", "name": "functions", "description": "Codex",
                   "tools": [{"type": "function", "name": "exec", "parameters": {"type": "object"}},
                             {"type": "function", "name": "shell", "parameters": {"type": "object"}}]},
                  {"type": "custom", "name": "apply_patch"}, {"type": "custom", "name": "rm_rf"}]})
    assert r.status_code == 200, r.text
    assert names(sent(upstream)) == ["functions__exec", "apply_patch"]


def fn(name: str) -> dict:
    return {"name": name, "description": f"the {name} function", "parameters": {"type": "object"}}


@pytest.mark.parametrize("fmt", FORMATS)
def test_legacy_functions_are_allowed_blocked_and_stripped_like_tools_for_every_backend(governed, fmt):
    """``functions`` is the same offer as ``tools``: the policy's names remove it whatever field carries it,
    and strip_tool_history removes an assistant's legacy ``function_call`` as it removes its tool_calls."""
    proc, upstream = governed
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    client.chat.completions.create(
        model="vsr/auto", functions=[fn(n) for n in ("admin.delete", "weather", "docs.search")],
        messages=[{"role": "user", "content": "Delete it."},
                  {"role": "assistant", "content": None,
                   "function_call": {"name": "admin.delete", "arguments": "{\"id\": \"acct-77\"}"}},
                  {"role": "function", "name": "admin.delete", "content": "deleted"},
                  {"role": "user", "content": f"Now look it up via {fmt}."}])
    body = sent(upstream)
    offered = [f["name"] for f in body.get("functions") or ()] + names(body)
    assert offered == ["docs.search"], body
    text = json.dumps(body)
    assert "admin.delete" not in text and "acct-77" not in text and "weather" not in text, body


def test_legacy_functions_under_a_passthrough_block_lose_only_the_blocked_one(tmp_path):
    with mock_upstream() as upstream:
        doc = config([model("m", f"{upstream.url}/v1")], [
            {"name": "any", "priority": 1, "modelRefs": [{"model": "m"}],
             "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "hi"}]}}],
            signals={"keywords": [{"name": "hi", "operator": "OR", "keywords": ["hi"]}]})
        doc["global"] = {"plugins": [{"type": "tools", "configuration": {
            "policy": {"mode": "passthrough", "block_tools": ["delete_account"]}}}]}
        with router(write_config(doc, str(tmp_path))) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
            client.chat.completions.create(model="vsr/auto", functions=[fn("delete_account"), fn("ok_tool")],
                                           function_call="auto", messages=[{"role": "user", "content": "hi"}])
            body = sent(upstream)
            assert [f["name"] for f in body["functions"]] == ["ok_tool"] and "tools" not in body, body
            assert body["function_call"] == "auto"
            client.chat.completions.create(model="vsr/auto", functions=[fn("delete_account")],
                                           function_call="auto", messages=[{"role": "user", "content": "hi"}])
            body = sent(upstream)
            assert "functions" not in body and "function_call" not in body, body    # nothing left to call
            with pytest.raises(openai.BadRequestError) as forced:
                client.chat.completions.create(
                    model="vsr/auto", functions=[fn("delete_account"), fn("ok_tool")],
                    function_call={"name": "delete_account"}, messages=[{"role": "user", "content": "hi"}])
            assert forced.value.body["param"] == "function_call", forced.value.body
            assert forced.value.body["code"] == "invalid_value" and "delete_account" in forced.value.body["message"]


# --- every model a request can reach ---------------------------------------------------------------


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """A global policy (block admin.delete), a recipe policy (only docs.search and admin.delete), one decision
    whose first candidate refuses connections, the recipe's fallback, and provider models named directly."""
    with mock_upstream() as upstream:
        models = [model("m", f"{upstream.url}/v1"), model("down", f"http://127.0.0.1:{refused_port()}/v1"),
                  {**model("m-anthropic", f"{upstream.url}/v1"), "api_format": "anthropic"}]
        doc = config(models, [{"name": "routed", "priority": 10, "modelRefs": [{"model": "down"}, {"model": "m"}],
                               "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "routed"}]}}],
                     signals={"keywords": [{"name": "routed", "operator": "OR", "keywords": ["route me"]}]},
                     fallback={"modelRefs": [{"model": "m-anthropic"}]},
                     plugins=[{"type": "tools", "configuration": {"policy": {
                         "mode": "filtered", "allow_tools": ["docs.search", "admin.delete"]}}}])
        doc["global"] = {"plugins": [{"type": "tools", "configuration": {"policy": {"block_tools": ["admin.delete"]}}},
                                     {"type": "router_replay", "configuration": {"enabled": True}}],
                         "router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("layered")))) as proc:
            yield proc, upstream


OFFERED = ("docs.search", "admin.delete", "weather")


def test_the_recipes_fallback_gets_the_recipes_and_the_global_tools_policy(layered):
    """No decision matched: the recipe's and the global plugins run (spec 6.5), the tools policy among them; a
    client could otherwise reach a tool the policy forbids by writing a prompt no decision matches."""
    proc, upstream = layered
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", tools=[chat_tool(n) for n in OFFERED], messages=[{"role": "user", "content": "hello"}])
    assert raw.headers["x-vsr-response-path"] == "upstream" and raw.headers["x-vsr-selected-model"] == "m-anthropic"
    assert "x-vsr-selected-decision" not in raw.headers
    assert names(sent(upstream)) == ["docs.search"]
    record = replay_record(proc, raw.headers["x-vsr-replay-id"])
    assert any("tools: policy filtered: removed admin.delete, weather" in p for p in record["plugins"]), record
    with pytest.raises(anthropic.BadRequestError) as forced:
        anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0).messages.create(
            model="vsr/auto", max_tokens=20, tool_choice={"type": "tool", "name": "admin.delete"},
            messages=[{"role": "user", "content": "hello"}],
            tools=[{"name": n, "input_schema": {"type": "object"}} for n in OFFERED])
    assert "admin.delete" in str(forced.value) and "tool_choice" in str(forced.value)


def test_a_decisions_later_candidate_gets_the_policy_its_first_would_have(layered):
    """The first candidate refuses connections: the one that answers is sent the same governed tools."""
    proc, upstream = layered
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", tools=[chat_tool(n) for n in OFFERED], messages=[{"role": "user", "content": "route me"}])
    assert raw.headers["x-vsr-response-path"] == "fallback" and raw.headers["x-vsr-selected-model"] == "m"
    assert raw.headers["x-vsr-selected-decision"] == "routed"
    assert names(sent(upstream)) == ["docs.search"]


def test_a_model_named_directly_gets_the_global_tools_policy(layered):
    """``direct_models: allow`` skips the recipe, not ``global.plugins``: the global block holds for every API."""
    proc, upstream = layered
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    client.chat.completions.create(model="m", tools=[chat_tool(n) for n in OFFERED],
                                   messages=[{"role": "user", "content": "hello"}])
    assert names(sent(upstream)) == ["docs.search", "weather"]
    client.responses.create(model="m", input="hello", tools=[
        {"type": "function", "name": n, "parameters": {"type": "object"}} for n in OFFERED])
    assert names(sent(upstream)) == ["docs.search", "weather"]
    with pytest.raises(openai.BadRequestError) as forced:
        client.chat.completions.create(model="m", tools=[chat_tool(n) for n in OFFERED],
                                       tool_choice={"type": "function", "function": {"name": "admin.delete"}},
                                       messages=[{"role": "user", "content": "hello"}])
    assert forced.value.body["param"] == "tool_choice" and "admin.delete" in forced.value.body["message"]


# --- select ---------------------------------------------------------------------------------------


def catalog(path, n: int) -> str:
    tools = [{"tool": {"type": "function", "function": {
        "name": f"tool_{i:04d}", "description": f"Internal utility number {i} for batch job {i % 17}.",
        "parameters": {"type": "object"}}}} for i in range(n - 1)]
    tools.append({"tool": {"type": "function", "function": {
        "name": "weather_forecast", "description": "Get the weather forecast for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}})
    file = path / "tools_db.json"
    file.write_text(json.dumps(tools))
    return str(file)


@pytest.fixture(scope="module")
def selecting(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("select")
    db = catalog(tmp, 1000)
    with mock_upstream() as upstream:
        models = [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt} for fmt in FORMATS]
        add = {"select": {"mode": "add", "tools_db_path": db, "need_threshold": 0,
                          "match": {"recall": {"method": "bm25", "top_k": 20},
                                    "judge": {"preset": "tool_rank", "top_k": 3, "min_ratio": 0}}}}
        narrow = {"select": {"mode": "filter", "need_threshold": 0, "preserve_count": 1,
                             "match": {"judge": {"top_k": 2, "min_ratio": 0}}}}
        decisions = [{"name": f"add-{fmt}", "priority": 10, "plugins": [{"type": "tools", "configuration": add}],
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": fmt}]},
                      "modelRefs": [{"model": f"m-{fmt}"}]} for fmt in FORMATS]
        decisions.append({"name": "narrow", "priority": 20, "plugins": [{"type": "tools", "configuration": narrow}],
                          "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "narrow"}]},
                          "modelRefs": [{"model": "m-openai"}]})
        doc = config(models, decisions, signals={"keywords": [
            {"name": k, "operator": "OR", "keywords": [f"via {k}"]} for k in (*FORMATS, "narrow")]})
        doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {"enabled": True}}],
                         "router": {"headers": {"debug": "any"}}}
        with router(write_config(doc, str(tmp))) as proc:
            yield proc, upstream


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_catalog_of_1000_tools_is_narrowed_to_top_k(selecting, fmt):
    proc, upstream = selecting
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=[
        {"role": "user", "content": f"What is the weather forecast for Paris? Answer via {fmt}."}])
    added = names(sent(upstream))
    assert len(added) == 3 and len(set(added)) == 3, added
    assert all(n == "weather_forecast" or n.startswith("tool_") for n in added)
    # BM25 recall put the one tool about the weather among the 20 the judge read, and it chose it.
    assert "weather_forecast" in added
    record = replay_record(proc, raw.headers["x-vsr-replay-id"])
    selection = [p for p in record["plugins"] if "tools: select add" in p]
    assert selection and all(n in selection[0] for n in added), record["plugins"]


def test_filter_mode_reads_at_most_255_tools_and_keeps_top_k_plus_the_preserved(selecting):
    proc, upstream = selecting
    before = metric(proc, "vsr_match_judge_truncated_total")
    tools = [chat_tool(f"t{i:03d}") for i in range(300)]
    r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-vsr-debug": "1"}, json={
        "model": "vsr/auto", "tools": tools, "messages": [{"role": "user", "content": "Do it via narrow."}]})
    assert r.status_code == 200, r.text
    assert 'match_judge_truncated="tools.select 299 candidates, judge read 255"' in r.headers["x-vsr-trace"]
    kept = names(sent(upstream))
    assert kept[0] == "t000" and len(kept) == 3                  # preserve_count 1, then the judge's top 2
    assert all(int(n[1:]) < 256 for n in kept)                   # the judge read the first 1 + 255, in order
    assert metric(proc, "vsr_match_judge_truncated_total") == before + 1


def test_select_on_error_fail_refuses_skip_and_keep_send_the_tools_unchanged_strip_drops_them(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failing")
    db = catalog(tmp, 10)
    with mock_upstream() as upstream:
        decisions = [{"name": mode, "priority": 10, "modelRefs": [{"model": "m"}],
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": mode}]},
                      "plugins": [{"type": "tools", "configuration": {"select": {
                          "mode": select_mode, "on_error": mode, "timeout_ms": 300,
                          **({"tools_db_path": db} if select_mode == "add" else {}),
                          "match": {"judge": {"deployment": "gone"}}}}}]}
                     for mode, select_mode in (("fail", "add"), ("skip", "add"), ("keep", "filter"), ("strip", "filter"))]
        doc = config([model("m", f"{upstream.url}/v1")], decisions, signals={"keywords": [
            {"name": m, "operator": "OR", "keywords": [f"on {m}"]} for m in ("fail", "skip", "keep", "strip")]})
        doc["global"] = {"model_catalog": {"deployments": {"gone": {
            "provider": "systemone", "endpoint": f"http://127.0.0.1:{refused_port()}/v1/systemone", "model": "x",
            "timeout_ms": 300}}}}
        with router(write_config(doc, str(tmp))) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
            with pytest.raises(openai.InternalServerError) as caught:
                client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "on fail"}])
            assert caught.value.status_code == 503 and "tool_selection_failed" in caught.value.response.text
            assert httpx.get(f"{upstream.url}/_mock/stats").json()["requests"] == 0
            client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "on skip"}])
            assert "tools" not in sent(upstream)
            offered = [chat_tool("a"), chat_tool("b")]
            client.chat.completions.create(model="vsr/auto", tools=offered,
                                           messages=[{"role": "user", "content": "on keep"}])
            assert names(sent(upstream)) == ["a", "b"]
            client.chat.completions.create(model="vsr/auto", tools=offered,
                                           messages=[{"role": "user", "content": "on strip"}])
            assert "tools" not in sent(upstream)
