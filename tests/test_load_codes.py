"""Every load-time code of spec 6.9, through ``config validate``'s own path, each as its one line; every removed
form of the registries with what replaces it; ``config validate`` reporting every kind of error in one run."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from vsr_fast.config._paths import render
from vsr_fast.config.algorithm import REMOVED as REMOVED_ALGORITHMS
from vsr_fast.config.forms import REMOVED_FIELDS
from vsr_fast.config.load import REMOVED_SIGNAL_TYPES
from vsr_fast.config.migrate import migrate
from vsr_fast.plugins.table import REMOVED_PLUGIN_TYPES
from vsr_fast.routing.migrate_target import router_target
from vsr_fast.routing.loaded import validate_bytes

from .test_config_load import base, run_cli
from .test_systemone_client import LOAD_CASES, REMOTE, doc

D0 = "recipes[default].decisions[0]"


def report(d: dict):
    return validate_bytes(yaml.safe_dump(d).encode())


def with_decision(**fields) -> dict:
    d = base()
    d["recipes"][0]["decisions"][0].update(fields)
    return d


def with_signals(**signals) -> dict:
    d = base()
    d["recipes"][0]["signals"].update(signals)
    return d


ERROR_CASES = [
    ("removed_section", {**base(), "routing": {"signals": {}}},
     "routing: removed_section: the top-level routing block; its signals and decisions live in recipes[] in v0.5"),
    ("invalid_value", {**base(), "version": "v0.3"},
     "version: invalid_value: 'v0.3' is not a schema this router reads; it reads `version: v0.5`"),
    ("removed_signal_type", with_signals(reasks=[{"name": "again", "threshold": 0.8}]),
     "recipes[default].signals.reasks: removed_signal_type: reasks was removed; write turn_relation with labels: "
     "[reask]"),
    ("removed_algorithm_type", with_decision(algorithm={"type": "knn"}),
     f"{D0}.algorithm.type: removed_algorithm_type: 'knn' was removed; write type: systemone, or static for a "
     "decision with one candidate"),
    ("removed_plugin_type", with_decision(plugins=[{"type": "shadow_dispatch", "configuration": {"model": "smart"}}]),
     f"{D0}.plugins[0].type: removed_plugin_type: shadow_dispatch was removed; write router_replay with shadow"),
    ("removed_field", with_signals(domains=[{"name": "stem", "mmlu_categories": ["math", "physics"]}]),
     "recipes[default].signals.domains[stem].mmlu_categories: removed_field: mmlu_categories was removed; write "
     "labels (`vsr-fast config migrate` rewrites it)"),
    ("reserved_header", with_decision(plugins=[{"type": "header_mutation",
                                                "configuration": {"add": [{"name": "x-vsr-trace", "value": "x"}]}}]),
     f"{D0}.plugins[0].configuration.add[0].name: reserved_header: 'x-vsr-trace' is written by the router"),
    ("match_empty", with_decision(plugins=[{"type": "tools", "configuration": {"select": {"match": {}}}}]),
     f"{D0}.plugins[0].configuration.select.match: match_empty: a match block runs recall, judge or both"),
    ("output_capability_missing", with_decision(output={"kind": "image"}),
     f"{D0}.modelRefs[0]: output_capability_missing:image_generation: model 'fast' does not declare "
     "image_generation (in capabilities, or image in modalities.output)"),
    ("output_not_executable", with_decision(output={"kind": "audio"}),
     f"{D0}.output: output_not_executable: audio output needs the audio output codec (phase 2)"),
]


@pytest.mark.parametrize(("code", "document", "line"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_each_error_code_is_its_one_line(code, document, line):
    errors = report(document).errors
    mine = [x for x in errors if f": {code}" in x]
    assert mine and mine[0].startswith(line), errors
    assert len(mine) == 1


@pytest.mark.parametrize(("document", "lines"), LOAD_CASES[:4],
                         ids=["span_required", "question_type_unsupported", "span_head_unsupported",
                              "input_modality_unsupported"])
def test_each_question_code_is_its_one_line(document, lines):
    assert report(document).errors == lines


def test_duplicate_tool_name_is_its_one_line(tmp_path):
    db = tmp_path / "tools.json"
    db.write_text(json.dumps([{"tool": {"type": "function", "function": {"name": n, "description": n}}}
                              for n in ("a", "b", "a")]))
    d = with_decision(plugins=[{"type": "tools", "configuration": {"select": {"mode": "add",
                                                                              "tools_db_path": str(db)}}}])
    assert report(d).errors == [f"{D0}.plugins[0].configuration.select.tools_db_path: duplicate_tool_name: entry [2] "
                                "names 'a' again"]


def test_warning_codes_are_their_one_line():
    d = doc({"complexity": [{"name": "difficulty"}]}, [{"type": "complexity", "name": "difficulty", "label": "hard"}])
    assert report(d).warnings == [
        "recipes[default].signals.complexity[difficulty]: uncalibrated_preset: preset complexity on deployment "
        "'remote' (fake) has no calibrated threshold; the rule uses 0.5"]
    d = doc({"decision": [{"name": "t", "question": {"type": "noul"}}]}, [{"type": "decision", "name": "t"}])
    d["global"]["model_catalog"]["deployments"] = {"remote": REMOTE}
    got = report(d).warnings
    assert "recipes[default].signals.decision: renamed_signal_type: decision loads as systemone; write systemone" in got
    assert (f"{D0}.rules.conditions[0].type: renamed_signal_type: decision loads as systemone; write systemone"
            in got)
    alg = report(with_decision(algorithm={"type": "decision"}))
    assert f"{D0}.algorithm.type: renamed_algorithm_type: 'decision' is now 'systemone'" in alg.warnings


# --- every removed form of the registries ---------------------------------------------------------------------


def _place(pattern: tuple[str, ...], value) -> tuple[dict, str]:
    """``base()`` with ``value`` at ``pattern`` (``*``: the first recipe, decision, model or rule), and its path."""
    d = base()
    d["recipes"][0]["signals"].update({k: [{"name": "r"}] for k in ("domains", "jailbreak", "pii", "fact_check",
                                                                     "user_feedbacks", "safety", "hallucination",
                                                                     "refusal", "modality", "language", "complexity")})
    node, steps = d, []
    for i, step in enumerate(pattern):
        if step == "*":
            node, steps = node[0], steps + [0]
        elif i == len(pattern) - 1:
            node[step], steps = value, steps + [step]
        else:
            node, steps = node.setdefault(step, [{}] if pattern[i + 1] == "*" else {}), steps + [step]
    return d, render(steps, d)


@pytest.mark.parametrize(("pattern", "becomes"), REMOVED_FIELDS, ids=[".".join(p) for p, _ in REMOVED_FIELDS])
def test_every_removed_field_names_what_replaces_it(pattern, becomes):
    d, path = _place(pattern, 1)
    errors = report(d).errors
    assert f"{path}: removed_field: {pattern[-1]} was removed; write {becomes} (`vsr-fast config migrate` " \
           "rewrites it)" in errors
    assert not [x for x in errors if x.startswith(path) and "removed_field" not in x], errors


@pytest.mark.parametrize("kind", sorted(REMOVED_SIGNAL_TYPES))
def test_every_removed_signal_type_is_one_line(kind):
    errors = report(with_signals(**{kind: [{"name": "r"}]})).errors
    assert errors == [f"recipes[default].signals.{kind}: removed_signal_type: {kind} was removed; write "
                      f"{REMOVED_SIGNAL_TYPES[kind]}"]


@pytest.mark.parametrize("kind", sorted(REMOVED_ALGORITHMS))
def test_every_removed_algorithm_type_is_one_line(kind):
    errors = report(with_decision(algorithm={"type": kind})).errors
    assert errors == [f"{D0}.algorithm.type: removed_algorithm_type: {kind!r} was removed; write "
                      f"{REMOVED_ALGORITHMS[kind]}"]


@pytest.mark.parametrize("kind", sorted(REMOVED_PLUGIN_TYPES))
def test_every_removed_plugin_type_is_one_line(kind):
    errors = report(with_decision(plugins=[{"type": kind, "configuration": {}}])).errors
    assert errors == [f"{D0}.plugins[0].type: removed_plugin_type: {kind} was removed; write "
                      f"{REMOVED_PLUGIN_TYPES[kind]}"]


@pytest.mark.parametrize("kind", sorted(set(REMOVED_ALGORITHMS) - {"confidence", "cascade"}))
def test_migrate_rewrites_every_removed_algorithm(kind):
    d = with_decision(algorithm={"type": kind})
    out = migrate(d, router_target())
    assert not [x for x in report(out.document).errors if "removed_algorithm_type" in x]
    assert any(n.path.startswith(f"{D0}.algorithm") for n in out.notes)


@pytest.mark.parametrize("kind", sorted(REMOVED_PLUGIN_TYPES))
def test_migrate_rewrites_or_drops_every_removed_plugin_with_a_note(kind):
    d = with_decision(plugins=[{"type": kind, "configuration": {"model": "smart"} if kind == "shadow_dispatch"
                                else {}}])
    out = migrate(d, router_target())
    assert not [x for x in report(out.document).errors if "removed_plugin_type" in x]
    assert any(n.path.startswith(f"{D0}.plugins[0]") for n in out.notes)


# --- config validate: every kind in one run, enums, endpoints, json ----------------------------------------------


def test_validate_reports_every_kind_of_error_in_one_run():
    d = copy.deepcopy(base())
    d["version"] = "v0.4"                                                         # precheck
    d["recipes"][0]["strategy"] = "fastest"                                       # shape (enum)
    d["recipes"][0]["decisions"][1]["modelRefs"][0]["model"] = "ghost"            # reference
    d["recipes"][0]["decisions"][2]["plugins"] = [{"type": "system_prompt", "configuration": {"mode": "append"}}]
    d["providers"]["models"][0]["backend_refs"][0]["endpoint"] = "not a url"      # endpoint
    errors = report(d).errors
    assert errors == [
        "version: invalid_value: 'v0.4' is not a schema this router reads; it reads `version: v0.5`",
        "recipes[default].strategy: invalid_value: Invalid enum value 'fastest' (one of: priority, confidence)",
        "providers.models[fast].backend_refs[0].endpoint: invalid_value: 'not a url' is not a URL (expected "
        "http[s]://host[:port][/path] or host:port)",
        "recipes[default].decisions[1].modelRefs[0].model: unknown_model: 'ghost' is not declared in providers.models",
    ] + [x for x in errors if x.startswith("recipes[default].decisions[2].plugins[0]")]
    assert any("removed_field: mode append was removed" in x for x in errors)


def test_plugin_errors_do_not_hide_the_routing_errors():
    d = with_decision(plugins=[{"type": "response_cache", "configuration": {"mode": "sometimes"}}])
    d["recipes"][0]["decisions"][2]["rules"]["conditions"][0]["name"] = "missing"
    errors = report(d).errors
    assert errors == [
        f"{D0}.plugins[0].configuration.mode: invalid_value: Invalid enum value 'sometimes' (one of: exact, semantic, "
        "exact_then_semantic)",
        "recipes[default].decisions[2].rules.conditions[0]: unknown_signal: keyword rule 'missing' is not declared "
        "in this recipe's signals.keywords",
    ]


@pytest.mark.parametrize("endpoint", ["not a url", "http://exa mple.com/v1", "ftp://example.com", "http://"])
def test_bad_endpoints_fail_with_their_path(endpoint):
    d = base()
    d["providers"]["models"][1]["backend_refs"][0]["endpoint"] = endpoint
    (line,) = report(d).errors
    assert line.startswith("providers.models[smart].backend_refs[0].endpoint: invalid_value: ")


@pytest.mark.parametrize("endpoint", ["127.0.0.1:8000", "http://[::1]:8000/v1", "https://api.example.com/v1",
                                      "http://my_host.internal:80"])
def test_good_endpoints_load(endpoint):
    d = base()
    d["providers"]["models"][1]["backend_refs"][0]["endpoint"] = endpoint
    assert report(d).errors == []


def test_deployment_endpoint_is_checked():
    d = copy.deepcopy(doc({}, []))      # REMOTE is shared with other tests
    d["global"]["model_catalog"]["deployments"]["remote"]["endpoint"] = "not a url"
    assert report(d).errors == ["global.model_catalog.deployments.remote.endpoint: invalid_value: 'not a url' is not "
                                "a URL (expected http[s]://host[:port][/path] or host:port)"]


def test_cli_validate_json(tmp_path):
    d = base()
    d["recipes"][0]["decisions"][0]["modelRefs"][0]["model"] = "ghost"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    result = run_cli("config", "validate", "--format", "json", str(path))
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert out["ok"] is False
    assert out["errors"] == [{"path": "recipes[default].decisions[0].modelRefs[0].model", "code": "unknown_model",
                              "message": "'ghost' is not declared in providers.models", "decision": "a"}]
    path.write_text(yaml.safe_dump(base()))
    result = run_cli("config", "validate", "--format", "json", str(path))
    assert result.returncode == 0
    out = json.loads(result.stdout)
    assert out["ok"] is True and out["errors"] == [] and len(out["config_version"]) == 16


REMOVED_SIGNAL_EXAMPLES = {
    "classifiers": {"name": "risk", "labels": ["SAFE", "RISKY"], "instructions": "Is the tool call risky?"},
    "preferences": {"name": "terse", "examples": ["keep it short"], "threshold": 0.7},
    "embeddings": {"name": "support", "candidates": ["password reset"], "threshold": 0.7},
    "kb": {"name": "law_kb", "kb": "mmlu", "target": {"kind": "label", "value": "law"}},
    "reasks": {"name": "again", "lookback_turns": 1, "threshold": 0.8},
    "topic_continuity": {"name": "same_topic"},
    "events": {"name": "payment", "event_types": ["payment_failed"], "severities": ["critical"]},
    "structure": {"name": "questions", "feature": {"type": "count", "source": {"type": "regex", "pattern": "[?]"}},
                  "predicate": {"gte": 2}},
    "actions": {"name": "fixing", "actions": ["fix"]},
}


@pytest.mark.parametrize("kind", sorted(REMOVED_SIGNAL_EXAMPLES))
def test_migrate_rewrites_or_drops_every_removed_signal_type_with_a_note(kind):
    assert set(REMOVED_SIGNAL_EXAMPLES) == set(REMOVED_SIGNAL_TYPES)
    d = with_signals(**{kind: [REMOVED_SIGNAL_EXAMPLES[kind]]})
    out = migrate(d, router_target())
    assert [n for n in out.notes if n.path.startswith(f"recipes[default].signals.{kind}")]
    assert kind not in out.document["recipes"][0]["signals"]
    assert [x for x in report(out.document).errors if "unsupported_value: the " not in x] == []


def test_a_masking_reference_is_reported_beside_a_routing_error():
    """One run reports every kind of error: a masking plugin naming an undeclared pii rule is named even when a
    routing error (here a guard's unknown keyword rule) leaves the routing table incomplete."""
    d = base()
    d["recipes"][0]["decisions"][0]["plugins"] = [
        {"type": "masking", "configuration": {"signal": "nosuch"}},
        {"type": "response_guard", "configuration": {"rules": [{"when": {"type": "keyword", "name": "nosuch"},
                                                                 "action": "block"}]}}]
    errors = report(d).errors
    assert any("plugins[1].configuration.rules[0].when: unknown_signal" in e for e in errors), errors
    assert any("plugins[0].configuration.signal: unknown_signal: masking names pii rule 'nosuch'" in e
               for e in errors), errors
