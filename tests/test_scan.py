"""vsr_fast.systemone.scan: the window plan (pure) and the scan driven through a scripted ``ask``.

The scripted model answers by window content (an injection planted at a known
offset, e-mail addresses as PII spans) and takes its latency in virtual time,
so the tests assert exact times, calls and concurrency under ``autojump_clock``.
"""
from __future__ import annotations

import math
import re

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsr_fast._ext.windows import byte_windows
from vsr_fast.config.catalog import ScanWindow
from vsr_fast.protocol import systemone as wire
from vsr_fast.systemone import scan as scan_mod
from vsr_fast.systemone.scan import (
    MAX_WINDOWS, Coverage, GuardScan, ScanMetrics, ScanParams, ScanRule, Window, plan_windows, scan,
)

CHARS = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(list("aé中文日本語한국어😀👍🏽🇫🇷\u0301ß\n ")),
)
TEXT = st.text(CHARS, max_size=300)


def starts(data: bytes) -> set[int]:
    """Every legal cut: the byte offset of each code point, and len(data)."""
    out, at = {len(data)}, 0
    for ch in data.decode():
        out.add(at)
        at += len(ch.encode())
    return out


def check_plan(data: bytes, plan, window_bytes: int, overlap: int, max_bytes: int) -> None:
    """Windows on boundaries, valid UTF-8, in input order, overlapping, covering the input whole."""
    ws = plan.windows
    if not data:
        assert ws == () and plan.order == ()
        return
    legal = starts(data)
    assert ws[0].start == 0 and ws[-1].end == len(data)
    for w in ws:
        assert w.start in legal and w.end in legal and w.start < w.end
        piece = data[w.start:w.end].decode()             # raises if a cut split a character
        assert w.size <= max_bytes or len(piece) == 1
    for a, b in zip(ws, ws[1:]):
        assert a.start < b.start and a.end < b.end        # in order, each adds text
        assert b.start <= a.end - min(overlap, a.size - 1)  # no gap; text across a cut is read whole
    assert len(plan.order) == min(plan.planned, MAX_WINDOWS)
    assert len(set(plan.order)) == len(plan.order) and set(plan.order) <= set(range(plan.planned))
    assert plan.order[0] == plan.tail
    if plan.planned > 1:
        assert plan.order[1] == 0


# --- the plan -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=TEXT, window=st.integers(16, 64), overlap_share=st.floats(0, 0.49), grow=st.integers(1, 4),
       seed=st.integers(0, 2**32))
def test_plan_windows_cover_the_input_on_boundaries(text, window, overlap_share, grow, seed):
    data = text.encode()
    overlap = int(window * overlap_share)
    plan = plan_windows(data, window_bytes=window, overlap_bytes=overlap, max_bytes=window * grow, seed=seed)
    check_plan(data, plan, window, overlap, window * grow)
    if plan.planned <= MAX_WINDOWS:
        assert sorted(plan.order) == list(range(plan.planned))
        # Under the cap the plan is the kernel's windows as they are.
        assert [[w.start, w.end] for w in plan.windows] == byte_windows(data, window, overlap).tolist()


@settings(max_examples=60, deadline=None)
@given(unit=st.text(CHARS, min_size=1, max_size=40), window=st.integers(16, 24), grow=st.integers(2, 6),
       seed=st.integers(0, 2**32))
def test_plan_caps_at_256_windows_with_larger_middle_windows(unit, window, grow, seed):
    """CJK, emoji, combining marks: over 256 windows, the middle grows and head and tail keep their size."""
    data = (unit * (9000 // len(unit.encode()) + 1)).encode()
    overlap = window // 4
    max_bytes = window * grow
    plan = plan_windows(data, window_bytes=window, overlap_bytes=overlap, max_bytes=max_bytes, seed=seed)
    check_plan(data, plan, window, overlap, max_bytes)
    kernel = byte_windows(data, window, overlap).tolist()
    assert len(kernel) > MAX_WINDOWS
    head, tail = plan.windows[0], plan.windows[-1]
    assert (head.start, head.end) == tuple(kernel[0])    # the first window_bytes, at that size
    assert tail.end == len(data) and tail.size <= window  # the last window_bytes, start moved forward
    assert tail.start == scan_mod._forward(data, len(data) - window)
    assert all(w.size <= max_bytes for w in plan.windows)
    assert any(plan.large(i) for i in range(1, plan.planned - 1))
    if plan.planned > MAX_WINDOWS:                        # only past 256 of the largest windows
        assert max(w.size for w in plan.windows[1:-1]) > max_bytes - 4
    assert len(plan.order) == min(plan.planned, MAX_WINDOWS)


def test_plan_middle_windows_are_the_smallest_that_fit():
    data = b"x" * 4000
    plan = plan_windows(data, window_bytes=16, overlap_bytes=4, max_bytes=64, seed=0)
    assert plan.planned <= MAX_WINDOWS
    sizes = {w.size for w in plan.windows[1:-2]}
    assert len(sizes) == 1 and (m := sizes.pop()) > 16
    # The middle runs from 4 bytes before the head's end to 4 bytes after the tail's start.
    assert len(byte_windows(data[12:3988], m - 1, 4)) > MAX_WINDOWS - 2   # one byte less would not fit
    assert (plan.windows[0], plan.windows[-1]) == (Window(0, 16), Window(3984, 4000))


def test_plan_beyond_the_largest_windows_reads_256_and_counts_the_rest():
    data = b"x" * (300 * 64)
    plan = plan_windows(data, window_bytes=16, overlap_bytes=4, max_bytes=64, seed=7)
    assert plan.planned > MAX_WINDOWS and len(plan.order) == MAX_WINDOWS
    assert {w.size for w in plan.windows[1:-2]} == {64}
    assert plan.order[:2] == (plan.tail, 0)


@pytest.mark.parametrize(("window", "overlap", "largest"), [(16, 0, 16), (16, 4, 64), (64, 8, 64), (32, 12, 100)])
def test_reach_is_the_longest_input_read_whole(window, overlap, largest):
    """What diagnostics call beyond every window (context_length_exceeded): one byte more leaves one unread."""
    reach = ScanParams(window, overlap, largest).reach_bytes
    fits = plan_windows(b"x" * reach, window_bytes=window, overlap_bytes=overlap, max_bytes=largest)
    past = plan_windows(b"x" * (reach + 1), window_bytes=window, overlap_bytes=overlap, max_bytes=largest)
    assert fits.planned <= MAX_WINDOWS < past.planned


def middle_of(plan) -> list[int]:
    return [i - 1 for i in plan.order[2:]]


def ascii_windows(n: int) -> bytes:
    """ASCII that the kernel cuts into exactly n windows of 16 bytes stepping 12."""
    return b"x" * (16 + 12 * (n - 1))


def test_read_order_tail_head_then_middle_by_halves():
    plan = plan_windows(ascii_windows(9), window_bytes=16, overlap_bytes=4, max_bytes=16, seed=0)
    assert plan.planned == 9
    # The 7 middle windows (plan windows 1..7): the middle, its quarters, then its eighths.
    assert middle_of(plan) == [3, 1, 5, 0, 4, 2, 6]
    assert plan.order == (8, 0, 4, 2, 6, 1, 5, 3, 7)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 8, 13, 100, 254])
def test_seed_rotates_the_middle(k):
    data = ascii_windows(k + 2)
    base = middle_of(plan_windows(data, window_bytes=16, overlap_bytes=4, max_bytes=16, seed=0))
    assert base[0] == k // 2
    for seed in (1, 5, 2**31 + 3):
        got = middle_of(plan_windows(data, window_bytes=16, overlap_bytes=4, max_bytes=16, seed=seed))
        assert got == [(p + seed) % k for p in base]


@pytest.mark.parametrize("seed", [0, 17, 99])
def test_windows_read_by_any_moment_are_spread(seed):
    k = 200
    middle = middle_of(plan_windows(ascii_windows(k + 2), window_bytes=16, overlap_bytes=4, max_bytes=16, seed=seed))
    for q in range(1, 7):
        read = sorted(middle[: 2**q - 1])
        gaps = [(b - a) for a, b in zip(read, read[1:])] + [read[0] + k - read[-1]]
        assert max(gaps) <= 2 * math.ceil(k / 2**q) + 1


def test_plan_edges():
    assert plan_windows(b"", window_bytes=16, overlap_bytes=4, max_bytes=16).order == ()
    one = plan_windows("中文".encode(), window_bytes=16, overlap_bytes=4, max_bytes=16)
    assert one.windows == (Window(0, 6),) and one.order == (0,)
    two = plan_windows(b"x" * 20, window_bytes=16, overlap_bytes=4, max_bytes=16)
    assert two.order == (1, 0)
    with pytest.raises(ValueError):
        plan_windows(b"x", window_bytes=16, overlap_bytes=4, max_bytes=8)
    with pytest.raises(ValueError):
        plan_windows(b"x", window_bytes=16, overlap_bytes=16, max_bytes=16)


def test_params_from_config_defaults_and_caps():
    assert ScanParams.from_config(ScanWindow()) == ScanParams(32768, 2048, 32768, 3.0)
    assert ScanParams.from_config(ScanWindow(), provider="systemone") == ScanParams(16384, 1024, 16384, 3.0)
    # A 32,768-token validated length caps windows at 31,744 bytes, and is max_tokens' default.
    assert ScanParams.from_config(ScanWindow(), validated_tokens=32768) == ScanParams(31744, 2048, 31744, 3.0)
    got = ScanParams.from_config(ScanWindow(tokens=2048, overlap=128, reread_margin=2), validated_tokens=32768)
    assert got == ScanParams(8192, 512, 31744, 2.0)


def test_coverage_labels():
    assert str(Coverage(3, 3)) == "full" and str(Coverage(2, 5)) == "partial 2/5" and str(Coverage(0, 5)) == "none"
    assert Coverage(2, 5).ratio == 0.4 and Coverage(0, 0).kind == "full"


# --- the scan, through a scripted model ------------------------------------------------------------

INJECT = "INJECT"
EMAIL = re.compile(r"[a-z]+@[a-z.]+")


class Model:
    """Answers every question by the window's text; ``latency(text)`` seconds of virtual time a call."""

    def __init__(self, p=None, latency=lambda text: 1.0, fail=lambda text: False, spans=None):
        self.p = p or (lambda text: 0.999 if INJECT in text else 0.01)
        self.latency, self.fail, self.spans = latency, fail, spans
        self.calls: list[tuple[float, str, frozenset[str]]] = []
        self.active = self.peak = self.cancelled = 0

    async def ask(self, text: str, wire_ids: frozenset[str]):
        self.calls.append((trio.current_time(), text, wire_ids))
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await trio.sleep(self.latency(text))
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
        if self.fail(text):
            return None
        out: dict[str, wire.Answer] = {}
        for wid in wire_ids:
            if wid == "pii":
                out[wid] = wire.SpanAnswer(self.spans(text) if self.spans else [])
            elif wid == "harm":
                out[wid] = wire.NoulAnswer(0.01)
            else:
                out[wid] = wire.NoulAnswer(self.p(text))
        return out

    def texts(self) -> list[str]:
        return [t for _, t, _ in self.calls]


def letters(n_windows: int) -> str:
    """Text of n_windows 16-byte windows, no two alike."""
    return ("abcdefghijklmnopqrstuvwxyz" * 9)[:16 + 12 * (n_windows - 1)]


def jailbreak(**kw) -> ScanRule:
    kw.setdefault("decisive", True)
    return ScanRule("jailbreak:attack", "jb", 0.99, **kw)


SMALL = ScanParams(16, 4, 16)                 # 16-byte windows stepping 12; no larger windows


def planted(n_windows: int, window: int, at: str = INJECT) -> str:
    """ASCII filler of n_windows windows with ``at`` in the middle of plan window ``window``."""
    data = ascii_windows(n_windows)
    start = 12 * window + 5
    return (data[:start] + at.encode() + data[start + len(at):]).decode()


async def test_max_parallel_and_exact_times(autojump_clock):
    guard = GuardScan(ascii_windows(10).decode(), [jailbreak()], SMALL, seed=0)
    model = Model()
    result = await scan(guard, model.ask, max_parallel=3)
    assert trio.current_time() == 4 and model.peak == 3
    assert [t for t, _, _ in model.calls] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    w = guard.plan.windows
    assert model.texts() == [ascii_windows(10)[w[i].start:w[i].end].decode() for i in guard.plan.order]
    rule = result.rules["jailbreak:attack"]
    assert (rule.matched, rule.decided, str(rule.coverage)) == (False, "whole", "full")
    assert result.ended == "read" and str(result.coverage) == "full" and result.calls == 10


async def test_decisive_match_ends_the_scan_at_once(autojump_clock):
    plan = plan_windows(ascii_windows(12), window_bytes=16, overlap_bytes=4, max_bytes=16, seed=3)
    third = plan.order[2]
    text = planted(12, third)
    model = Model(latency=lambda t: 0.5 if INJECT in t else 1.0)
    guard = GuardScan(text, [jailbreak()], SMALL, seed=3)
    result = await scan(guard, model.ask, max_parallel=2)
    # t=0: tail and head; t=1: the third window (0.5 s) and the fourth; t=1.5: the match ends it.
    assert trio.current_time() == 1.5
    assert len(model.calls) == 4 and model.cancelled == 1
    rule = result.rules["jailbreak:attack"]
    assert (rule.matched, rule.decided, rule.value) == (True, "early", 0.999)
    assert result.ended == "decisive" and str(result.coverage) == "partial 3/12"


async def test_non_decisive_match_keeps_reading_only_for_the_others(autojump_clock):
    text = planted(6, 0)                               # in the head, the second window read
    harm = ScanRule("safety:harm", "harm", 0.5)
    model = Model()
    result = await scan(GuardScan(text, [jailbreak(decisive=False), harm], SMALL, seed=0), model.ask,
                        max_parallel=1)
    assert [ids for _, _, ids in model.calls] == [{"jb", "harm"}] * 2 + [{"harm"}] * 4
    assert result.ended == "read" and trio.current_time() == 6
    assert result.rules["jailbreak:attack"].decided == "early" and result.rules["jailbreak:attack"].matched
    assert (result.rules["safety:harm"].matched, result.rules["safety:harm"].decided) == (False, "whole")

    # With no other rule to read for, the match ends the scan.
    model = Model()
    result = await scan(GuardScan(text, [jailbreak(decisive=False)], SMALL, seed=0), model.ask, max_parallel=1)
    assert result.ended == "matched" and len(model.calls) == 2


CAPPED = ScanParams(16, 4, 64)                # over 256 windows: the middle grows up to 64 bytes


def capped_text(marks: dict[int, str]) -> str:
    """4,000 dots, each mark in the middle of its plan window (the windows do not depend on the seed)."""
    text = "." * 4000
    plan = plan_windows(text.encode(), window_bytes=16, overlap_bytes=4, max_bytes=64)
    for i, mark in marks.items():
        w = plan.windows[i]
        mid = (w.start + w.end) // 2 - len(mark) // 2
        text = text[:mid] + mark + text[mid + len(mark):]
    return text


def diluted(full: float, small: float):
    """P(INJECT...) by window size: ``full`` in a larger window, ``small`` in one of 16 bytes."""
    def p(text: str) -> float:
        for mark, (big, little) in {"INJECT": (full, small), "INJEKT": (0.85, 0.95)}.items():
            if mark in text:
                return little if len(text) <= 16 else big
        return 0.01
    return p


async def test_near_miss_within_half_the_margin_is_read_again_at_once(autojump_clock):
    plan = plan_windows(b"." * 4000, window_bytes=16, overlap_bytes=4, max_bytes=64, seed=5)
    parent = plan.order[6]
    assert plan.large(parent)
    text = capped_text({parent: INJECT})
    model = Model(p=diluted(0.97, 0.999))             # 0.97 is 1.1 log-odds below 0.99: within 1.5
    guard = GuardScan(text, [jailbreak()], CAPPED, seed=5)
    result = await scan(guard, model.ask, max_parallel=1)
    w = plan.windows[parent]
    rereads = model.texts()[7:]
    assert 1 <= len(rereads) <= 2 and all(len(t) <= 16 and t in text[w.start:w.end] for t in rereads)
    assert INJECT in rereads[-1] and result.ended == "decisive"
    assert trio.current_time() == len(model.calls) and result.rereads == len(rereads)
    assert result.rules["jailbreak:attack"].decided == "early"


async def test_near_miss_further_below_waits_for_the_unread_windows_closest_first(autojump_clock):
    plan = plan_windows(b"." * 4000, window_bytes=16, overlap_bytes=4, max_bytes=64, seed=1)
    first, second = plan.order[3], plan.order[9]
    text = capped_text({first: "INJEKT", second: INJECT})  # 2.9 and 2.4 log-odds short: the second first
    model = Model(p=diluted(0.9, 0.95))               # read again at 16 bytes: still short, no match
    rule = jailbreak(decisive=False)
    guard = GuardScan(text, [rule], CAPPED, seed=1)
    result = await scan(guard, model.ask, max_parallel=2)
    texts = model.texts()
    n = plan.planned
    assert texts[:n] == [text[plan.windows[i].start:plan.windows[i].end] for i in plan.order]
    assert len(texts[n:]) == result.rereads >= 2 and all(len(t) <= 16 for t in texts[n:])
    again = [("INJECT" in t, "INJEKT" in t) for t in texts[n:]]
    first_inject = again.index((True, False))
    first_injekt = again.index((False, True))
    assert first_inject < first_injekt
    got = result.rules["jailbreak:attack"]
    assert (got.matched, got.decided, str(got.coverage)) == (False, "whole", "full")


async def test_a_larger_window_not_read_again_by_the_deadline_counts_as_unread(autojump_clock):
    plan = plan_windows(b"." * 4000, window_bytes=16, overlap_bytes=4, max_bytes=64, seed=1)
    text = capped_text({plan.order[3]: INJECT})
    guard = GuardScan(text, [jailbreak()], CAPPED, seed=1)
    with trio.move_on_after(plan.planned + 0.5):      # every window read; its re-reads are not
        await scan(guard, Model(p=diluted(0.9, 0.999)).ask, max_parallel=1)
    result = guard.result()
    assert result.ended == "cut" and str(result.coverage) == "full"
    rule = result.rules["jailbreak:attack"]
    assert str(rule.coverage) == f"partial {plan.planned - 1}/{plan.planned}"
    assert (rule.matched, rule.decided) == (None, "unscanned")


async def test_tail_near_miss_reads_the_last_half_window_at_once(autojump_clock):
    params = ScanParams(64, 8, 64)
    text = "." * 170 + INJECT                         # windows [0,64) [56,120) [112,176): the tail is whole
    model = Model(p=lambda t: (0.9 if len(t) > 32 else 0.999) if INJECT in t else 0.01)
    result = await scan(GuardScan(text, [jailbreak()], params, seed=0), model.ask, max_parallel=1)
    assert model.texts() == [text[112:], text[144:]]  # the tail, then its last half window, before the head
    assert trio.current_time() == 2 and result.ended == "decisive" and result.rereads == 1

    # Too far below the threshold: no re-read.
    model = Model(p=lambda t: 0.2 if INJECT in t else 0.01)
    result = await scan(GuardScan(text, [jailbreak()], params, seed=0), model.ask, max_parallel=1)
    assert len(model.calls) == 3 and result.rereads == 0
    # A margin of 0 reads nothing again.
    model = Model(p=lambda t: (0.9 if len(t) > 32 else 0.999) if INJECT in t else 0.01)
    guard = GuardScan(text, [jailbreak()], ScanParams(64, 8, 64, reread_margin=0), seed=0)
    result = await scan(guard, model.ask, max_parallel=1)
    assert len(model.calls) == 3 and result.rules["jailbreak:attack"].matched is False


@pytest.mark.parametrize(("policy", "min_coverage", "expected"), [
    ("unknown", 0.0, None), ("match", 0.0, True), ("no_match", 0.0, False),
    ("best_effort", 0.0, False), ("best_effort", 0.99, None),
])
async def test_a_failed_window_counts_as_unread(autojump_clock, policy, min_coverage, expected):
    text = letters(5)
    head = text[:16]
    model = Model(fail=lambda t: t == head)
    rule = jailbreak(on_unscanned=policy, min_coverage=min_coverage)
    result = await scan(GuardScan(text, [rule], SMALL, seed=0), model.ask, max_parallel=2)
    assert len(model.calls) == 5 and result.ended == "read"
    assert str(result.coverage) == "partial 4/5"
    got = result.rules["jailbreak:attack"]
    assert (got.matched, got.decided, str(got.coverage)) == (expected, "unscanned", "partial 4/5")


async def test_a_question_error_leaves_only_its_rule_unread(autojump_clock):
    async def ask(text, wire_ids):
        return {"jb": wire.QuestionError("question_failed") if text.startswith("x" * 16) else wire.NoulAnswer(0.0),
                "harm": wire.NoulAnswer(0.0)}
    text = "x" * 16 + "y" * 40
    rules = [jailbreak(), ScanRule("safety:harm", "harm", 0.5)]
    result = await scan(GuardScan(text, rules, SMALL, seed=0), ask, max_parallel=4)
    assert str(result.coverage) == "full" and str(result.rules["safety:harm"].coverage) == "full"
    assert str(result.rules["jailbreak:attack"].coverage) == "partial 4/5"


async def test_deadline_leaves_partial_coverage(autojump_clock):
    guard = GuardScan(ascii_windows(10).decode(), [jailbreak()], SMALL, seed=0)
    model = Model()
    with trio.move_on_after(2.5):
        await scan(guard, model.ask, max_parallel=2)
    assert trio.current_time() == 2.5 and len(model.calls) == 6 and model.cancelled == 2
    result = guard.result()
    assert result.ended == "cut" and str(result.coverage) == "partial 4/10"
    rule = result.rules["jailbreak:attack"]
    assert (rule.matched, rule.decided, rule.coverage.ratio) == (None, "unscanned", 0.4)

    guard = GuardScan(ascii_windows(10).decode(), [jailbreak()], SMALL, seed=0)
    with trio.move_on_after(0.5):
        await scan(guard, Model().ask, max_parallel=2)
    rule = guard.result().rules["jailbreak:attack"]
    assert (rule.matched, rule.decided, str(rule.coverage)) == (None, "none", "none")


def email_spans(text: str) -> list[wire.Span]:
    spans = [wire.Span("email", m.start(), m.end(), 0.99, m.group()) for m in EMAIL.finditer(text)]
    return spans + [wire.Span("name", m.start(), m.end(), 0.99) for m in re.finditer("alice", text)]


async def test_pii_spans_keep_their_places_in_the_original_text(autojump_clock):
    params = ScanParams(64, 24, 64)
    prefix = "中文😀é ü " * 12                       # multibyte characters before every address
    base = prefix + "-" * 300
    plan = plan_windows(base.encode(), window_bytes=64, overlap_bytes=24, max_bytes=64, seed=0)
    data = bytearray(base.encode())
    a, b = plan.windows[-4], plan.windows[-3]
    assert a.start > len(prefix.encode()) and b.start < a.end - 17
    alice = b"alice@example.com"                      # inside the overlap of a and b: found twice
    data[b.start + 1:b.start + 1 + len(alice)] = alice
    c = plan.windows[-2]
    bob = b"bob@example.com"                          # cut by b's end: "bob@exa" in b, whole in c
    data[b.end - 7:b.end - 7 + len(bob)] = bob
    assert c.start < b.end - 7 and b.end + 8 < c.end
    text = data.decode()
    assert plan_windows(data, window_bytes=64, overlap_bytes=24, max_bytes=64).windows == plan.windows

    pii = ScanRule("pii:contact", "pii", 0.5, ignore=frozenset({"name"}), collect_spans=True)
    model = Model(spans=email_spans)
    result = await scan(GuardScan(text, [pii], params, seed=0), model.ask, max_parallel=4)
    got = result.rules["pii:contact"]
    assert got.matched and got.decided == "early" and str(got.coverage) == "full"
    assert [(s.start, s.end, s.label) for s in got.spans] == [
        (text.index("alice@"), text.index("alice@") + 17, "email"),
        (text.index("bob@"), text.index("bob@") + 15, "email"),
    ]
    assert [text[s.start:s.end] for s in got.spans] == ["alice@example.com", "bob@example.com"]
    assert got.labels == {"email": True}
    # Reading on after the match: every window carried the span question.
    assert len(model.calls) == plan.planned and all(ids == {"pii"} for _, _, ids in model.calls)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.text(st.sampled_from(list("中文😀é ü.ab")), max_size=30), min_size=1, max_size=12),
       window=st.integers(24, 48), seed=st.integers(0, 1000))
def test_every_span_maps_back_once(chunks, window, seed):
    """Random multibyte text with '@' marks: each is found once, at its exact character offset."""
    text = "@".join(chunks)

    async def run():
        async def ask(t, wire_ids):
            await trio.sleep(1)
            return {"pii": wire.SpanAnswer([wire.Span("at", i, i + 1, 0.9) for i, ch in enumerate(t) if ch == "@"])}
        rule = ScanRule("pii:at", "pii", 0.5, collect_spans=True)
        return await scan(GuardScan(text, [rule], ScanParams(window, window // 3, window), seed=seed), ask,
                          max_parallel=3)

    result = trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    spans = result.rules["pii:at"].spans
    assert [(s.start, s.end) for s in spans] == [(i, i + 1) for i, ch in enumerate(text) if ch == "@"]
    assert str(result.coverage) == "full"


def test_metrics_render_coverage_and_decisions():
    metrics = ScanMetrics()
    guard = GuardScan(ascii_windows(4).decode(), [jailbreak(), ScanRule("pii:p", "pii", 0.5)], SMALL, seed=0)
    read = guard.next_read()
    guard.feed(read, {"jb": wire.NoulAnswer(0.999), "pii": wire.SpanAnswer([])})
    metrics.record(guard.result())
    text = "\n".join(metrics.render())
    assert 'vsr_signal_scan_coverage_total{signal="jailbreak:attack",coverage="partial"} 1' in text
    assert 'vsr_signal_scan_decided_total{signal="jailbreak:attack",outcome="early"} 1' in text
    assert 'vsr_signal_scan_decided_total{signal="pii:p",outcome="unscanned"} 1' in text
    assert 'vsr_signal_scan_coverage_ratio_count{signal="pii:p"} 1' in text
