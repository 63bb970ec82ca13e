"""What a recipe author's trial (trial 91) found loading silently: a decision without rules matches every request,
two decisions of one priority are settled by file order, a fast_response makes a decision's modelRefs dead, a
decision ranked below a catch-all is never chosen. Each is a load warning naming the decisions, said by ``config
validate``, by serve and by a reload's answer. Errors about a field of a decision name the decision, and a
duplicate model name says where both are. The reference says every bound the load enforces on a list (remom's
``breadth_schedule``)."""
from __future__ import annotations

import copy
import json

import httpx
import pytest
import yaml

from vsr_fast.routing import load_bytes, load_raw

from .procs import ROOT, config, mock_upstream, model, router, wait_for_value, write_config
from .test_config_load import errors_of, run_cli

CODES = ("no_rules", "never_matches", "shadowed_decision", "equal_priority", "unused_model_refs")
CATCH_ALL = {"operator": "AND", "conditions": []}
KW = {"operator": "AND", "conditions": [{"type": "keyword", "name": "k"}]}
FAST = {"type": "fast_response", "configuration": {"message": "Closed today."}}


def doc(*decisions: dict, endpoint: str = "http://127.0.0.1:9/v1", **recipe_extra) -> dict:
    return config([model("m", endpoint), model("n", endpoint)], list(decisions),
                  signals={"keywords": [{"name": "k", "keywords": ["kw"]}, {"name": "j", "keywords": ["jw"]}]},
                  **recipe_extra)


def reload_to(proc, path: str, d: dict) -> httpx.Response:
    """Rewrite the router's file with ``d`` and ask it to reload."""
    with open(path, "w") as f:
        yaml.safe_dump(d, f, sort_keys=False)
    return httpx.post(f"{proc.url}/admin/reload", timeout=30)


def dec(name: str, priority: int = 0, rules: dict | None = CATCH_ALL, models=("m",), **extra) -> dict:
    d = {"name": name, "priority": priority, "modelRefs": [{"model": m} for m in models], **extra}
    if rules is not None:
        d["rules"] = copy.deepcopy(rules)     # a test may edit its document
    return d


def warned(d: dict) -> list[str]:
    return [w for w in load_raw(d).warnings if any(f": {c}: " in w for c in CODES)]


# -- 1. no rules ----------------------------------------------------------------------------------------------------

def test_a_decision_without_rules_warns_that_it_matches_every_request():
    [line] = warned(doc(dec("code", 10, KW), dec("general", 0, rules=None)))
    assert line.startswith("recipes[default].decisions[1]: no_rules: decision 'general' has no rules, so it "
                           "matches every request"), line
    assert "rules: {operator: AND, conditions: []}" in line


def test_the_spec_catch_all_written_out_is_no_warning():
    assert warned(doc(dec("code", 10, KW), dec("general", 0, CATCH_ALL))) == []
    assert warned(doc(dec("only", 0, {"operator": "AND"}))) == []


def test_rules_that_can_never_hold_warn():
    [line] = warned(doc(dec("code", 10, KW), dec("nothing", 5, {"operator": "OR", "conditions": []}),
                        dec("general", 0)))
    assert line.startswith("recipes[default].decisions[1].rules: never_matches: decision 'nothing'"), line


# -- 2. order: a catch-all above others, equal priorities --------------------------------------------------------------

def test_decisions_below_a_catch_all_are_never_chosen():
    lines = warned(doc(dec("general", 50), dec("code", 10, KW), dec("math", 50, KW)))
    assert [x.partition(": ")[0] for x in lines] == ["recipes[default].decisions[2]", "recipes[default].decisions[1]"]
    assert all(": shadowed_decision: " in x and "'general' (decisions[0], priority 50) matches every request" in x
               for x in lines), lines


def test_two_decisions_of_one_priority_that_can_both_match_warn_naming_both_and_the_winner():
    [line] = warned(doc(dec("code", 10, KW), dec("tools", 10, {"type": "keyword", "name": "j"}), dec("general")))
    assert line.startswith("recipes[default].decisions[1].priority: equal_priority: decision 'tools' shares "
                           "priority 10 with 'code' (decisions[0])"), line
    assert "'code' (decisions[0]) wins over 'tools'" in line


def test_three_of_one_priority_name_each_earlier_one():
    lines = warned(doc(dec("a", 10, KW), dec("b", 10, KW), dec("c", 10, KW), dec("general")))
    assert len(lines) == 2
    assert "'a' (decisions[0]) and 'b' (decisions[1]) each win over 'c'" in lines[1], lines


def test_equal_priorities_that_cannot_match_together_distinct_priorities_or_confidence_are_no_warning():
    not_k = {"operator": "AND", "conditions": [{"operator": "NOT", "conditions": [{"type": "keyword", "name": "k"}]}]}
    assert warned(doc(dec("k", 10, KW), dec("not-k", 10, not_k), dec("general"))) == []
    assert warned(doc(dec("k", 10, KW), dec("j", 9, {"type": "keyword", "name": "j"}), dec("general"))) == []
    assert warned(doc(dec("k", 10, KW), dec("j", 10, {"type": "keyword", "name": "j"}), dec("general"),
                      strategy="confidence")) == []


def test_file_order_settles_a_tie_on_a_real_router_as_the_warning_says(tmp_path):
    """The warning is about what serving does: both match ``kw jw``, the first written answers."""
    with mock_upstream() as mock:
        d = doc(dec("code", 10, KW), dec("tools", 10, {"type": "keyword", "name": "j"}), dec("general"),
                endpoint=f"{mock.url}/v1")
        with router(write_config(d, str(tmp_path))) as proc:
            said = wait_for_value(lambda: [x for x in proc.lines if "equal_priority" in x], "the start's warning")
            assert "'code' (decisions[0]) wins over 'tools'" in said[0]
            body = {"model": "vsr/auto", "messages": [{"role": "user", "content": "kw jw"}]}
            r = httpx.post(f"{proc.url}/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
            assert r.headers["x-vsr-selected-decision"] == "code"


# -- 3. a fast_response answers: the modelRefs are dead ------------------------------------------------------------------

def test_modelrefs_of_a_decision_a_fast_response_answers_warn():
    [line] = warned(doc(dec("closed", 10, KW, models=("m", "n"), plugins=[FAST]), dec("general")))
    assert line.startswith("recipes[default].decisions[0].modelRefs: unused_model_refs: decision 'closed' is "
                           "answered by the fast_response at recipes[default].decisions[0].plugins[0]"), line
    assert "(m, n) are never called" in line
    assert warned(doc(dec("closed", 10, KW, models=(), plugins=[FAST]), dec("general"))) == []


def test_a_recipe_fast_response_makes_every_decision_and_the_fallback_model_free():
    d = doc(dec("code", 10, KW), dec("general"), plugins=[FAST], fallback={"modelRefs": [{"model": "m"}]})
    lines = warned(d)
    assert [x.partition(": ")[0] for x in lines] == ["recipes[default].decisions[0].modelRefs",
                                                      "recipes[default].decisions[1].modelRefs",
                                                      "recipes[default].fallback.modelRefs"], lines


# -- said by validate, serve's reload, and not by the shipped configurations ---------------------------------------

def test_config_validate_prints_the_warnings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc(dec("code", 10, KW, plugins=[FAST]), dec("tools", 10, KW),
                                       dec("general", rules=None))))
    done = run_cli("config", "validate", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    for code in ("no_rules", "equal_priority", "unused_model_refs"):
        assert [x for x in done.stdout.splitlines() if x.startswith("warning: ") and f": {code}: " in x], done.stdout
    done = run_cli("config", "validate", "--format", "json", str(path))
    codes = {w["code"] for w in json.loads(done.stdout)["warnings"]}
    assert {"no_rules", "equal_priority", "unused_model_refs"} <= codes


def test_a_reload_returns_and_logs_the_warnings(tmp_path):
    with mock_upstream() as mock:
        path = write_config(doc(dec("general"), endpoint=f"{mock.url}/v1"), str(tmp_path))
        with router(path) as proc:
            r = reload_to(proc, path, doc(dec("code", 10, KW, plugins=[FAST]), dec("tools", 10, KW),
                                          dec("general", rules=None), endpoint=f"{mock.url}/v1"))
            assert r.status_code == 200, r.text
            said = r.json()["warnings"]
            for code, name in (("no_rules", "'general'"), ("equal_priority", "'tools'"),
                               ("unused_model_refs", "'code'")):
                assert [w for w in said if f": {code}: " in w and name in w], (code, said)
            wait_for_value(lambda: [x for x in proc.lines if "equal_priority" in x], "the warning in the log")


SHIPPED = sorted([ROOT / "config" / "quickstart.yaml", *(ROOT / "config").glob("*/*.yaml")])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_configurations_have_none_of_these_mistakes(path):
    loaded = load_bytes(path.read_bytes())
    assert [w for w in loaded.warnings if any(f": {c}: " in w for c in CODES)] == []


# -- 4. errors inside a decision name it; 5. a duplicate model says where both are -----------------------------------

def _two_bad_decisions() -> dict:
    """Decision 0 ('code') with a misspelt field in its rules, decision 1 ('general') naming an undeclared model."""
    d = doc(dec("code", 10, KW), dec("general"))
    d["recipes"][0]["decisions"][0]["rules"]["conditions"][0]["lable"] = "x"
    d["recipes"][0]["decisions"][1]["modelRefs"][0]["model"] = "ghost"
    return d


LABLE = "recipes[default].decisions[0].rules.conditions[0].lable: unknown_field: decision 'code': "
GHOST = ("recipes[default].decisions[1].modelRefs[0].model: unknown_model: decision 'general': 'ghost' is not "
         "declared in providers.models")


def test_config_validate_names_the_decision_a_bad_field_is_in(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_two_bad_decisions()))
    done = run_cli("config", "validate", str(path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert [x for x in lines if x.startswith(f"error: {LABLE}")], lines
    assert f"error: {GHOST}" in lines, lines
    # JSON keeps the path and message as the loader wrote them, and names the decision beside them.
    found = json.loads(run_cli("config", "validate", "--format", "json", str(path)).stdout)["errors"]
    assert {(e["path"], e.get("decision")) for e in found} >= {
        ("recipes[default].decisions[0].rules.conditions[0].lable", "code"),
        ("recipes[default].decisions[1].modelRefs[0].model", "general")}, found
    assert all(not e["message"].startswith("decision ") for e in found)


def test_serve_refusing_a_file_names_the_decision(tmp_path):
    d = doc(dec("code", 10, {"type": "keyword", "name": "nope"}), dec("general"))     # a compile-step error
    done = run_cli("serve", "--config", write_config(d, str(tmp_path)), "--port", "0")
    assert done.returncode == 2
    assert [x for x in done.stderr.splitlines() if x.startswith("error: recipes[default].decisions[0].rules")
            and "decision 'code': " in x], done.stderr
    done = run_cli("serve", "--config", write_config(_two_bad_decisions(), str(tmp_path)), "--port", "0")
    assert [x for x in done.stderr.splitlines() if x.startswith(f"error: {LABLE}")], done.stderr


def test_a_refused_reload_names_the_decision(tmp_path):
    with mock_upstream() as mock:
        path = write_config(doc(dec("general"), endpoint=f"{mock.url}/v1"), str(tmp_path))
        with router(path) as proc:
            r = reload_to(proc, path, _two_bad_decisions())
            assert r.status_code != 200 and GHOST in r.text and LABLE in r.text, r.text


def test_a_duplicate_model_name_says_which_and_where_both_are():
    d = doc(dec("general"))
    d["providers"]["models"].append(model("m", "http://127.0.0.1:11/v1"))
    lines = [x for x in errors_of(d) if ": duplicate_name: " in x]
    assert lines == ["providers.models[m].name: duplicate_name: model 'm' is declared more than once, at "
                     "providers.models[0] and providers.models[2]; give each model its own name"], lines


def test_a_duplicate_decision_name_says_where_both_are():
    lines = [x for x in errors_of(doc(dec("a", 1, KW), dec("general"), dec("a", 2, KW))) if "duplicate_name" in x]
    assert lines == ["recipes[default].decisions: duplicate_name: decision 'a' is declared more than once, at "
                     "recipes[default].decisions[0] and recipes[default].decisions[2]"], lines


# -- 6. remom: the reference says the bound the load enforces ----------------------------------------------------------

def test_the_reference_says_how_many_remom_rounds_the_load_takes():
    d = doc(dec("general", models=("m", "n"), algorithm={"type": "remom", "remom": {"breadth_schedule": [2] * 9}}))
    [line] = errors_of(d)
    assert "breadth_schedule: invalid_value: " in line and "length <= 8" in line
    d["recipes"][0]["decisions"][0]["algorithm"]["remom"]["breadth_schedule"] = [2] * 8
    load_raw(d)
    rows = [x for x in (ROOT / "docs" / "config.md").read_text().splitlines() if x.startswith("| `breadth_schedule`")]
    assert rows and "at most 8 items" in rows[0], rows


def test_a_decision_set_aside_for_its_shape_does_not_shift_the_paths_of_the_ones_after_it(tmp_path):
    """Decision 0 misses its name (set aside so the rest still converts); decision 2 names an undeclared model:
    its error says decisions[2] and 'c', not the index it had once decision 0 was taken out."""
    d = doc(dec("a", 1, KW), dec("b", 2, KW), dec("c", 3, KW), dec("general"))
    del d["recipes"][0]["decisions"][0]["name"]
    d["recipes"][0]["decisions"][2]["modelRefs"][0]["model"] = "ghost"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(d))
    lines = [x for x in run_cli("config", "validate", str(path)).stdout.splitlines() if x.startswith("error: ")]
    assert lines == ["error: recipes[default].decisions[0].name: missing_field: required",
                     "error: recipes[default].decisions[2].modelRefs[0].model: unknown_model: decision 'c': 'ghost' "
                     "is not declared in providers.models"], lines
    assert [x for x in errors_of(d) if "ghost" in x] == [
        "recipes[default].decisions[2].modelRefs[0].model: unknown_model: 'ghost' is not declared in providers.models"]


def test_two_items_set_aside_from_one_list_in_one_round_take_out_those_two():
    """Decisions 0 and 2 miss their names: both go, and the ones left are 1 and 3 (a later error names 3)."""
    d = doc(dec("a", 1, KW), dec("b", 2, KW), dec("c", 3, KW), dec("general"))
    del d["recipes"][0]["decisions"][0]["name"]
    del d["recipes"][0]["decisions"][2]["name"]
    d["recipes"][0]["decisions"][3]["modelRefs"][0]["model"] = "ghost"
    assert sorted(errors_of(d)) == [
        "recipes[default].decisions[0].name: missing_field: required",
        "recipes[default].decisions[2].name: missing_field: required",
        "recipes[default].decisions[3].modelRefs[0].model: unknown_model: 'ghost' is not declared in providers.models"]


def test_a_warning_names_the_files_index_of_the_decision_it_cites_when_an_earlier_one_was_set_aside():
    """A decision set aside for its shape (no name) leaves the converted list one shorter: the warning's path was
    put back to the file's index, but the decision its message cites kept the converted index, one off."""
    from vsr_fast.config.load import collect

    nameless = dec("x", 5, KW)
    del nameless["name"]
    found = collect(doc(nameless, dec("general", 50), dec("code", 10, KW)))
    assert found.errors == ["recipes[default].decisions[0].name: missing_field: required"], found.errors
    [line] = [w for w in found.warnings if ": shadowed_decision: " in w]
    assert line.startswith("recipes[default].decisions[2]: "), line
    assert "'general' (decisions[1], priority 50)" in line, line
    found = collect(doc(nameless, dec("code", 10, KW), dec("tools", 10, {"type": "keyword", "name": "j"}),
                        dec("general")))
    [line] = [w for w in found.warnings if ": equal_priority: " in w]
    assert line.startswith("recipes[default].decisions[2].priority: "), line
    assert "'code' (decisions[1]) wins over 'tools'" in line, line
