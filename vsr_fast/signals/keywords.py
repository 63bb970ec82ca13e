"""``keywords`` (condition type ``keyword``): exact, regex, BM25, n-gram and fuzzy matches.

Every method reads the current user turn, and the earlier user turns too with
``include_history``. Literal matching, BM25, n-grams and fuzzy matching run in
the C kernels of ``vsr_fast._ext``; regexes use ``re``.

BM25 scores the request against the rule's keywords as documents, with
rank-bm25's Okapi idf: a term found in half of the keywords or more weighs
nothing (or less), so a bm25 rule needs three keywords or more to match at all.

Published values: the total match count (exact, regex), or the density in
matches per 1,000 characters when the rule sets a ``density`` predicate, the
best BM25 score, the best n-gram similarity, and the number of keywords within
fuzzy distance. Confidence is 1 for literal and regex matches, the best
similarity for n-grams, and score / (score + 1) for BM25.
"""
from __future__ import annotations

import abc
import re
from collections.abc import Collection

import numpy as np

from .._ext import bm25 as _bm25
from .._ext import keywords as _kw
from ..config.signals import KeywordRule
from .base import CanonicalRequest, CompileErrors, Outcome, RuleFamily, compile_each

CONDITION_TYPE = "keyword"


def _combine(operator: str, hits: list[bool]) -> bool:
    if operator == "AND":
        return all(hits)
    if operator == "NOR":
        return not any(hits)
    return any(hits)


class _Rule(abc.ABC):
    """One compiled rule: ``outcome(text)`` from the text it reads."""

    def __init__(self, rule: KeywordRule) -> None:
        self.rule = rule

    @abc.abstractmethod
    def outcome(self, text: str) -> Outcome:
        """The rule's answer for ``text``."""


class _Literal(_Rule):
    def __init__(self, rule: KeywordRule) -> None:
        super().__init__(rule)
        self.matcher = _kw.KeywordMatcher(rule.keywords, case_sensitive=rule.case_sensitive)

    def outcome(self, text: str) -> Outcome:
        counts, total = self.matcher.counts(text)
        return _counted(self.rule, [int(c) for c in counts], total, text)


class _Regex(_Rule):
    def __init__(self, rule: KeywordRule, patterns: list[re.Pattern[str]]) -> None:
        super().__init__(rule)
        self.patterns = patterns
        # OR without a number needs only the first hit of any pattern. A pattern's leading global flags, such as
        # (?m), are scoped to it, since they may not stand inside the alternation (a traceback at load otherwise).
        self.any = None
        if rule.operator == "OR" and rule.count is None and rule.density is None:
            try:
                self.any = re.compile("|".join(_scoped(p.pattern) for p in patterns), patterns[0].flags)
            except re.error:
                self.any = None     # counted pattern by pattern below: the same answer, a little slower

    def outcome(self, text: str) -> Outcome:
        if self.any is not None:
            m = self.any.search(text)
            if m is None:
                return Outcome(False, value=0.0, detail="no pattern matched")
            return Outcome(True, value=1.0, detail=f"matched {m.group(0)[:40]!r}", redacted="matched")
        counts = [sum(1 for _ in p.finditer(text)) for p in self.patterns]
        return _counted(self.rule, counts, sum(counts), text)


_LEADING_FLAGS = re.compile(r"\(\?([imsx]+)\)")


def _scoped(pattern: str) -> str:
    """``(?m)x`` as ``(?m:x)``, any other pattern as ``(?:x)``: a group that can stand in an alternation."""
    m = _LEADING_FLAGS.match(pattern)
    return f"(?{m.group(1)}:{pattern[m.end():]})" if m else f"(?:{pattern})"


def _counted(rule: KeywordRule, counts: list[int], total: int, text: str) -> Outcome:
    if rule.density is not None:
        value = _kw.density(total, len(text))
        return Outcome(rule.density.holds(value), value=value, detail=f"{value:.3g} matches per 1,000 chars")
    if rule.count is not None:
        return Outcome(rule.count.holds(total), value=float(total), detail=f"{total} matches")
    matched = _combine(rule.operator, [c > 0 for c in counts])
    found = [k for k, c in zip(rule.keywords, counts) if c]
    return Outcome(matched, value=float(total), detail=f"{total} matches: {', '.join(found[:5])}" if found else "no match")


class _BM25(_Rule):
    """The rule's keywords are the documents; the request's text is the query."""

    def __init__(self, rule: KeywordRule) -> None:
        super().__init__(rule)
        self.index = _bm25.BM25Index([_bm25.tokenize(k) for k in rule.keywords])

    def outcome(self, text: str) -> Outcome:
        scores = self.index.scores_text(text)  # = scores(tokenize(text)), tokenized in C
        hits = [bool(s > self.rule.bm25_threshold) for s in scores]
        best = float(scores.max()) if len(scores) else 0.0
        return Outcome(_combine(self.rule.operator, hits), value=best, confidence=best / (best + 1) if best > 0 else 0.0,
                       detail=f"best bm25 {best:.3g} ({self.rule.keywords[int(np.argmax(scores))]!r})")


class _Ngram(_Rule):
    def __init__(self, rule: KeywordRule) -> None:
        super().__init__(rule)
        self.matcher = _kw.NgramMatcher(rule.keywords, rule.ngram_threshold, case_sensitive=rule.case_sensitive)

    def outcome(self, text: str) -> Outcome:
        best = self.matcher.best(text)
        hits = [bool(b >= self.rule.ngram_threshold) for b in best]
        top = float(best.max()) if len(best) else 0.0
        return Outcome(_combine(self.rule.operator, hits), value=top, confidence=top,
                       detail=f"best trigram similarity {top:.3g}")


class _Fuzzy(_Rule):
    def __init__(self, rule: KeywordRule) -> None:
        super().__init__(rule)
        self.matcher = _kw.FuzzyMatcher(rule.keywords, rule.fuzzy_threshold, case_sensitive=rule.case_sensitive)

    def outcome(self, text: str) -> Outcome:
        distances = self.matcher.distances(text)
        hits = [bool(d >= 0) for d in distances]
        near = [f"{k}~{int(d)}" for k, d in zip(self.rule.keywords, distances) if d >= 0]
        return Outcome(_combine(self.rule.operator, hits), value=float(sum(hits)),
                       detail=", ".join(near[:5]) or "nothing within distance")


class KeywordFamily(RuleFamily):
    condition_type = CONDITION_TYPE

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        out = {}
        with_history: str | None = None
        for name in names:
            compiled = self._rules[name]
            if compiled is None:
                out[name] = Outcome(None, confidence=0.0, detail="rule failed to load")
            elif compiled.rule.include_history:
                if with_history is None:
                    with_history = "\n".join([*request.history, request.text])
                out[name] = compiled.outcome(with_history)
            else:
                out[name] = compiled.outcome(request.text)
        return out


def compile(rules: list[KeywordRule], path: str, errors: CompileErrors) -> KeywordFamily:
    """Compile every rule; invalid regexes and forms the method cannot use are load errors."""
    return KeywordFamily(compile_each(rules, path, errors, _compile_rule))


def _compile_rule(rule: KeywordRule, where: str, errors: CompileErrors) -> _Rule | None:
    return _make(rule, where, errors) if _check(rule, where, errors) else None


def _check(rule: KeywordRule, where: str, errors: CompileErrors) -> bool:
    ok = True
    if rule.count is not None and rule.density is not None:
        errors.add(where, "invalid_value", "set count or density, not both")
        ok = False
    numbered = rule.count is not None or rule.density is not None
    if numbered and (rule.operator != "OR" or rule.method not in ("exact", "regex")):
        errors.add(where, "invalid_value", "count and density need operator: OR over literal or regex keywords")
        ok = False
    for field_name in ("count", "density"):
        predicate = getattr(rule, field_name)
        if predicate is not None and predicate.is_empty():
            errors.add(f"{where}.{field_name}", "invalid_value", "a predicate needs gt, gte, lt, lte or eq")
            ok = False
    if rule.method == "ngram" and rule.ngram_arity != 3:
        errors.add(f"{where}.ngram_arity", "invalid_value", "only character trigrams (3) are served")
        ok = False
    for i, keyword in enumerate(rule.keywords):
        if not keyword.strip():
            errors.add(f"{where}.keywords[{i}]", "invalid_value", "an empty keyword matches nothing")
            ok = False
    return ok


def _make(rule: KeywordRule, where: str, errors: CompileErrors) -> _Rule | None:
    if rule.method == "regex":
        flags = 0 if rule.case_sensitive else re.IGNORECASE
        patterns = []
        for i, pattern in enumerate(rule.keywords):
            try:
                patterns.append(re.compile(pattern, flags))
            except re.error as exc:
                errors.add(f"{where}.keywords[{i}]", "invalid_value", f"invalid regex {pattern!r}: {exc}")
        return _Regex(rule, patterns) if len(patterns) == len(rule.keywords) else None
    try:
        return {"exact": _Literal, "bm25": _BM25, "ngram": _Ngram, "fuzzy": _Fuzzy}[rule.method](rule)
    except ValueError as exc:
        errors.add(where, "invalid_value", str(exc))
        return None
