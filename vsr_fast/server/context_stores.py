"""The context plugin's stores (spec 5.7): the vector store, its ``files`` ingested, and the memory store.

Opened once per process, at start when some decision uses the plugin, or by the first reload that makes one
use it (``reload``): from ``global.stores`` as the process started, which a reload changes only at a restart.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ..config.stores import Stores
from ..embeddings import Embedders
from ..events.memory_store import MemoryStore
from ..events.vector_store import VectorStore

log = logging.getLogger("vsr_fast.serve")


async def open_context_stores(stores: Stores, embedders: Embedders) -> tuple[VectorStore, MemoryStore]:
    """Both stores, the vector store's files ingested (embedded in a worker thread); closed again when that
    fails (a file, an embedding or the store's Redis), which is raised."""
    vectors = VectorStore(stores.vector_store, embedders.for_store(stores.vector_store.embedding))
    memories = MemoryStore(stores.memory, embedders.for_store(stores.memory.embedding))
    try:
        if stores.vector_store.files:
            added = await trio.to_thread.run_sync(vectors.ingest_files_sync)
            log.info("vsr-fast: vector store: %d chunks from %d files", added, len(stores.vector_store.files))
    except BaseException:
        vectors.close()
        memories.close()
        raise
    return vectors, memories


@asynccontextmanager
async def context_stores(stores: Stores | None, embedders: Embedders) -> AsyncIterator[tuple]:
    """``open_context_stores`` for the process's life; (None, None) when no decision uses the plugin, so
    nothing is embedded."""
    if stores is None:
        yield None, None
        return
    vectors, memories = await open_context_stores(stores, embedders)
    try:
        yield vectors, memories
    finally:
        vectors.close()
        memories.close()


async def held(vectors: VectorStore, memories: MemoryStore) -> None:
    """Keep stores a reload opened until the process stops (its background nursery is cancelled), then close
    them."""
    try:
        await trio.sleep_forever()
    finally:
        vectors.close()
        memories.close()


__all__ = ["context_stores", "held", "open_context_stores"]
