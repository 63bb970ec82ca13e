"""The semantic response cache's index: cached requests as unit vectors, searched by brute-force cosine.

One numpy matrix for every partition (``response_cache.semantic_partition``:
the principal, decision, guard, revision and request parameters), each row
tagged with its partition's number, so a search is one matrix-vector product
over the live rows and a mask: ~1 ms for 100,000 entries of 256 floats
(bench/semantic_cache.py). Bounded by ``max_entries``: the least recently
stored row is reused first; a row past its TTL is never returned and is reused
when the matrix is full. Used only from the trio thread.

The polarity check (spec 5.4) runs on what recall returns, before the judge:
a cached request that reads almost the same as the new one but differs by a
negation cue or an antonym is dropped, since a static embedding cannot see
that "enable" and "disable" ask for opposite things.
"""
from __future__ import annotations

import re
import time
from collections import OrderedDict

import numpy as np

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "without", "cannot", "nor", "neither", "nobody",
                       "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't", "wouldn't",
                       "can't", "couldn't", "shouldn't", "haven't", "hasn't", "hadn't", "mustn't", "avoid",
                       "except", "excluding"})
_ANTONYM_PAIRS = [
    ("increase", "decrease"), ("add", "remove"), ("enable", "disable"), ("start", "stop"), ("open", "close"),
    ("before", "after"), ("min", "max"), ("minimum", "maximum"), ("true", "false"), ("yes", "no"),
    ("buy", "sell"), ("up", "down"), ("more", "less"), ("most", "least"), ("best", "worst"), ("high", "low"),
    ("higher", "lower"), ("highest", "lowest"), ("large", "small"), ("larger", "smaller"),
    ("largest", "smallest"), ("big", "small"), ("bigger", "smaller"), ("fast", "slow"), ("faster", "slower"),
    ("hot", "cold"), ("old", "new"), ("older", "newer"), ("oldest", "newest"), ("first", "last"),
    ("win", "lose"), ("allow", "deny"), ("accept", "reject"), ("encrypt", "decrypt"), ("compress", "decompress"),
    ("encode", "decode"), ("import", "export"), ("upload", "download"), ("push", "pull"), ("include", "exclude"),
    ("ascending", "descending"), ("positive", "negative"), ("left", "right"), ("north", "south"),
    ("east", "west"), ("above", "below"), ("inside", "outside"), ("lock", "unlock"), ("install", "uninstall"),
    ("love", "hate"), ("pros", "cons"), ("advantages", "disadvantages"), ("benefits", "risks"),
    ("safe", "dangerous"), ("legal", "illegal"), ("possible", "impossible"), ("easy", "hard"),
    ("cheap", "expensive"), ("cheapest", "priciest"), ("early", "late"), ("earlier", "later"),
    ("success", "failure"), ("succeed", "fail"), ("valid", "invalid"), ("agree", "disagree"),
    ("similar", "different"), ("same", "different"), ("always", "never"), ("everything", "nothing"),
    ("synchronous", "asynchronous"), ("sync", "async"), ("client", "server"), ("input", "output"),
    ("read", "write"), ("get", "set"), ("send", "receive"), ("import", "export"), ("male", "female"),
    ("strong", "weak"), ("rich", "poor"), ("light", "dark"), ("forward", "backward"), ("internal", "external"),
]
ANTONYMS: dict[str, frozenset[str]] = {}
for _a, _b in _ANTONYM_PAIRS:
    ANTONYMS[_a] = ANTONYMS.get(_a, frozenset()) | {_b}
    ANTONYMS[_b] = ANTONYMS.get(_b, frozenset()) | {_a}


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def opposite(a: str, b: str) -> bool:
    """Whether ``b`` reads like ``a`` with its polarity turned: a negation cue one has and the other has not,
    or a word of one whose antonym only the other has. Word order and the rest of the wording are free."""
    wa, wb = words(a), words(b)
    sa, sb = set(wa), set(wb)
    if sum(w in NEGATIONS for w in wa) % 2 != sum(w in NEGATIONS for w in wb) % 2:
        return True
    only_a, only_b = sa - sb, sb - sa
    return any(ANTONYMS.get(w, frozenset()) & only_b for w in only_a)


class SemanticIndex:
    """Rows of (partition, key, text, vector, expiry); ``search`` returns a partition's nearest live rows."""

    def __init__(self, dim: int, max_entries: int, initial: int = 1024) -> None:
        self.dim = dim
        self.max_entries = max_entries
        size = min(initial, max_entries)
        self.vectors = np.zeros((size, dim), np.float32)
        self.parts = np.full(size, -1, np.int64)        # the partition's number; -1: a free row
        self.expiry = np.zeros(size, np.float64)
        self.keys: list[str | None] = [None] * size
        self.texts: list[str | None] = [None] * size
        self._partition_ids: dict[str, int] = {}
        self._row_of: dict[tuple[int, str], int] = {}
        self._order: OrderedDict[int, None] = OrderedDict()     # rows, least recently stored first
        self._free: list[int] = list(range(size - 1, -1, -1))

    def __len__(self) -> int:
        return len(self._order)

    def _partition(self, partition: str) -> int:
        pid = self._partition_ids.get(partition)
        if pid is None:
            pid = self._partition_ids[partition] = len(self._partition_ids)
        return pid

    def _row(self) -> int:
        if not self._free and len(self.parts) < self.max_entries:
            old = len(self.parts)
            new = min(old * 2, self.max_entries)
            self.vectors = np.concatenate([self.vectors, np.zeros((new - old, self.dim), np.float32)])
            self.parts = np.concatenate([self.parts, np.full(new - old, -1, np.int64)])
            self.expiry = np.concatenate([self.expiry, np.zeros(new - old, np.float64)])
            self.keys += [None] * (new - old)
            self.texts += [None] * (new - old)
            self._free = list(range(new - 1, old - 1, -1))
        if self._free:
            return self._free.pop()
        row, _ = self._order.popitem(last=False)        # full: the least recently stored row goes
        self._forget(row)
        return row

    def _forget(self, row: int) -> None:
        key = self.keys[row]
        if key is not None:
            self._row_of.pop((int(self.parts[row]), key), None)
        self.parts[row] = -1
        self.keys[row] = self.texts[row] = None

    def add(self, partition: str, key: str, text: str, vector: np.ndarray, ttl_seconds: float) -> None:
        pid = self._partition(partition)
        row = self._row_of.get((pid, key))
        if row is None:
            row = self._row()
            self._row_of[(pid, key)] = row
        self.vectors[row] = vector
        self.parts[row] = pid
        self.expiry[row] = time.monotonic() + ttl_seconds
        self.keys[row], self.texts[row] = key, text
        self._order[row] = None
        self._order.move_to_end(row)

    def search(self, partition: str, vector: np.ndarray, top_k: int,
               min_similarity: float | None) -> list[tuple[float, str, str]]:
        """``(cosine, key, text)`` of the partition's nearest live rows, best first."""
        pid = self._partition_ids.get(partition)
        if pid is None or not self._order:
            return []
        scores = self.vectors @ vector
        live = (self.parts == pid) & (self.expiry > time.monotonic())
        if min_similarity is not None:
            live &= scores >= min_similarity
        rows = np.flatnonzero(live)
        if not len(rows):
            return []
        if len(rows) > top_k:
            rows = rows[np.argpartition(-scores[rows], top_k - 1)[:top_k]]
        rows = rows[np.argsort(-scores[rows], kind="stable")]
        return [(float(scores[r]), self.keys[r], self.texts[r]) for r in rows]  # type: ignore[misc]


__all__ = ["ANTONYMS", "NEGATIONS", "SemanticIndex", "opposite", "words"]
