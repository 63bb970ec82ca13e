"""The windows of the long earlier turns a rule reads whole (``systemone.history_windows``): which, within the
bounds, and how their answers fold (previous turn at the rule's predicate, older turns at HISTORY_SURE)."""
from __future__ import annotations

from vsr_fast.protocol import systemone as wire
from vsr_fast.signals.base import Outcome
from vsr_fast.systemone.history_windows import LONG_TURNS, WINDOW_BYTES, fold_history, plan_history
from vsr_fast.systemone.learned import LearnedRule, Share, StateSpec
from vsr_fast.systemone.scan import ScanParams
from vsr_fast.systemone.states import HISTORY_SURE, part_state

SHARE = Share("preset:jailbreak", "primary", "request", StateSpec(history=True, coverage="full"))
PARAMS = ScanParams(2048, 1023, 2048)


def view(text: str) -> str:
    return text if len(text.encode()) <= 2048 else text[:512] + " [...] " + text[-1536:]


def rule() -> LearnedRule:
    return LearnedRule("jailbreak", "attack", "p", "choice", ("benign", "jailbreak"), ("jailbreak",), frozenset(),
                       lambda p: p >= 0.4, "request", SHARE, None, None)


class Request:
    def __init__(self, history: list[str]) -> None:
        self.history = history


def test_long_turns_only_their_windows_newest_first_within_the_bounds():
    short, long_ = "hello", "é" * 1500 + "x" * 1000                 # 4,000 bytes: 3 windows
    history = [long_] * (LONG_TURNS + 2) + [short]
    plan = plan_history(SHARE, history, view, PARAMS, seed=7)
    turns = sorted({int(s.part.split(":")[1].split("@")[0]) for s in plan.windows})
    assert turns == list(range(2, LONG_TURNS + 2)) and plan.planned == 3 * (LONG_TURNS + 2)
    assert not any(plan.windows.values())             # the previous turn is the short one
    texts = [part_state(Request(history), s.part, view).request for s in plan.windows]
    assert all(t in long_ and len(t.encode()) <= 2048 for t in texts)
    assert plan_history(SHARE, [short, "hi"], view, PARAMS, seed=7) is None


def test_a_turn_past_the_byte_cap_reads_what_fits_in_the_scans_order():
    huge = "word " * (WINDOW_BYTES // 3)              # 437 KB: its windows hold more than the cap
    plan = plan_history(SHARE, [huge], view, PARAMS, seed=1)
    read = sum(int(s.part.split("-")[1]) - int(s.part.split("@")[1].split("-")[0]) for s in plan.windows)
    assert WINDOW_BYTES - 2048 < read <= WINDOW_BYTES and len(plan.windows) < plan.planned
    assert all(plan.windows.values())                 # all of the previous turn


def choice(p: float) -> wire.ChoiceAnswer:
    return wire.ChoiceAnswer(choice="jailbreak" if p >= 0.5 else "benign", confidence=max(p, 1 - p),
                             probabilities={"benign": 1 - p, "jailbreak": p})


def test_the_previous_turn_decides_at_the_predicate_an_older_one_at_history_sure():
    long_ = "x" * 3000
    plan = plan_history(SHARE, [long_, long_ + "y"], view, PARAMS, seed=0)
    older = [s for s, previous in plan.windows.items() if not previous]
    previous = [s for s, previous in plan.windows.items() if previous]
    own = Outcome(False, value=0.01, confidence=0.99, detail="own")

    def folded(p_older: float, p_previous: float) -> bool | None:
        answers = {**{s: choice(0.01) for s in plan.windows}, older[0]: choice(p_older), previous[-1]: choice(p_previous)}
        outcome, read = fold_history(rule(), own, plan, answers)
        assert str(read.coverage) == "full" and read.key == "jailbreak:attack:history"
        return outcome.matched

    assert folded(0.01, 0.5) is True                  # the previous turn at the rule's 0.4
    assert folded(0.5, 0.01) is False                 # an older one under HISTORY_SURE
    assert folded(HISTORY_SURE, 0.01) is True
    outcome, read = fold_history(rule(), own, plan, {})
    assert outcome.matched is None and read.decided == "none"       # no window answered: unknown
