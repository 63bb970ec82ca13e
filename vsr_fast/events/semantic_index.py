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
from difflib import SequenceMatcher

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


# Words that carry no subject of their own: swapping one of these keeps the request (how do I / how can I).
STOPWORDS = frozenset("""a an the is are was were be been being am do does did done can could would should will
shall may might must i me my you your we our he she it its they them their this that these those what what's
whats which who whom whose how why when where there here of in on at by for to from with about into onto over
as and or but if so than then too very just also some any all each every please tell give show explain
describe way ways s t d ll re ve m get make let know want need like one""".split())


def _content(ws: list[str]) -> set[str]:
    return {w for w in ws if w not in STOPWORDS}


def _related(a: str, b: str) -> bool:
    """The same word in another form (value / values, sort / sorting): a shared stem of five letters or the
    whole shorter word."""
    n = min(len(a), len(b), 5)
    return n >= 3 and a[:n] == b[:n]


def swapped(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with a subject swapped: where the two word sequences differ by a replacement,
    both sides hold content words, none shared or related (capital of France / of Germany, 10 miles / 25
    miles, a haiku about autumn / about winter). A paraphrase mostly reorders, inserts and swaps function
    words, which this lets through."""
    wa, wb = words(a), words(b)
    for op, i1, i2, j1, j2 in SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if op != "replace":
            continue
        ca, cb = _content(wa[i1:i2]), _content(wb[j1:j2])
        if ca and cb and not any(x == y or _related(x, y) for x in ca for y in cb):
            if not (ca & set(wb) or cb & set(wa)):         # a word that only moved is no swap
                return True
    return False


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


def differs(a: str, b: str) -> bool:
    """The lexical check before the judge: a polarity flip or a swapped subject."""
    return opposite(a, b) or swapped(a, b)


COARSE_DIM = 32             # 100,000 rows of 32 floats stay in cache: ~0.5 ms a scan, against ~6+ ms for 256
COARSE_FROM = 4096          # below this many rows the exact scan is as cheap
RERANK = 1024               # rows the coarse scan hands to the exact one (at least 64 per top_k)


def projection(dim: int, k: int = COARSE_DIM, seed: int = 20_260_401) -> np.ndarray:
    """(dim, k): a fixed Gaussian random projection. It keeps cosines near 1 close to 1 (Johnson-Lindenstrauss),
    which is all the coarse scan needs; the principal axes of the embedding, tried first, lost 12 of 77
    true neighbours at 20,000 entries against none for this (bench/semantic_cache.py checks it at 100,000)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((dim, k)) / np.sqrt(k)).astype(np.float32)


class SemanticIndex:
    """Rows of (partition, key, text, vector, expiry); ``search`` returns a partition's nearest live rows.

    With ``axes`` (``projection``) and at least ``COARSE_FROM`` rows a search is two scans: the
    coarse one over the rows' projections picks ``RERANK`` candidates, the exact cosine ranks them.
    bench/semantic_cache.py checks the hits are those of the exact scan at 100,000 entries.
    """

    def __init__(self, dim: int, max_entries: int, initial: int = 1024, axes: np.ndarray | None = None) -> None:
        self.dim = dim
        self.max_entries = max_entries
        self.axes = axes
        size = min(initial, max_entries)
        self.coarse = np.zeros((size, axes.shape[1] if axes is not None else 0), np.float32)
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
            self.coarse = np.concatenate([self.coarse, np.zeros((new - old, self.coarse.shape[1]), np.float32)])
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
        if self.axes is not None:
            self.coarse[row] = vector @ self.axes
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
        live = (self.parts == pid) & (self.expiry > time.monotonic())
        if self.axes is not None and len(self._order) >= COARSE_FROM:
            rough = self.coarse @ (vector @ self.axes)
            rows = np.flatnonzero(live)
            want = max(RERANK, 64 * top_k)
            if len(rows) > want:
                rows = rows[np.argpartition(-rough[rows], want - 1)[:want]]
            scores = np.zeros(len(self.parts), np.float32)
            scores[rows] = self.vectors[rows] @ vector
            live = np.zeros(len(self.parts), bool)
            live[rows] = True
        else:
            scores = self.vectors @ vector
        if min_similarity is not None:
            live &= scores >= min_similarity
        rows = np.flatnonzero(live)
        if not len(rows):
            return []
        if len(rows) > top_k:
            rows = rows[np.argpartition(-scores[rows], top_k - 1)[:top_k]]
        rows = rows[np.argsort(-scores[rows], kind="stable")]
        return [(float(scores[r]), self.keys[r], self.texts[r]) for r in rows]  # type: ignore[misc]


__all__ = ["COARSE_DIM", "projection", "ANTONYMS", "NEGATIONS", "STOPWORDS", "SemanticIndex", "differs", "opposite", "swapped", "words"]
