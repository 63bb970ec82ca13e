"""Earlier user turns read whole, in windows (spec "Long inputs", carried to ``input.history``).

A request-stage rule that reads the earlier user turns (``input.history``) and its whole input
(``coverage: full``: jailbreak, a ``systemone`` rule) gets each earlier turn in its state through the
routing view, head and tail around a marker: an attack in the middle of a long earlier turn went unread.
A turn longer than the view is now also read in the windows the current turn would be read in (the
deployment's ``scan_window``, ``scan.plan_windows``), each window a state of its own
(``State(request=window)``, share part ``history:<i>@<start>-<end>``) asked in the request's one merged
call to the deployment, a batch entry per window. The embedded model reads the windows it has not read
before in that call's one encode call and keeps them in its read cache (keyed by text: a window's bytes
are the same on the next request, which repeats the turn); the client's answer reuse answers a window
asked on an earlier request without a call at all. A remote System One deployment gets the same windows,
as entries of the same batch call.

Which window decides: any window of the previous user turn (the last before the current turn) on which
the rule's predicate holds; for a jailbreak rule, a window of an older turn only when its P(jailbreak) is
also at least ``HISTORY_SURE``, the rule the embedded model applies to its history. A window left
unknown (its call failed or was late) reads as the rule's unknown does (``on_unknown``).

Bounds, per request and share: the ``LONG_TURNS`` (16) most recent long turns of the ``HISTORY_TURNS``
(32) the model reads, and at most ``WINDOW_BYTES`` (256 KiB) of windows in all, newest turn first. A
turn whose windows do not all fit in what is left reads those that do, in the scan's order (tail, head,
then the middle by halves from a point that changes with each request), so no part of it is predictably
left unread; the rest of it and every long turn past the bounds are read through the view only, as
before. The windows read of those the long turns hold are counted per rule in
``vsr_signal_scan_coverage_*`` under the signal ``<type>:<name>:history``; a partial read leaves the rule
to the view and the windows read, never to ``on_unscanned`` (a long agent history must not refuse every
request).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..protocol import systemone as wire
from ..signals.base import Outcome
from .learned import LearnedRule, Share, StateSpec, fold_parts, outcome_of, why_unknown
from .scan import Coverage, RuleScan, ScanParams, plan_windows
from .states import HISTORY_SURE, HISTORY_TURNS

LONG_TURNS = 16
WINDOW_BYTES = 256 * 1024


@dataclass(frozen=True)
class HistoryWindows:
    """One share's windows of its long earlier turns: each window's share, True when it reads the previous turn;
    ``planned``, the windows those turns hold in all (the bounds read fewer)."""

    windows: dict[Share, bool]
    planned: int


def reads_history(rule: LearnedRule) -> bool:
    """A request-stage rule reading the earlier turns whole (span rules read each turn as a part of its own)."""
    spec = rule.share.spec
    return rule.stage == "request" and spec.history and spec.coverage == "full" and rule.question_type != "span"


def plan_history(share: Share, history: list[str], view: Callable[[str], str], params: ScanParams,
                 seed: int) -> HistoryWindows | None:
    """The windows ``share`` reads of the earlier turns ``history`` (oldest first) longer than ``view``; None when
    none is. ``seed`` rotates the middle of a turn the bounds cut (``scan.plan_windows``)."""
    last = len(history) - 1
    windows: dict[Share, bool] = {}
    planned = turns = 0
    budget = WINDOW_BYTES
    for i in range(last, max(last + 1 - HISTORY_TURNS, 0) - 1, -1):
        text = history[i]
        if view(text) is text:            # within the view: the state's history holds it whole
            continue
        plan = plan_windows(text.encode(), window_bytes=params.window_bytes, overlap_bytes=params.overlap_bytes,
                            max_bytes=params.max_bytes, seed=seed)
        planned += plan.planned
        turns += 1
        if turns > LONG_TURNS:
            continue
        for j in plan.order:
            w = plan.windows[j]
            if w.size > budget:
                budget = 0
                break
            budget -= w.size
            windows[Share(share.wire_id, share.deployment, share.stage, StateSpec(),
                          part=f"history:{i}@{w.start}-{w.end}")] = i == last
    return HistoryWindows(windows, planned) if planned else None


def fold_history(rule: LearnedRule, own: Outcome, plan: HistoryWindows,
                 answers: Mapping[Share, wire.Answer | None]) -> tuple[Outcome, RuleScan]:
    """The rule's outcome over its state and its windows' answers, and its read of the windows for the metrics."""
    parts, read = [], 0
    for share, previous in plan.windows.items():
        answer = answers.get(share)
        outcome = outcome_of(rule, answer, why_unknown(answers, share))
        answered = answer is not None and not isinstance(answer, wire.QuestionError)
        read += answered
        if (answered and outcome.matched and not previous and rule.condition_type == "jailbreak"
                and (outcome.value or 0.0) < HISTORY_SURE):
            outcome = dataclasses.replace(outcome, matched=False, detail=f"{outcome.detail}; older turn, under "
                                          f"{HISTORY_SURE:g}")
        parts.append((share.part, outcome))
    folded = fold_parts(own, parts)
    coverage = Coverage(read, plan.planned)
    hit = any(o.matched for _, o in parts)
    decided = "whole" if coverage.kind == "full" or hit else "unscanned" if read else "none"
    best = max((o.value for _, o in parts if o.value is not None), default=None)
    return folded, RuleScan(f"{rule.condition_type}:{rule.name}:history", hit, best, coverage, decided)
