"""Guard rules reading a long input in windows (spec: system-one-performance-and-cost.md, "Long inputs").

Guard rules (``jailbreak``, ``safety``, ``pii``, and ``systemone`` rules with
``coverage: full``) read the whole input, in windows of ``scan_window.tokens``
that overlap by ``scan_window.overlap``. Three layers, the pure ones first
(STYLE 6, h11's shape)::

    plan_windows(data, ...) -> ScanPlan       pure: the windows and the order they are read in
    GuardScan(text, rules, params, seed=)     pure: which window to send next, what an answer decides
    await scan(guard, ask, max_parallel=)     trio: at most max_parallel calls in flight, each fed back

The plan. Windows come from the C kernel ``byte_windows`` (code-point
boundaries, consecutive windows overlap by ``overlap`` to ``overlap + 3``
bytes, together they cover the input). They are read tail first, then the
head, then the middle by halves: number the k middle windows 0..k-1 around a
circle; the i-th middle read (i = 1, 2, ..., then 0 last) is at position
``floor(bitreverse(i) * k / m) + rotation (mod k)``, m the power of two at or
above k, skipping positions already taken. Unrotated that is the middle
window, then the two at its quarters, the four at its eighths, ... The
rotation is ``seed mod k``: a caller passes a fresh seed per request
(``random.getrandbits(32)``, or a hash of the request id to replay one), so
the first middle window read sits at ``(k/2 + seed) mod k`` and every later
one keeps its place relative to it. Any prefix of the order stays spread
over the whole input (rotating a halving sequence on a circle keeps its
gaps), and no part of the middle is predictably read last.

At most ``MAX_WINDOWS`` (256) windows per input. An input that needs more is
cut again: the head (the kernel's first window) and the tail (the last
``window_bytes`` of the input, its start moved forward to a boundary) stay
at ``window_bytes``; the part between them, from ``overlap`` before the
head's end to ``overlap`` after the tail's start, is cut into the smallest
windows of at most ``max_bytes`` that 254 cover. Only an input longer than
that leaves windows past the 256th in the read order unread; they count as
unread. Without the cap the plan is the kernel's windows as they are, so
its tail is the kernel's last window, which can be shorter than a window.

Deciding. A window's answers count as soon as it is read. A window that
makes a rule match decides it; when that rule is ``decisive`` (its match
alone refuses the request) the scan ends at once: calls in flight are
cancelled and no further window is sent. Once a rule matched its question
leaves later calls (they carry only the questions still undecided), except
for a rule that ``collect_spans``: masking needs every span, so a matched
pii rule keeps reading. When every rule has matched and none collects
spans, the scan ends too.

Re-reads. A larger window (one over ``window_bytes``: the middle of a capped
plan) whose answer leaves a rule short of its threshold by at most
``reread_margin`` in log-odds is read again in windows of ``window_bytes``
before the rule decides: within half the margin at once, ahead of every
unsent window; further below after the windows still unread, closest to the
threshold first. A re-read window inside a part already read at
``window_bytes`` (the head, the tail, another re-read) is not sent. Until
its re-reads are answered, the larger window does not count as read for
that rule. The tail: when its answer leaves a rule short by at most the
margin, the input's last half window (``window_bytes // 2``) is read again at
once, one more window that can still end the scan; it is skipped when the
tail is no longer than that. Re-read windows do not count against the 256.

Spans. A span answer's offsets index its window's text; they are moved to
the original text's characters (code points) via the window's start, a byte
offset converted once through anchors (``_Chars``), clamped to the window,
and spans of one label inside another (the same span found twice by
overlapping windows, or cut by a window's edge) are kept once, the larger,
with the higher probability.

Results. Per rule: matched / unmatched / unknown, the best value read (the
highest probability, or score for a score rule), labels, spans, and the
rule's coverage: plan windows answered for it, of those planned. A rule
that did not match on a partial read follows ``on_unscanned``: ``unknown``
(left unknown), ``match``, ``no_match``, or ``best_effort`` (the
performance spec's default: unmatched, or unknown below ``min_coverage``).
A rule with no window read is unknown whatever its policy: the caller
applies ``on_unknown`` (spec: "When no window is read at all ..."). The
scan's own coverage counts windows whose call answered. ``ScanMetrics``
turns results into ``vsr_signal_scan_coverage_total{signal,coverage}``,
``vsr_signal_scan_coverage_ratio{signal}`` and
``vsr_signal_scan_decided_total{signal,outcome}``.

Deadlines. ``scan`` takes no timeout: the caller's cancel scope ends it, and
the ``GuardScan`` it was given keeps every answer read by then, so
``guard.result()`` after the scope is the partial scan (windows in flight
count as unread)::

    guard = GuardScan(text, rules, ScanParams.from_config(dep.scan_window, ...), seed=seed)
    with trio.move_on_after(signals_deadline_s):
        await scan(guard, ask, max_parallel=dep.scan_window.max_parallel)
    result = guard.result()

Left out: the pacing rule ("a scan that falls behind reads its remaining
windows in runs read as one, when the deployment's measured pace says those
would be read in time"). This scan always keeps its planned windows and reads
what it can by the deadline. A failed window (``ask`` returned None) is not
retried. Also left out: a per-deployment limit shared by several inputs'
scans (``max_parallel`` bounds one scan).
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import msgspec
import trio

from .._ext.windows import BYTES_PER_TOKEN, byte_windows
from ..config.catalog import ScanWindow
from ..metrics import Counter, Histogram
from ..protocol import systemone as wire
from ..signals.base import Outcome
from .views import QUESTION_RESERVE_TOKENS

if TYPE_CHECKING:
    from .learned import LearnedRule

__all__ = [
    "MAX_WINDOWS", "Ask", "Coverage", "GuardScan", "Read", "RuleScan", "ScanMetrics", "ScanParams", "ScanPlan",
    "ScanResult", "ScanRule", "Window", "plan_windows", "scan",
]

MAX_WINDOWS = 256
OnUnscanned = Literal["unknown", "match", "no_match", "best_effort"]
Answers = Mapping[str, wire.Answer]
Ask = Callable[[str, frozenset[str]], Awaitable[Answers | None]]
"""``ask(window_text, wire_ids)``: one call carrying the questions ``wire_ids``; None when the call failed."""

# Probabilities are clamped this far from 0 and 1 before log-odds: a P of exactly 0 or 1 stays finite.
_EPS = 1e-12


# --- sizes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScanParams:
    """A deployment's ``scan_window`` in bytes (4 bytes a token), and its re-read margin in log-odds."""

    window_bytes: int
    overlap_bytes: int
    max_bytes: int
    reread_margin: float = 3.0

    @classmethod
    def from_config(cls, sw: ScanWindow, *, provider: str = "model_runtime",
                    validated_tokens: int | None = None) -> ScanParams:
        """The spec's defaults (8,192 / 512 tokens; 4,096 / 256 for ``provider: systemone``) and caps.

        The model's validated length less 1,024 tokens caps windows at one byte a
        token and is ``max_tokens``' default, as ``views.budget_bytes`` does for the
        routing view; without a validated length the larger windows are no larger
        than a window unless ``max_tokens`` says so.
        """
        tokens, overlap = (4096, 256) if provider == "systemone" else (8192, 512)
        window = (sw.tokens or tokens) * BYTES_PER_TOKEN
        overlap = (sw.overlap if sw.overlap is not None else overlap) * BYTES_PER_TOKEN
        largest = sw.max_tokens * BYTES_PER_TOKEN if sw.max_tokens else None
        if validated_tokens:
            reserve = validated_tokens - QUESTION_RESERVE_TOKENS
            cap = reserve if reserve >= 256 else max(validated_tokens * BYTES_PER_TOKEN, 1024)
            window = min(window, cap)
            largest = min(largest or cap, cap)
        largest = max(largest or window, window)
        # A window cut down to the model keeps an overlap below half of it (the config's own bound).
        overlap = min(overlap, (window - 1) // 2)
        return cls(window, overlap, largest, sw.reread_margin)

    @property
    def reach_bytes(self) -> int:
        """The longest input ``plan_windows`` reads whole in ``MAX_WINDOWS`` windows: the head and the tail at
        ``window_bytes``, the middle in the largest windows (one byte past ``window_bytes`` at least), each
        overlapping the next. Past it, windows go unread."""
        middle = max(self.max_bytes, self.window_bytes + 1)
        return 2 * self.window_bytes + (MAX_WINDOWS - 2) * middle - (MAX_WINDOWS - 1) * self.overlap_bytes


# --- the plan (pure) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    """[start, end) byte offsets into the input's UTF-8, on code-point boundaries."""

    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ScanPlan:
    """An input's windows in input order, and the order they are read in (at most 256 of them)."""

    windows: tuple[Window, ...]
    order: tuple[int, ...]            # indices into windows: tail, head, then the middle by halves
    window_bytes: int
    overlap_bytes: int

    @property
    def planned(self) -> int:
        return len(self.windows)

    @property
    def tail(self) -> int:
        return len(self.windows) - 1

    def large(self, i: int) -> bool:
        """A window over ``window_bytes``: it dilutes what it holds, so a near miss is read again."""
        return self.windows[i].size > self.window_bytes


def plan_windows(data: bytes, *, window_bytes: int, overlap_bytes: int, max_bytes: int, seed: int = 0) -> ScanPlan:
    """The windows of UTF-8 ``data`` and their read order; ``seed`` rotates the middle (module docstring).

    Raises ValueError unless ``window_bytes >= 1``, ``0 <= overlap_bytes < window_bytes``
    and ``max_bytes >= window_bytes``.
    """
    if max_bytes < window_bytes:
        raise ValueError(f"max_bytes ({max_bytes}) is below window_bytes ({window_bytes})")
    spans = _cut(data, window_bytes, overlap_bytes)
    if len(spans) > MAX_WINDOWS:
        spans = _capped(data, spans[0], window_bytes, overlap_bytes, max_bytes)
    windows = tuple(Window(s, e) for s, e in spans)
    return ScanPlan(windows, _read_order(len(windows), seed), window_bytes, overlap_bytes)


def _cut(data: bytes | memoryview, size: int, overlap: int, offset: int = 0) -> list[tuple[int, int]]:
    return [(s + offset, e + offset) for s, e in byte_windows(data, size, overlap).tolist()]


def _capped(data: bytes, head: tuple[int, int], size: int, overlap: int, largest: int) -> list[tuple[int, int]]:
    """Head and tail at ``size``; between them the smallest windows up to ``largest`` that 254 cover."""
    n = len(data)
    tail_start = _forward(data, n - size)
    lo = _back(data, head[1] - overlap)
    hi = _forward(data, tail_start + overlap)
    middle = memoryview(data)[lo:hi]
    room = MAX_WINDOWS - 2
    # w windows of m bytes stepping m - overlap cover L bytes when L + (w - 1) * overlap <= w * m.
    # Cuts at code-point boundaries lose up to 6 bytes a step, so grow m in small steps until 254 fit.
    m = max(size + 1, min(largest, -(-(len(middle) + (room - 1) * overlap) // room)))
    spans = _cut(middle, m, overlap, lo)
    while len(spans) > room and m < largest:
        m = min(largest, m + max(1, m // 256))
        spans = _cut(middle, m, overlap, lo)
    # The middle's last window can start a boundary's width past the tail's start: the tail holds it.
    return [head, *(s for s in spans if s[0] < tail_start), (tail_start, n)]


def _forward(data: bytes, i: int) -> int:
    """The first code-point boundary at or after byte ``i``."""
    i = max(i, 0)
    while i < len(data) and data[i] & 0xC0 == 0x80:
        i += 1
    return i


def _back(data: bytes, i: int) -> int:
    """The last code-point boundary at or before byte ``i``."""
    i = min(max(i, 0), len(data))
    while 0 < i < len(data) and data[i] & 0xC0 == 0x80:
        i -= 1
    return i


def _read_order(n: int, seed: int) -> tuple[int, ...]:
    if n <= 2:
        return tuple(range(n - 1, -1, -1))          # (), (0,), (1, 0): tail, then head
    middle = itertools.islice(_halving(n - 2, seed % (n - 2)), MAX_WINDOWS - 2)
    return (n - 1, 0, *(1 + p for p in middle))


def _halving(k: int, rotation: int) -> Iterator[int]:
    """0..k-1 by halves around a circle: its middle, its quarters, its eighths, ..., rotated."""
    bits = max(1, (k - 1).bit_length())
    m = 1 << bits
    seen = bytearray(k)
    for i in itertools.chain(range(1, m), (0,)):
        j = int(f"{i:0{bits}b}"[::-1], 2)
        p = (j * k // m + rotation) % k
        if not seen[p]:
            seen[p] = 1
            yield p


class _Chars:
    """Byte offsets to character offsets in one UTF-8 text, decoding only from the nearest anchor."""

    def __init__(self, data: bytes, offsets: Iterable[int]) -> None:
        self._data = data
        self._bytes = [0]
        self._chars = [0]
        for b in sorted(set(offsets)):
            self.at(b)

    def at(self, b: int) -> int:
        i = bisect.bisect_right(self._bytes, b) - 1
        anchor = self._bytes[i]
        chars = self._chars[i] + len(self._data[anchor:b].decode())
        if b != anchor:
            self._bytes.insert(i + 1, b)
            self._chars.insert(i + 1, chars)
        return chars


# --- rules and answers ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanRule:
    """A rule that reads the input whole: what it asks, when it matches, what an unread part means.

    ``threshold`` is the probability its predicate needs (log-odds distances to it
    drive re-reads); None reads nothing again (a score rule, a ``lt`` predicate).
    ``passes`` defaults to ``p >= threshold``. Labels and ignore labels apply as in
    ``systemone.learned.outcome_of``.
    """

    key: str                              # e.g. "jailbreak:prompt_attack": result and metric label
    wire_id: str
    threshold: float | None
    passes: Callable[[float], bool] | None = None
    labels: tuple[str, ...] = ()
    ignore: frozenset[str] = frozenset()
    decisive: bool = False                # its match alone refuses the request: ends the scan
    on_unscanned: OnUnscanned = "unknown"
    min_coverage: float = 0.0             # best_effort below this share of windows read: unknown
    collect_spans: bool = False           # keep reading after a match: masking needs every span

    def __post_init__(self) -> None:
        if self.passes is None:
            if self.threshold is None:
                raise ValueError(f"rule {self.key!r} needs a threshold or passes")
            threshold = self.threshold
            object.__setattr__(self, "passes", lambda p: p >= threshold)

    @classmethod
    def from_learned(cls, rule: LearnedRule, *, threshold: float | None, decisive: bool = False,
                     on_unscanned: OnUnscanned = "unknown", min_coverage: float = 0.0) -> ScanRule:
        return cls(f"{rule.condition_type}:{rule.name}", rule.share.wire_id, threshold, rule.passes,
                   rule.labels, rule.ignore, decisive, on_unscanned, min_coverage,
                   collect_spans=rule.question_type == "span")


@dataclass(slots=True)
class _Judged:
    matched: bool
    value: float                          # the best probability, or the score
    p: float | None                       # the probability re-reads measure; None for a score
    labels: dict[str, bool]
    spans: list[wire.Span]                # kept spans, in window characters


def _judge(rule: ScanRule, answer: wire.Answer) -> _Judged | None:
    """One window's answer for one rule, as ``outcome_of`` reads it; None when it is no answer."""
    passes = rule.passes
    assert passes is not None
    if isinstance(answer, wire.NoulAnswer):
        return _Judged(passes(answer.noul), answer.noul, answer.noul, {}, [])
    if isinstance(answer, wire.ScoreAnswer):
        return _Judged(passes(answer.score), answer.score, None, {}, [])
    if isinstance(answer, (wire.ChoiceAnswer, wire.SetAnswer)):
        probs = answer.probabilities
        labels = {o: passes(p) for o, p in probs.items() if o not in rule.ignore}
        mine = [o for o in rule.labels if o not in rule.ignore]
        best = max((probs.get(o, 0.0) for o in mine), default=0.0)
        return _Judged(any(labels.get(o, False) for o in mine), best, best, labels, [])
    if isinstance(answer, wire.SpanAnswer):
        mine = set(rule.labels)
        heard = [s for s in answer.spans if s.label not in rule.ignore and (not mine or s.label in mine)]
        kept = [s for s in answer.spans if s.label not in rule.ignore and passes(s.probability)]
        best = max((s.probability for s in heard), default=0.0)
        hit = any(not mine or s.label in mine for s in kept)
        return _Judged(hit, best, best, {s.label: True for s in kept}, kept)
    return None                           # QuestionError, or a type this rule cannot read


def _logit(p: float) -> float:
    p = min(max(p, _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Coverage:
    """Windows read of those planned: ``full``, ``partial n/m`` or ``none``."""

    read: int
    planned: int

    @property
    def kind(self) -> Literal["full", "partial", "none"]:
        if self.read >= self.planned:
            return "full"
        return "partial" if self.read else "none"

    @property
    def ratio(self) -> float:
        return self.read / self.planned if self.planned else 1.0

    def __str__(self) -> str:
        kind = self.kind
        return f"partial {self.read}/{self.planned}" if kind == "partial" else kind


Decided = Literal["early", "whole", "unscanned", "none"]


@dataclass(frozen=True)
class RuleScan:
    """One rule's read of the input.

    ``decided``: ``early`` a window matched it before all its windows were read;
    ``whole`` it decided on every window; ``unscanned`` a partial read that did not
    match, decided by ``on_unscanned``; ``none`` no window was read (unknown).
    """

    key: str
    matched: bool | None
    value: float | None                   # the best probability read (for a score rule, the highest score)
    coverage: Coverage
    decided: Decided
    labels: dict[str, bool] = field(default_factory=dict)
    spans: tuple[wire.Span, ...] = ()     # character offsets into the original text, deduped

    def outcome(self) -> Outcome:
        value = self.value if self.value is not None else 0.0
        return Outcome(self.matched, value=self.value, confidence=value, labels=self.labels or None,
                       spans=list(self.spans), detail=f"{self.decided}; read {self.coverage}; best {value:.3g}")


@dataclass(frozen=True)
class ScanResult:
    """``ended``: ``read`` every window wanted was read; ``decisive`` a decisive match ended it;
    ``matched`` every rule matched; ``cut`` the caller's deadline ended it."""

    rules: dict[str, RuleScan]
    coverage: Coverage                    # windows whose call answered, of those planned
    ended: Literal["read", "decisive", "matched", "cut"]
    calls: int                            # calls sent, re-reads included
    rereads: int                          # of which re-reads (tail and larger windows)


class ScanMetrics:
    """The scan's metrics, one sample per guard rule's read."""

    def __init__(self) -> None:
        self.coverage = Counter("vsr_signal_scan_coverage_total",
                                "Guard rules' reads of their input: full, partial or none.", ("signal", "coverage"))
        self.ratio = Histogram("vsr_signal_scan_coverage_ratio", "Share of its windows a guard rule read.",
                               ("signal",), buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0))
        self.decided = Counter("vsr_signal_scan_decided_total",
                               "Guard rules by how they decided: early, whole, unscanned, none.", ("signal", "outcome"))

    def record(self, result: ScanResult) -> None:
        for rule in result.rules.values():
            self.record_rule(rule)

    def record_rule(self, rule: RuleScan) -> None:
        """One rule's read: of a scan, or of the earlier turns' windows (``history_windows``)."""
        self.coverage.inc(rule.key, rule.coverage.kind)
        self.ratio.observe(rule.coverage.ratio, rule.key)
        self.decided.inc(rule.key, rule.decided)

    def render(self) -> list[str]:
        return self.coverage.render() + self.ratio.render() + self.decided.render()


# --- the scan (pure) ------------------------------------------------------------------------------


Kind = Literal["window", "reread", "tail"]


@dataclass(frozen=True, slots=True)
class Read:
    """One call: a window's text and the questions it carries."""

    seq: int
    kind: Kind                            # a plan window, a larger window's re-read, or the tail's
    index: int                            # the plan window it reads, or reads again
    window: Window
    text: str
    char_start: int                       # the window's start in characters of the original text
    wire_ids: frozenset[str]
    rules: frozenset[str]                 # the rule keys whose answers it reads


@dataclass(frozen=True, slots=True)
class _Job:
    kind: Kind
    index: int
    window: Window
    wanted: frozenset[str] = frozenset()  # re-reads: the rules that asked for it


@dataclass(slots=True)
class _RuleState:
    rule: ScanRule
    answered: set[int] = field(default_factory=set)     # plan windows answered for this rule
    pending: dict[int, set[Window]] = field(default_factory=dict)   # larger window -> re-reads unanswered
    matched: bool = False
    early: bool = False
    value: float | None = None
    labels: dict[str, bool] = field(default_factory=dict)
    spans: list[wire.Span] = field(default_factory=list)


class GuardScan:
    """One input's scan: the plan, what to send next, and what the answers so far decide.

    Sans-I/O: ``next_read()`` hands out the next call (or None: nothing to send
    until an answer arrives), ``feed(read, answers)`` takes its answers (None: the
    call failed), ``result()`` says what they decide, at any moment.
    """

    def __init__(self, text: str, rules: Sequence[ScanRule], params: ScanParams, *, seed: int) -> None:
        self._data = text.encode()
        self.params = params
        self.plan = plan_windows(self._data, window_bytes=params.window_bytes, overlap_bytes=params.overlap_bytes,
                                 max_bytes=params.max_bytes, seed=seed)
        self._rules = {r.key: _RuleState(r) for r in rules}
        if len(self._rules) != len(rules):
            raise ValueError("rule keys must be unique")
        self._chars = _Chars(self._data, (w.start for w in self.plan.windows))
        # Parts read at window_bytes: a re-read inside one of them is not sent.
        self._small = [w for w in self.plan.windows if w.size <= params.window_bytes]
        self._next = 0                                  # position in plan.order
        self._urgent: deque[_Job] = deque()
        self._later: list[tuple[float, int, _Job]] = []
        self._order = itertools.count()
        self._in_flight: set[int] = set()
        self._answered: set[int] = set()                # plan windows whose call answered
        self._tail_reread = False
        self._calls = self._rereads = 0
        self._ended: Literal["decisive", "matched"] | None = None
        if not self._rules:
            self._ended = "matched"

    @property
    def ended(self) -> bool:
        """A decisive match, or every rule matched: nothing more is sent, calls in flight can go."""
        return self._ended is not None

    # -- sending -------------------------------------------------------------------------------
    def next_read(self) -> Read | None:
        """The call to send now, marked in flight; None when nothing is to be sent now."""
        while self._ended is None:
            job = self._pop()
            if job is None:
                return None
            if job.kind != "window" and all(self._rules[k].matched for k in job.wanted):
                continue                                 # every rule that wanted it has decided
            asking = [st.rule for st in self._rules.values()
                      if not st.matched or (job.kind == "window" and st.rule.collect_spans)]
            w = job.window
            read = Read(next(self._order), job.kind, job.index, w, self._data[w.start:w.end].decode(),
                        self._chars.at(w.start), frozenset(r.wire_id for r in asking),
                        frozenset(r.key for r in asking))
            self._in_flight.add(read.seq)
            self._calls += 1
            self._rereads += job.kind != "window"
            return read
        return None

    def _pop(self) -> _Job | None:
        if self._urgent:
            return self._urgent.popleft()
        if self._next < len(self.plan.order):
            i = self.plan.order[self._next]
            self._next += 1
            return _Job("window", i, self.plan.windows[i])
        if self._later:
            return heapq.heappop(self._later)[2]
        return None

    # -- answers -------------------------------------------------------------------------------
    def feed(self, read: Read, answers: Answers | None) -> None:
        """Take one call's answers; None (a failed call) leaves its window unread."""
        self._in_flight.discard(read.seq)
        if answers is None or self._ended is not None:
            return
        if read.kind == "window":
            self._answered.add(read.index)
        short: dict[str, float] = {}                     # rule -> log-odds below its threshold
        for key in read.rules:
            st = self._rules[key]
            answer = answers.get(st.rule.wire_id)
            judged = _judge(st.rule, answer) if answer is not None else None
            if judged is None:
                continue                                 # this rule did not read this window
            self._absorb(st, read, judged)
            gap = self._shortfall(st, judged)
            if gap is not None:
                short[key] = gap
        if short and read.kind == "window":
            if self.plan.large(read.index):
                self._reread(read.index, short)
            if read.index == self.plan.tail:
                self._reread_tail(short)
        if self._ended is None and all(st.matched and not st.rule.collect_spans for st in self._rules.values()):
            self._ended = "matched"

    def _absorb(self, st: _RuleState, read: Read, judged: _Judged) -> None:
        if read.kind == "window":
            st.answered.add(read.index)
        elif read.kind == "reread" and read.index in st.pending:
            st.pending[read.index].discard(read.window)
        st.value = judged.value if st.value is None else max(st.value, judged.value)
        for label, hit in judged.labels.items():
            st.labels[label] = st.labels.get(label, False) or hit
        length = len(read.text)
        for s in judged.spans:
            start = min(max(s.start, 0), length)
            end = min(max(s.end, start), length)
            st.spans.append(msgspec.structs.replace(s, start=read.char_start + start, end=read.char_start + end))
        if judged.matched and not st.matched:
            st.matched = True
            st.early = len(st.answered) < self.plan.planned
            if st.rule.decisive:
                self._ended = "decisive"

    def _shortfall(self, st: _RuleState, judged: _Judged) -> float | None:
        """Log-odds below the rule's threshold, when within the re-read margin."""
        margin = self.params.reread_margin
        if st.matched or judged.p is None or st.rule.threshold is None or margin <= 0:
            return None
        gap = max(_logit(st.rule.threshold) - _logit(judged.p), 0.0)
        return gap if gap <= margin else None

    def _reread(self, parent: int, short: dict[str, float]) -> None:
        """Read a larger window again at window_bytes: at once within half the margin, else after the rest."""
        w = self.plan.windows[parent]
        cut = _cut(memoryview(self._data)[w.start:w.end], self.plan.window_bytes, self.plan.overlap_bytes, w.start)
        subs = [Window(s, e) for s, e in cut]
        subs = [s for s in subs if not any(k.start <= s.start and s.end <= k.end for k in self._small)]
        if not subs:
            return
        self._small.extend(subs)
        wanted = frozenset(short)
        for key in wanted:
            self._rules[key].pending[parent] = set(subs)
        jobs = [_Job("reread", parent, s, wanted) for s in subs]
        closest = min(short.values())
        if closest <= self.params.reread_margin / 2:
            self._urgent.extend(jobs)
        else:
            for job in jobs:
                heapq.heappush(self._later, (closest, next(self._order), job))

    def _reread_tail(self, short: dict[str, float]) -> None:
        """The input's last half window, once, at once; not when the tail is no longer than it."""
        if self._tail_reread:
            return
        self._tail_reread = True
        n = len(self._data)
        start = _forward(self._data, n - self.plan.window_bytes // 2)
        if start <= self.plan.windows[self.plan.tail].start or start >= n:
            return
        w = Window(start, n)
        self._small.append(w)
        self._urgent.append(_Job("tail", self.plan.tail, w, frozenset(short)))

    # -- result --------------------------------------------------------------------------------
    def result(self) -> ScanResult:
        """What the windows read so far decide; unread and in-flight windows count as unread."""
        planned = self.plan.planned
        rules = {key: self._rule_result(st, planned) for key, st in self._rules.items()}
        if self._ended is not None:
            ended = self._ended
        elif self._in_flight or self._urgent or self._later or self._next < len(self.plan.order):
            ended = "cut"
        else:
            ended = "read"
        return ScanResult(rules, Coverage(len(self._answered), planned), ended, self._calls, self._rereads)

    def _rule_result(self, st: _RuleState, planned: int) -> RuleScan:
        # A larger window whose re-reads are not all answered is not read, for the rule that wanted them.
        unsure = sum(1 for parent, left in st.pending.items() if left and parent in st.answered)
        coverage = Coverage(len(st.answered) - unsure, planned)
        matched: bool | None
        if st.matched:
            matched, decided = True, "early" if st.early else "whole"
        elif coverage.kind == "full":
            matched, decided = False, "whole"
        elif coverage.kind == "none":
            matched, decided = None, "none"
        else:
            matched, decided = _unscanned(st.rule, coverage), "unscanned"
        return RuleScan(st.rule.key, matched, st.value, coverage, decided, dict(st.labels), tuple(_dedupe(st.spans)))


def _unscanned(rule: ScanRule, coverage: Coverage) -> bool | None:
    if rule.on_unscanned == "match":
        return True
    if rule.on_unscanned == "no_match":
        return False
    if rule.on_unscanned == "best_effort":
        return False if coverage.ratio >= rule.min_coverage else None
    return None


def _dedupe(spans: Iterable[wire.Span]) -> list[wire.Span]:
    """Spans of one label inside another kept once (the outer one, with the higher probability)."""
    out: list[wire.Span] = []
    for s in sorted(spans, key=lambda s: (s.label, s.start, -s.end, -s.probability)):
        last = out[-1] if out and out[-1].label == s.label else None
        # Sorted by start, then longest first: a span inside any kept one is inside the last kept one.
        if last is not None and last.start <= s.start and s.end <= last.end:
            if s.probability > last.probability:
                out[-1] = msgspec.structs.replace(last, probability=s.probability)
            continue
        out.append(s)
    return sorted(out, key=lambda s: (s.start, s.end, s.label))


# --- the driver (trio) ----------------------------------------------------------------------------


async def scan(guard: GuardScan, ask: Ask, *, max_parallel: int) -> ScanResult:
    """Read ``guard``'s windows through ``ask``, at most ``max_parallel`` calls at a time.

    Returns when every window wanted is read, or at once when a decisive match
    (or every rule's match) ends the scan, cancelling the calls in flight. The
    caller's cancel scope is the deadline: after it, ``guard.result()`` holds
    what was read. Errors ``ask`` raises are bugs and leave in an ExceptionGroup;
    a failed call is ``ask`` returning None.
    """
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    send, receive = trio.open_memory_channel[tuple[Read, Answers | None]](max_parallel)
    async with trio.open_nursery() as nursery:
        in_flight = 0
        while True:
            while in_flight < max_parallel and (read := guard.next_read()) is not None:
                nursery.start_soon(_read_one, ask, read, send)
                in_flight += 1
            if in_flight == 0:
                break
            read, answers = await receive.receive()
            in_flight -= 1
            guard.feed(read, answers)
            if guard.ended:
                break
        nursery.cancel_scope.cancel()
    return guard.result()


async def _read_one(ask: Ask, read: Read, send: trio.MemorySendChannel[tuple[Read, Answers | None]]) -> None:
    answers = await ask(read.text, read.wire_ids)
    await send.send((read, answers))
