"""``context``: retrieve documents and memories and inject them into the provider-bound request (spec 5.7).

Sources are retrieved in order, at most one of each type:

- ``rag`` reads the in-memory vector store (``global.stores.vector_store``):
  recall by embedding (the default), BM25, or none (a judge over the chunks as
  listed), then the relevance judge (``context.rag`` match defaults, 5.4);
- ``memory`` reads the user's own memories (``global.stores.memory``), by
  embedding or, without recall, newest first; ``store: {auto: true}`` writes
  the turn to memory after the response. A caller the router cannot tell apart
  from others (anonymous) has no memory.

``injection.mode``: ``tool_role`` puts each source's context in a tool
exchange after the last user message, ``system_prompt`` in the system prompt.
``on_failure`` says what a source that fails means: ``skip`` (the default)
sends the request without it, ``warn`` also adds a ``context_unavailable``
warning, ``block`` fails the request (``context_failed``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from msgspec import UNSET, UnsetType

from ..config.schema_base import Block
from ._merge import merged_fields
from .match import Match, Recall
from .match import check as check_match
from .match import resolve as resolve_match

TYPE = "context"
RAG, MEMORY = "context.rag", "context.memory"


class MemoryWrite(Block):
    auto: bool = False          # write each turn to the user's memory after the response


class Source(Block):
    """One source; ``backend`` is a rag source's, ``store`` a memory source's."""

    type: Literal["rag", "memory"]
    backend: Literal["vectorstore"] | None = None
    store: MemoryWrite | None = None
    match: Match | None = None
    on_failure: Literal["skip", "warn", "block"] = "skip"


class Injection(Block):
    mode: Literal["tool_role", "system_prompt"] = "tool_role"


class ContextConfig(Block):
    """``{type: context, configuration: ...}`` at one layer (fields override field by field)."""

    enabled: bool | UnsetType = UNSET
    sources: list[Source] | UnsetType = UNSET
    injection: Injection | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A source as a request runs it: its match block resolved against the feature's default."""

    type: str
    feature: str
    match: Match
    on_failure: str
    auto_write: bool = False


@dataclass(frozen=True, slots=True)
class Context:
    sources: tuple[Retrieval, ...]
    injection: str

    @property
    def writes_memory(self) -> bool:
        return any(s.auto_write for s in self.sources)


def resolve(*layers: ContextConfig | None, memory_limit: int = 5, memory_threshold: float = 0.7) -> Context | None:
    """The request's context policy, layers lowest first; None when off or without sources.

    ``memory_limit`` / ``memory_threshold``: the memory store's recall bounds, which a memory source's default
    block takes (a written block keeps its own).
    """
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False or not values.get("sources"):
        return None
    out = []
    for source in values["sources"]:
        feature = RAG if source.type == "rag" else MEMORY
        match = resolve_match(source.match, feature)
        if source.type == "memory" and source.match is None:
            match = Match(recall=Recall(method="embedding", top_k=memory_limit, min_similarity=memory_threshold))
        out.append(Retrieval(source.type, feature, match, source.on_failure,
                             auto_write=source.type == "memory" and source.store is not None and source.store.auto))
    injection = values.get("injection") or Injection()
    return Context(tuple(out), injection.mode)


def check(raw: dict, path: str) -> list[str]:
    """What the block's types cannot say: one source of each type, each type's own fields, its match block."""
    errors: list[str] = []
    seen: set[str] = set()
    for i, source in enumerate(raw.get("sources") or ()):
        if not isinstance(source, dict):
            continue
        where, kind = f"{path}.sources[{i}]", source.get("type")
        if not isinstance(kind, str):
            continue                    # the block's types say what is wrong with it
        if kind in seen:
            errors.append(f"{where}.type: invalid_value: a context block has at most one {kind} source")
        seen.add(kind)
        if kind == "memory" and "backend" in source:
            errors.append(f"{where}.backend: invalid_value: a memory source reads global.stores.memory; "
                          f"backend is a rag source's")
        if kind == "rag" and "store" in source:
            errors.append(f"{where}.store: invalid_value: store is a memory source's (write memories after the "
                          f"response)")
        if "match" in source:
            errors += check_match(source["match"], f"{where}.match", RAG if kind == "rag" else MEMORY)
    return errors


__all__ = ["Context", "ContextConfig", "Injection", "MEMORY", "MemoryWrite", "RAG", "Retrieval", "Source", "TYPE",
           "check", "resolve"]
