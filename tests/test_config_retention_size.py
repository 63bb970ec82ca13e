"""The parts of the v0.5 configuration surface an outside author reads in the spec and expects to load:
``decisions[].retention`` (5.7), escalate ``order: size`` over the models' ``param_size`` (5.6, 6.6),
``recipes[].candidate_requirements`` (6.3) and the ``algorithm.type: decision`` alias with its settings under
``decision:`` (5.2)."""
from __future__ import annotations

import pytest

from vsr_fast.config.algorithm import kind_of
from vsr_fast.config.schema import ProviderModel
from vsr_fast.selection.static import parameter_count
from vsr_fast.routing import load_raw

from .test_looper_config import ESC, errors_of

D = "recipes[default].decisions[0]"


def doc(decision_extra: dict | None = None, sizes=(None, None), caps=((), ()), recipe_extra: dict | None = None,
        refs=("big", "small")) -> dict:
    models = []
    for name, size, cap in zip(("big", "small"), sizes, caps):
        m: dict = {"name": name, "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}
        if size is not None:
            m["param_size"] = size
        if cap:
            m["capabilities"] = list(cap)
        models.append(m)
    decision = {"name": "d", "modelRefs": [{"model": m} for m in refs], **(decision_extra or {})}
    return {"version": "v0.5", "providers": {"models": models},
            "recipes": [{"name": "default", "decisions": [decision], **(recipe_extra or {})}]}


# --- retention (spec 5.7) ---------------------------------------------------------------------------------


def test_retention_loads_with_its_four_fields():
    loaded = load_raw(doc({"retention": {"ttl_turns": 3, "keep_current_model": True,
                                         "prefer_prefix_retention": True, "drop": False}}))
    r = loaded.config.recipes[0].decisions[0].retention
    assert (r.ttl_turns, r.keep_current_model, r.prefer_prefix_retention, r.drop) == (3, True, True, False)


@pytest.mark.parametrize(("retention", "line"), [
    ({"drop": True, "ttl_turns": 2},
     f"{D}.retention: invalid_value: drop: true keeps nothing of the turn, so ttl_turns: 2 has nothing to keep; "
     "write one of them"),
    ({"ttl_turns": -1}, f"{D}.retention.ttl_turns: invalid_value: Expected `int` >= 0"),
    ({"ttl_turn": 2}, f"{D}.retention.ttl_turn: unknown_field: not a field of this block; did you mean ttl_turns?"),
])
def test_bad_retention_fails_with_one_line(retention, line):
    assert errors_of(doc({"retention": retention})) == [line]


def test_an_empty_retention_is_a_warning():
    loaded = load_raw(doc({"retention": {}}))
    assert any(w.startswith(f"{D}.retention: ineffective_retention:") for w in loaded.warnings), loaded.warnings


def test_emits_is_still_refused_with_its_replacement():
    lines = errors_of(doc({"emits": [{"kind": "retention", "retention": {"ttl_turns": 3}}]}))
    assert lines == [f"{D}.emits: removed_field: emits was removed; write retention (`vsr-fast config migrate` "
                     "rewrites it)"]


# --- order: size (spec 5.6) -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "count"), [("8B", 8e9), ("0.5b", 5e8), ("350M", 3.5e8), ("1.2T", 1.2e12),
                                             ("35B-A3B", 35e9), ("743B-A39B", 743e9), (" 70B ", 70e9)])
def test_param_size_reads_the_total_parameter_count(text, count):
    assert parameter_count(text) == count


def size_esc(order="size") -> dict:
    return {"algorithm": {"type": "escalate", "escalate": {"order": order, **ESC["escalate"]}}}


def test_order_size_loads_when_every_candidate_has_a_param_size():
    loaded = load_raw(doc(size_esc(), sizes=("70B", "8B")))
    assert loaded.config.recipes[0].decisions[0].algorithm.escalate.order == "size"
    assert [m.param_size for m in loaded.config.providers.models] == ["70B", "8B"]


def test_order_size_names_each_candidate_without_a_size():
    assert errors_of(doc(size_esc(), sizes=("70B", None))) == [
        f"{D}.algorithm.escalate.order: missing_field: order: size reads each candidate's param_size, and "
        "providers.models[small] has none; write its parameter count (param_size: 8B, or 35B-A3B for a "
        "mixture of experts)"]


def test_a_param_size_that_is_no_count_fails_to_load():
    assert errors_of(doc(sizes=("huge", None))) == [
        "providers.models[big].param_size: invalid_value: 'huge' is not a parameter count "
        "(a number and K, M, B or T: 8B, 0.5B, 35B-A3B)"]


def test_order_size_sorts_smallest_first_keeping_the_modelrefs_order_between_equals():
    from vsr_fast.selection.static import by_size
    models = [ProviderModel(name=n, param_size=s) for n, s in (("a", "70B"), ("b", "8B"), ("c", "35B-A3B"),
                                                               ("d", "8B"))]
    assert [m.name for m in by_size(tuple(models))] == ["b", "d", "c", "a"]


# --- candidate_requirements (spec 6.3) ---------------------------------------------------------------------


def test_candidate_requirements_load_when_every_candidate_meets_them():
    loaded = load_raw(doc(recipe_extra={"candidate_requirements": {"capabilities": ["tools"]}},
                          caps=(("chat", "tools"), ("tools",))))
    assert loaded.config.recipes[0].candidate_requirements.capabilities == ["tools"]


def test_a_candidate_that_misses_a_requirement_fails_with_its_line():
    lines = errors_of(doc(recipe_extra={"candidate_requirements": {"capabilities": ["tools"]}},
                          caps=(("chat", "tools"), ("chat",))))
    assert lines == [f"{D}.modelRefs[1]: candidate_requirement_unmet: model 'small' does not declare the "
                     "tools capability recipes[default].candidate_requirements asks of every candidate"]


def test_candidate_requirements_cover_the_fallback_and_refuse_unknown_fields():
    extra = {"candidate_requirements": {"capabilities": ["tools"]}, "fallback": {"modelRefs": [{"model": "small"}]}}
    lines = errors_of(doc(recipe_extra=extra, caps=(("tools",), ()), refs=("big",)))
    assert lines == ["recipes[default].fallback.modelRefs[0]: candidate_requirement_unmet: model 'small' does not "
                     "declare the tools capability recipes[default].candidate_requirements asks of every candidate"]
    assert errors_of(doc(recipe_extra={"candidate_requirements": {"min_params": 3}})) == [
        "recipes[default].candidate_requirements.min_params: unknown_field: not a field of this block"]


# --- algorithm.type: decision with its settings under decision: (spec 5.2) --------------------------------------


def test_the_decision_alias_reads_its_settings_as_systemones():
    loaded = load_raw(doc({"algorithm": {"type": "decision", "decision": {"instructions": "which?"}}}))
    alg = loaded.config.recipes[0].decisions[0].algorithm
    assert kind_of(alg) == "systemone" and alg.systemone is not None and alg.systemone.instructions == "which?"
    assert f"{D}.algorithm.type: renamed_algorithm_type: 'decision' is now 'systemone'" in loaded.warnings
    assert not any("unknown_field" in w for w in loaded.warnings)


def test_the_decision_alias_with_both_keys_is_one_line():
    lines = errors_of(doc({"algorithm": {"type": "decision", "decision": {"instructions": "a"},
                                         "systemone": {"instructions": "b"}}}))
    assert lines == [f"{D}.algorithm.decision: invalid_value: the settings are written twice, under decision and "
                     "systemone; keep systemone"]
