"""The semantic cache's index (partitions, TTL, LRU bound, the two-stage search) and its lexical check."""
from __future__ import annotations

import numpy as np

from vsr_fast.events import semantic_index as si


def unit(rng, n: int, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_search_stays_in_its_partition_and_ranks_by_cosine():
    rng = np.random.default_rng(0)
    v = unit(rng, 3)
    index = si.SemanticIndex(16, 10)
    index.add("alice", "a", "first", v[0], 60)
    index.add("bob", "b", "second", v[0], 60)
    index.add("alice", "c", "third", (v[0] + 0.3 * v[1]) / np.linalg.norm(v[0] + 0.3 * v[1]), 60)
    hits = index.search("alice", v[0], 3, None)
    assert [h[1] for h in hits] == ["a", "c"] and hits[0][0] > hits[1][0]
    assert [h[1] for h in index.search("alice", v[0], 3, 0.999)] == ["a"]
    assert index.search("carol", v[0], 3, None) == []


def test_expired_rows_are_never_returned_and_the_bound_drops_the_least_recently_stored():
    rng = np.random.default_rng(1)
    v = unit(rng, 4)
    index = si.SemanticIndex(16, 2, initial=1)
    index.add("p", "old", "x", v[0], -1)              # already past its TTL
    assert index.search("p", v[0], 1, None) == []
    index.add("p", "k1", "x", v[1], 60)
    index.add("p", "k2", "x", v[2], 60)               # full: "old" leaves
    index.add("p", "k3", "x", v[3], 60)               # full: k1 leaves
    assert len(index) == 2
    assert {h[1] for h in index.search("p", v[1], 5, None)} == {"k2", "k3"}
    index.add("p", "k2", "x", v[1], 60)               # the same key again: its row is replaced
    assert len(index) == 2 and index.search("p", v[1], 1, None)[0][1] == "k2"


def test_the_two_stage_search_finds_what_the_exact_scan_finds():
    rng = np.random.default_rng(2)
    v = unit(rng, si.COARSE_FROM + 500, 64)
    fast = si.SemanticIndex(64, len(v), axes=si.projection(64))
    exact = si.SemanticIndex(64, len(v))
    for i, row in enumerate(v):
        fast.add("p", str(i), "t", row, 60)
        exact.add("p", str(i), "t", row, 60)
    for i in range(0, len(v), 97):
        q = v[i] + 0.2 * unit(rng, 1, 64)[0]
        q /= np.linalg.norm(q)
        assert [h[1] for h in fast.search("p", q, 3, 0.5)] == [h[1] for h in exact.search("p", q, 3, 0.5)]


def test_the_lexical_check_drops_polarity_flips_and_swapped_subjects_and_keeps_paraphrases():
    assert si.differs("How do I enable 2FA?", "How do I disable 2FA?")
    assert si.differs("Is coffee good for you?", "Is coffee not good for you?")
    assert si.differs("Convert 10 miles to km", "Convert 25 miles to km")
    assert si.differs("What is the capital of France?", "What is the capital of Germany?")
    assert not si.differs("How do I reverse a list in Python?", "How can I reverse a list in python")
    assert not si.differs("How do I sort a dictionary by value?", "How can I sort a dictionary by its values?")
