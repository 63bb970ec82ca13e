"""Okapi BM25 over short tokenised documents (C kernel: _ext/bm25.pyx).

Scores equal rank_bm25.BM25Okapi's on the same tokens, including its epsilon
floor: a negative idf (a token in more than half the documents) becomes
epsilon * the average idf.
"""

from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

CJK_RANGES: Final[tuple[tuple[int, int], ...]]  # inclusive code-point ranges

def tokenize(text: str) -> list[str]:
    """text.lower(), split on every non-alphanumeric character (str.isalnum);
    each alphanumeric CJK character is a token of its own."""

class BM25Index:
    """Built once from the corpus; scoring releases the GIL."""

    n_docs: Final[int]
    k1: Final[float]
    b: Final[float]
    epsilon: Final[float]
    avgdl: Final[float]  # mean document length in tokens; 0.0 for an empty corpus
    average_idf: Final[float]  # before the epsilon floor, as rank_bm25 computes it
    @property
    def n_terms(self) -> int: ...
    def __init__(
        self, corpus: Iterable[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> None:
        """Raises ValueError unless k1 >= 0, 0 <= b <= 1 and epsilon is finite.

        Unlike rank_bm25, an empty corpus or one without tokens is accepted (all
        scores 0), and where rank_bm25 divides 0 by 0 (k1 = 0, or b = 1 and an
        empty document) and scores NaN, this index scores 0.
        """
    def scores(self, query_tokens: Sequence[str]) -> npt.NDArray[np.float64]:
        """One score per document; repeated tokens count each time, unknown ones add 0."""
    def scores_text(self, text: str) -> npt.NDArray[np.float64]:
        """scores(tokenize(text)), bit for bit, tokenizing in C: no str is built for a
        token, and one the index does not know costs a hash lookup."""
    def top_k(self, query_tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        """Up to k (doc_index, score) pairs, best first, ties by lower index. k < 0: ValueError."""
