"""tools: every bad form of its configuration one line with its path (duplicate_tool_name included), layering,
and its edits of each client API's body (policy, strip history, Codex namespaces and custom tools)."""
from __future__ import annotations

import json

import pytest

from vsr_fast.plugins import tools as tp
from vsr_fast.routing import load_raw
from vsr_fast.server.recording import Policies

from . import test_plugins_config as plugins_config
from .test_plugins_config import errors_of


def doc(decision_plugins: list, global_plugins: list | None = None, deployments: dict | None = None) -> dict:
    out = plugins_config.doc(decision_plugins, global_plugins)
    if deployments:
        out["global"]["model_catalog"] = {"deployments": deployments}
    return out


AT = f"{plugins_config.AT}.configuration"


@pytest.fixture
def db(tmp_path):
    def write(names: list[str]) -> str:
        path = tmp_path / "tools_db.json"
        path.write_text(json.dumps([{"tool": {"type": "function", "function": {"name": n, "description": n}}}
                                    for n in names]))
        return str(path)
    return write


def test_a_catalog_that_names_a_tool_twice_fails_to_load(db):
    path = db(["a", "b", "a"])
    lines = errors_of(doc([{"type": "tools", "configuration": {"select": {"mode": "add", "tools_db_path": path}}}]))
    assert lines == [f"{AT}.select.tools_db_path: duplicate_tool_name: entry [2] names 'a' again"]


@pytest.mark.parametrize(("configuration", "line"), [
    ({"select": {"mode": "add", "on_error": "keep", "tools_db_path": "@db"}},
     f"{AT}.select.on_error: invalid_value: 'keep' is not an on_error of select mode add (skip or fail)"),
    ({"select": {"mode": "filter", "on_error": "skip"}},
     f"{AT}.select.on_error: invalid_value: 'skip' is not an on_error of select mode filter (keep or strip or fail)"),
    ({"select": {"mode": "add"}}, f"{AT}.select.tools_db_path: missing_field: select mode add chooses from a catalog"),
    ({"select": {"mode": "add", "tools_db_path": "/nonexistent/tools.json"}},
     f"{AT}.select.tools_db_path: invalid_value: cannot read '/nonexistent/tools.json'"),
    ({"select": {"match": {}}}, f"{AT}.select.match: match_empty"),
    ({"select": {"match": {"recall": {"method": "embedding"}}}}, f"{AT}.select.match.recall.method: invalid_value"),
    ({"select": {"match": {"judge": {"max_candidates": 256}}}}, f"{AT}.select.match.judge.max_candidates: invalid_value"),
    ({"select": {"match": {"judge": {"max_candidates": 0}}}}, f"{AT}.select.match.judge.max_candidates: invalid_value"),
    ({"select": {"match": {"judge": {"preset": "relevance"}}}}, f"{AT}.select.match.judge.preset: invalid_value"),
    ({"select": {"need_threshold": 1.5}}, f"{AT}.select.need_threshold: invalid_value"),
    ({"select": {"timeout_ms": 0}}, f"{AT}.select.timeout_ms: invalid_value"),
    ({"policy": {"mode": "allow"}}, f"{AT}.policy.mode: invalid_value"),
    ({"policy": {"allow_tools": "docs.search"}}, f"{AT}.policy.allow_tools: invalid_type"),
    ({"policy": {"block": ["x"]}}, f"{AT}.policy.block: unknown_field"),
    ({"select": {"match": {"judge": {"deployment": "nowhere"}}}},
     f"{AT}.select.match.judge.deployment: unknown_deployment: 'nowhere' is not declared"),
])
def test_each_bad_form_is_one_line_with_its_path(configuration, line, db):
    select = configuration.get("select")
    if isinstance(select, dict) and select.get("tools_db_path") == "@db":
        select["tools_db_path"] = db(["a"])
    lines = errors_of(doc([{"type": "tools", "configuration": configuration}]))
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_a_judge_deployment_must_answer_choice_and_noul():
    lines = errors_of(doc([{"type": "tools", "configuration": {"select": {"match": {"judge": {"deployment": "s"}}}}}],
                          deployments={"s": {"provider": "systemone", "endpoint": "http://127.0.0.1:1/v1/systemone",
                                             "model": "x", "capabilities": {"question_types": ["score"]}}}))
    assert lines == [f"{AT}.select.match.judge: question_type_unsupported: tool_need and tool_rank ask noul and "
                     'choice questions; deployment "s" does not answer choice, noul']


def test_layers_merge_policy_and_select_field_by_field_and_select_null_turns_it_off(db):
    path = db(["a", "b"])
    loaded = load_raw(doc(
        [{"type": "tools", "configuration": {"policy": {"block_tools": ["x"]}, "select": {"need_threshold": 0.2}}}],
        global_plugins=[{"type": "tools", "configuration": {"policy": {"mode": "filtered", "allow_tools": ["a"]},
                                                            "select": {"mode": "add", "tools_db_path": path}}}]))
    policy = Policies(loaded).tools("default", "d")
    assert (policy.mode, policy.allow, policy.block) == ("filtered", frozenset({"a"}), frozenset({"x"}))
    assert policy.select.mode == "add" and policy.select.need_threshold == 0.2
    assert [t.name for t in policy.select.catalog] == ["a", "b"] and policy.select.on_error == "skip"
    off = load_raw(doc([{"type": "tools", "configuration": {"select": None}}],
                       global_plugins=[{"type": "tools", "configuration": {"select": {"mode": "filter"}}}]))
    assert Policies(off).tools("default", "d") is None          # nothing left to do: no policy at all


BODIES = {
    "openai": {"tools": [{"type": "function", "function": {"name": "keep"}},
                         {"type": "custom", "custom": {"name": "drop"}}],
               "tool_choice": {"type": "function", "function": {"name": "drop"}},
               "messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": None,
                             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "keep"}}]},
                            {"role": "tool", "tool_call_id": "c", "content": "r"},
                            {"role": "assistant", "content": "ok", "tool_calls": [{"id": "d"}]}]},
    "anthropic": {"tools": [{"name": "keep"}, {"name": "drop"}], "tool_choice": {"type": "tool", "name": "drop"},
                  "messages": [{"role": "user", "content": "hi"},
                               {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "keep"}]},
                               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"},
                                                            {"type": "text", "text": "and"}]}]},
    "responses": {"tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "keep"},
                                                                          {"type": "function", "name": "drop"}]}],
                  "tool_choice": {"type": "function", "name": "drop"},
                  "input": [{"role": "user", "content": "hi"},
                            {"type": "function_call", "call_id": "c", "name": "keep", "namespace": "ns"},
                            {"type": "function_call_output", "call_id": "c", "output": "r"},
                            {"type": "custom_tool_call", "call_id": "e", "name": "x", "input": "y"}]},
}


@pytest.mark.parametrize("fmt", sorted(BODIES))
def test_policy_and_history_edits_in_each_format(fmt):
    body = json.loads(json.dumps(BODIES[fmt]))
    removed = tp.keep_tools(body, fmt, lambda ref: ref.name != "drop")
    assert removed == (["ns__drop"] if fmt == "responses" else ["drop"])
    assert [r.name for r in tp.listed(body, fmt)] == ["keep"] and "tool_choice" not in body
    assert tp.strip_history(body, fmt) >= 2
    text = json.dumps(body)
    assert '"r"' not in text and "tool_use" not in text and "function_call" not in text and "tool_calls" not in text
    # Nothing but the conversation's own text is left: "hi" (and "ok" / "and" where they stood beside a call).
    assert "hi" in text
    assert tp.keep_tools(body, fmt, lambda ref: False) == (["ns__keep"] if fmt == "responses" else ["keep"])
    assert "tools" not in body


def test_a_namespaced_tool_is_matched_by_each_of_its_names():
    ref = tp.ToolRef("exec", "functions")
    assert ref.key == "functions__exec" and ref.keys() == {"exec", "functions__exec", "functions.exec", "functions"}
    policy = tp.Tools(mode="filtered", allow=frozenset({"functions"}), block=frozenset({"functions.shell"}))
    assert policy.allows(ref) and not policy.allows(tp.ToolRef("shell", "functions"))
    assert not tp.Tools(mode="none").allows(tp.ToolRef("a"))
