"""``language`` signals: the language of the current user turn (spec 5.2, heuristic signals).

One detection per request, shared by every rule: py3langid's naive Bayes model
with normalised probabilities, scored by the C kernel vsr_fast._ext.langid
(py3langid's answers, ~20 times faster). Below a rule's ``min_confidence`` (and for text
with no letters at all) the rule answers unknown rather than guessing.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass

from py3langid import langid

from .._ext.langid import LangId
from . import langid_model
from ..config.signals import LanguageRule
from .base import CanonicalRequest, CompileErrors, Outcome, RuleFamily, compile_each

# Only the head of the turn is classified. The cost is linear in the bytes the
# model walks (~5 us a KB, ~3 ms for a 1 MB paste), while a few KB already
# decide the language; the model's softmax temperature (sqrt of the byte length)
# is also calibrated on short texts, so a 1 MB text scores a flatter, less
# useful distribution than its first 4 KB. Rejected: sampling head and tail,
# which doubles the cost for texts that rarely change language midway.
HEAD_BYTES = 4096

# The detector's label for "no linguistic content": a verdict that there is no
# language, so it answers unknown, and no rule can ask for it.
NO_LANGUAGE = "zxx"

# A letter in any script: a word character that is neither a digit nor "_".
_LETTER = re.compile(r"[^\W\d_]")


@functools.cache
def _identifier() -> langid.LanguageIdentifier:
    """py3langid's own identifier over the model, read once per process (~0.07 s from the unpacked copy
    ``make build`` writes, ~0.5 s from py3langid's xz file: ``langid_model``): what the kernel answers as. The
    router's detector maps the tables instead (``_detector``).

    Shared and read-only: nothing here calls ``set_languages``, the one method
    that mutates it.
    """
    return langid_model.identifier()


@functools.cache
def _detector() -> LangId:
    """The C kernel over the same model: py3langid's answers at ~1/20 of the cost.

    py3langid walks the bytes in a Python loop (~0.23 ms for 2 KB); the kernel
    walks the model's tables in C, mapped from the unpacked copy (``langid_model.mapped_identifier``: ~0.02 s
    where reading them for ``_identifier`` costs ~0.07 s). Built on the first compile with language rules.
    """
    return LangId(langid_model.mapped_identifier())


def known_codes() -> frozenset[str]:
    """The language codes a rule may name: what the detector can answer."""
    return frozenset(_detector().classes) - {NO_LANGUAGE}


def primary_subtag(code: str) -> str:
    """``zh-CN`` -> ``zh``, ``EN`` -> ``en``: the part the detector answers."""
    return code.replace("_", "-").split("-", 1)[0].strip().lower()


def head(text: str, limit: int = HEAD_BYTES) -> str:
    """At most ``limit`` UTF-8 bytes of ``text``, cut on a character boundary."""
    if len(text) * 4 <= limit:          # cannot exceed the limit: skip the encode
        return text
    cut = text[:limit].encode("utf-8", "surrogatepass")[:limit]
    # "ignore" drops only the character the byte cut split (and lone surrogates).
    return cut.decode("utf-8", "ignore")


@dataclass(frozen=True, slots=True)
class Detection:
    """The detector's one answer for a request; ``code`` None: nothing to classify."""

    code: str | None
    p: float
    why: str = ""


def detect(text: str) -> Detection:
    """Classify the head of ``text``."""
    sample = head(text)
    if not _LETTER.search(sample):
        return Detection(None, 0.0, "no letters")
    # Lower-cased: the model learnt cased text, and "rANdOm CaSe" English
    # otherwise scores as no language at all. Lower-cased natural text scores
    # about the same as the original (and the model itself lowers ALL-CAPS
    # text). str.lower, not casefold: casefold turns German "ß" into "ss".
    code, p = _detector().classify(sample.lower())
    if code == NO_LANGUAGE:
        return Detection(None, p, f"no language ({NO_LANGUAGE} p={p:.2f})")
    return Detection(code, p)


@dataclass(frozen=True, slots=True)
class _Compiled:
    languages: frozenset[str]
    min_confidence: float


class LanguageFamily(RuleFamily):
    """The compiled ``language`` rules of one recipe."""

    condition_type = "language"

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        if not names:
            return {}
        found = detect(request.text)
        return {name: _answer(self._rules[name], found) for name in names}


def _answer(rule: _Compiled | None, found: Detection) -> Outcome:
    if rule is None:
        return Outcome(None, confidence=0.0, detail="rule failed to load")
    if found.code is None:
        return Outcome(None, confidence=found.p, detail=found.why)
    said = f"{found.code} p={found.p:.2f}"
    if found.p < rule.min_confidence:
        return Outcome(None, confidence=found.p, detail=f"{said} < {rule.min_confidence:.2f}")
    return Outcome(found.code in rule.languages, confidence=found.p, detail=said)


def compile(rules: list[LanguageRule], path: str, errors: CompileErrors) -> LanguageFamily:
    """Check and compile ``rules``; problems go to ``errors``, never raised."""
    known = known_codes() if rules else frozenset()
    if rules:
        _detector()  # built now (~0.1 s), so that no request pays for it
    return LanguageFamily(compile_each(rules, path, errors, lambda r, p, e: _compile_rule(r, p, known, e)))


def _compile_rule(rule: LanguageRule, rule_path: str, known: frozenset[str],
                  errors: CompileErrors) -> _Compiled | None:
    if rule.languages is None:
        field_path, given, source = rule_path, [rule.name], "the rule's name, as languages is not set"
    else:
        field_path, given, source = f"{rule_path}.languages", rule.languages, "languages"
    if not given:
        errors.add(field_path, "invalid_value", "an empty list matches no language")
        return None
    codes, ok = set(), True
    for code in given:
        primary = primary_subtag(code)
        if primary == NO_LANGUAGE:
            errors.add(field_path, "invalid_value",
                       f"language rule {rule.name!r}: {code!r} (from {source}) is the detector's label for "
                       f"text with no language, which answers unknown rather than matching")
            ok = False
        elif primary not in known:
            errors.add(field_path, "invalid_value",
                       f"language rule {rule.name!r}: {code!r} (from {source}) is not a language code "
                       f"the detector answers; it answers ISO 639 codes such as en, zh, ja, de")
            ok = False
        codes.add(primary)
    return _Compiled(frozenset(codes), rule.min_confidence) if ok else None


__all__ = ["HEAD_BYTES", "Detection", "LanguageFamily", "compile", "detect", "head", "known_codes",
           "primary_subtag"]
