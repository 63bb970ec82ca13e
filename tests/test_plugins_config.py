"""The request plugins' configuration: every bad form a one-line error with its path, and layering field by field."""
from __future__ import annotations

import pytest

from vsr_fast.errors import ConfigError
from vsr_fast.routing import load_raw
from vsr_fast.server.recording import Policies


def doc(decision_plugins: list, global_plugins: list | None = None, recipe_plugins: list | None = None) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:1/v1"}]}]},
        "global": {"plugins": global_plugins or []},
        "recipes": [{"name": "default", "plugins": recipe_plugins or [],
                     "decisions": [{"name": "d", "modelRefs": [{"model": "m"}], "plugins": decision_plugins}]}],
    }


def errors_of(d: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    return info.value.lines


AT = "recipes[default].decisions[0].plugins[0]"


@pytest.mark.parametrize(("entry", "line"), [
    ({"type": "header_mutation", "configuration": {"add": [{"name": "x-vsr-selected-model", "value": "x"}]}},
     f"{AT}.configuration.add[0].name: reserved_header: 'x-vsr-selected-model' is written by the router"),
    ({"type": "header_mutation", "configuration": {"update": [{"name": "Authorization", "value": "Bearer x"}]}},
     f"{AT}.configuration.update[0].name: reserved_header: 'Authorization'"),
    ({"type": "header_mutation", "configuration": {"delete": ["x-authz-user-id"]}},
     f"{AT}.configuration.delete[0]: reserved_header: 'x-authz-user-id'"),
    ({"type": "header_mutation", "configuration": {"add": [{"name": "bad name", "value": "x"}]}},
     f"{AT}.configuration.add[0].name: invalid_value"),
    ({"type": "header_mutation", "configuration": {"add": [{"name": "x-ok", "value": "a\nb"}]}},
     f"{AT}.configuration.add[0].value: invalid_value"),
    ({"type": "system_prompt", "configuration": {"mode": "append", "system_prompt": "x"}},
     f"{AT}.configuration.mode: removed_field: mode append was removed"),
    ({"type": "system_prompt", "configuration": {"mode": "prepend", "system_prompt": "x"}},
     f"{AT}.configuration.mode: invalid_value"),
    ({"type": "system_prompt", "configuration": {"system_prompt": ""}},
     f"{AT}.configuration.system_prompt: invalid_value"),
    ({"type": "request_params", "configuration": {"blocked_params": ["messages"]}},
     f"{AT}.configuration.blocked_params[0]: invalid_value: 'messages' makes the request what it is"),
    ({"type": "request_params", "configuration": {"generation": {"thinking": False, "reasoning_effort": "low"}}},
     f"{AT}.configuration.generation.reasoning_effort: invalid_value: reasoning_effort is sent only together"),
    ({"type": "request_params", "configuration": {"generation": {"thinking": True, "max_tokens": 512,
                                                                 "thinking_budget": 512}}},
     f"{AT}.configuration.generation.thinking_budget: invalid_value: the thinking budget (512) must be below"),
    ({"type": "request_params", "configuration": {"temperature": {"min": 1.5, "max": 0.5}}},
     f"{AT}.configuration.temperature: invalid_value: min 1.5 is above max 0.5"),
    ({"type": "request_params", "configuration": {"max_tokens_limit": 0}},
     f"{AT}.configuration.max_tokens_limit: invalid_value"),
    ({"type": "request_params", "configuration": {"max_token_limit": 10}},
     f"{AT}.configuration.max_token_limit: unknown_field"),
    ({"type": "prompt_cache", "configuration": {"max_markers": 5}},
     f"{AT}.configuration.max_markers: invalid_value"),
    ({"type": "prompt_cache", "configuration": {"targets": ["history"]}},
     f"{AT}.configuration.targets[0]: invalid_value"),
    ({"type": "rag", "configuration": {}},
     f"{AT}.type: removed_plugin_type: rag was removed; write context with a rag source"),
    ({"type": "semantic-cache", "configuration": {}},
     f"{AT}.type: removed_plugin_type: semantic-cache was removed; write response_cache"),
])
def test_each_bad_form_is_one_line_with_its_path(entry, line):
    lines = errors_of(doc([entry]))
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_layers_override_field_by_field():
    loaded = load_raw(doc(
        decision_plugins=[{"type": "request_params", "configuration": {"max_tokens_limit": 10}}],
        global_plugins=[{"type": "request_params", "configuration": {"max_tokens_limit": 99, "max_n": 2}},
                        {"type": "system_prompt", "configuration": {"system_prompt": "global", "mode": "replace"}}],
        recipe_plugins=[{"type": "system_prompt", "configuration": {"system_prompt": "recipe"}}],
    ))
    shaping = Policies(loaded).shaping("default", "d")
    steps = dict(shaping.steps)
    assert steps["request_params"].max_tokens_limit == 10 and steps["request_params"].max_n == 2
    assert (steps["system_prompt"].text, steps["system_prompt"].mode) == ("recipe", "replace")
    assert list(steps) == ["system_prompt", "request_params"]         # the spec's order, whatever the layers'


def test_a_decision_turns_an_inherited_plugin_off():
    loaded = load_raw(doc(
        decision_plugins=[{"type": "system_prompt", "configuration": {"enabled": False}}],
        global_plugins=[{"type": "system_prompt", "configuration": {"system_prompt": "global"}}],
    ))
    assert Policies(loaded).shaping("default", "d") is None


# RFC 9110 7.6.1 hop-by-hop and framing names: a proxy writes them per connection, never a plugin.
HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
              "host", "content-length")


@pytest.mark.parametrize("name", HOP_BY_HOP)
@pytest.mark.parametrize("key", ["add", "update", "delete"])
def test_header_mutation_refuses_every_hop_by_hop_and_framing_name(name, key):
    written = name.title()          # any case
    conf = {key: [written] if key == "delete" else [{"name": written, "value": "x"}]}
    where = f"{AT}.configuration.{key}[0]" + ("" if key == "delete" else ".name")
    lines = errors_of(doc([{"type": "header_mutation", "configuration": conf}]))
    assert any(line.startswith(f"{where}: reserved_header: {written!r}") for line in lines), lines
