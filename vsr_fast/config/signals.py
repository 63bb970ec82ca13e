"""Signal rule blocks of ``recipes[].signals`` and ``recipes[].projections`` (spec 5.2, 6.6)."""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from .schema_base import Block

Name = Annotated[str, Meta(min_length=1)]


class Predicate(Block, kw_only=True):
    """A numeric test: every bound given must hold."""

    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    eq: float | None = None

    def is_empty(self) -> bool:
        return self.gt is None and self.gte is None and self.lt is None and self.lte is None and self.eq is None

    def holds(self, value: float) -> bool:
        """Whether ``value`` satisfies every bound."""
        return not (
            (self.gt is not None and not value > self.gt)
            or (self.gte is not None and not value >= self.gte)
            or (self.lt is not None and not value < self.lt)
            or (self.lte is not None and not value <= self.lte)
            or (self.eq is not None and not value == self.eq)
        )


class KeywordRule(Block, kw_only=True):
    """``keywords``: literal, regex, BM25, n-gram or fuzzy matches over the current turn."""

    name: Name
    keywords: Annotated[list[str], Meta(min_length=1)]
    operator: Literal["AND", "OR", "NOR"] = "OR"
    method: Literal["exact", "regex", "bm25", "ngram", "fuzzy"] = "exact"
    case_sensitive: bool = False
    include_history: bool = False
    description: str | None = None
    # An OR rule over literal or regex keywords may match on a number instead (not both).
    count: Predicate | None = None
    density: Predicate | None = None           # matches per 1,000 characters
    bm25_threshold: Annotated[float, Meta(ge=0)] = 0.1
    ngram_threshold: Annotated[float, Meta(ge=0, le=1)] = 0.4
    ngram_arity: Annotated[int, Meta(ge=1, le=8)] = 3
    fuzzy_threshold: Annotated[int, Meta(ge=0, le=8)] = 2   # largest edit distance that matches


class LanguageRule(Block, kw_only=True):
    """``language``: the request's language is one of ``languages`` (default: the rule's name)."""

    name: Name
    languages: list[str] | None = None
    min_confidence: Annotated[float, Meta(ge=0, le=1)] = 0.5
    description: str | None = None


TokenCount = int | str  # 8000, "8K", "1M"


class ContextRule(Block, kw_only=True):
    """``context``: the request's estimated tokens (4 UTF-8 bytes a token) lie in [min, max]."""

    name: Name
    min_tokens: TokenCount = 0
    max_tokens: TokenCount | None = None
    description: str | None = None


class ConversationSource(Block, kw_only=True):
    type: Literal["message", "turn", "tool_definition", "tool_call", "tool_result", "system_prompt"]
    role: Literal["system", "developer", "user", "assistant", "tool"] | None = None


class ConversationFeature(Block, kw_only=True):
    type: Literal["count", "exists"] = "count"
    source: ConversationSource = field(default_factory=lambda: ConversationSource(type="message"))


class ConversationRule(Block, kw_only=True):
    """``conversation``: structural facts about the messages and tools."""

    name: Name
    feature: ConversationFeature
    predicate: Predicate | None = None
    description: str | None = None


class Subject(Block, kw_only=True):
    kind: Literal["User", "Group"]
    name: Name


class RoleBinding(Block, kw_only=True):
    """``role_bindings`` (condition type ``authz``): a role held by trusted subjects."""

    name: Name
    role: Name
    subjects: Annotated[list[Subject], Meta(min_length=1)]
    description: str | None = None


class MetadataPredicate(Block, kw_only=True):
    equals: str | None = None
    not_equals: str | None = None
    in_: list[str] | None = field(default=None, name="in")
    exists: bool | None = None
    matches: str | None = None     # a regular expression, searched


class MetadataRule(Block, kw_only=True):
    """``metadata``: a predicate on one key of the request's (untrusted) metadata."""

    name: Name
    key: Name
    predicate: MetadataPredicate
    description: str | None = None


class InputModalityRule(Block, kw_only=True):
    """``input_modality``: the request carries parts of this medium."""

    name: Name
    modality: Literal["text", "image", "audio", "video"]
    description: str | None = None


# --- projections ------------------------------------------------------------------


class ProjectionInput(Block, kw_only=True):
    type: Name
    name: Name
    weight: float
    # match: 1 when the signal matched; confidence: its confidence when matched; value: its number.
    value_source: Literal["match", "confidence", "value"] = "match"


class ProjectionScore(Block, kw_only=True):
    name: Name
    inputs: Annotated[list[ProjectionInput], Meta(min_length=1)]
    method: Literal["weighted_sum"] = "weighted_sum"


class BandOutput(Block, kw_only=True):
    name: Name
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


class ProjectionMapping(Block, kw_only=True):
    name: Name
    source: Name
    outputs: Annotated[list[BandOutput], Meta(min_length=1)]
    method: Literal["threshold_bands"] = "threshold_bands"


class Projections(Block, kw_only=True):
    scores: list[ProjectionScore] = field(default_factory=list)
    mappings: list[ProjectionMapping] = field(default_factory=list)


# Condition type -> the signals block key that declares it.
CONDITION_TYPES = {
    "keyword": "keywords",
    "language": "language",
    "context": "context",
    "conversation": "conversation",
    "authz": "role_bindings",
    "metadata": "metadata",
    "input_modality": "input_modality",
}
