"""Keyword kernels over UTF-8 text (C kernel: _ext/keywords.pyx).

Shared rules:
- case_sensitive=False compares under fold_case (one code point to one).
- A CJK character is a code point in CJK_RANGES. A keyword with one has no word
  boundary check, and a CJK character never blocks another keyword's boundary.
- Words (NgramMatcher, FuzzyMatcher) are runs of alphanumerics (str.isalnum),
  each alphanumeric CJK character a word of its own. A keyword of m words is
  compared with each run of m consecutive text words, taken as the text from the
  first word's start to the last word's end (punctuation between them included;
  non-word characters at a keyword's ends are ignored). A keyword without words
  never matches.
- text may be str or UTF-8 bytes (invalid bytes read as one character each).
"""

from collections.abc import Iterable
from typing import Final

import numpy as np
import numpy.typing as npt

CJK_RANGES: Final[tuple[tuple[int, int], ...]]  # inclusive code-point ranges

def fold_case(text: str) -> str:
    """Per code point: casefold() if one code point, else lower() if one, else itself
    (so "ß" and "İ" stay; "ς" and "Σ" fold to "σ")."""

def density(total_matches: int, text_len_chars: int) -> float:
    """Matches per 1,000 characters (code points) of text, the spec's unit; 0.0 for empty text."""

class KeywordMatcher:
    """Many literal keywords counted in one pass (Aho-Corasick DFA over folded UTF-8).

    A keyword counts its non-overlapping occurrences, leftmost first (like str.count,
    independently of the other keywords), that are neither preceded nor followed by
    a word character (regex \\w: alphanumeric or '_'; CJK excepted).
    """

    keywords: Final[tuple[str, ...]]
    case_sensitive: Final[bool]
    def __init__(self, keywords: Iterable[str], *, case_sensitive: bool = False) -> None:
        """Raises ValueError for an empty keyword, TypeError for a non-str one."""
    def counts(self, text: str | bytes) -> tuple[npt.NDArray[np.int64], int]:
        """(per-keyword counts in keyword order, total)."""
    def density(self, text: str | bytes) -> float:
        """Total matches per 1,000 characters of text."""

def count_keywords(
    text: str | bytes, keywords: Iterable[str], *, case_sensitive: bool = False
) -> tuple[npt.NDArray[np.int64], int]:
    """KeywordMatcher(keywords).counts(text), building the matcher for one call."""

class NgramMatcher:
    """Jaccard similarity of character-trigram sets, |A & B| / |A | B|; a span shorter
    than 3 characters is its own single gram."""

    keywords: Final[tuple[str, ...]]
    threshold: Final[float]
    case_sensitive: Final[bool]
    def __init__(self, keywords: Iterable[str], threshold: float, *, case_sensitive: bool = False) -> None:
        """Raises ValueError unless 0 < threshold <= 1."""
    def best(self, text: str | bytes) -> npt.NDArray[np.float64]:
        """Each keyword's best similarity over the text's spans (0.0 when none)."""
    def match(self, text: str | bytes) -> list[tuple[int, float]]:
        """[(keyword_index, best similarity)] for the keywords at or above threshold."""

def ngram_match(
    text: str | bytes, keywords: Iterable[str], threshold: float, *, case_sensitive: bool = False
) -> list[tuple[int, float]]:
    """NgramMatcher(keywords, threshold).match(text), building the matcher for one call."""

class FuzzyMatcher:
    """Levenshtein distance in code points (insert, delete, substitute: 1 each)."""

    keywords: Final[tuple[str, ...]]
    max_distance: Final[int]
    case_sensitive: Final[bool]
    def __init__(self, keywords: Iterable[str], max_distance: int, *, case_sensitive: bool = False) -> None:
        """Raises ValueError if max_distance < 0."""
    def distances(self, text: str | bytes) -> npt.NDArray[np.int64]:
        """Each keyword's least distance to a span if <= max_distance, else -1."""
    def match(self, text: str | bytes) -> list[tuple[int, int]]:
        """[(keyword_index, distance)] for the keywords within max_distance of some span."""

def fuzzy_match(
    text: str | bytes, keywords: Iterable[str], max_distance: int, *, case_sensitive: bool = False
) -> list[tuple[int, int]]:
    """FuzzyMatcher(keywords, max_distance).match(text), building the matcher for one call."""
