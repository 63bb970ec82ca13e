"""Settings that load but can never take effect are load warnings, each one line with its path and code: a plugin
type given twice in one layer, a model twice in one modelRefs, a fast_response with an empty message, a tools
policy filtered with no allow_tools, a predicate no probability can meet. Two backends of one model under one
name are a load error (their metrics, health state and logs would be one backend's)."""
from __future__ import annotations

import json

import pytest
import yaml

from vsr_fast.routing import load_raw
from vsr_fast.routing.loaded import validate_bytes

from .procs import cli_process
from .test_plugins_config import AT, doc, errors_of

CODES = ("duplicate_plugin", "duplicate_model", "empty_message", "empty_allow_tools", "never_matches",
         "family_not_read", "masked_label_ignored")


def warned(d: dict) -> list[str]:
    """The warnings of the codes these checks write, as the loaded router reports them."""
    return [w for w in load_raw(d).warnings if any(f": {c}: " in w for c in CODES)]


def with_signals(d: dict, signals: dict, rules: dict) -> dict:
    d["recipes"][0]["signals"] = signals
    d["recipes"][0]["decisions"][0]["rules"] = rules
    return d


def test_two_system_prompt_plugins_on_one_decision_warn_that_the_second_is_never_applied():
    d = doc([{"type": "system_prompt", "configuration": {"system_prompt": "one"}},
             {"type": "system_prompt", "configuration": {"system_prompt": "two"}}])
    [line] = warned(d)
    assert line.startswith("recipes[default].decisions[0].plugins[1].type: duplicate_plugin: ")
    assert "the first ([0])" in line


def test_any_plugin_type_twice_in_the_global_layer_warns_too():
    d = doc([], global_plugins=[{"type": "request_params", "configuration": {"max_tokens_limit": 10}},
                                {"type": "system_prompt", "configuration": {"system_prompt": "x"}},
                                {"type": "request_params", "configuration": {"max_tokens_limit": 20}}])
    assert [w.partition(": ")[0] for w in warned(d)] == ["global.plugins[2].type"]


def test_one_plugin_of_a_type_per_layer_is_no_warning():
    d = doc([{"type": "system_prompt", "configuration": {"system_prompt": "decision"}}],
            global_plugins=[{"type": "system_prompt", "configuration": {"system_prompt": "global"}}],
            recipe_plugins=[{"type": "system_prompt", "configuration": {"system_prompt": "recipe"}}])
    assert warned(d) == []


def test_the_same_model_twice_in_modelrefs_warns_at_the_second():
    d = doc([])
    d["recipes"][0]["decisions"][0]["modelRefs"] = [{"model": "m"}, {"model": "m", "lora_name": "adapter"}]
    [line] = warned(d)
    assert line.startswith("recipes[default].decisions[0].modelRefs[1].model: duplicate_model: 'm' is already "
                           "modelRefs[0]")


@pytest.mark.parametrize(("facts", "why"), [
    ({"api_format": "openai"}, "does not declare capabilities: [reasoning]"),
    ({"api_format": "anthropic", "capabilities": ["reasoning"]}, "only an openai-format model"),
    ({"api_format": "openai", "capabilities": ["reasoning"]}, None)])
def test_a_vllm_reasoning_family_on_a_model_that_gets_no_reasoning_field_warns(facts, why):
    d = doc([])
    d["providers"]["models"][0].update(facts, reasoning_family="chat_template_kwargs")
    name = d["providers"]["models"][0]["name"]
    lines = warned(d)
    if why is None:
        assert lines == []
    else:
        [line] = lines
        assert line.startswith(f"providers.models[{name}].reasoning_family: family_not_read: ") and why in line


def test_a_fast_response_with_an_empty_message_warns():
    d = doc([{"type": "fast_response", "configuration": {"message": "  "}}])
    assert [w.partition(": ")[0] for w in warned(d)] == [f"{AT}.configuration.message"]
    assert warned(doc([{"type": "fast_response", "configuration": {"message": "Closed today."}}])) == []


def test_tools_filtered_without_allow_tools_warns_at_the_layer_that_set_the_mode():
    d = doc([{"type": "tools", "configuration": {"policy": {"mode": "filtered", "block_tools": ["x"]}}}])
    [line] = warned(d)
    assert line.startswith(f"{AT}.configuration.policy.mode: empty_allow_tools: ")


def test_tools_filtered_with_allow_tools_from_another_layer_or_disabled_is_no_warning():
    allow = doc([{"type": "tools", "configuration": {"policy": {"mode": "filtered"}}}],
                global_plugins=[{"type": "tools", "configuration": {"policy": {"allow_tools": ["docs"]}}}])
    assert warned(allow) == []
    off = doc([{"type": "tools", "configuration": {"enabled": False}}],
              global_plugins=[{"type": "tools", "configuration": {"policy": {"mode": "filtered"}}}])
    assert warned(off) == []


@pytest.mark.parametrize(("bound", "ok"), [
    ({"gte": 1.4}, False), ({"lte": -0.1}, False), ({"gt": 1}, False), ({"lt": 0}, False), ({"eq": 2}, False),
    ({"gte": 0.8, "lte": 0.2}, False), ({"gt": 0.5, "lt": 0.5}, False),
    ({"gte": 1}, True), ({"lte": 0}, True), ({"gte": 0.3, "lt": 0.9}, True), ({"eq": 1}, True),
])
def test_a_probability_condition_that_can_never_hold_warns(bound, ok):
    d = with_signals(doc([]), {"domains": [{"name": "math", "labels": ["math"]}],
                               "jailbreak": [{"name": "jb"}]},
                     {"operator": "OR", "conditions": [{"type": "domain", "name": "math", **bound},
                                                       {"type": "jailbreak", "name": "jb"}]})
    lines = warned(d)
    if ok:
        assert lines == []
    else:
        [line] = lines
        assert line.startswith("recipes[default].decisions[0].rules.conditions[0]: never_matches: domain condition "
                               "'math' tests a probability, 0 to 1")


def test_a_rules_own_predicate_over_a_probability_that_can_never_hold_warns():
    d = with_signals(doc([]), {"jailbreak": [{"name": "jb", "predicate": {"gte": 1.4}}]},
                     {"type": "jailbreak", "name": "jb"})
    [line] = warned(d)
    assert line.startswith("recipes[default].signals.jailbreak[jb].predicate: never_matches: gte 1.4")


def test_a_score_questions_condition_is_bounded_by_its_levels():
    question = {"type": "score", "instructions": "How hard?", "criteria": ["easy", "medium", "hard"]}
    d = with_signals(doc([]), {"systemone": [{"name": "hard", "question": question, "predicate": {"gte": 1}}]},
                     {"type": "systemone", "name": "hard", "gte": 1.5})
    assert warned(d) == []                                   # levels 0..2: 1.5 can hold
    d["recipes"][0]["decisions"][0]["rules"]["gte"] = 2.5
    [line] = warned(d)
    assert "a score from 0 to 2" in line


def test_the_warnings_reach_config_validate_json_with_path_and_code():
    d = doc([{"type": "system_prompt", "configuration": {"system_prompt": "one"}},
             {"type": "system_prompt", "configuration": {"system_prompt": "two"}}])
    report = validate_bytes(yaml.safe_dump(d).encode())
    assert report.errors == [] and any(": duplicate_plugin: " in w for w in report.warnings)
    assert json.dumps(report.warnings)


def test_two_backends_of_one_model_under_one_name_fail_to_load():
    d = doc([])
    d["providers"]["models"][0]["backend_refs"] = [{"endpoint": "http://127.0.0.1:1/v1", "name": "east"},
                                                   {"endpoint": "http://127.0.0.1:2/v1", "name": "east"}]
    [line] = errors_of(d)
    assert line.startswith("providers.models[m].backend_refs[1].name: duplicate_name: backend 'east' is already "
                           "backend_refs[0]'s name")


def test_a_backend_named_like_another_backends_default_label_fails_too():
    d = doc([])
    d["providers"]["models"][0]["backend_refs"] = [{"endpoint": "http://127.0.0.1:1/v1", "name": "m[1]"},
                                                   {"endpoint": "http://127.0.0.1:2/v1"}]
    assert [line.partition(": ")[0] for line in errors_of(d)] == ["providers.models[m].backend_refs[1].name"]


def masking_over(entity_types: list[str] | None, ignore_labels: list[str], *, layer: str = "decision") -> dict:
    """A decision masking pii rule ``personal``, its entity_types written at ``layer`` (decision or global)."""
    conf = {"signal": "personal", **({"entity_types": entity_types} if entity_types is not None else {})}
    if layer == "decision":
        d = doc([{"type": "masking", "configuration": conf}])
    else:
        d = doc([{"type": "masking", "configuration": {"signal": "personal"}}],
                global_plugins=[{"type": "masking", "configuration": {k: v for k, v in conf.items() if k != "signal"}}])
    d["recipes"][0]["signals"] = {"pii": [{"name": "personal", "ignore_labels": ignore_labels}]}
    return d


@pytest.mark.parametrize("layer", ["decision", "global"])
def test_masking_an_entity_type_its_pii_rule_ignores_warns_that_it_is_never_masked(layer):
    """The rule never reports a label it ignores, so masking that label masks nothing (trial 21)."""
    d = masking_over(["PERSON", "EMAIL_ADDRESS", "LOCATION"], ["DATE_TIME", "PERSON", "LOCATION"], layer=layer)
    at = AT if layer == "decision" else "global.plugins[0]"
    assert [w.split(": ")[:2] for w in warned(d)] == [
        [f"{at}.configuration.entity_types[0]", "masked_label_ignored"],
        [f"{at}.configuration.entity_types[2]", "masked_label_ignored"]]
    assert "pii rule 'personal' ignores PERSON (ignore_labels)" in warned(d)[0]


@pytest.mark.parametrize(("entity_types", "ignore_labels"), [
    (["EMAIL_ADDRESS"], ["PERSON"]), (None, ["PERSON", "LOCATION"]), (["PERSON"], [])])
def test_masking_only_labels_its_rule_keeps_is_no_warning(entity_types, ignore_labels):
    assert warned(masking_over(entity_types, ignore_labels)) == []


def test_config_validate_prints_the_masked_label_warning_and_the_file_loads(tmp_path):
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(masking_over(["PERSON", "EMAIL_ADDRESS"], ["PERSON"])))
    done = cli_process("config", "validate", str(path))
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert f"warning: {AT}.configuration.entity_types[0]: masked_label_ignored: " in out, out
    assert "entity_types[1]" not in out
