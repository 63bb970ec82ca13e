"""Each C kernel against its pure-Python reference, measured in one run.

    .venv/bin/python -m bench.kernels

Prints a Markdown table: the median microseconds per call of the kernel and of
its reference (vsr_fast._ext._reference, the best honest pure-Python version;
rank_bm25 itself for BM25), and the speed-up. Both sides get the same prepared
inputs (matchers and indexes are built once, outside the timing), and each pair
is checked to give the same answer before it is timed. Takes about 30 s.

The "bm25 scores_text" rows compare the C tokenizer + scoring with the Python
path it replaces in the keyword signal (tokenize(), then the C scores()), and
with rank-bm25 on the same text; their Python column is that path, not a
_reference function. A goal in µs bounds the kernel's own median.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import bm25, jsonscan, keywords, windows

SAMPLE_NS = 2_000_000  # a timed batch lasts at least 2 ms, far above the clock's resolution
BUDGET_S = 1.2  # per side of each row


def median_us(fn: Callable[[], object]) -> float:
    """Median µs per call over batches of calls, for about BUDGET_S seconds."""
    batch = 1
    while True:
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        if time.perf_counter_ns() - start >= SAMPLE_NS or batch >= 1 << 20:
            break
        batch *= 2
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection mid-batch measures the collector
    try:
        deadline = time.perf_counter_ns() + int(BUDGET_S * 1e9)
        while time.perf_counter_ns() < deadline or len(samples) < 7:
            start = time.perf_counter_ns()
            for _ in range(batch):
                fn()
            samples.append((time.perf_counter_ns() - start) / batch)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples) / 1000


@dataclass
class Row:
    kernel: str
    workload: str
    c_us: float
    py_us: float
    goal: float | None = None  # a speed-up
    goal_us: float | None = None  # a ceiling on the kernel's own time

    def cells(self) -> list[str]:
        ratio = self.py_us / self.c_us
        goals = []
        if self.goal is not None:
            goals.append(f"≥ {self.goal:g}× ({'met' if ratio >= self.goal else 'NOT met'})")
        if self.goal_us is not None:
            goals.append(f"< {self.goal_us:g} µs ({'met' if self.c_us < self.goal_us else 'NOT met'})")
        return [self.kernel, self.workload, f"{self.c_us:,.2f}", f"{self.py_us:,.1f}", f"{ratio:,.1f}×",
                ", ".join(goals)]


def compare(kernel: str, workload: str, c_fn, py_fn, same: Callable[[object, object], bool], goal=None,
            goal_us=None) -> Row:
    if not same(c_fn(), py_fn()):
        raise AssertionError(f"{kernel}: kernel and reference disagree on {workload}")
    return Row(kernel, workload, median_us(c_fn), median_us(py_fn), goal, goal_us)


# ------------------------------------------------------------------ workloads

WORDS = (
    "the router sends each request to a model that fits its budget and latency while the guard "
    "reads long inputs in windows and the decision model answers questions about domains safety "
    "jailbreak pii complexity tools context memory cache stream tokens provider upstream deadline"
).split()


def prose(rng: random.Random, n_bytes: int, extras: list[str] = ()) -> str:
    """English-like text of about n_bytes UTF-8 bytes, with `extras` sprinkled in."""
    out: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(extras) if extras and rng.random() < 0.08 else rng.choice(WORDS)
        if rng.random() < 0.1:
            word = word.capitalize() + rng.choice([",", ".", ":", ""])
        out.append(word)
        size += len(word.encode()) + 1
    return " ".join(out)


def bm25_row(rng: random.Random) -> Row:
    vocab = [f"term{i}" for i in range(2000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    corpus = [rng.choices(vocab, weights, k=rng.randint(5, 40)) for _ in range(1000)]
    # 2 very common terms (in most documents), 3 common ones, 3 Zipf draws (mostly rare).
    query = rng.choices(vocab[:10], k=2) + rng.choices(vocab[:100], k=3) + rng.choices(vocab, weights, k=3)
    index = bm25.BM25Index(corpus)
    okapi = ref.BM25Reference(corpus).okapi
    return compare(
        "bm25", "1 query (8 tokens) × 1,000 docs vs rank-bm25",
        lambda: index.scores(query), lambda: okapi.get_scores(query),
        lambda a, b: np.allclose(a, b, rtol=0, atol=1e-9), goal=50,
    )


def bm25_text_rows(rng: random.Random) -> list[Row]:
    """The keyword signal's bm25 method: the rule's keywords are the documents, a
    2 KB user turn the query, tokenized in C (scores_text) or by tokenize()."""
    docs = [bm25.tokenize(k) for k in KEYWORDS_20]
    text = prose(rng, 2048, ["urgent", "ASAP", "Refund", "password:", "ignore previous", "北京", "😀", "Invoice"])
    index = bm25.BM25Index(docs)
    reference = ref.BM25Reference(docs)
    workload = f"2 KB user turn × {len(docs)} keyword docs"
    return [
        compare("bm25 scores_text", f"{workload}, vs tokenize() + scores()",
                lambda: index.scores_text(text), lambda: index.scores(bm25.tokenize(text)),
                lambda a, b: np.array_equal(a, b)),
        compare("bm25 scores_text", f"{workload}, vs rank-bm25 (regex tokenizer)",
                lambda: index.scores_text(text), lambda: reference.scores_text(text),
                lambda a, b: np.allclose(a, b, rtol=0, atol=1e-9)),
    ]


KEYWORDS_20 = [
    "urgent", "asap", "deadline", "refund", "invoice", "password", "jailbreak", "ignore previous",
    "system prompt", "credit card", "ssn", "lawsuit", "diagnosis", "prescription", "bomb",
    "exploit", "malware", "encrypt", "北京", "😀",
]


def keyword_rows(rng: random.Random) -> list[Row]:
    matcher = keywords.KeywordMatcher(KEYWORDS_20)
    extras = ["urgent", "ASAP", "Refund", "password:", "ignore previous", "北京", "😀", "Invoice"]
    ascii_text = prose(rng, 32 * 1024, [e for e in extras if e.isascii()])
    mixed_text = prose(rng, 32 * 1024, extras + ["路由", "模型", "naïve", "Ünïcode"])
    rows = []
    for label, text in [("ASCII prose", ascii_text), ("prose with CJK, emoji, accents", mixed_text)]:
        rows.append(compare(
            "keyword density", f"20 keywords, 32 KB {label}, case-insensitive",
            lambda t=text: matcher.density(t),
            lambda t=text: ref.density(ref.count_keywords(t, KEYWORDS_20)[1], len(t)),
            lambda a, b: a == b, goal=4,
        ))
    return rows


def window_rows(rng: random.Random) -> list[Row]:
    text = prose(rng, 2**20, ["路由", "模型", "😀", "naïve"]).encode()[: 2**20]
    text = text[: len(text.decode(errors="ignore").encode())]
    return [
        compare(
            "byte windows", "1 MB, 32 KB windows, 2 KB overlap",
            lambda: windows.byte_windows(text, 32768, 2048), lambda: ref.byte_windows(text, 32768, 2048),
            lambda a, b: a.tolist() == [list(w) for w in b],
        ),
        compare(
            "byte windows", "1 MB, 256 B windows, 32 B overlap",
            lambda: windows.byte_windows(text, 256, 32), lambda: ref.byte_windows(text, 256, 32),
            lambda a, b: a.tolist() == [list(w) for w in b],
        ),
        compare(
            "routing view", "1 MB into a 32 KB view (copies 32 KB)",
            lambda: windows.routing_view(text, 32768, 0.25), lambda: ref.routing_view(text, 32768, 0.25),
            lambda a, b: a == b,
        ),
    ]


def fuzzy_ngram_rows(rng: random.Random) -> list[Row]:
    targets = ["machine learning", "refund request", "password reset", "credit card", "jailbreak",
               "latency budget", "北京大学", "naïve bayes", "system prompt", "deep learning"]
    typos = ["machine lerning", "refnud request", "pasword reset", "credit crad", "jailbrake",
             "latncy budget", "北京大字", "naive bayes"]
    text = prose(rng, 2048, typos)
    ngram = keywords.NgramMatcher(targets, 0.5)
    fuzzy = keywords.FuzzyMatcher(targets, 2)
    return [
        compare("ngram (trigram Jaccard)", "10 keywords of 1-4 words, 2 KB text",
                lambda: ngram.match(text), lambda: ref.ngram_match(text, targets, 0.5),
                lambda a, b: a == b, goal_us=40),
        compare("fuzzy (Levenshtein ≤ 2)", "10 keywords of 1-4 words, 2 KB text",
                lambda: fuzzy.match(text), lambda: ref.fuzzy_match(text, targets, 2),
                lambda a, b: a == b),
    ]


def jsonscan_rows(rng: random.Random) -> list[Row]:
    """The nesting bound every client body passes before decoding (protocol/errors.py)."""
    turns = [{"role": rng.choice(["user", "assistant"]), "content": [{"type": "text", "text": prose(rng, 180)}]}
             for _ in range(10)]
    small = json.dumps({"model": "vsr/auto", "messages": turns}).encode()[:2048]
    image = "data:image/png;base64," + "A" * (2**20)
    big_image = json.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": image}}]}]}).encode()
    many = json.dumps({"model": "m", "messages": turns * 500}).encode()
    return [compare("json nesting depth", workload, lambda b=body: jsonscan.nesting_depth(b, 256),
                    lambda b=body: ref.nesting_depth(b, 256), lambda a, b: a == b)
            for workload, body in (("2 KB chat body", small), ("1 MB body: one base64 image", big_image),
                                   (f"{len(many) >> 20} MB body: 5,000 turns of text parts", many))]


def main() -> None:
    started = time.perf_counter()
    rng = random.Random(2024)
    ref.fold_case("Ü")  # build the reference's fold tables outside the timing
    # The text rows draw from their own generator, so the other rows' inputs stay as they were.
    rows = [bm25_row(rng), *bm25_text_rows(random.Random(2048)), *keyword_rows(rng), *window_rows(rng),
            *fuzzy_ngram_rows(rng), *jsonscan_rows(random.Random(7))]
    header = ["kernel", "workload", "C µs (median)", "Python µs (median)", "speed-up", "goal"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row.cells()) + " |")
    # What case folding in Python alone would cost, per 32 KB text: why the kernels fold in C.
    mixed = prose(random.Random(1), 32 * 1024, ["北京", "😀", "naïve"])
    print()
    print(f"For scale, on 32 KB of prose with CJK and emoji: str.lower() {median_us(mixed.lower):,.1f} µs, "
          f"str.encode() {median_us(mixed.encode):,.1f} µs.")
    print(f"Measured in {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
