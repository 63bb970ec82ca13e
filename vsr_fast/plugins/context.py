"""``context``: retrieve documents and memories and inject them into the provider-bound request (spec 5.7).

Sources are retrieved in order, at most one of each type:

- ``rag`` reads the in-memory vector store (``global.stores.vector_store``):
  recall by embedding (the default), BM25, or none (a judge over the chunks as
  listed), then the relevance judge (``context.rag`` match defaults, 5.4);
- ``memory`` reads the user's own memories (``global.stores.memory``), by
  embedding or, without recall, newest first; ``store: {auto: true}`` writes
  the turn to memory after the response. A caller the router cannot tell apart
  from others (anonymous) has no memory.

``compress`` shrinks long tool outputs (``targets.tool_outputs``, extractive):
each one of at least ``min_tokens`` keeps its sentences most relevant to the
latest user message (BM25 prefilters the judge's candidates; the
``context.compress`` match defaults to ``recall: {method: bm25}, judge: {preset:
relevance}``) within ``target_tokens``, in their order, the rest marked as
omitted. ``mode: always`` compresses every such output; ``auto`` only when the
request is over its budget. A request still over its budget then loses whole
earlier history turns (a user message and the replies, tool calls and tool
results up to the next user message), the least relevant to the latest user
message (BM25) first, older first among equals, until it fits; the system
prompt and the last user turn stay, and the first turn kept opens with
``[... N earlier turns omitted ...]``. A request that still does not fit is
sent as it is, with ``x-vsr-warnings: context_over_budget;tokens=..;budget=..``.

The budget is ``budget.max_tokens`` less an integer
``reserve_output_tokens``; ``max_tokens: auto`` is the smallest
``context_window_size`` among the route's candidates (providers.models[])
less the reserved output, whose ``auto`` is the request's own output limit
(``max_tokens``, ``max_completion_tokens`` or ``max_output_tokens``), else
``DEFAULT_RESERVE_OUTPUT_TOKENS``. With ``max_tokens: auto`` and no candidate
window there is no budget (a load warning says so): ``auto`` does not compress
and history is kept. Tokens are estimated at four characters each.
``failure_mode: fail_open`` leaves an output whole when its judge fails,
``fail_closed`` fails the request.

``compress.signals`` (global or recipe layers only) compresses the current turn the
routing signals read (signals/compress.py), not the provider request; a
compress block with signals and no ``mode`` leaves the provider request whole.

``injection.mode``: ``tool_role`` puts each source's context in a tool
exchange after the last user message, ``system_prompt`` in the system prompt.
A request that declares no tools gets the system prompt either way: Anthropic
and Bedrock refuse a tool exchange in a request without tools.
``on_failure`` says what a source that fails means: ``skip`` (the default)
sends the request without it, ``warn`` also adds a ``context_unavailable``
warning, ``block`` fails the request (``context_failed``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..config.bindings import APPLICATION_TYPES
from ..config.schema_base import Block
from ..config.signals import CONDITION_TYPES
from ._merge import merged_fields
from .match import Match, Recall
from .match import check as check_match
from .match import resolve as resolve_match

TYPE = "context"
SIGNAL_TYPES = frozenset({*CONDITION_TYPES, *APPLICATION_TYPES, "systemone"})     # what skip_signals names
DEFAULT_RESERVE_OUTPUT_TOKENS = 4096    # reserve_output_tokens: auto, for a request that sets no output limit
RAG, MEMORY, COMPRESS = "context.rag", "context.memory", "context.compress"


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
    # tool_role: a request that declares no tools gets the system prompt (Anthropic refuses a tool exchange there).
    mode: Literal["tool_role", "system_prompt"] = "tool_role"


class ToolOutputs(Block):
    mode: Literal["extractive"] = "extractive"
    min_tokens: Annotated[int, Meta(ge=1, le=10_000_000)] = 2000     # shorter outputs stay whole
    target_tokens: Annotated[int, Meta(ge=1, le=10_000_000)] = 1000


class Targets(Block):
    tool_outputs: ToolOutputs | None = ToolOutputs()


class Budget(Block):
    """The request's input budget in tokens (estimated at four characters each): an integer ``max_tokens`` (less
    an integer ``reserve_output_tokens``), or with ``auto`` the candidates' window less the reserve."""

    # auto: the smallest providers.models[].context_window_size among the route's candidates, less the reserve
    max_tokens: Annotated[int, Meta(ge=256)] | Literal["auto"] = "auto"
    # auto: the request's own output limit (max_tokens, max_completion_tokens, max_output_tokens), else 4096
    reserve_output_tokens: Annotated[int, Meta(ge=0)] | Literal["auto"] = "auto"


class SignalsCompression(Block):
    """``compress.signals``: the current turn the routing signals read, cut to its highest-scoring sentences
    within ``max_tokens`` before they run; the provider request is untouched, and the signal types in
    ``skip_signals`` read the turn whole. A sentence scores how central it is to the turn (its words' mean log count in it), plus one for each
    of its profile's keywords (coding, medical, security), plus a bonus at the turn's start and end
    (``multi_turn``: growing towards the end). Set in global.plugins or a recipe's plugins (a decision's is
    refused: signals run before a decision is chosen). Earlier turns and tool results are read as written."""

    enabled: bool = True
    profile: Literal["default", "coding", "medical", "security", "multi_turn"] = "default"
    max_tokens: Annotated[int, Meta(ge=64, le=1_048_576)] = 4096     # a longer turn is compressed to this budget
    # these signal types read the original text
    skip_signals: list[str] = msgspec.field(default_factory=lambda: ["jailbreak", "pii"])


class Compress(Block):
    """Long tool outputs shrink to their most relevant sentences; then, while the request is over its budget,
    whole earlier history turns (a user message with the replies, tool calls and results up to the next user
    message) are dropped, the least relevant to the latest user message (BM25) first, older first among equals.
    The system prompt and the last user turn stay; the first user message after a dropped turn opens with
    ``[... N earlier turns omitted ...]``. A request that still does not fit is sent as it is, with
    ``x-vsr-warnings: context_over_budget;tokens=N;budget=M``."""

    # always: compress every long tool output; auto: only a request over its budget. Unset: auto, but a block
    # that sets signals and no mode leaves the provider request whole
    mode: Literal["auto", "always"] | UnsetType = UNSET
    targets: Targets = Targets()
    budget: Budget = Budget()
    match: Match | None = None
    failure_mode: Literal["fail_open", "fail_closed"] = "fail_open"
    signals: SignalsCompression | None = None


class ContextConfig(Block):
    """``{type: context, configuration: ...}`` at one layer (fields override field by field)."""

    enabled: bool | UnsetType = UNSET
    sources: list[Source] | UnsetType = UNSET
    injection: Injection | UnsetType = UNSET
    compress: Compress | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A source as a request runs it: its match block resolved against the feature's default."""

    type: str
    feature: str
    match: Match
    on_failure: str
    auto_write: bool = False


@dataclass(frozen=True, slots=True)
class Compression:
    """``compress`` as a request runs it: ``max_tokens`` None is auto (the candidates' window), ``reserve``
    None is auto (the request's own output limit)."""

    always: bool
    tool_outputs: ToolOutputs | None
    max_tokens: int | None
    reserve: int | None
    match: Match
    fail_closed: bool

    def budget(self, windows: list[int], output_limit: int | None) -> int | None:
        """The request's input budget in tokens, given its candidates' known windows and its own output limit;
        None when ``max_tokens: auto`` has no window to read."""
        if self.max_tokens is not None:
            return self.max_tokens - (self.reserve or 0)    # an explicit budget is the input's: auto reserves none
        if not windows:
            return None
        reserve = self.reserve if self.reserve is not None else output_limit or DEFAULT_RESERVE_OUTPUT_TOKENS
        return max(min(windows) - reserve, 0)


@dataclass(frozen=True, slots=True)
class Context:
    sources: tuple[Retrieval, ...]
    injection: str
    compress: Compression | None = None

    @property
    def writes_memory(self) -> bool:
        return any(s.auto_write for s in self.sources)


def resolve(*layers: ContextConfig | None, memory_limit: int = 5, memory_threshold: float = 0.7) -> Context | None:
    """The request's context policy, layers lowest first; None when off or without sources.

    ``memory_limit`` / ``memory_threshold``: the memory store's recall bounds, which a memory source's default
    block takes (a written block keeps its own).
    """
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False or not (values.get("sources") or _compression(values.get("compress"))):
        return None
    out = []
    for source in values.get("sources") or ():
        feature = RAG if source.type == "rag" else MEMORY
        match = resolve_match(source.match, feature)
        if source.type == "memory" and source.match is None:
            match = Match(recall=Recall(method="embedding", top_k=memory_limit, min_similarity=memory_threshold))
        out.append(Retrieval(source.type, feature, match, source.on_failure,
                             auto_write=source.type == "memory" and source.store is not None and source.store.auto))
    injection = values.get("injection") or Injection()
    return Context(tuple(out), injection.mode, _compression(values.get("compress")))


def _compression(compress: Compress | None) -> Compression | None:
    if compress is None or (compress.signals is not None and compress.mode is UNSET):
        return None         # a block with only signals leaves the provider request whole
    budget = compress.budget
    return Compression(compress.mode == "always", compress.targets.tool_outputs,
                       budget.max_tokens if isinstance(budget.max_tokens, int) else None,
                       budget.reserve_output_tokens if isinstance(budget.reserve_output_tokens, int) else None,
                       resolve_match(compress.match, COMPRESS), compress.failure_mode == "fail_closed")


def signals_compression(*layers: ContextConfig | None) -> SignalsCompression | None:
    """The ``compress.signals`` a recipe's signals read through, from its global and recipe layers; None when off."""
    values = merged_fields(*layers)
    compress = values.get("compress") if values and values.get("enabled") is not False else None
    found = compress.signals if isinstance(compress, Compress) else None
    return found if found is not None and found.enabled else None


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
    compress = raw.get("compress")
    if isinstance(compress, dict):
        if "signals" in compress and ".decisions[" in path:
            errors.append(f"{path}.compress.signals: invalid_value: signals run before a decision is chosen: set "
                          f"compress.signals in global.plugins or the recipe's plugins")
        signals = compress.get("signals")
        skip = signals.get("skip_signals") if isinstance(signals, dict) else None
        for i, name in enumerate(skip if isinstance(skip, list) else ()):
            if isinstance(name, str) and name not in SIGNAL_TYPES:
                errors.append(f"{path}.compress.signals.skip_signals[{i}]: invalid_value: {name!r} is not a signal "
                              f"type ({', '.join(sorted(SIGNAL_TYPES))})")
        if "match" in compress:
            errors += check_match(compress["match"], f"{path}.compress.match", COMPRESS)
        targets = compress.get("targets")
        outputs = targets.get("tool_outputs") if isinstance(targets, dict) else None
        if isinstance(outputs, dict):
            low, high = outputs.get("target_tokens", 1000), outputs.get("min_tokens", 2000)
            if isinstance(low, int) and isinstance(high, int) and low >= high:
                errors.append(f"{path}.compress.targets.tool_outputs.target_tokens: invalid_value: an output is "
                              f"compressed from min_tokens ({high}) to fewer tokens, not {low}")
    return errors


__all__ = ["COMPRESS", "Compress", "Compression", "Context", "ContextConfig", "DEFAULT_RESERVE_OUTPUT_TOKENS", "Injection", "MEMORY", "MemoryWrite", "RAG", "Retrieval", "SignalsCompression", "Source", "TYPE",
           "signals_compression",
           "check", "resolve"]
