"""The match block (spec 5.4): one validator for every feature's block, each bad form one line with its path and
code; per-feature defaults; the keep rules."""
from __future__ import annotations

import pytest

from vsr_fast.plugins import match as m
from vsr_fast.plugins import response_cache as rc
from vsr_fast.routing import load_raw
from vsr_fast.server.recording import Policies

from . import test_plugins_config as plugins_config
from .test_plugins_config import errors_of

AT = f"{plugins_config.AT}.configuration"
CACHE = f"{AT}.semantic.match"
TOOLS = f"{AT}.select.match"


def cache(match) -> dict:
    return plugins_config.doc([{"type": "response_cache",
                                "configuration": {"mode": "semantic", "semantic": {"match": match}}}])


def tools(match) -> dict:
    return plugins_config.doc([{"type": "tools", "configuration": {"select": {"match": match}}}])


@pytest.mark.parametrize(("d", "line"), [
    (cache({}), f"{CACHE}: match_empty: a match block runs recall, judge or both"),
    (tools({}), f"{TOOLS}: match_empty"),
    (cache({"recall": {"method": "bm25", "top_k": 3}}),
     f"{CACHE}.recall.method: invalid_value: response_cache.semantic recalls by embedding, not 'bm25'"),
    (tools({"recall": {"method": "embedding", "top_k": 3}}),
     f"{TOOLS}.recall.method: invalid_value: tools.select recalls by bm25 or no recall, not 'embedding'"),
    (cache({"recall": {"method": "vector"}}), f"{CACHE}.recall.method: invalid_value"),
    (cache({"judge": {"preset": "same_request"}}),
     f"{CACHE}.recall: missing_field: response_cache.semantic recalls by embedding"),
    (cache({"recall": {"min_similarity": 1.5}}),
     f"{CACHE}.recall.min_similarity: invalid_value: a cosine is within [-1, 1]"),
    (tools({"recall": {"method": "bm25", "min_similarity": -1}}),
     f"{TOOLS}.recall.min_similarity: invalid_value: a BM25 score is >= 0"),
    (cache({"recall": {"top_k": 0}}), f"{CACHE}.recall.top_k: invalid_value"),
    (cache({"recall": {"top_k": "three"}}), f"{CACHE}.recall.top_k: invalid_type"),
    (cache({"recall": {"method": "embedding", "k": 3}}), f"{CACHE}.recall.k: unknown_field"),
    (cache({"recall": {}, "judge": {"preset": "relevance"}}),
     f"{CACHE}.judge.preset: invalid_value: response_cache.semantic judges with same_request, not 'relevance'"),
    (cache({"recall": {}, "judge": {"preset": "similarity"}}), f"{CACHE}.judge.preset: invalid_value"),
    (cache({"recall": {}, "judge": {"preset": "same_request", "question": {"type": "noul", "instructions": "x"}}}),
     f"{CACHE}.judge.question: invalid_value: a judge asks a preset or a custom question, not both"),
    (cache({"recall": {}, "judge": {"question": {"type": "score", "instructions": "How close?"}}}),
     f"{CACHE}.judge.question.levels: missing_field: a score question names 2 to 10 levels"),
    (cache({"recall": {}, "judge": {"question": {"type": "noul", "instructions": "Same?", "levels": ["a", "b"]}}}),
     f"{CACHE}.judge.question.levels: invalid_value: only a score question has levels"),
    (cache({"recall": {}, "judge": {"question": {"type": "set", "instructions": "x"}}}),
     f"{CACHE}.judge.question.type: invalid_value"),
    (cache({"recall": {}, "judge": {"question": {"type": "noul"}}}),
     f"{CACHE}.judge.question.instructions: missing_field"),
    (cache({"recall": {}, "judge": {"max_candidates": 0}}),
     f"{CACHE}.judge.max_candidates: invalid_value: a noul judge reads 1 to 4096 candidates, not 0"),
    (cache({"recall": {}, "judge": {"max_candidates": 5000}}),
     f"{CACHE}.judge.max_candidates: invalid_value: a noul judge reads 1 to 4096 candidates, not 5000"),
    (tools({"judge": {"max_candidates": 256}}),
     f"{TOOLS}.judge.max_candidates: invalid_value: a choice judge reads 1 to 255 candidates, not 256"),
    (cache({"recall": {}, "judge": {"question": {"type": "choice", "instructions": "Which?"}, "max_candidates": 300}}),
     f"{CACHE}.judge.max_candidates: invalid_value: a choice judge reads 1 to 255"),
    (cache({"recall": {}, "judge": {"min_score": 1.2}}), f"{CACHE}.judge.min_score: invalid_value"),
    (cache({"recall": {}, "judge": {"min_ratio": -0.1}}), f"{CACHE}.judge.min_ratio: invalid_value"),
    (cache({"recall": {}, "judge": {"top_k": 0}}), f"{CACHE}.judge.top_k: invalid_value"),
    (cache({"recall": {}, "judge": {"on_error": "keep"}}), f"{CACHE}.judge.on_error: invalid_value"),
    (cache({"recall": {}, "judge": {"timeout_ms": 0}}), f"{CACHE}.judge.timeout_ms: invalid_value"),
    (cache({"recall": {}, "judge": {"deployment": ""}}), f"{CACHE}.judge.deployment: invalid_value"),
    (cache({"recall": {}, "judge": {"deployment": "nowhere"}}),
     f"{CACHE}.judge.deployment: unknown_deployment: 'nowhere' is not declared"),
    (plugins_config.doc([{"type": "response_cache", "configuration": {"mode": "fuzzy"}}]), f"{AT}.mode: invalid_value"),
])
def test_each_bad_match_form_is_one_line_with_its_path_and_code(d, line):
    lines = errors_of(d)
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_a_feature_without_a_block_runs_its_default_and_a_written_block_replaces_it():
    policies = Policies(load_raw(plugins_config.doc([{"type": "response_cache", "configuration": {
        "mode": "exact_then_semantic"}}])))
    policy = policies.cache("default", "d")
    assert policy.match == m.FEATURES[rc.SEMANTIC].default
    assert policy.match.recall.top_k == 3 and policy.match.recall.min_similarity == 0.8
    assert policy.match.judge.preset == "same_request" and policy.match.judge.min_score == 0.8
    written = m.Match(recall=m.Recall(top_k=5))
    assert m.resolve(written, rc.SEMANTIC) == written            # no judge: recall alone
    # A written recall without top_k keeps the default's bound: unbounded, a bm25 recall put the whole vector
    # store (1.4 MB) into every request.
    bm25 = m.resolve(m.Match(recall=m.Recall(method="bm25")), "context.rag").recall
    assert (bm25.method, bm25.top_k, bm25.min_similarity) == ("bm25", 20, None)
    judge_only = m.resolve(m.Match(judge=m.Judge(max_candidates=9)), "tools.select").judge
    assert (judge_only.preset, judge_only.top_k, judge_only.min_ratio, judge_only.cap) == ("tool_rank", 3, 0.1, 9)


def test_default_caps_per_question_type():
    assert m.Judge(preset="tool_rank").cap == 255
    assert m.Judge(preset="same_request").cap == 64
    assert m.Judge(question=m.Question(type="score", instructions="x", levels=["a", "b"])).cap == 64


def test_keep_rules_top_k_min_score_min_ratio():
    scored = [(0.2, 0), (0.9, 1), (0.5, 2), (0.85, 3), (0.9, 4)]
    assert m.keep(scored, m.Judge()) == [(0.9, 1), (0.9, 4), (0.85, 3), (0.5, 2), (0.2, 0)]
    assert m.keep(scored, m.Judge(top_k=2)) == [(0.9, 1), (0.9, 4)]
    assert m.keep(scored, m.Judge(min_score=0.5)) == [(0.9, 1), (0.9, 4), (0.85, 3), (0.5, 2)]
    assert m.keep(scored, m.Judge(min_ratio=0.9)) == [(0.9, 1), (0.9, 4), (0.85, 3)]
    assert m.keep([], m.Judge(top_k=1)) == []
