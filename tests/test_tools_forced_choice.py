"""tools policy and a client's forced tool_choice: a request that forces a tool the route's policy removes is
refused (400, param tool_choice) in every client API, never silently re-pointed; a selection's removal still
drops the choice, and a forced tool the policy keeps goes through untouched."""
from __future__ import annotations

import json

import pytest

from vsr_fast.errors import InvalidValue
from vsr_fast.plugins import tools as tp

POLICY = tp.Tools(block=frozenset({"danger"}))

FORCING = {
    "openai": {"tools": [{"type": "function", "function": {"name": "safe"}},
                         {"type": "function", "function": {"name": "danger"}}],
               "tool_choice": {"type": "function", "function": {"name": "danger"}}},
    "anthropic": {"tools": [{"name": "safe"}, {"name": "danger"}], "tool_choice": {"type": "tool", "name": "danger"}},
    "responses": {"tools": [{"type": "function", "name": "safe"}, {"type": "function", "name": "danger"}],
                  "tool_choice": {"type": "function", "name": "danger"}},
}


def body(fmt: str) -> dict:
    return json.loads(json.dumps(FORCING[fmt]))


@pytest.mark.parametrize("fmt", sorted(FORCING))
def test_forcing_a_tool_the_policy_blocks_is_refused_naming_tool_choice(fmt):
    with pytest.raises(InvalidValue) as info:
        tp.keep_tools(body(fmt), fmt, POLICY.allows)
    assert info.value.status == 400 and info.value.param == "tool_choice"
    assert "'danger'" in info.value.message


@pytest.mark.parametrize("policy", [tp.Tools(mode="none"), tp.Tools(mode="filtered", allow=frozenset({"other"}))])
def test_forcing_a_tool_when_the_policy_removes_every_tool_is_refused_too(policy):
    with pytest.raises(InvalidValue):
        tp.keep_tools(body("openai"), "openai", policy.allows)


def test_a_chat_custom_tool_and_a_responses_hosted_tool_are_forced_tools_too():
    chat = {"tools": [{"type": "custom", "custom": {"name": "danger"}}, {"type": "function", "function": {"name": "a"}}],
            "tool_choice": {"type": "custom", "custom": {"name": "danger"}}}
    with pytest.raises(InvalidValue):
        tp.keep_tools(chat, "openai", POLICY.allows)
    hosted = {"tools": [{"type": "web_search_preview"}, {"type": "function", "name": "a"}],
              "tool_choice": {"type": "web_search_preview"}}
    with pytest.raises(InvalidValue):
        tp.keep_tools(hosted, "responses", tp.Tools(block=frozenset({"web_search_preview"})).allows)


@pytest.mark.parametrize("fmt", sorted(FORCING))
def test_a_forced_tool_the_policy_keeps_goes_through_and_others_are_removed(fmt):
    b = body(fmt)
    assert tp.keep_tools(b, fmt, tp.Tools(block=frozenset({"safe"})).allows) == ["safe"]
    assert b["tool_choice"] == FORCING[fmt]["tool_choice"]


@pytest.mark.parametrize("fmt", sorted(FORCING))
def test_a_selection_that_drops_the_forced_tool_still_drops_the_choice(fmt):
    b = body(fmt)
    assert tp.keep_tools(b, fmt, lambda ref: ref.name != "danger") == ["danger"]
    assert "tool_choice" not in b
    b = body(fmt)
    tp.keep_tools(b, fmt, POLICY.allows, forced="drop")
    assert "tool_choice" not in b


REQUIRING = {
    "openai": {"tools": [{"type": "function", "function": {"name": "other"}}], "tool_choice": "required"},
    "anthropic": {"tools": [{"name": "other"}], "tool_choice": {"type": "any"}},
    "responses": {"tools": [{"type": "function", "name": "other"}], "tool_choice": "required"},
}


@pytest.mark.parametrize("fmt", sorted(REQUIRING))
def test_requiring_a_tool_call_when_the_policy_removes_every_tool_is_refused(fmt):
    """The client demanded a call none of its tools may make: the forced-tool 400, not a plain answer."""
    with pytest.raises(InvalidValue) as info:
        tp.keep_tools(json.loads(json.dumps(REQUIRING[fmt])), fmt, tp.Tools(mode="filtered",
                                                                            allow=frozenset({"lookup"})).allows)
    assert info.value.status == 400 and info.value.param == "tool_choice"


@pytest.mark.parametrize("fmt", sorted(REQUIRING))
def test_requiring_a_tool_call_with_an_allowed_tool_left_goes_through(fmt):
    b = json.loads(json.dumps(REQUIRING[fmt]))
    b["tools"].append(json.loads(json.dumps(FORCING[fmt]["tools"][0])))     # "safe", which the policy keeps
    assert tp.keep_tools(b, fmt, tp.Tools(mode="filtered", allow=frozenset({"safe"})).allows) == ["other"]
    assert b["tool_choice"] == REQUIRING[fmt]["tool_choice"]


def test_a_responses_allowed_tools_choice_in_required_mode_demands_a_call_too():
    b = {"tools": [{"type": "function", "name": "other"}],
         "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "other"}]}}
    with pytest.raises(InvalidValue):
        tp.keep_tools(b, "responses", tp.Tools(mode="none").allows)


def test_a_selection_that_removes_every_tool_drops_a_required_choice():
    b = json.loads(json.dumps(REQUIRING["openai"]))
    tp.keep_tools(b, "openai", lambda ref: False)
    assert "tool_choice" not in b and "tools" not in b
