"""Decisions: three-valued logic, on_unknown, strategies, projections, and their load checks."""
from __future__ import annotations

import itertools

import msgspec
import pytest

from vsr_fast.routing import load_raw
from vsr_fast.config.schema import Decision, ModelRef, Recipe, RuleNode
from vsr_fast.config.signals import Projections
from vsr_fast.decisions.engine import DecisionFailed, choose, evaluate
from vsr_fast.decisions.projections import CompiledProjections
from vsr_fast.errors import ConfigError
from vsr_fast.signals.base import CompileErrors, Outcome
from vsr_fast.signals.registry import Readings

T, F, U = True, False, None


def readings(**values) -> Readings:
    r = Readings()
    for name, v in values.items():
        outcome = v if isinstance(v, Outcome) else Outcome(v)
        r.outcomes[("keyword", name)] = outcome
    return r


def leaf(name, **kw) -> RuleNode:
    return RuleNode(type="keyword", name=name, **kw)


def node(op, *children) -> RuleNode:
    return RuleNode(operator=op, conditions=list(children))


KLEENE_AND = {(a, b): (F if F in (a, b) else U if U in (a, b) else T) for a, b in itertools.product((T, F, U), repeat=2)}
KLEENE_OR = {(a, b): (T if T in (a, b) else U if U in (a, b) else F) for a, b in itertools.product((T, F, U), repeat=2)}


@pytest.mark.parametrize("a, b", list(itertools.product((T, F, U), repeat=2)))
def test_kleene_and_or(a, b):
    r = readings(a=a, b=b)
    assert evaluate(node("AND", leaf("a"), leaf("b")), r) is KLEENE_AND[(a, b)]
    assert evaluate(node("OR", leaf("a"), leaf("b")), r) is KLEENE_OR[(a, b)]


@pytest.mark.parametrize("a, expected", [(T, F), (F, T), (U, U)])
def test_not(a, expected):
    assert evaluate(node("NOT", leaf("a")), readings(a=a)) is expected


def test_empty_and_is_true_empty_or_is_false_and_missing_signal_is_unknown():
    assert evaluate(node("AND"), readings()) is True
    assert evaluate(node("OR"), readings()) is False
    assert evaluate(leaf("absent"), readings()) is None


@pytest.mark.parametrize(
    "value, bounds, expected",
    [(3.0, {"gte": 3}, T), (2.0, {"gte": 3}, F), (3.0, {"gt": 3}, F), (0.5, {"lt": 1, "gt": 0}, T),
     (1.0, {"eq": 1}, T), (None, {"gte": 1}, U)],
)
def test_numeric_leaf_predicates(value, bounds, expected):
    r = readings(n=Outcome(True if value is not None else None, value=value))
    assert evaluate(leaf("n", **bounds), r) is expected


def decision(name, rules, priority=0, on_unknown=None) -> Decision:
    rules = msgspec.structs.replace(rules, on_unknown=on_unknown)
    return Decision(name=name, rules=rules, priority=priority, modelRefs=[ModelRef(model="m")])


@pytest.mark.parametrize("policy, matched", [(None, False), ("no_match", False), ("match", True)])
def test_on_unknown_settles_an_unresolved_decision(policy, matched):
    recipe = Recipe(name="r", decisions=[decision("d", node("AND", leaf("u")), on_unknown=policy)])
    chosen = choose(recipe, readings(u=U))
    assert (chosen.decision is not None) is matched
    assert chosen.verdicts[0].value is None


def test_on_unknown_fail_request_raises_a_routing_error():
    recipe = Recipe(name="r", decisions=[decision("d", node("AND", leaf("u")), on_unknown="fail_request")])
    with pytest.raises(DecisionFailed) as info:
        choose(recipe, readings(u=U))
    assert info.value.status == 400 and info.value.code == "decision_unresolved"


def test_priority_strategy_highest_wins_ties_by_order():
    recipe = Recipe(name="r", decisions=[
        decision("low", node("AND"), priority=1),
        decision("first_high", node("AND"), priority=5),
        decision("second_high", node("AND"), priority=5),
    ])
    assert choose(recipe, readings()).decision.name == "first_high"


def test_confidence_strategy_uses_mean_confidence_of_holding_leaves():
    r = readings(a=Outcome(True, confidence=0.9), b=Outcome(True, confidence=0.4), c=Outcome(True, confidence=0.7))
    recipe = Recipe(name="r", strategy="confidence", decisions=[
        decision("ab", node("AND", leaf("a"), leaf("b")), priority=100),   # mean 0.65
        decision("c", node("AND", leaf("c")), priority=1),                  # 0.7
        decision("catch_all", node("AND"), priority=1000),                  # holds by no leaf: 0
    ])
    chosen = choose(recipe, r)
    assert chosen.decision.name == "c"
    assert chosen.why.startswith("highest confidence 0.7")


def test_projections_weighted_sum_and_bands():
    proj = msgspec.convert({
        "scores": [{"name": "risk", "inputs": [
            {"type": "keyword", "name": "a", "weight": 0.5},
            {"type": "keyword", "name": "b", "weight": 0.3, "value_source": "confidence"},
            {"type": "keyword", "name": "c", "weight": 0.1, "value_source": "value"},
            {"type": "keyword", "name": "u", "weight": 5.0},
        ]}],
        "mappings": [{"name": "band", "source": "risk", "outputs": [
            {"name": "low", "lt": 0.5}, {"name": "mid", "gte": 0.5, "lt": 1.0}, {"name": "high", "gte": 1.0}]}],
    }, Projections)
    errors = CompileErrors()
    compiled = CompiledProjections(proj, "recipes[r].projections", errors, lambda t, n: True)
    assert errors.lines == []
    r = readings(a=True, b=Outcome(True, confidence=0.5), c=Outcome(True, value=2.0), u=U)
    compiled.evaluate(r)
    assert r.get("projection", "risk").value == pytest.approx(0.5 + 0.15 + 0.2)
    assert [r.get("projection", n).matched for n in ("low", "mid", "high")] == [False, True, False]


def base_doc(**recipe) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9"}]}]},
        "recipes": [{"name": "default", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}], **recipe}],
    }


def load_errors(doc) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(doc)
    return info.value.lines


def with_rules(rules, **recipe):
    doc = base_doc(**recipe)
    doc["recipes"][0]["decisions"][0]["rules"] = rules
    return doc


KW = {"keywords": [{"name": "urgent", "keywords": ["urgent"]}]}

LOAD_CASES = [
    (with_rules({"operator": "AND", "conditions": [{"type": "keyword", "name": "urgentt"}]}, signals=KW),
     ["recipes[default].decisions[0].rules.conditions[0]: unknown_signal: keyword rule 'urgentt' is not declared in this recipe's signals.keywords"]),
    (with_rules({"operator": "AND", "conditions": [{"type": "weather", "name": "rain"}]}),
     ["recipes[default].decisions[0].rules.conditions[0].type: unknown_signal: 'weather' is not a condition type this router serves"]),
    (with_rules({"operator": "AND", "conditions": [{"type": "domain", "name": "math"}]}),
     ["recipes[default].decisions[0].rules.conditions[0]: unknown_signal: domain rule 'math' is not declared in this recipe's signals"]),
    (with_rules({"operator": "AND", "conditions": [{"type": "embedding", "name": "x"}]}),
     ["recipes[default].decisions[0].rules.conditions[0].type: removed_signal_type: 'embedding' conditions were removed; write a systemone yes/no question quoting the examples"]),
    (with_rules({"operator": "AND", "conditions": [{"type": "keyword", "name": "urgent", "label": "x"}]}, signals=KW),
     ["recipes[default].decisions[0].rules.conditions[0].label: invalid_value: keyword conditions have no labels"]),
    (with_rules({"operator": "AND", "conditions": [{"type": "language", "name": "en", "gte": 1}]},
                signals={"language": [{"name": "en"}]}),
     ["recipes[default].decisions[0].rules.conditions[0]: invalid_value: language signals publish no number for gt/gte/lt/lte/eq to test"]),
    (with_rules({"operator": "AND", "conditions": [{"type": "projection", "name": "nope"}]}),
     ["recipes[default].decisions[0].rules.conditions[0]: unknown_signal: projection 'nope' is not declared in this recipe's projections"]),
    (base_doc(signals={"keywords": [{"name": "bad", "method": "regex", "keywords": ["ok", "(unclosed"]}]}),
     ["recipes[default].signals.keywords[bad].keywords[1]: invalid_value: invalid regex '(unclosed': missing ), unterminated subpattern at position 0"]),
    (base_doc(signals={"keywords": [{"name": "n", "keywords": ["a"], "count": {"gte": 1}, "density": {"gt": 1}}]}),
     ["recipes[default].signals.keywords[n]: invalid_value: set count or density, not both"]),
    (base_doc(signals={"keywords": [{"name": "n", "operator": "AND", "keywords": ["a"], "count": {"gte": 1}}]}),
     ["recipes[default].signals.keywords[n]: invalid_value: count and density need operator: OR over literal or regex keywords"]),
    (base_doc(signals={"keywords": [{"name": "n", "keywords": ["a"], "count": {}}]}),
     ["recipes[default].signals.keywords[n].count: invalid_value: a predicate needs gt, gte, lt, lte or eq"]),
    (base_doc(signals={"keywords": [{"name": "n", "keywords": ["a", " "]}]}),
     ["recipes[default].signals.keywords[n].keywords[1]: invalid_value: an empty keyword matches nothing"]),
    (base_doc(signals={"keywords": [{"name": "n", "keywords": ["a"]}, {"name": "n", "keywords": ["b"]}]}),
     ["recipes[default].signals.keywords[n].name: duplicate_name: keywords rule 'n' is declared more than once"]),
    (base_doc(signals={"keywords": [{"name": "n", "keywords": ["a"], "methd": "regex"}]}),
     ["recipes[default].signals.keywords[n].methd: unknown_field: not a field of this block; did you mean method?"]),
    (base_doc(signals={"structure": [{"name": "x"}]}),
     ["recipes[default].signals.structure: removed_signal_type: structure was removed; write keywords rules with a count or density predicate"]),
    (base_doc(projections={"scores": [{"name": "s", "inputs": [{"type": "keyword", "name": "ghost", "weight": 1}]}]}),
     ["recipes[default].projections.scores[0].inputs[0]: unknown_signal: keyword rule 'ghost' is not declared in this recipe's signals"]),
]


@pytest.mark.parametrize("doc, lines", LOAD_CASES, ids=[c[1][0].split(": ")[1] + ":" + c[1][0].split(":")[0][-30:] for c in LOAD_CASES])
def test_condition_and_signal_load_errors(doc, lines):
    assert load_errors(doc) == lines


async def test_unread_signals_are_not_evaluated():
    doc = with_rules({"operator": "AND", "conditions": [{"type": "keyword", "name": "urgent"}]},
                     signals={**KW, "language": [{"name": "en"}]})
    loaded = load_raw(doc)
    compiled = loaded.table.recipes["default"]
    from vsr_fast.signals.base import CanonicalRequest
    from vsr_fast.protocol.chat import Message
    r = await compiled.read(lambda: CanonicalRequest([Message(role="user", content="this is urgent")]), None)
    assert set(r.outcomes) == {("keyword", "urgent")}
    assert set(r.timings_us) == {"keyword"}


def test_static_candidates_keep_order_once_per_model_and_take_the_first_ref_s_lora_name():
    from vsr_fast.config.schema import ProviderModel
    from vsr_fast.selection.static import candidate_models

    models = {n: ProviderModel(name=n, provider_model_id=f"up-{n}") for n in ("a", "b")}
    refs = [ModelRef(model="b", lora_name="b-adapter"), ModelRef(model="a"), ModelRef(model="b", lora_name="other")]
    got = candidate_models(refs, models)
    assert [(m.name, m.upstream_model) for m in got] == [("b", "b-adapter"), ("a", "up-a")]
    assert got[1] is models["a"], "a ref without lora_name is the provider model itself"


# --- fail_request: it decides its own decision's unresolved result, never one a higher decision won ----------


def test_fail_request_does_not_fail_a_request_a_higher_priority_decision_won():
    # The trial's unk2.yaml: tv (200, on_unknown: match) and fail (100, fail_request) read the same unknown signal.
    rules = node("AND", leaf("k"), leaf("dead"))
    recipe = Recipe(name="r", decisions=[decision("tv", rules, priority=200, on_unknown="match"),
                                         decision("fail", rules, priority=100, on_unknown="fail_request")])
    chosen = choose(recipe, readings(k=T, dead=U))
    assert chosen.decision.name == "tv"
    by_name = {v.name: v for v in chosen.verdicts}
    assert by_name["fail"].unresolved and not by_name["fail"].matched
    assert not by_name["tv"].unresolved


def test_fail_request_fails_when_the_unresolved_decision_outranks_every_match():
    rules = node("AND", leaf("k"), leaf("dead"))
    recipe = Recipe(name="r", decisions=[decision("low", node("AND", leaf("k")), priority=10),
                                         decision("fail", rules, priority=100, on_unknown="fail_request")])
    with pytest.raises(DecisionFailed) as info:
        choose(recipe, readings(k=T, dead=Outcome(None, detail="unknown: timeout: remote: no answer")))
    exc = info.value
    assert "'fail'" in exc.message and "keyword:dead" in exc.message and "timeout" in exc.message
    assert exc.unknown == (("keyword", "dead"),)
    assert [v.name for v in exc.verdicts if v.unresolved] == ["fail"]
    assert exc.status == 400       # an unknown keyword rule is not the decision model's: no retry helps


def test_fail_request_on_a_remote_signal_is_a_retryable_503():
    recipe = Recipe(name="r", decisions=[decision("fail", node("AND", leaf("dead")), on_unknown="fail_request")])
    with pytest.raises(DecisionFailed) as info:
        choose(recipe, readings(dead=U), remote=frozenset({"keyword"}))
    assert (info.value.status, info.value.code, info.value.retry_after_s) == (503, "decision_unresolved", 1)


def test_fail_request_under_confidence_fails_only_when_it_could_have_won():
    # Under strategy confidence an unresolved decision's confidence is at most what it would be with every unknown
    # leaf holding with confidence 1: (0.2 + 1) / 2 = 0.6 for `pending`.
    pending = decision("pending", node("AND", leaf("a"), leaf("u")), priority=1, on_unknown="fail_request")
    surer = Recipe(name="r", strategy="confidence",
                   decisions=[pending, decision("c", node("AND", leaf("c")), priority=0)])
    r = readings(a=Outcome(True, confidence=0.2), u=U, c=Outcome(True, confidence=0.7))
    assert choose(surer, r).decision.name == "c"
    r = readings(a=Outcome(True, confidence=0.2), u=U, c=Outcome(True, confidence=0.5))
    with pytest.raises(DecisionFailed):
        choose(surer, r)
