"""response_guard's configuration and the response stage's rules: every bad form one line with its path,
the layering, what holds a stream, the lazy evaluation and what the cache key reads."""
from __future__ import annotations

import pytest
import trio

from vsr_fast.errors import ConfigError
from vsr_fast.plugins import response_cache
from vsr_fast.routing import load_raw
from vsr_fast.routing.guard import run
from vsr_fast.server.recording import Policies
from vsr_fast.signals.base import Outcome

SIGNALS = {
    "jailbreak": [{"name": "unsafe", "stage": "response", "predicate": {"gte": 0.9}},
                  {"name": "attack"}],
    "refusal": [{"name": "refused"}],
    "hallucination": [{"name": "ungrounded"}],
    "fact_check": [{"name": "needs_facts"}],
    "keywords": [{"name": "facts", "operator": "OR", "keywords": ["when"]}],
    "systemone": [{"name": "rude", "stage": "response", "input": {"answer": True},
                   "question": {"type": "noul", "instructions": "Is the answer rude?"}}],
}
BLOCK_UNSAFE = {"when": {"type": "jailbreak", "name": "unsafe"}, "action": "block"}


def doc(guard: dict | None = None, *, signals: dict | None = None, global_plugins: list | None = None,
        recipe_plugins: list | None = None, decision_plugins: list | None = None) -> dict:
    plugins = decision_plugins if decision_plugins is not None else (
        [{"type": "response_guard", "configuration": guard}] if guard is not None else [])
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:1/v1"}]}]},
        "global": {"plugins": global_plugins or [],
                   "model_catalog": {"deployments": {"s1": {
                       "provider": "systemone", "endpoint": "http://127.0.0.1:2/v1/systemone", "model": "fake",
                       "capabilities": {"question_types": ["choice", "noul", "score", "set", "span"]}}},
                       "system": {"decision_model": {"deployment": "s1"}}}},
        "recipes": [{"name": "default", "signals": signals if signals is not None else SIGNALS,
                     "plugins": recipe_plugins or [],
                     "decisions": [{"name": "d", "modelRefs": [{"model": "m"}], "plugins": plugins}]}],
    }


def errors_of(d: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    return info.value.lines


AT = "recipes[default].decisions[0].plugins[0].configuration"


@pytest.mark.parametrize(("guard", "line"), [
    ({"rules": []}, f"{AT}.rules: invalid_value"),
    ({"rules": [{"when": {"type": "jailbreak", "name": "unsafe"}}]}, f"{AT}.rules[0].action: missing_field"),
    ({"rules": [{"when": {"type": "jailbreak", "name": "unsafe"}, "action": "redact"}]},
     f"{AT}.rules[0].action: invalid_value"),
    ({"rules": [BLOCK_UNSAFE], "on_unknown": "pass"}, f"{AT}.on_unknown: invalid_value"),
    ({"rules": [BLOCK_UNSAFE], "mode": "strict"}, f"{AT}.mode: unknown_field"),
    ({"rules": [{"when": {}, "action": "block"}]},
     f"{AT}.rules[0].when: invalid_value: a condition names a signal (type and name) or an operator"),
    ({"rules": [{"when": {"type": "jailbreak", "name": "unsafe"}, "action": "block", "details": True}]},
     f"{AT}.rules[0].details: invalid_value: details adds a note to an annotated answer; action 'block'"),
    ({"rules": [{"when": {"type": "jailbreak", "name": "unsafe"}, "action": "annotate", "code": "Bad Code"}]},
     f"{AT}.rules[0].code: invalid_value"),
    ({"rules": [{"when": {"type": "refusal", "name": "nobody"}, "action": "block"}]},
     f"{AT}.rules[0].when: unknown_signal: refusal rule 'nobody' is not declared"),
    ({"rules": [{"when": {"type": "keyword", "name": "nobody"}, "action": "block"}]},
     f"{AT}.rules[0].when: unknown_signal: keyword rule 'nobody' is not declared"),
    ({"rules": [{"when": {"type": "embedding", "name": "x"}, "action": "block"}]},
     f"{AT}.rules[0].when.type: removed_signal_type"),
    ({"rules": [{"when": {"type": "refusal", "name": "refused", "label": "maybe"}, "action": "block"}]},
     f"{AT}.rules[0].when.label: invalid_value: 'maybe' is not an option of refusal rule 'refused'"),
    ({"rules": [{"when": {"operator": "AND", "conditions": [
        {"type": "jailbreak", "name": "attack", "on_unknown": "match"}]}, "action": "block"}]},
     f"{AT}.rules[0].when.conditions[0].on_unknown: invalid_value: a guard rule's unknown is the guard's on_unknown"),
], ids=lambda v: "" if isinstance(v, str) else None)
def test_each_bad_form_is_one_line_with_its_path(guard, line):
    lines = errors_of(doc(guard))
    assert any(x.startswith(line) for x in lines), lines


@pytest.mark.parametrize(("signals", "line"), [
    ({"refusal": [{"name": "refused", "stage": "request"}]}, "recipes[default].signals.refusal[refused].stage: unknown_field"),
    ({"systemone": [{"name": "q", "input": {"answer": True}, "question": {"type": "noul", "instructions": "x"}}]},
     "recipes[default].signals.systemone[q].stage: invalid_value: input.answer and input.context read the model's "
     "answer: set stage: response"),
    ({"pii": [{"name": "p", "stage": "response"}]}, "recipes[default].signals.pii[p].stage: unknown_field"),
])
def test_response_stage_signals_refuse_what_cannot_be_asked(signals, line):
    lines = errors_of(doc(None, signals=signals))
    assert any(x.startswith(line) for x in lines), lines


def test_a_decision_cannot_route_on_a_response_stage_signal():
    d = doc(None)
    d["recipes"][0]["decisions"][0]["rules"] = {"operator": "AND", "conditions": [{"type": "refusal", "name": "refused"}]}
    assert any("decisions route before an answer exists" in x for x in errors_of(d))


def guard_of(d: dict):
    loaded = load_raw(d)
    return loaded, loaded.table.recipes["default"].guards.get("d")


def test_layers_merge_field_by_field_and_a_decision_turns_the_guard_off():
    g = {"type": "response_guard", "configuration": {"rules": [BLOCK_UNSAFE], "on_unknown": "none"}}
    _, guard = guard_of(doc(global_plugins=[g], decision_plugins=[
        {"type": "response_guard", "configuration": {"on_unknown": "block"}}]))
    assert guard.policy.on_unknown == "block" and guard.policy.rules[0].action == "block"
    _, off = guard_of(doc(global_plugins=[g], decision_plugins=[
        {"type": "response_guard", "configuration": {"enabled": False}}]))
    assert off is None


@pytest.mark.parametrize(("rules", "on_unknown", "holds"), [
    ([BLOCK_UNSAFE], "annotate", True),
    ([{"when": {"type": "refusal", "name": "refused"}, "action": "annotate", "details": True}], "annotate", True),
    ([{"when": {"type": "refusal", "name": "refused"}, "action": "annotate"}], "annotate", False),
    ([{"when": {"type": "refusal", "name": "refused"}, "action": "none"}], "none", False),
    ([{"when": {"type": "refusal", "name": "refused"}, "action": "none"}], "block", True),
])
def test_only_a_guard_that_can_refuse_or_rewrite_holds_a_stream(rules, on_unknown, holds):
    _, guard = guard_of(doc({"rules": rules, "on_unknown": on_unknown}))
    assert guard.holds is holds


def test_request_stage_signals_a_guard_reads_are_asked_by_routing():
    guard = {"rules": [{"when": {"operator": "AND", "conditions": [
        {"type": "fact_check", "name": "needs_facts"}, {"type": "hallucination", "name": "ungrounded"}]},
        "action": "annotate"}]}
    loaded, compiled = guard_of(doc(guard))
    recipe = loaded.table.recipes["default"]
    assert [(r.condition_type, r.name) for r in recipe.learned.read] == [("fact_check", "needs_facts")]
    assert set(compiled.response) == {("hallucination", "ungrounded")}
    hallucination = compiled.response[("hallucination", "ungrounded")]
    assert hallucination.share.spec.answer and hallucination.share.spec.context


def test_the_guard_and_revision_are_in_the_cache_key():
    base = {"type": "response_cache", "configuration": {"enabled": True}}
    keys = set()
    for plugins in ([base],
                    [base, {"type": "response_guard", "configuration": {"rules": [BLOCK_UNSAFE]}}],
                    [base, {"type": "response_guard", "configuration": {"rules": [BLOCK_UNSAFE], "on_unknown": "none"}}],
                    [{"type": "response_cache", "configuration": {"enabled": True, "revision": {"policy_revision": "2"}}},
                     {"type": "response_guard", "configuration": {"rules": [BLOCK_UNSAFE], "on_unknown": "none"}}]):
        loaded = load_raw(doc(decision_plugins=plugins))
        policies = Policies(loaded)
        keys.add(response_cache.cache_key(b'{"messages":[]}', recipe="default", decision="d",
                                          guard=policies.guard_key("default", "d"),
                                          policy=policies.cache("default", "d"), principal="user:a"))
    assert len(keys) == 4


def test_team_and_tenant_scopes_key_on_the_callers_team_and_tenant():
    assert response_cache.principal("team", user="a", team="red") == "team:red"
    assert response_cache.principal("tenant", user="a", team="red", tenant="acme") == "tenant:acme"
    assert response_cache.principal("team", user="a", team="red") != response_cache.principal("team", user="a", team="blue")


def test_a_caller_without_the_scopes_attribute_falls_back_to_a_narrower_identity_never_a_wider_one():
    p = response_cache.principal
    # A key without a tenant (team): its key, not one partition of every such key, nor its team.
    assert p("tenant", user="u1", team="platform", key="u1") == "key:u1"
    assert p("team", user="t1", tenant="acme", key="t1") == "key:t1"
    assert p("tenant", user="u1", key="u1") != p("tenant", user="u2", key="u2")
    # Trusted headers without a key: the user, else the team, for a tenant scope.
    assert p("tenant", user="ana", team="red") == "user:ana"
    assert p("tenant", user=None, team="red") == "team:red"
    assert p("team", user="ana", tenant="acme") == "user:ana"
    # Only wider identities known: no principal, so no cache (sharing the tenant would be wider than asked).
    assert p("team", user=None, tenant="acme") is None
    assert p("user", user=None, team="red") is None
    # The truly anonymous are one; a tenant named "anonymous" is not them.
    assert p("tenant", user=None) == p("user", user=None) == "anonymous" != p("tenant", user=None, tenant="anonymous")


# --- the lazy evaluation ------------------------------------------------------------------------


def _run(guard_doc: dict, request_outcomes: dict, answers: dict):
    """The verdict, and the rounds of response-stage rules asked (each one merged round)."""
    from vsr_fast.signals.registry import Readings

    _, guard = guard_of(doc(guard_doc))
    readings = Readings()
    readings.outcomes.update(request_outcomes)
    rounds: list[list[str]] = []

    async def ask(rules):
        rounds.append(sorted(f"{r.condition_type}:{r.name}" for r in rules))
        return {(r.condition_type, r.name): answers[(r.condition_type, r.name)] for r in rules}

    return trio.run(run, guard, readings, ask), rounds


FACTS_AND_UNGROUNDED = {"rules": [{"when": {"operator": "AND", "conditions": [
    {"type": "fact_check", "name": "needs_facts"}, {"type": "hallucination", "name": "ungrounded"}]},
    "action": "annotate", "code": "ungrounded"}]}


def test_an_and_stops_at_its_first_false_condition():
    verdict, rounds = _run(FACTS_AND_UNGROUNDED, {("fact_check", "needs_facts"): Outcome(False)}, {})
    assert rounds == [] and verdict.outcome == "passed"
    verdict, rounds = _run(FACTS_AND_UNGROUNDED, {("fact_check", "needs_facts"): Outcome(True)},
                           {("hallucination", "ungrounded"): Outcome(True)})
    assert rounds == [["hallucination:ungrounded"]] and verdict.outcome == "flagged" and verdict.codes == ["ungrounded"]


def test_rules_share_each_round_and_an_and_asks_its_next_condition_only_when_needed():
    guard = {"rules": [
        {"when": {"operator": "AND", "conditions": [{"type": "refusal", "name": "refused"},
                                                    {"type": "systemone", "name": "rude"}]}, "action": "annotate",
         "code": "rude_refusal"},
        BLOCK_UNSAFE]}
    answers = {("refusal", "refused"): Outcome(True), ("systemone", "rude"): Outcome(False),
               ("jailbreak", "unsafe"): Outcome(False)}
    verdict, rounds = _run(guard, {}, answers)
    assert rounds == [["jailbreak:unsafe", "refusal:refused"], ["systemone:rude"]]
    assert verdict.outcome == "passed"
    answers[("refusal", "refused")] = Outcome(False)
    verdict, rounds = _run(guard, {}, answers)
    assert rounds == [["jailbreak:unsafe", "refusal:refused"]]


@pytest.mark.parametrize(("on_unknown", "outcome", "codes"), [
    ("annotate", "flagged", ["guard:jailbreak:unsafe;unknown"]),
    ("block", "blocked", []),
    ("none", "passed", []),
])
def test_an_unknown_signal_follows_on_unknown(on_unknown, outcome, codes):
    verdict, _ = _run({"rules": [BLOCK_UNSAFE], "on_unknown": on_unknown}, {},
                      {("jailbreak", "unsafe"): Outcome(None, detail="unknown: timeout")})
    assert verdict.outcome == outcome and verdict.codes == codes


def test_the_first_block_ends_the_guard():
    guard = {"rules": [BLOCK_UNSAFE, {"when": {"type": "refusal", "name": "refused"}, "action": "annotate"}]}
    verdict, rounds = _run(guard, {}, {("jailbreak", "unsafe"): Outcome(True), ("refusal", "refused"): Outcome(True)})
    assert verdict.outcome == "blocked" and [f.action for f in verdict.fired] == ["block"]
