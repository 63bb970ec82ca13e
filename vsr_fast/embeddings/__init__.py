"""Embedding deployments for recall only (spec 5.5): the semantic cache, memory, the vector store and RAG queries.

No decision path reads an embedding (tests/test_embeddings.py holds it): an
embedder is handed to the stores that recall, never to signals or decisions.

Two kinds of deployment embed text:

- ``StaticEmbedder``: a built-in vsr-static model's static embedding (one
  matrix lookup and a mean per text, microseconds), 256 wide; the
  pre-declared ``vela-embedding`` is one. Cheap enough for the trio thread
  once loaded (``inline``).
- ``RemoteEmbedder``: an OpenAI-compatible ``/v1/embeddings`` API
  (``openai_embeddings``), called over a blocking httpx client that callers
  run in a worker thread; its answers must have the declared ``dimensions``.

Both start lazily: nothing is loaded or connected until something embeds, so a
configuration without a recall feature never loads an embedding model.
Vectors come back as float32 unit rows (cosine is a dot product).
"""
from __future__ import annotations

import ssl
import threading
from collections.abc import Sequence

import httpx
import msgspec
import numpy as np

from ..config.catalog import (BUILTIN_EMBEDDINGS, DEFAULT_ARTIFACT, VELA_EMBEDDING, Deployment, EmbeddingRef,
                              ModelCatalog, dimension_of, embedding_deployments)
from ..errors import EmbeddingFailed
from ..systemone.capabilities import load_model
from ..systemone.deployments import key_of, refuse_cookies

DEFAULT_TIMEOUT_MS = 5000


class _EmbeddingsAnswer(msgspec.Struct):
    class Item(msgspec.Struct):
        embedding: list[float]
        index: int = 0

    data: list[Item]


_ANSWER = msgspec.json.Decoder(_EmbeddingsAnswer)
_REQUEST = msgspec.json.Encoder()


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class StaticEmbedder:
    """A built-in model's static embedding, loaded on first use."""

    kind = "embedded"

    def __init__(self, name: str, dep: Deployment) -> None:
        self.name, self.dep = name, dep
        self.dimension = dimension_of(dep) or 0
        self._embedding = None
        self._lock = threading.Lock()       # two worker threads must not load the model twice

    @property
    def started(self) -> bool:
        return self._embedding is not None

    @property
    def inline(self) -> bool:
        """Whether ``encode`` may run on the trio thread: loaded, it costs microseconds a text."""
        return self._embedding is not None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows, one per text (blocking on the first call: it loads the model)."""
        if self._embedding is None:
            with self._lock:
                if self._embedding is None:
                    self._embedding = load_model(self.dep.artifact or DEFAULT_ARTIFACT).embedding
        return self._embedding.encode(list(texts))

    def close(self) -> None:
        return None


class RemoteEmbedder:
    """An OpenAI-compatible embeddings API; ``encode`` blocks on HTTP, so callers run it in a worker thread."""

    kind = "remote"
    inline = False

    def __init__(self, name: str, dep: Deployment) -> None:
        self.name, self.dep = name, dep
        self.dimension = dimension_of(dep) or 0
        endpoint = (dep.endpoint or "").rstrip("/")
        self.url = f"{endpoint if '://' in endpoint else 'http://' + endpoint}/embeddings"
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._client is not None

    def _connect(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                dep = self.dep
                headers = dict(dep.headers)
                key = key_of(self.name, dep)
                if key and dep.auth is not None:
                    headers[dep.auth.header] = f"{dep.auth.prefix} {key}" if dep.auth.prefix else key
                verify = ssl.create_default_context(cafile=dep.tls.ca_file) if dep.tls.ca_file else dep.tls.verify
                client = httpx.Client(headers=headers, verify=verify, trust_env=False,
                                      timeout=httpx.Timeout((dep.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000))
                refuse_cookies(client)
                self._client = client
            return self._client

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit rows, one per text; raises EmbeddingFailed when the API fails or answers another width."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        body = {"input": list(texts), "encoding_format": "float"}
        if self.dep.model:
            body["model"] = self.dep.model
        client = self._client or self._connect()
        last: Exception | None = None
        for _ in range(self.dep.max_retries + 1):
            try:
                resp = client.post(self.url, content=_REQUEST.encode(body),
                                   headers={"content-type": "application/json"})
            except httpx.HTTPError as exc:
                last = exc
                continue
            if resp.status_code >= 400:
                raise EmbeddingFailed(f"embedding deployment {self.name!r} answered {resp.status_code}")
            try:
                items = sorted(_ANSWER.decode(resp.content).data, key=lambda item: item.index)
            except msgspec.DecodeError as exc:
                raise EmbeddingFailed(f"embedding deployment {self.name!r}: not an embeddings answer: {exc}") from None
            rows = np.asarray([item.embedding for item in items], np.float32)
            if rows.shape != (len(texts), self.dimension):
                raise EmbeddingFailed(f"embedding deployment {self.name!r} answered {rows.shape[0]} vectors "
                                      f"{rows.shape[1] if rows.ndim == 2 else 0} wide; it declares "
                                      f"{self.dimension} for {len(texts)} texts")
            return _unit(rows)
        raise EmbeddingFailed(f"embedding deployment {self.name!r} did not answer: {type(last).__name__}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


Embedder = StaticEmbedder | RemoteEmbedder


def make(name: str, dep: Deployment) -> Embedder:
    return RemoteEmbedder(name, dep) if dep.provider == "openai_embeddings" else StaticEmbedder(name, dep)


def vela() -> StaticEmbedder:
    """The pre-declared embedding deployment, for a store used without a catalog (tools, benchmarks)."""
    return StaticEmbedder(VELA_EMBEDDING, BUILTIN_EMBEDDINGS[VELA_EMBEDDING])


class Embedders:
    """The catalog's embedding deployments, each made on first use and shared by every store that names it."""

    def __init__(self, catalog: ModelCatalog) -> None:
        self.deployments = embedding_deployments(catalog)
        self.default = catalog.embeddings.default.deployment
        self._made: dict[str, Embedder] = {}

    def get(self, name: str | None = None) -> Embedder:
        """The embedder of deployment ``name`` (the default one when None); the load checks vouch it exists."""
        name = name or self.default
        embedder = self._made.get(name)
        if embedder is None:
            embedder = self._made[name] = make(name, self.deployments[name])
        return embedder

    def for_store(self, ref: EmbeddingRef | None) -> Embedder:
        """A store's embedder: the deployment its ``embedding`` block names, else the default."""
        return self.get(ref.deployment if ref is not None else None)

    def inventory(self) -> list[dict]:
        """``GET /api/v1/inventory/embedding-models``: every embedding deployment and whether it started."""
        out = []
        for name, dep in self.deployments.items():
            made = self._made.get(name)
            caps = dep.capabilities
            out.append({"name": name, "provider": dep.provider, "kind": "remote" if dep.provider == "openai_embeddings"
                        else "embedded", "model": dep.model or dep.artifact, "dimensions": dimension_of(dep),
                        "modalities": list(caps.modalities) if caps else ["text"], "default": name == self.default,
                        "started": made is not None and made.started})
        return out

    def close(self) -> None:
        for embedder in self._made.values():
            embedder.close()


__all__ = ["Embedder", "Embedders", "RemoteEmbedder", "StaticEmbedder", "make", "vela"]
