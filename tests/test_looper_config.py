"""The Looper's configuration (spec 5.6): every bad algorithm form fails the load with its one line and code."""
from __future__ import annotations

import msgspec
import pytest
import yaml

from vsr_fast.config.schema import Pricing
from vsr_fast.errors import ConfigError
from vsr_fast.routing import load_raw
from vsr_fast.selection import accept, cost, selectors

from .test_config_load import run_cli

D = "recipes[default].decisions[0]"


def doc(algorithm: dict | None, refs=("cheap", "dear"), priced=True) -> dict:
    models = [{"name": n, "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]} for n in ("cheap", "dear")]
    if priced:
        models[0]["pricing"] = {"input": 0.1, "output": 0.4}
        models[1]["pricing"] = {"input": 3, "output": 15}
    decision: dict = {"name": "d", "modelRefs": [{"model": m} for m in refs]}
    if algorithm is not None:
        decision["algorithm"] = algorithm
    return {"version": "v0.5", "providers": {"models": models},
            "recipes": [{"name": "default", "decisions": [decision]}]}


def errors_of(d: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    return info.value.lines


ESC = {"type": "escalate", "escalate": {"accept": {"confidence": {"gte": -0.5}}}}


@pytest.mark.parametrize("algorithm", [
    {"type": "static"}, {"type": "random"}, {"type": "random", "random": {"seed": 3}},
    {"type": "multi_factor", "multi_factor": {"weights": {"cost": 2, "latency": 0}, "quality": {"dear": 0.9}}},
    ESC, {**ESC, "budget": {"deadline_ms": 5000, "max_calls": 3}, "on_error": "fail"},
    {"type": "escalate", "escalate": {"order": "cost", "accept": {"refusal": False}}},
    {"type": "systemone"},
    {"type": "ratings", "ratings": {"max_concurrent": 1}, "on_error": "fail"},
    {"type": "remom", "remom": {"breadth_schedule": [3, 2], "model_distribution": "equal"}},
    {"type": "fusion", "fusion": {"model": "dear", "analysis_models": ["cheap"]}, "budget": {"max_calls": 8}},
    {"type": "workflows", "workflows": {"roles": [{"name": "plan", "models": ["cheap"], "prompt": "plan"},
                                                  {"name": "check", "models": ["dear"], "access_list": ["plan"]}],
                                        "final": {"model": "dear"}}},
    {"type": "workflows", "workflows": {"mode": "dynamic", "planner": {"model": "dear"}, "max_steps": 2}},
    {"type": "systemone", "systemone": {"instructions": "Which model?", "candidates": {"cheap": "short answers"}}},
])
def test_good_algorithms_load(algorithm):
    loaded = load_raw(doc(algorithm))
    assert loaded.config.recipes[0].decisions[0].algorithm.type == algorithm["type"]


@pytest.mark.parametrize(("algorithm", "line"), [
    ({"type": "confidence"}, f"{D}.algorithm.type: removed_algorithm_type: 'confidence' was removed; write type: "
                             "escalate with one accept check (escalate.accept.confidence)"),
    ({"type": "router_dc"}, f"{D}.algorithm.type: removed_algorithm_type: 'router_dc' was removed; write type: "
                            "systemone (one choice over the candidates' descriptions)"),
    ({"type": "elo"}, f"{D}.algorithm.type: removed_algorithm_type: 'elo' was removed; write "
                      "global.router.learning.adaptation"),
    ({"type": "bogus"}, f"{D}.algorithm.type: invalid_value: unknown algorithm type 'bogus' (one of: escalate, "
                        "fusion, multi_factor, random, ratings, remom, static, systemone, workflows)"),
    ({"type": "remom"}, f"{D}.algorithm.remom: missing_field: a remom algorithm needs remom.breadth_schedule"),
    ({"type": "workflows"}, f"{D}.algorithm.workflows: missing_field: a workflows algorithm needs workflows.roles"),
    ({"type": "fusion", "fusion": {"model": "judge"}},
     f"{D}.algorithm.fusion.model: unknown_model: 'judge' is not one of the decision's modelRefs"),
    ({"type": "workflows", "workflows": {"roles": [{"name": "w", "models": ["cheap", "x"]}]}},
     f"{D}.algorithm.workflows.roles[0].models[1]: unknown_model: 'x' is not one of the decision's modelRefs"),
    ({"type": "workflows", "workflows": {"roles": [{"name": "w", "models": ["cheap"]}], "mode": "dynamic"}},
     f"{D}.algorithm.workflows.roles: invalid_value: a dynamic workflow's planner writes its roles; remove them or "
     "set mode: static"),
    ({"type": "workflows", "workflows": {"mode": "static"}},
     f"{D}.algorithm.workflows.roles: missing_field: a static workflow needs its roles"),
    ({"type": "workflows", "workflows": {"roles": [{"name": "draft", "models": ["cheap", "dear"]},
                                                   {"name": "review", "models": ["dear"],
                                                    "access_list": ["draft", "draft:1:dear", "drafts"]}]}},
     f"{D}.algorithm.workflows.roles[1].access_list[2]: invalid_value: 'drafts' names no earlier role nor one of "
     "its agents (draft, draft:0:cheap, draft:1:dear)"),
    ({"type": "workflows", "workflows": {"roles": [{"name": "draft", "models": ["cheap"]},
                                                   {"name": "review", "models": ["dear"],
                                                    "access_list": ["review"]}]}},
     f"{D}.algorithm.workflows.roles[1].access_list[0]: invalid_value: 'review' names no earlier role nor one of "
     "its agents (draft, draft:0:cheap)"),
    ({"type": "workflows", "workflows": {"mode": "dynamic", "planner": {"model": "x"}}},
     f"{D}.algorithm.workflows.planner.model: unknown_model: 'x' is not one of the decision's modelRefs"),
    ({"type": "remom", "remom": {"breadth_schedule": [2], "synthesis_model": "x"}},
     f"{D}.algorithm.remom.synthesis_model: unknown_model: 'x' is not one of the decision's modelRefs"),
    ({"type": "remom", "remom": {"breadth_schedule": []}},
     f"{D}.algorithm.remom.breadth_schedule: invalid_value: Expected `array` of length >= 1"),
    ({"type": "ratings", "on_error": "last_attempt"},
     f"{D}.algorithm.on_error: invalid_value: ratings's on_error is skip or fail"),
    ({"type": "random", "budget": {"max_calls": 2}},
     f"{D}.algorithm.budget: invalid_value: the random selector takes no budget (only executors do)"),
    ({"type": "static", "on_error": "fail"},
     f"{D}.algorithm.on_error: invalid_value: the static selector takes no on_error (only executors do)"),
    ({"type": "random", "escalate": ESC["escalate"]},
     f"{D}.algorithm.escalate: invalid_value: settings of the escalate algorithm under type 'random'"),
    ({"type": "escalate"}, f"{D}.algorithm.escalate: missing_field: an escalate algorithm needs escalate.accept"),
    ({"type": "escalate", "escalate": {"accept": {}}},
     f"{D}.algorithm.escalate.accept: invalid_value: exactly one check (confidence, systemone or refusal: false), got 0"),
    ({"type": "escalate", "escalate": {"accept": {"refusal": False, "confidence": {"gte": 0}}}},
     f"{D}.algorithm.escalate.accept: invalid_value: exactly one check (confidence, systemone or refusal: false), got 2"),
    ({"type": "multi_factor", "multi_factor": {"quality": {"other": 0.5}}},
     f"{D}.algorithm.multi_factor.quality.other: unknown_model: 'other' is not one of the decision's modelRefs"),
    ({"type": "systemone", "systemone": {"candidates": {"other": "x"}}},
     f"{D}.algorithm.systemone.candidates.other: unknown_model: 'other' is not one of the decision's modelRefs"),
    ({"type": "systemone", "on_error": "fail"},
     f"{D}.algorithm.on_error: invalid_value: the systemone selector takes no on_error (only executors do)"),
    ({"type": "systemone", "systemone": {"deployment": "nowhere"}},
     f"{D}.algorithm.systemone.deployment: unknown_deployment: 'nowhere' is not declared in "
     "global.model_catalog.deployments"),
    ({"type": "escalate", "escalate": {"accept": {"systemone": {"gte": 0.5, "deployment": "nowhere"}}}},
     f"{D}.algorithm.escalate.accept.systemone.deployment: unknown_deployment: 'nowhere' is not declared in "
     "global.model_catalog.deployments"),
    ({"type": "escalate", "escalate": {"accept": {"systemone": {"gte": 1.5}}}},
     f"{D}.algorithm.escalate.accept.systemone.gte: invalid_value: Expected `float` <= 1.0"),
    ({**ESC, "on_error": "skip"}, f"{D}.algorithm.on_error: invalid_value: escalate's on_error is last_attempt or fail"),
])
def test_bad_algorithms_fail_with_one_line(algorithm, line):
    assert errors_of(doc(algorithm)) == [line]


def test_renamed_decision_type_warns_and_loads_as_systemone():
    loaded = load_raw(doc({"type": "decision"}))
    assert f"{D}.algorithm.type: renamed_algorithm_type: 'decision' is now 'systemone'" in loaded.warnings


def test_the_systemone_selector_needs_two_candidates():
    assert errors_of(doc({"type": "systemone"}, refs=("cheap",))) == [
        f"{D}.algorithm: invalid_value: the systemone selector needs at least two modelRefs to choose between"]


def test_escalate_needs_two_candidates():
    assert errors_of(doc(ESC, refs=("cheap",))) == [
        f"{D}.algorithm: invalid_value: escalate needs at least two modelRefs to escalate between"]


@pytest.mark.parametrize("algorithm", [{"type": "multi_factor"},
                                       {"type": "escalate", "escalate": {"order": "cost", "accept": {"refusal": False}}}])
def test_cost_ordering_needs_pricing(algorithm):
    assert errors_of(doc(algorithm, priced=False)) == [
        f"{D}.algorithm: missing_field: ordering by cost needs providers.models[].pricing of every candidate "
        "(missing: cheap, dear)"]


def test_multi_factor_without_a_cost_weight_needs_no_pricing():
    load_raw(doc({"type": "multi_factor", "multi_factor": {"weights": {"cost": 0}}}, priced=False))


@pytest.mark.parametrize(("pricing", "path"), [({"input": -1}, "input"), ({"currency": "usd"}, "currency"),
                                               ({"per_token": 1}, "per_token")])
def test_bad_pricing_fails_with_its_path(pricing, path):
    d = doc(None)
    d["providers"]["models"][0]["pricing"] = pricing
    (line,) = errors_of(d)
    assert line.startswith(f"providers.models[cheap].pricing.{path}: "), line


def test_mixed_currencies_in_one_decision_fail():
    d = doc(None)
    d["providers"]["models"][1]["pricing"]["currency"] = "EUR"
    assert errors_of(d) == [f"{D}.modelRefs: invalid_value: a decision's priced models share one currency "
                            "(found EUR, USD)"]


# --- the pure parts: cost, checks, selectors ------------------------------------------------------------


def test_cost_of_each_protocols_usage():
    p = Pricing(input=2.0, output=10.0, cached=0.5)
    chat = cost.Tokens()
    chat.read(b'{"usage":{"prompt_tokens":1000,"completion_tokens":200,"prompt_tokens_details":{"cached_tokens":400}}}')
    assert cost.price(p, chat) == pytest.approx((600 * 2 + 400 * 0.5 + 200 * 10) / 1e6)
    msgs = cost.Tokens()
    msgs.read(b'{"type":"message_start","message":{"usage":{"input_tokens":600,"cache_read_input_tokens":400,'
              b'"output_tokens":1}}}')
    msgs.read(b'{"type":"message_delta","usage":{"output_tokens":200}}')
    assert cost.price(p, msgs) == pytest.approx(cost.price(p, chat))
    resp = cost.Tokens()
    resp.read(b'{"type":"response.completed","response":{"usage":{"input_tokens":1000,"output_tokens":200,'
              b'"input_tokens_details":{"cached_tokens":400}}}}')
    assert cost.price(p, resp) == pytest.approx(cost.price(p, chat))
    # Input Messages writes to its cache is input too, billed (at the input price: no price of its own here).
    written = cost.Tokens()
    written.read(b'{"type":"message_start","message":{"usage":{"input_tokens":100,"cache_read_input_tokens":400,'
                 b'"cache_creation_input_tokens":500,"output_tokens":1}}}')
    written.read(b'{"type":"message_delta","usage":{"output_tokens":200}}')
    assert (written.input, written.cached, written.output) == (1000, 400, 200)
    assert cost.price(p, written) == pytest.approx(cost.price(p, chat))


def test_confidence_and_refusal_checks():
    body = (b'{"choices":[{"message":{"content":"a b"},"logprobs":{"content":['
            b'{"token":"a","logprob":-0.2,"top_logprobs":[{"token":"a","logprob":-0.2},{"token":"x","logprob":-1.7}]},'
            b'{"token":"b","logprob":-0.4,"top_logprobs":[{"token":"b","logprob":-0.4},{"token":"y","logprob":-0.9}]}]}}]}')
    docs = accept._docs(body, False)
    assert accept.confidence(accept.token_logprobs(docs), "avg_logprob") == pytest.approx(-0.3)
    assert accept.confidence(accept.token_logprobs(docs), "margin") == pytest.approx((1.5 + 0.5) / 2)
    assert not accept.refused(docs)
    assert accept.refused(accept._docs(b'{"choices":[{"message":{"content":null,"refusal":"no"}}]}', False))
    assert accept.refused(accept._docs(b'data: {"choices":[{"delta":{"refusal":"no"}}]}\n\ndata: [DONE]\n\n', True))


def test_a_tool_call_answer_without_logprobs_passes_a_confidence_check_and_a_text_one_does_not():
    """OpenAI rates no token of a tool call (``logprobs.content`` null): an agent's every tool-call turn would
    otherwise be rejected and call every candidate. A text answer without logprobs still fails."""
    check = msgspec.convert({"confidence": {"method": "avg_logprob", "gte": -0.5}}, accept.Accept)
    call = (b'{"choices":[{"finish_reason":"tool_calls","logprobs":{"content":null},"message":{"content":null,'
            b'"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}')
    ok, why = accept.accepted(check, call, False, "openai")
    assert ok and "tool call" in why, why
    streamed = (b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
                b'"function":{"name":"f","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]}\n\n'
                b'data: {"choices":[{"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
    assert accept.accepted(check, streamed, True, "openai")[0]
    text = b'{"choices":[{"finish_reason":"stop","logprobs":null,"message":{"content":"hello"}}]}'
    assert accept.accepted(check, text, False, "openai") == (False, "avg_logprob: no logprobs")


def test_multi_factor_prefers_the_cheaper_model_until_its_error_rate_rises():
    from vsr_fast.config.algorithm import MultiFactor
    from vsr_fast.config.schema import ProviderModel
    cheap = ProviderModel(name="cheap", pricing=Pricing(input=0.1, output=0.4))
    dear = ProviderModel(name="dear", pricing=Pricing(input=3, output=15))
    stats, cfg = selectors.ModelStats(), MultiFactor()
    assert selectors.pick_multi_factor((dear, cheap), cfg, stats, None)[0] is cheap
    picks = []
    for _ in range(10):
        stats.observe("cheap", 0.01, ok=False)
        picks.append(selectors.pick_multi_factor((dear, cheap), cfg, stats, None)[0].name)
    assert picks[0] == "cheap" and picks[-1] == "dear"
    # A session's earlier model wins a tie, never a real difference.
    twin = ProviderModel(name="twin", pricing=Pricing(input=0.1, output=0.4))
    assert selectors.pick_multi_factor((cheap, twin), cfg, selectors.ModelStats(), "twin")[0] is twin
    assert selectors.pick_multi_factor((cheap, dear), cfg, selectors.ModelStats(), "dear")[0] is cheap


@pytest.mark.parametrize(("budget", "path"), [({"turn": {"tokens_per_s": 0}}, "budget.turn.tokens_per_s"),
                                              ({"turn": {"reserve": 1}}, "budget.turn.reserve"),
                                              ({"max_calls": 0}, "budget.max_calls"),
                                              ({"deadline_ms": 0}, "budget.deadline_ms")])
def test_bad_budgets_fail_with_their_path(budget, path):
    (line,) = errors_of(doc({**ESC, "budget": budget}))
    assert line.startswith(f"{D}.algorithm.{path}: "), line


def test_domain_scores_weigh_in_multi_factor_and_merge_by_the_best():
    from vsr_fast.config.algorithm import MultiFactor
    from vsr_fast.config.schema import ProviderModel
    a, b = ProviderModel(name="a"), ProviderModel(name="b")
    cfg = MultiFactor()
    assert selectors.pick_multi_factor((a, b), cfg, selectors.ModelStats(), None)[0] is a
    scores = selectors.domain_scores([{"a": 0.1, "b": 0.6}, {"b": 0.3}])
    assert scores == {"a": 0.1, "b": 0.6}
    assert selectors.pick_multi_factor((a, b), cfg, selectors.ModelStats(), None, scores)[0] is b
    # The weight scales the factor: at 0 the domain scores change nothing.
    off = MultiFactor(weights=msgspec.structs.replace(cfg.weights, domain=0))
    assert selectors.pick_multi_factor((a, b), off, selectors.ModelStats(), None, scores)[0] is a


def test_model_scores_name_provider_models_and_need_a_multi_factor_decision():
    d = doc({"type": "multi_factor"})
    d["recipes"][0]["signals"] = {"domains": [{"name": "math", "model_scores": {"cheap": 0.9, "ghost": 0.2}}]}
    assert errors_of(d) == ["recipes[default].signals.domains[math].model_scores.ghost: unknown_model: 'ghost' is "
                            "not in providers.models"]
    d["recipes"][0]["signals"]["domains"][0]["model_scores"] = {"cheap": 1.5}
    (line,) = errors_of(d)
    assert line.startswith("recipes[default].signals.domains[math].model_scores"), line
    assert line.endswith("invalid_value: Expected `float` <= 1.0"), line


def test_selector_picks_the_most_probable_candidate_and_keeps_the_rest_as_fallbacks():
    from vsr_fast.config.algorithm import SystemOneSelect
    from vsr_fast.config.schema import ProviderModel
    a, b, c = ProviderModel(name="a", description="general"), ProviderModel(name="b"), ProviderModel(name="c")
    assert selectors.descriptions((a, b, c), SystemOneSelect(candidates={"b": "proofs"})) == {
        "a": "general", "b": "proofs", "c": "c"}
    assert [m.name for m in selectors.pick_answered((a, b, c), {"a": 0.2, "b": 0.1, "c": 0.7})] == ["c", "a", "b"]
    assert [m.name for m in selectors.pick_answered((a, b, c), {"b": 0.5, "c": 0.5})] == ["b", "a", "c"]
    assert selectors.pick_answered((a, b, c), {"z": 1.0}) == (a, b, c)


def test_hybrid_confidence_and_a_models_own_rating():
    tokens = [{"token": "a", "logprob": -0.6, "top_logprobs": [{"token": "a", "logprob": -0.6},
                                                              {"token": "b", "logprob": -3.6}]}]
    # logprob -0.6 -> (3 - 0.6) / 3 = 0.8; margin 3 -> 1 - e^-1 = 0.632
    assert accept.confidence(tokens, "hybrid") == pytest.approx(0.5 * 0.8 + 0.5 * (1 - 2.718281828 ** -1), rel=1e-6)
    assert accept.confidence(tokens, "hybrid", (1.0, 0.0)) == pytest.approx(0.8)
    assert accept.confidence([{"token": "a", "logprob": -9.0}], "hybrid") == 0.0     # clamped, no runner-up
    assert accept.self_rating('Sure. {"confidence": 0.82, "reason": "ok"}') == 0.82
    assert accept.self_rating('{"confidence": 7}') == 1.0
    assert accept.self_rating("I'd say 0.4") == 0.4
    assert accept.self_rating("no idea") is None and accept.self_rating("about 12") is None


def test_self_verify_needs_no_logprobs_so_any_api_format_loads():
    d = doc({"type": "escalate", "escalate": {"accept": {"confidence": {"method": "self_verify", "gte": 0.7}}}})
    d["providers"]["models"][1]["api_format"] = "anthropic"
    load_raw(d)
    d["recipes"][0]["decisions"][0]["algorithm"]["escalate"]["accept"]["confidence"]["method"] = "hybrid"
    assert errors_of(d) == [f"{D}.algorithm.escalate.accept.confidence: invalid_value: logprobs come from Chat "
                            "(api_format: openai) models only, not dear"]


CHECKED = {"type": "escalate", "escalate": {"accept": {"systemone": {"gte": 0.5, "timeout_ms": 500}}}}
UNANSWERED = (f"{D}.algorithm.escalate.accept.systemone: question_type_unsupported: deployment 'primary' "
              "(vsr-static-11) does not answer preset answer_check, as its card says; no answer could pass the check: "
              "set its deployment to one that answers it")


def test_answer_check_on_the_embedded_model_fails_config_validate(tmp_path):
    """The embedded model refuses answer_check in place: a check that can never pass fails the load (spec 5.2;
    outside-user trials 6c and 41)."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc(CHECKED)))
    done = run_cli("config", "validate", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert [x for x in done.stdout.splitlines() if x.startswith("error: ")] == [f"error: {UNANSWERED}".replace(": question_type_unsupported: ",
                                                                       ": question_type_unsupported: decision 'd': ")]


def test_answer_check_on_a_deployment_whose_card_says_nothing_of_presets_loads():
    d = doc(CHECKED)
    d["global"] = {"model_catalog": {"deployments": {"api": {"provider": "systemone", "endpoint": "http://127.0.0.1:9"}},
                                     "system": {"decision_model": {"deployment": "api"}}}}
    assert load_raw(d).config.recipes[0].decisions[0].algorithm.escalate.accept.systemone.timeout_ms == 500
