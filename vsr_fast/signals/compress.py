"""``compress.signals`` (spec 5.7): the current user turn the routing signals read, cut to the sentences its
profile scores highest within ``max_tokens``, in their order.

Extractive and cheap, since it runs on every long request where it is set: a sentence scores how central it is
to the turn (the mean log count of its words in the whole turn: the sentences that share the turn's words carry
it), plus its profile's keywords, plus a bonus at the turn's start and end where instructions sit
(``multi_turn``: the latest sentences). A turn within
``max_tokens`` is read as written. The provider request is never changed: only the signals' view of it.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

import msgspec

from .._ext.bm25 import tokenize
from .base import CanonicalRequest

CHARS_PER_TOKEN = 4
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Each profile's words: a sentence scores one point for each it holds (after BM25, which is scaled to 0..1).
PROFILES: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "coding": frozenset("code function error bug exception stack trace compile test class method api "
                        "python java javascript typescript rust sql query fix refactor".split()),
    "medical": frozenset("symptom symptoms diagnosis dose dosage patient pain treatment medication drug "
                         "allergy chronic acute fever blood pressure".split()),
    "security": frozenset("password credential exploit vulnerability attack malware injection token secret "
                          "ignore instructions bypass jailbreak admin privilege".split()),
    "multi_turn": frozenset(),
}


class SignalsView:
    """A recipe's ``compress.signals`` (plugins.context.SignalsCompression): the canonical request its signals
    read, and the signal types that read the original."""

    __slots__ = ("edges", "keywords", "max_chars", "recent", "skip")

    def __init__(self, profile: str, max_tokens: int, skip_signals: Iterable[str]) -> None:
        self.max_chars = max_tokens * CHARS_PER_TOKEN
        self.keywords = PROFILES[profile]
        self.recent = profile == "multi_turn"
        self.skip = frozenset(skip_signals)

    def view(self, request: CanonicalRequest) -> CanonicalRequest:
        """``request`` with its current turn compressed; ``request`` itself when the turn is within budget."""
        text = request.text
        if len(text) <= self.max_chars or not request.current:
            return request
        short = self.compress(text)
        messages = list(request.messages)
        first, *rest = request.current
        messages[first] = msgspec.structs.replace(messages[first], content=short)
        for i in rest:
            messages[i] = msgspec.structs.replace(messages[i], content="")
        return CanonicalRequest(messages, tools=request.tool_count, metadata=request.metadata,
                                identity=request.identity)

    def compress(self, text: str) -> str:
        sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
        tokens = [tokenize(s) for s in sentences]
        counts = Counter(w for words in tokens for w in words)
        # Centrality: a sentence's words' mean log count in the turn (BM25 against the whole turn weighs the
        # same thing, at 40 times the cost on a long turn).
        central = [sum(math.log1p(counts[w]) for w in words) / len(words) if words else 0.0 for words in tokens]
        top = max(central, default=0.0)
        n = len(sentences)
        scores = []
        for i, words in enumerate(tokens):
            score = central[i] / top if top > 0 else 0.0
            score += sum(1 for w in words if w in self.keywords)
            if self.recent:
                score += i / max(n - 1, 1)
            elif i == 0 or i == n - 1:
                score += 1.0
            scores.append(score)
        keep, used = set(), 0
        for i in sorted(range(n), key=lambda i: (-scores[i], i)):
            cost = len(sentences[i]) + 1
            if used + cost > self.max_chars:
                continue
            keep.add(i)
            used += cost
        return " ".join(sentences[i] for i in sorted(keep))


__all__ = ["PROFILES", "SignalsView"]
