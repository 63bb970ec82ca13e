"""The in-memory vector store a ``context`` RAG source reads (spec 5.4, 5.7): listable chunks, each with its
embedding and a place in a BM25 index.

A document is cut into chunks of about ``chunk_chars`` at paragraph, then line,
then sentence breaks. ``memory`` keeps this router's chunks; ``redis`` keeps them
in one Redis hash with a version counter, and every router sharing it reloads
its local copy when the version moves (checked at each recall, one GET). A
chunk's id is a hash of its document and text, so routers that ingest the same
files at start write the same entries.

Every method here blocks (embedding, Redis): the request path calls them in a
worker thread. One lock keeps ingestion and recall from seeing half an index.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from .redis_client import redis
from .._ext.bm25 import BM25Index, tokenize
from ..config.stores import VectorStore as VectorStoreConfig
from ..embeddings import Embedder
from ..errors import StoreFull

log = logging.getLogger("vsr_fast.vector_store")


class Chunk(msgspec.Struct, frozen=True):
    id: str
    document: str
    text: str


class _Stored(msgspec.Struct, frozen=True):
    document: str
    text: str
    vector: bytes


_STORED = msgspec.msgpack.Encoder()
_LOAD = msgspec.msgpack.Decoder(_Stored)
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"(?<=[.!?])\s+"))


def chunks_of(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters, at the coarsest break that fits."""
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    for brk in _BREAKS:
        parts = [p.strip() for p in brk.split(text) if p.strip()]
        if len(parts) > 1:
            out: list[str] = []
            for part in parts:
                if out and len(out[-1]) + 1 + len(part) <= size:
                    out[-1] = f"{out[-1]}\n{part}"
                else:
                    out += chunks_of(part, size)
            return out
    return [text[i:i + size] for i in range(0, len(text), size)]     # one long word: cut it


@dataclass(frozen=True, slots=True)
class Hit:
    score: float
    chunk: Chunk


class VectorStore:
    """Chunks, their unit vectors and a BM25 index over them; ``recall`` by embedding or BM25, ``listed``."""

    def __init__(self, config: VectorStoreConfig, embedder: Embedder) -> None:
        self.config = config
        self.embedder = embedder
        self.chunks: list[Chunk] = []
        self._ids: dict[str, int] = {}
        self._vectors = np.zeros((0, embedder.dimension), np.float32)
        self._bm25: BM25Index | None = None
        self._lock = threading.Lock()
        self._version: bytes | None = None
        self._redis = (redis.Redis.from_url(config.redis_url(), socket_timeout=2.0, socket_connect_timeout=1.0)
                       if config.backend_type == "redis" else None)
        self._hash, self._version_key = f"{config.prefix}chunks", f"{config.prefix}version"

    def ingest_files_sync(self) -> int:
        """Ingest ``files`` (read as UTF-8 text, named by their file name); returns the chunks added."""
        return sum(self.ingest_sync(Path(path).name, Path(path).read_text(encoding="utf-8"))
                   for path in self.config.files)

    def ingest_sync(self, document: str, text: str, *, whole: bool = False) -> int:
        """Cut ``text`` into chunks, embed them and add those not held yet; returns how many were added.
        ``whole``: all of them or none, StoreFull when they do not fit (the API's documents; files at start take
        what fits, with a warning)."""
        pieces = chunks_of(text, self.config.chunk_chars)
        new = [Chunk(hashlib.sha256(f"{document}\0{p}".encode()).hexdigest()[:32], document, p) for p in pieces]
        with self._lock:
            new = [c for c in dict((c.id, c) for c in new).values() if c.id not in self._ids]
            room = self.config.max_chunks - len(self.chunks)
            if whole and room < len(new):
                raise StoreFull(f"the vector store holds {len(self.chunks)} of its {self.config.max_chunks} chunks "
                                f"(max_chunks): {document!r} needs {len(new)} more; nothing of it was added")
            if room < len(new):
                log.warning("vector store full (%d chunks): %d chunks of %s not added", self.config.max_chunks,
                            len(new) - max(room, 0), document)
                new = new[:max(room, 0)]
            if not new:
                return 0
            vectors = self.embedder.encode([c.text for c in new])
            if self._redis is not None:
                pipe = self._redis.pipeline(transaction=False)
                pipe.hset(self._hash, mapping={c.id: _STORED.encode(_Stored(c.document, c.text, v.tobytes()))
                                               for c, v in zip(new, vectors)})
                pipe.incr(self._version_key)
                pipe.execute()
            self._add(new, vectors)
        return len(new)

    def _add(self, new: list[Chunk], vectors: np.ndarray) -> None:
        for chunk in new:
            self._ids[chunk.id] = len(self.chunks)
            self.chunks.append(chunk)
        self._vectors = np.concatenate([self._vectors, vectors.astype(np.float32)])
        self._bm25 = BM25Index([tokenize(c.text) for c in self.chunks])

    def _follow(self) -> None:
        """Redis: reload the local copy when another router (or this one) changed the store."""
        if self._redis is None:
            return
        version = self._redis.get(self._version_key)
        if version == self._version:
            return
        stored = self._redis.hgetall(self._hash)
        with self._lock:
            fresh = {k.decode(): _LOAD.decode(v) for k, v in stored.items() if k.decode() not in self._ids}
            fresh = {k: s for k, s in fresh.items()
                     if len(s.vector) == 4 * self.embedder.dimension}     # another model's vectors are not ours
            if fresh:
                self._add([Chunk(k, s.document, s.text) for k, s in fresh.items()],
                          np.stack([np.frombuffer(s.vector, np.float32) for s in fresh.values()]))
            self._version = version

    def recall_sync(self, query: str, method: str, top_k: int | None,
                    min_similarity: float | None) -> list[Hit]:
        """The best chunks for ``query``, best first: cosine (embedding) or BM25 score (bm25)."""
        self._follow()
        with self._lock:
            if not self.chunks:
                return []
            if method == "bm25":
                assert self._bm25 is not None
                scores = self._bm25.scores_text(query)
            else:
                scores = self._vectors @ self.embedder.encode([query])[0]
            order = np.argsort(-scores, kind="stable")[: top_k or len(self.chunks)]
            return [Hit(float(scores[i]), self.chunks[i]) for i in order
                    if min_similarity is None or scores[i] >= min_similarity]

    def listed_sync(self, limit: int | None = None) -> list[Chunk]:
        """The chunks as ingested (a judge without recall reads them in this order)."""
        self._follow()
        with self._lock:
            return list(self.chunks[:limit])

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()


__all__ = ["Chunk", "Hit", "VectorStore", "chunks_of"]
