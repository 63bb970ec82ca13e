"""Running a ``match`` block's judge (spec 5.4): one System One call about the recalled candidates, then the
keep rules. Recall itself belongs to the store that holds the candidates (the cache's index, a vector store);
the feature hands its recalled texts here, best first.

A choice judge offers the candidates as the options of one standard request;
a noul or score judge asks about each candidate, one batch entry per
candidate (a standard request when there is one). The judge reads at most its
``cap`` candidates, the rest truncated in recall order (a trace note and
``vsr_match_judge_truncated_total``). On failure ``on_error: skip`` keeps the
candidates as recall ranked them; ``fail`` raises ``MatchFailed``.
"""
from __future__ import annotations

import time

from ...config.catalog import PRIMARY
from ...errors import MatchFailed
from ...headers import trace
from ...plugins.match import Judge, keep
from ...protocol import systemone as wire
from ...systemone.presets import PRESETS
from .exchange import Exchange

_CUSTOM = "match"          # a custom question's ID; a preset is asked under its own (the model knows it)


def truncated(ex: Exchange, feature: str, had: int, read: int) -> None:
    ex.state.metrics.judge_truncated.inc(feature)
    if ex.trace is not None:
        ex.trace = trace.with_member(ex.trace, trace.string_member(
            "match_judge_truncated", f"{feature} {had} candidates, judge read {read}"))


def recalled(ex: Exchange, feature: str, method: str, kept: int, seconds: float) -> None:
    """Count and time a recall stage the feature ran."""
    ex.state.metrics.match_recall.inc(feature, method, "hit" if kept else "miss")
    ex.state.metrics.match_stage.observe(seconds, feature, "recall")


def _question(judge: Judge, candidates: list[str]) -> wire.Question:
    if judge.question is not None:
        q = judge.question
        if q.type == "choice":
            return wire.ChoiceQuestion(criteria={str(i): c for i, c in enumerate(candidates)},
                                       instructions=q.instructions)
        if q.type == "score":
            return wire.ScoreQuestion(criteria=list(q.levels or ()), instructions=q.instructions)
        return wire.NoulQuestion(instructions=q.instructions)
    preset = PRESETS[judge.preset or "relevance"]
    if preset.type == "choice":
        return wire.ChoiceQuestion(criteria={str(i): c for i, c in enumerate(candidates)},
                                   instructions=preset.instructions)
    return preset.question()


def _score(answer: wire.Answer | None, levels: int) -> float | None:
    """A noul's P(yes), or a score scaled to [0, 1] over its levels, so the keep rules read one scale."""
    if isinstance(answer, wire.NoulAnswer):
        return answer.noul
    if isinstance(answer, wire.ScoreAnswer):
        return answer.score / max(levels - 1, 1)
    return None


async def judge(ex: Exchange, feature: str, judge: Judge, request: str, candidates: list[str]) -> list[int]:
    """The indexes of ``candidates`` (recall order) the judge keeps, best first."""
    read = candidates[:judge.cap]
    if len(candidates) > len(read):
        truncated(ex, feature, len(candidates), len(read))
    if not read:
        return []
    started = time.perf_counter()
    scored = await _ask(ex, judge, request, read)
    metrics = ex.state.metrics
    metrics.match_stage.observe(time.perf_counter() - started, feature, "judge")
    metrics.match_judge.inc(feature, "ok" if scored is not None else "error")
    if scored is None:
        if judge.on_error == "fail":
            raise MatchFailed(f"{feature}.match: the judge did not answer in time")
        return list(range(len(read)))
    return [i for _, i in keep(scored, judge)]


async def _ask(ex: Exchange, judge: Judge, request: str, read: list[str]) -> list[tuple[float, int]] | None:
    asker = ex.state.systemone
    if asker is None:
        return None
    deployment = judge.deployment or ex.state.table.catalog.system.decision_model.deployment or PRIMARY
    question = _question(judge, read)
    qid = PRESETS[judge.preset].wire_id if judge.question is None and judge.preset else _CUSTOM
    levels = len(question.criteria) if isinstance(question, wire.ScoreQuestion) else 2
    if isinstance(question, wire.ChoiceQuestion):
        answers = await asker.ask_standard(deployment, wire.State(request=request), {qid: question},
                                           judge.timeout_ms)
        rank = answers.get(qid) if answers else None
        if not isinstance(rank, wire.ChoiceAnswer):
            return None
        return [(p, int(k)) for k, p in rank.probabilities.items() if k.isdigit() and int(k) < len(read)]
    if len(read) == 1:
        answers = await asker.ask_standard(deployment, wire.State(request=request, candidate=read[0]),
                                           {qid: question}, judge.timeout_ms)
        score = _score(answers.get(qid) if answers else None, levels)
        return None if score is None else [(score, 0)]
    entries = {str(i): (wire.State(request=request, candidate=c), {qid: question}) for i, c in enumerate(read)}
    batch = await asker.ask_batch(deployment, entries, judge.timeout_ms)
    if batch is None:
        return None
    out = []
    for i in range(len(read)):
        answers = batch.get(str(i))
        score = _score(answers.get(qid) if answers else None, levels)
        if score is not None:
            out.append((score, i))
    return out
