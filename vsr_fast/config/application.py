"""The ``systemone`` primitive and the eleven application signals' rule blocks (spec 5.2).

Each application signal takes exactly the fields of the spec's table, plus
name, description, deployment and timeout_ms; any other field fails the load.
"""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from .catalog import TimeoutMs
from .schema_base import Block
from .signals import (
    ContextRule,
    ConversationRule,
    InputModalityRule,
    KeywordRule,
    LanguageRule,
    MetadataRule,
    Predicate,
    RoleBinding,
)

Name = Annotated[str, Meta(min_length=1)]
StageName = Literal["request", "response"]


class _Rule(Block, kw_only=True):
    name: Name
    description: str | None = None
    deployment: str | None = None
    timeout_ms: TimeoutMs | None = None


class HistoryInput(Block, kw_only=True):
    # Also read the earlier user turns: the worst turn's answer is the rule's. The embedded models read the most
    # recent 32, and a turn before the previous one only when sure it is an attack (vsr-static: P >= 0.6), so a
    # benign turn flagged by mistake blocks its reply, not the rest of the conversation.
    history: bool = False


class PiiInput(Block, kw_only=True):
    # Also read the earlier user turns, each asked on its own (a span's offsets index one text), the most recent
    # 32; the rule matches when any holds personal data, and its spans stay the current turn's.
    history: bool = False
    # Also read the tool results, as history reads the earlier turns.
    tool_results: bool = False


class TurnsInput(Block, kw_only=True):
    # The embedded models read the current turn only (an input_unread warning at load).
    previous_turns: Annotated[int, Meta(ge=0, le=32)] = 4


class DomainRule(_Rule, kw_only=True):
    labels: list[str] | None = None
    predicate: Predicate | None = None
    # Model -> how well it serves this domain, 0..1: a multi_factor decision's domain factor when the rule matched.
    model_scores: dict[str, Annotated[float, Meta(ge=0, le=1)]] | None = None


class LabelledRule(_Rule, kw_only=True):
    """fact_check, user_feedbacks, modality: labels and a predicate."""

    labels: list[str] | None = None
    predicate: Predicate | None = None


class JailbreakRule(_Rule, kw_only=True):
    predicate: Predicate | None = None
    stage: StageName = "request"
    input: HistoryInput = HistoryInput()
    on_unknown: Literal["no_match", "match"] = "no_match"


class SafetyRule(_Rule, kw_only=True):
    labels: list[str] | None = None
    predicate: Predicate | None = None
    stage: StageName = "request"


class PiiRule(_Rule, kw_only=True):
    """Personal data in the request; the labels and how the embedded model finds them.

    EMAIL_ADDRESS, PHONE_NUMBER, CREDIT_CARD, US_SSN, IP_ADDRESS and IBAN_CODE by regexes and validators (Luhn
    and card ranges, SSA rules, mod-97): a phone with a +country code, a US number, or a number as written at
    home in DE, FR, GB, ES, IT, NL, JP, CN, IN, BR, MX or AU (``0151 2345678``, ``06 12 34 56 78``,
    ``090-1234-5678``), checked against that country's numbering plan; dates, amounts, versions and order numbers
    are not phones. A role mailbox names no person and is no EMAIL_ADDRESS: ``noreply@``, ``no-reply@``,
    ``donotreply@``, ``do-not-reply@`` (or with ``_``), ``mailer-daemon@``, ``postmaster@``, with any ``+tag``
    but VERP's, the recipient's address (``noreply+jane=example.com@``) (Claude Code's ``noreply@anthropic.com`` attribution is in every turn). Text written without spaces (CJK,
    kana, Hangul, Thai) is a word boundary: ``メールはyamada@example.jp``. PERSON, LOCATION, DATE_TIME,
    STREET_ADDRESS and ORGANIZATION by gazetteers and rules, read only when a rule keeps one of them
    (``ignore_labels``)."""

    predicate: Predicate | None = None
    ignore_labels: list[str] = field(default_factory=list)
    input: PiiInput = PiiInput()
    on_unknown: Literal["no_match", "match"] = "no_match"


class PredicateRule(_Rule, kw_only=True):
    """hallucination, refusal: a predicate only."""

    predicate: Predicate | None = None


class TurnRelationRule(_Rule, kw_only=True):
    labels: list[str] | None = None
    input: TurnsInput = TurnsInput()


class ComplexityRule(_Rule, kw_only=True):
    labels: list[str] | None = None


class QuestionSpec(Block, kw_only=True):
    """An operator's own System One question."""

    type: Literal["choice", "noul", "score", "set", "span"]
    instructions: str | None = None
    # choice, set, span: option -> description (null, or a list of option names: the option is read by its name
    # alone); score: level descriptions from 0.
    criteria: dict[str, str | None] | list[str] | None = None
    head: str | None = None


class SystemOneInput(Block, kw_only=True):
    # The earlier user turns. The embedded models answer a yes/no, score or set question on the worst of them and
    # the current turn (the most recent 32), at the request stage; any other part or question they do not read
    # is an input_unread warning at load. A span question reads each turn on its own.
    history: bool = False
    previous_turns: Annotated[int, Meta(ge=0, le=32)] = 0
    # The tool results, read as history reads the earlier turns.
    tool_results: bool = False
    image: bool = False
    audio: bool = False
    video: bool = False
    answer: bool = False
    context: bool = False


class SystemOneRule(_Rule, kw_only=True):
    question: QuestionSpec
    predicate: Predicate | None = None
    labels: list[str] | None = None
    ignore_labels: list[str] = field(default_factory=list)
    stage: StageName = "request"
    input: SystemOneInput = SystemOneInput()
    coverage: Literal["truncate", "full"] = "truncate"
    # A full-coverage answer that could not read the whole input: what it means. best_effort
    # trusts what was read when at least min_coverage of the windows were.
    on_unscanned: Literal["unknown", "match", "no_match", "best_effort"] = "unknown"
    min_coverage: Annotated[float, Meta(ge=0, le=1)] = 0.0


class Signals(Block, kw_only=True):
    """``recipes[].signals``: seven heuristic types, the systemone primitive, eleven application types.

    A rule reads the current user turn: every user message after the last assistant message, joined by a
    blank line (consecutive user messages, or a Responses input's user items, are one turn, as Anthropic
    reads them). Its ``input`` adds the earlier user turns, the tool results or other parts."""

    keywords: list[KeywordRule] = field(default_factory=list)
    language: list[LanguageRule] = field(default_factory=list)
    context: list[ContextRule] = field(default_factory=list)
    conversation: list[ConversationRule] = field(default_factory=list)
    role_bindings: list[RoleBinding] = field(default_factory=list)
    metadata: list[MetadataRule] = field(default_factory=list)
    input_modality: list[InputModalityRule] = field(default_factory=list)

    systemone: list[SystemOneRule] = field(default_factory=list)
    domains: list[DomainRule] = field(default_factory=list)
    fact_check: list[LabelledRule] = field(default_factory=list)
    user_feedbacks: list[LabelledRule] = field(default_factory=list)
    jailbreak: list[JailbreakRule] = field(default_factory=list)
    safety: list[SafetyRule] = field(default_factory=list)
    pii: list[PiiRule] = field(default_factory=list)
    hallucination: list[PredicateRule] = field(default_factory=list)
    refusal: list[PredicateRule] = field(default_factory=list)
    turn_relation: list[TurnRelationRule] = field(default_factory=list)
    complexity: list[ComplexityRule] = field(default_factory=list)
    modality: list[LabelledRule] = field(default_factory=list)
