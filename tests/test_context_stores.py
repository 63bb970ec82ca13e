"""The context plugin's stores (spec 5.7), in memory and in Redis: a user's memories newest first, bounded, never
another user's; the vector store's chunks recalled by embedding and BM25 and listed as ingested."""
from __future__ import annotations

import pytest

from vsr_fast.config.stores import MemoryStore as MemoryConfig
from vsr_fast.config.stores import VectorStore as VectorConfig
from vsr_fast.embeddings import vela
from vsr_fast.errors import StoreFull
from vsr_fast.events.memory_store import MemoryStore
from vsr_fast.events.vector_store import VectorStore

from .test_e2e_semantic_cache import prefix  # noqa: F401  (a fixture: a key prefix of its own, cleaned)


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_memories_are_newest_first_bounded_and_per_user(backend, prefix):
    store = MemoryStore(MemoryConfig(backend_type=backend, prefix=prefix, max_memories_per_user=3), vela())
    try:
        for i in range(5):
            store.add_sync("alice", f"alice note {i}: I keep bees on the roof")
        store.add_sync("bob", "bob note: I race sailing boats")
        assert [m.text for m in store.newest_sync("alice")] == [f"alice note {i}: I keep bees on the roof"
                                                               for i in (4, 3, 2)]
        assert [m.text for m in store.newest_sync("alice", 1)] == ["alice note 4: I keep bees on the roof"]
        hits = store.recall_sync("bob", "Do I keep bees?", 5, None)
        assert [m.text for _, m in hits] == ["bob note: I race sailing boats"], "only bob's own memory"
        assert store.recall_sync("carol", "bees", 5, None) == []
        best = store.recall_sync("alice", "Tell me about my bees", 2, 0.0)
        assert len(best) == 2 and best[0][0] >= best[1][0]
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_chunks_are_recalled_by_embedding_and_bm25_and_listed_as_ingested(backend, prefix):
    store = VectorStore(VectorConfig(backend_type=backend, prefix=prefix, chunk_chars=100), vela())
    try:
        assert store.ingest_sync("bees.md", "Honeybees swarm in late spring when the hive grows crowded.") == 1
        assert store.ingest_sync("boats.md", "A sailing dinghy capsizes less with its crew hiking out.") == 1
        for method in ("embedding", "bm25"):
            hits = store.recall_sync("When do honeybees swarm?", method, 1, None)
            assert [h.chunk.document for h in hits] == ["bees.md"], method
        assert store.recall_sync("When do honeybees swarm?", "bm25", 5, 100.0) == [], "min_similarity bounds BM25"
        assert [c.document for c in store.listed_sync()] == ["bees.md", "boats.md"]
        assert [c.document for c in store.listed_sync(1)] == ["bees.md"]
    finally:
        store.close()
    if backend == "redis":
        other = VectorStore(VectorConfig(backend_type="redis", prefix=prefix, chunk_chars=100), vela())
        try:
            assert sorted(c.document for c in other.listed_sync()) == ["bees.md", "boats.md"], "a second router reads them"
        finally:
            other.close()


def test_a_document_the_store_has_no_room_for_is_refused_whole():
    # POST /api/v1/context/documents ingests whole: a 201 with nothing kept told the caller its text was there.
    store = VectorStore(VectorConfig(backend_type="memory", chunk_chars=100, max_chunks=2), vela())
    try:
        assert store.ingest_sync("bees.md", "Honeybees swarm in late spring when the hive grows crowded.",
                                 whole=True) == 1
        paragraphs = "\n\n".join(f"Paragraph {i} about sailing dinghies and their crews." for i in range(3))
        with pytest.raises(StoreFull, match="nothing of it was added"):
            store.ingest_sync("boats.md", paragraphs, whole=True)
        assert [c.document for c in store.listed_sync()] == ["bees.md"]
        assert store.ingest_sync("boats.md", paragraphs) == 1          # a start-up file takes what fits
    finally:
        store.close()
