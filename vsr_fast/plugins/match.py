"""The ``match`` block every similarity feature writes (spec 5.4): ``recall``, then a ``judge``.

This module is the block, its one validator (``check``), each feature's default
and the recall methods it accepts (``FEATURES``), and the keep rules. Running
a block is ``vsr_fast.server.pipeline.match``: recall over the feature's
candidates, the judge's one System One call, then ``keep``.

A feature that writes no block runs its default; a written block replaces the
default as a whole, except that a judge asking the feature's default preset
takes that preset's default keep rules for the fields it leaves out (a
``tools`` judge written as ``{max_candidates: 20}`` asks tool_rank and still
keeps the best 3). A judge that names no question asks the feature's preset.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from msgspec import Meta
from msgspec.structs import replace

from ..config.schema_base import Block

MAX_CHOICES = 255           # the options of one choice question: a choice judge's cap and default
PER_CANDIDATE = 64          # a noul / score judge's default: one batch entry per candidate
MAX_PER_CANDIDATE = 4096    # its load bound: a batch that large is already minutes of a remote judge
PRESET_TYPES = {"relevance": "noul", "same_request": "noul", "tool_rank": "choice"}
Name = Annotated[str, Meta(min_length=1)]


class Recall(Block):
    method: Literal["embedding", "bm25"] = "embedding"
    # Unset: the feature's default recall's (context rag 20, memory 5, semantic cache 3), any method.
    top_k: Annotated[int, Meta(ge=1, le=100_000)] | None = None
    # A cosine for embedding recall ([-1, 1]), a BM25 score for bm25 (>= 0): ``check`` bounds it per method.
    min_similarity: float | None = None


class Question(Block):
    """A custom judge question: ``choice`` offers the candidates as its options, ``noul`` / ``score`` ask about
    each candidate."""

    type: Literal["choice", "noul", "score"]
    instructions: Annotated[str, Meta(min_length=1)]
    levels: list[Annotated[str, Meta(min_length=1)]] | None = None     # a score question's, lowest first


class Judge(Block):
    preset: Literal["relevance", "same_request", "tool_rank"] | None = None
    question: Question | None = None
    deployment: Name | None = None
    top_k: Annotated[int, Meta(ge=1, le=100_000)] | None = None
    min_score: Annotated[float, Meta(ge=0, le=1)] | None = None
    min_ratio: Annotated[float, Meta(ge=0, le=1)] | None = None
    max_candidates: int | None = None          # bounded per question type by ``check``
    on_error: Literal["skip", "fail"] | None = None
    timeout_ms: Annotated[int, Meta(ge=1, le=60_000)] | None = None

    @property
    def question_type(self) -> str:
        if self.question is not None:
            return self.question.type
        return PRESET_TYPES.get(self.preset or "", "noul")

    @property
    def cap(self) -> int:
        """How many candidates the judge reads."""
        if self.max_candidates is not None:
            return self.max_candidates
        return MAX_CHOICES if self.question_type == "choice" else PER_CANDIDATE


class Match(Block):
    recall: Recall | None = None
    judge: Judge | None = None


@dataclass(frozen=True, slots=True)
class Feature:
    """A feature's default block, the recall methods it accepts ("" for no recall) and its judge presets."""

    default: Match
    recall: tuple[str, ...]
    presets: tuple[str, ...]


FEATURES: dict[str, Feature] = {
    "response_cache.semantic": Feature(
        Match(recall=Recall(method="embedding", top_k=3, min_similarity=0.8),
              judge=Judge(preset="same_request", min_score=0.8)),
        ("embedding",), ("same_request",)),
    "context.rag": Feature(
        Match(recall=Recall(method="embedding", top_k=20, min_similarity=0.3),
              judge=Judge(preset="relevance", top_k=6, min_score=0.5)),
        ("embedding", "bm25", ""), ("relevance",)),
    "context.memory": Feature(
        Match(recall=Recall(method="embedding", top_k=5, min_similarity=0.7)),
        ("embedding", ""), ("relevance",)),
    "context.compress": Feature(
        Match(recall=Recall(method="bm25"), judge=Judge(preset="relevance")),
        ("bm25", ""), ("relevance",)),
    "tools.select": Feature(
        Match(judge=Judge(preset="tool_rank", top_k=3, min_ratio=0.1)),
        ("bm25", ""), ("tool_rank",)),
}


def check(raw: object, path: str, feature: str) -> list[str]:
    """Load errors of one feature's ``match`` block that its types cannot say, one line each with its path.

    ``raw`` is the block as written (the types have already accepted it).
    """
    if not isinstance(raw, dict):
        return []
    spec = FEATURES[feature]
    recall, judge = raw.get("recall"), raw.get("judge")
    if not recall and not judge:
        return [f"{path}: match_empty: a match block runs recall, judge or both"]
    errors: list[str] = []
    if isinstance(recall, dict):
        method = recall.get("method", "embedding")
        if method not in spec.recall:
            accepts = " or ".join(m or "no recall" for m in spec.recall)
            errors.append(f"{path}.recall.method: invalid_value: {feature} recalls by {accepts}, not {method!r}")
        low = recall.get("min_similarity")
        if isinstance(low, (int, float)) and (low < 0 if method == "bm25" else not -1 <= low <= 1):
            bound = "a BM25 score is >= 0" if method == "bm25" else "a cosine is within [-1, 1]"
            errors.append(f"{path}.recall.min_similarity: invalid_value: {bound}")
    elif "" not in spec.recall:
        errors.append(f"{path}.recall: missing_field: {feature} recalls by {' or '.join(spec.recall)}; "
                      f"a judge alone cannot read its whole store")
    if isinstance(judge, dict):
        errors += _check_judge(judge, f"{path}.judge", feature, spec)
    return errors


def _check_judge(judge: dict, path: str, feature: str, spec: Feature) -> list[str]:
    preset, question = judge.get("preset"), judge.get("question")
    if preset is None and question is None:
        preset = spec.presets[0]            # a judge that names no question asks the feature's preset
    if preset is not None and question is not None:
        return [f"{path}.question: invalid_value: a judge asks a preset or a custom question, not both"]
    errors = []
    if isinstance(question, dict):
        levels = question.get("levels")
        if question["type"] == "score" and not (isinstance(levels, list) and 2 <= len(levels) <= 10):
            errors.append(f"{path}.question.levels: missing_field: a score question names 2 to 10 levels")
        elif question["type"] != "score" and levels is not None:
            errors.append(f"{path}.question.levels: invalid_value: only a score question has levels")
    if preset is not None and preset not in spec.presets:
        errors.append(f"{path}.preset: invalid_value: {feature} judges with {' or '.join(spec.presets)}, "
                      f"not {preset!r}")
    qtype = question["type"] if isinstance(question, dict) else PRESET_TYPES.get(preset, "noul")
    cap = judge.get("max_candidates")
    limit = MAX_CHOICES if qtype == "choice" else MAX_PER_CANDIDATE
    if cap is not None and not 1 <= cap <= limit:
        errors.append(f"{path}.max_candidates: invalid_value: a {qtype} judge reads 1 to {limit} candidates, "
                      f"not {cap}")
    return errors


def resolve(written: Match | None, feature: str) -> Match:
    """The block a feature runs: its default when none is written, else the written one, a judge of the
    default's preset taking that preset's keep rules for the fields it leaves out."""
    default = FEATURES[feature].default
    if written is None:
        return default
    judge, base = written.judge, default.judge
    if judge is not None and judge.preset is None and judge.question is None:
        judge = replace(judge, preset=FEATURES[feature].presets[0])
    if judge is not None and base is not None and judge.preset == base.preset and judge.question is None:
        judge = replace(judge, **{f: getattr(base, f) for f in ("top_k", "min_score", "min_ratio")
                                  if getattr(judge, f) is None and getattr(base, f) is not None})
    recall = written.recall
    if recall is not None and recall.top_k is None and default.recall is not None:
        # The default's bound, whatever the method: an unbounded recall hands every candidate on (a bm25 recall
        # put a whole vector store into each request). min_similarity is not taken: its scale is the method's.
        recall = replace(recall, top_k=default.recall.top_k)
    return replace(written, judge=judge, recall=recall)


def keep(scored: Sequence[tuple[float, int]], judge: Judge) -> list[tuple[float, int]]:
    """The keep rules over ``(score, index)`` pairs: best first, ``min_score``, ``min_ratio`` of the best, then
    ``top_k``. Ties keep the earlier (better recalled) candidate first."""
    ranked = sorted(scored, key=lambda s: (-s[0], s[1]))
    if not ranked:
        return []
    best = ranked[0][0]
    out = [(s, i) for s, i in ranked
           if (judge.min_score is None or s >= judge.min_score) and (judge.min_ratio is None or s >= judge.min_ratio * best)]
    return out[:judge.top_k] if judge.top_k is not None else out


__all__ = ["FEATURES", "Feature", "Judge", "MAX_CHOICES", "Match", "PER_CANDIDATE", "Question", "Recall", "check",
           "keep", "resolve"]
