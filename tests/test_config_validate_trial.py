"""What an outside config author met in ``config validate`` (trial 41): a guard whose deployment cannot answer its
preset loads; deep rule trees crash with a traceback; errors that mislead (a second error that only follows from
the first, a broken path, an enum error without its values, a wrong type without a hint)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
import yaml

from vsr_fast.config.load import MAX_RULE_DEPTH
from vsr_fast.routing import load_raw

from .procs import ROOT, config, mock_upstream, router, wait_for_value, write_config
from .test_config_load import base, errors_of, run_cli

R = "recipes[default]"
GUARD = {"type": "response_guard", "configuration": {"rules": [
    {"when": {"type": "hallucination", "name": "ungrounded"}, "action": "block"}]}}


def _write(tmp_path, doc: dict, deep: str = "") -> str:
    """``doc`` as JSON (which is YAML), with ``deep`` written in place of the string "DEEP": no dumper writes a
    tree deeper than Python's recursion limit."""
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(doc).replace('"DEEP"', deep))
    return str(path)


def _guarded() -> dict:
    doc = base()
    doc["recipes"][0]["signals"]["hallucination"] = [{"name": "ungrounded"}]
    doc["recipes"][0]["decisions"][0]["plugins"] = [GUARD]
    return doc


# -- 1. a rule whose deployment does not answer its preset fails to load (spec 5.2, 6.9); escalate's answer check:
# tests/test_looper_config.py ------------------------------------------------------------------------------------

UNGROUNDED = (f"{R}.signals.hallucination[ungrounded]: span_required: deployment 'primary' (vsr-static-11) does not "
              "answer preset hallucination, as its card says; bind hallucination to a deployment that answers it "
              f"(rule deployment, {R}.model_bindings.hallucination or global.model_catalog.bindings.hallucination)")


def test_a_guard_on_a_preset_its_deployment_does_not_answer_fails_validate(tmp_path):
    done = run_cli("config", "validate", _write(tmp_path, _guarded()))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: {UNGROUNDED}" in done.stdout.splitlines(), done.stdout
    assert "preset_unanswered" not in done.stdout


def test_a_hallucination_rule_bound_to_a_deployment_that_says_nothing_of_presets_loads():
    doc = _guarded()
    doc["global"] = {"model_catalog": {"deployments": {"api": {
        "provider": "systemone", "endpoint": "http://127.0.0.1:9", "capabilities": {"question_types": ["noul", "span"]}}},
                                       "bindings": {"hallucination": "api"}}}
    load_raw(doc)


# -- 2. rule trees nest at most MAX_RULE_DEPTH levels, said in one line by validate, serve and reload ------------------

def _nested(levels: int) -> dict:
    rules: dict = {"type": "keyword", "name": "k"}
    for _ in range(levels):
        rules = {"operator": "NOT", "conditions": [rules]}
    doc = base()
    doc["recipes"][0]["decisions"][2]["rules"] = rules
    return doc


def _nested_file(tmp_path, levels: int, doc: dict | None = None) -> str:
    doc = doc or base()
    doc["recipes"][0]["decisions"][2]["rules"] = "DEEP"
    deep = '{"operator": "NOT", "conditions": [' * levels + '{"type": "keyword", "name": "k"}' + "]}" * levels
    return _write(tmp_path, doc, deep)


def _too_deep(levels: int, shown: bool = False) -> str:
    """The loader's line; ``shown``: as validate, serve and a reload print it, naming the decision (base()'s c)."""
    return (f"{R}.decisions[2].rules: too_deep: {'decision ' + repr('c') + ': ' if shown else ''}conditions nest "
            f"{levels} levels; a rule tree nests at most {MAX_RULE_DEPTH}")


def test_a_rule_tree_at_the_limit_loads_and_one_past_it_is_refused():
    load_raw(_nested(MAX_RULE_DEPTH))
    assert errors_of(_nested(MAX_RULE_DEPTH + 1)) == [_too_deep(MAX_RULE_DEPTH + 1)]


@pytest.mark.parametrize("levels", [MAX_RULE_DEPTH + 1, 300])
def test_validate_refuses_a_deep_rule_tree_with_one_line_and_no_traceback(tmp_path, levels):
    done = run_cli("config", "validate", _nested_file(tmp_path, levels))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"error: {_too_deep(levels, shown=True)}"]


def test_a_document_nested_past_any_rule_tree_is_refused_with_its_path(tmp_path):
    doc = base()
    doc["recipes"][0]["signals"]["keywords"][0]["keywords"] = "DEEP"
    done = run_cli("config", "validate", _write(tmp_path, doc, "[" * 300 + '"x"' + "]" * 300))
    assert done.returncode == 1, done.stderr[-2000:]
    [line] = done.stdout.splitlines()
    assert line.startswith(f"error: {R}.signals.keywords[k].keywords[0][0]") and line.endswith(
        ": too_deep: the document nests past 100 levels here"), line
    # Deeper than YAML's parser reads: its own one line.
    done = run_cli("config", "validate", _nested_file(tmp_path, 3000))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.endswith(": yaml_error: exceeded maximum nesting depth\n"), done.stdout


def test_serve_refuses_a_deep_rule_tree_with_one_line_and_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "vsr_fast", "serve", "--config", _nested_file(tmp_path, 300),
                           "--port", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VSR_STATE_DIR": str(tmp_path / "state")})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert _too_deep(300, shown=True) in done.stderr


def test_reload_refuses_a_deep_rule_tree_and_keeps_serving(tmp_path):
    with mock_upstream() as upstream:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        path = write_config(doc, str(tmp_path))
        deep = base()
        deep["providers"], deep["entrypoints"] = doc["providers"], doc["entrypoints"]
        with router(path) as proc, httpx.Client(timeout=30) as client:
            os.replace(_nested_file(tmp_path, 300, deep), path)
            refused = client.post(f"{proc.url}/admin/reload")
            assert refused.status_code == 422, refused.text
            assert _too_deep(300, shown=True) in refused.json()["error"]["message"]
            wait_for_value(lambda: proc.popen.poll() is None or None, "the router to keep running")
            r = client.post(f"{proc.url}/v1/chat/completions",
                            json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200, r.text


# -- 3. each error said once, where it is, with what to write -------------------------------------------------------

def _systemone(question: dict, name: str = "q") -> dict:
    doc = base()
    doc["recipes"][0]["signals"]["systemone"] = [{"name": name, "question": question}]
    doc["recipes"][0]["decisions"][2]["rules"] = {"operator": "AND", "conditions": [{"type": "systemone", "name": name}]}
    return doc


@pytest.mark.parametrize(("question", "line"), [
    ({"type": "choice"}, "invalid_value: a choice question needs criteria: option -> description"),
    ({"type": "score"}, "invalid_value: a score question needs criteria: a list of levels"),
    ({"type": "score", "criteria": {"low": "l"}}, "invalid_value: a score question needs criteria: a list of levels"),
    ({"type": "span"}, "invalid_value: a span question needs criteria: option -> description"),
])
def test_a_refused_question_is_the_only_error_and_its_rule_still_counts_as_declared(question, line):
    lines = errors_of(_systemone(question))
    assert lines == [f"{R}.signals.systemone[q].question.criteria: {line}"]


def test_a_choice_without_descriptions_loads_and_is_asked_by_name_alone():
    loaded = load_raw(_systemone({"type": "choice", "criteria": {"a": None, "b": "the second"}}))
    question = next(iter(loaded.table.recipes["default"].learned.questions.values()))
    assert question.criteria == {"a": "", "b": "the second"}     # the wire's empty description: the name alone


def test_a_choice_over_a_list_of_names_loads_as_names_without_descriptions():
    loaded = load_raw(_systemone({"type": "choice", "criteria": ["a", "b"]}))
    question = next(iter(loaded.table.recipes["default"].learned.questions.values()))
    assert question.criteria == {"a": "", "b": ""}
    assert errors_of(_systemone({"type": "set", "criteria": ["a", "b", "a"]})) == [
        f"{R}.signals.systemone[q].question.criteria[2]: duplicate_name: option 'a' is written twice"]


def test_a_bad_description_is_named_by_its_option():
    assert errors_of(_systemone({"type": "choice", "criteria": {"a": 5, "b": None}})) == [
        f"{R}.signals.systemone[q].question.criteria.a: invalid_type: expected str | null, got int"]


def test_every_enum_error_lists_the_values_it_takes(tmp_path):
    doc = base()
    doc["recipes"][0]["decisions"][2]["plugins"] = [{"type": "response_guard", "configuration": {"rules": [
        {"when": {"type": "keyword", "name": "k"}, "action": "deny"}]}}]
    done = run_cli("config", "validate", _write(tmp_path, doc))
    assert done.returncode == 1
    assert [x for x in done.stdout.splitlines() if x.startswith("error: ")] == [
        f"error: {R}.decisions[2].plugins[0].configuration.rules[0].action: invalid_value: decision 'c': Invalid enum "
        "value 'deny' (one of: block, annotate, none)"]


def test_a_projection_input_of_a_signals_key_says_the_condition_type(tmp_path):
    doc = base()
    doc["recipes"][0]["projections"] = {"scores": [
        {"name": "s", "method": "weighted_sum", "inputs": [{"type": "keywords", "name": "k", "weight": 1}]}]}
    done = run_cli("config", "validate", _write(tmp_path, doc))
    assert done.returncode == 1
    assert [x for x in done.stdout.splitlines() if x.startswith("error: ")] == [
        f"error: {R}.projections.scores[0].inputs[0].type: unknown_signal: 'keywords' is not a condition type; "
        "did you mean keyword?"]


def test_a_decision_condition_of_a_signals_key_says_the_condition_type():
    doc = base()
    doc["recipes"][0]["decisions"][2]["rules"]["conditions"][0]["type"] = "keywords"
    assert errors_of(doc) == [f"{R}.decisions[2].rules.conditions[0].type: unknown_signal: 'keywords' is not a "
                              "condition type this router serves; did you mean keyword?"]


def test_a_bad_subject_kind_is_the_only_error_of_its_role_binding():
    doc = base()
    doc["recipes"][0]["signals"]["role_bindings"] = [{"name": "rb", "role": "r", "subjects": [{"kind": "Team", "name": "x"}]}]
    assert errors_of(doc) == [f"{R}.signals.role_bindings[rb].subjects[0].kind: invalid_value: Invalid enum value "
                              "'Team' (one of: User, Group)"]
