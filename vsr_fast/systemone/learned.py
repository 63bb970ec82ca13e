"""Learned signals: the ``systemone`` primitive and the eleven application signals as questions (spec 5.2).

Each rule compiles into one internal question: an application rule asks its
preset's canonical question, a ``systemone`` rule its own. Rules of one
preset, deployment, stage and input share one question (its ``share`` key),
and each applies its own labels and predicate to the shared answer.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import application as app
from ..config.catalog import PRIMARY, Deployment, ModelCatalog
from ..config.signals import Predicate
from ..protocol import systemone as wire
from . import capabilities as caps
from .split import SetAsNoul
from .presets import APPLICATION_SIGNALS, NEUTRAL_THRESHOLD, PRESETS, Preset
from ..signals.base import CompileErrors, Outcome

SYSTEMONE = "systemone"
# The parts a request-stage span rule reads one text a state (``states.part_shares``): a span's offsets index
# one text, so the router asks each on its own, whatever the model.
SPAN_PARTS = ("history", "tool_results")


@dataclass(frozen=True)
class StateSpec:
    """The parts of the request a question reads; questions with equal specs share a state."""

    history: bool = False
    previous_turns: int = 0
    tool_results: bool = False
    images: bool = False
    previous_answer: bool = False
    coverage: str = "truncate"
    answer: bool = False              # the response stage: the model's answer
    context: bool = False             # and its grounding context (tool results)


@dataclass(frozen=True)
class Share:
    """Rules with equal Share keys ask one question in one state on one deployment."""

    wire_id: str
    deployment: str
    stage: str
    spec: StateSpec
    # One earlier text asked as a state of its own: a span rule's ("history:3"), a long turn's window ("history:3@0-2048").
    part: str = ""


@dataclass
class LearnedRule:
    condition_type: str
    name: str
    path: str
    question_type: str
    options: tuple[str, ...]          # choice/set/span option names; () for noul and score
    labels: tuple[str, ...]           # the options the rule itself matches
    ignore: frozenset[str]
    passes: Callable[[float], bool]
    stage: str
    share: Share
    timeout_ms: int | None
    on_unknown: str | None            # jailbreak/pii: no_match | match
    preset: Preset | None = None
    threshold: float | None = None    # the predicate's bound, for a guard scan's re-reads
    on_unscanned: str = "unknown"     # a full-coverage rule whose input was not read whole
    min_coverage: float = 0.0         # with on_unscanned: best_effort
    question: wire.Question | None = None   # the wire question (filled once shares are merged)


@dataclass
class LearnedSignals:
    """A recipe's learned rules, keyed by (condition type, name)."""

    rules: dict[tuple[str, str], LearnedRule] = field(default_factory=dict)
    questions: dict[Share, wire.Question] = field(default_factory=dict)
    read: list[LearnedRule] = field(default_factory=list)
    # Rules declared but refused at load: a condition naming one is not also reported as undeclared.
    refused: set[tuple[str, str]] = field(default_factory=set)

    def declares(self, type_: str, name: str) -> bool:
        return (type_, name) in self.rules or (type_, name) in self.refused

    def rule(self, type_: str, name: str) -> LearnedRule | None:
        return self.rules.get((type_, name))

    def mark_read(self, pairs) -> None:
        """Request-stage rules that decisions and projections read; others are never asked."""
        seen = {}
        for pair in pairs:
            rule = self.rules.get(pair)
            if rule is not None and rule.stage == "request":
                seen[pair] = rule
        self.read = list(seen.values())

    def response_rules(self) -> list[LearnedRule]:
        """The response-stage rules, asked only when a response_guard rule reads them."""
        return [r for r in self.rules.values() if r.stage == "response"]

    def asked(self) -> dict[Share, wire.Question]:
        """The questions the request stage asks: one per share of the read rules."""
        return {r.share: self.questions[r.share] for r in self.read}


def _bound(rule_predicate: Predicate | None, default: float) -> float | None:
    """The probability a rule's predicate turns on (its gte/gt), for re-read margins."""
    if rule_predicate is None or rule_predicate.is_empty():
        return default
    return rule_predicate.gte if rule_predicate.gte is not None else rule_predicate.gt


def _threshold(rule_predicate: Predicate | None, default: float) -> Callable[[float], bool]:
    if rule_predicate is not None and not rule_predicate.is_empty():
        return rule_predicate.holds
    return lambda p: p >= default


class _Compiler:
    def __init__(self, recipe_path: str, catalog: ModelCatalog, bindings: dict[str, str],
                 deployments: dict[str, Deployment], capable: Callable[[str], caps.Capable | None],
                 errors: CompileErrors, warnings: list[str]) -> None:
        self.path = recipe_path
        self.catalog = catalog
        self.bindings = bindings
        self.deployments = deployments
        self.capable = capable
        self.errors = errors
        self.warnings = warnings
        self.out = LearnedSignals()

    # -- deployments ------------------------------------------------------------------
    def deployment_for(self, condition_type: str | None, explicit: str | None) -> str:
        """Rule's deployment, recipe binding, global binding, then the decision model (spec 6.5)."""
        if explicit:
            return explicit
        if condition_type:
            bound = self.bindings.get(condition_type) or self.catalog.bindings.get(condition_type)
            if bound:
                return bound
        return self.catalog.system.decision_model.deployment or PRIMARY

    def check_deployment(self, rule_path: str, name: str, question_type: str, head: str | None,
                         media: set[str], binding_type: str | None) -> caps.Capable | None:
        if name not in self.deployments:
            self.errors.add(rule_path, "unknown_deployment",
                            f"resolves to deployment {name!r}, which global.model_catalog.deployments does not declare")
            return None
        capable = self.capable(name)
        if capable is None or not capable.known:
            return capable
        set_by_noul = question_type == "set" and "noul" in capable.question_types
        if question_type not in capable.question_types and not set_by_noul:
            if question_type == "span":
                kind = binding_type or "this rule"
                self.errors.add(rule_path, "span_required",
                                f'resolves to deployment "{name}", which cannot answer span questions; bind {kind} to a '
                                f"span-capable deployment (rule deployment, {self.path}.model_bindings.{kind} or "
                                f"global.model_catalog.bindings.{kind})")
            else:
                self.errors.add(rule_path, "question_type_unsupported",
                                f'asks a {question_type} question; deployment "{name}" ({capable.model or capable.kind}) '
                                f"answers {', '.join(sorted(capable.question_types)) or 'nothing'}")
        if head is not None and head not in capable.span_heads:
            self.errors.add(rule_path, "span_head_unsupported",
                            f'names span head {head!r}; the model of deployment "{name}" has '
                            f"{', '.join(sorted(capable.span_heads)) or 'no named heads'}")
        for medium in sorted(media - set(capable.modalities)):
            self.errors.add(rule_path, "input_modality_unsupported",
                            f'reads {medium}; deployment "{name}" reads {", ".join(sorted(capable.modalities))}')
        return capable

    # -- rules ---------------------------------------------------------------------------
    def add(self, rule: LearnedRule) -> None:
        key = (rule.condition_type, rule.name)
        if key in self.out.rules:
            self.errors.add(f"{rule.path}.name", "duplicate_name",
                            f"{rule.condition_type} rule {rule.name!r} is declared more than once")
            return
        self.out.rules[key] = rule

    def check_parts(self, rule_path: str, deployment: str, capable: caps.Capable | None, stage: str,
                    preset_name: str | None, question_type: str, parts: tuple[str, ...]) -> None:
        """Warn of each ``input.*`` part the rule asks for that the model's card says it does not read."""
        if capable is None or not capable.known or capable.reads is None:
            return
        read = capable.reads.get(stage, {})
        kind = f"preset:{preset_name}" if preset_name else question_type
        what = f"preset {preset_name}" if preset_name else f"a {question_type} question"
        for part in parts:
            if question_type == "span" and stage == "request" and part in SPAN_PARTS:
                continue
            if kind in read.get(part, ()) or question_type in read.get(part, ()):
                continue
            self.warnings.append(
                f"{rule_path}.input.{part}: input_unread: deployment {deployment!r} ({capable.model or capable.kind}) "
                f"does not read {part} for {what} at the {stage} stage, as its card says; "
                "its answer ignores that part")

    def preset_rule(self, signal: str, rule, *, labels=None, predicate=None, stage="request", spec=StateSpec(),
                    ignore=(), on_unknown=None, parts: tuple[str, ...] = ()) -> None:
        """``parts``: the state parts the rule's ``input`` asks for beyond the current turn."""
        condition_type, preset_name = APPLICATION_SIGNALS[signal]
        rule_path = f"{self.path}.signals.{signal}[{rule.name}]"
        if signal == "safety" and labels:
            preset_name = "harm_categories"
        preset = PRESETS[preset_name]
        options = tuple(preset.options)
        if signal == "domains" and labels is None:
            labels = [rule.name]
        chosen = tuple(labels) if labels else ((preset.positive,) if preset.positive else ())
        for i, label in enumerate(labels or ()):
            if label not in preset.options:
                self.errors.add(f"{rule_path}.labels[{i}]", "invalid_value",
                                f"{label!r} is not an option of preset {preset_name} ({', '.join(options)})")
        for i, label in enumerate(ignore):
            if label not in preset.options:
                self.errors.add(f"{rule_path}.ignore_labels[{i}]", "invalid_value",
                                f"{label!r} is not a label of preset {preset_name}")
        if stage not in preset.stages:
            self.errors.add(f"{rule_path}.stage", "invalid_value", f"preset {preset_name} is not asked at the {stage} stage")
        if stage == "response":
            # The response stage asks about the request and the answer (and the context its preset reads).
            spec = dataclasses.replace(spec, answer=True, context="context" in preset.reads, coverage="truncate")
        deployment = self.deployment_for(condition_type, rule.deployment)
        media = {"image"} if spec.images else set()
        reported = len(self.errors.lines)
        capable = self.check_deployment(rule_path, deployment, preset.type, None, media, condition_type)
        if (capable is not None and capable.known and capable.presets is not None and preset_name not in capable.presets
                and len(self.errors.lines) == reported):
            # The card says the model refuses this question in place: the rule would always be unknown (spec 5.2).
            self.errors.add(rule_path, "span_required" if preset.type == "span" else "question_type_unsupported",
                            f"deployment {deployment!r} ({capable.model or capable.kind}) does not answer preset "
                            f"{preset_name}, as its card says; bind {condition_type} to a deployment that answers it "
                            f"(rule deployment, {self.path}.model_bindings.{condition_type} or "
                            f"global.model_catalog.bindings.{condition_type})")
        if preset.type == "span" and capable is not None and capable.known and capable.span_labels is not None:
            unmarked = [o for o in options if o not in ignore and o not in capable.span_labels]
            if unmarked:
                self.warnings.append(
                    f"{rule_path}: span_labels_unanswered: deployment {deployment!r} ({capable.model or capable.kind}) "
                    f"does not mark {', '.join(unmarked)}, as its card says; add them to ignore_labels or expect "
                    f"them never found")
        self.check_parts(rule_path, deployment, capable, stage, preset_name, preset.type, parts)
        default = NEUTRAL_THRESHOLD
        if predicate is None and capable is not None and capable.known:
            calibrated = capable.calibrated.get(preset_name if preset_name != "harm_categories" else "harm")
            if calibrated is not None and stage == "request":
                default = calibrated
            else:
                self.warnings.append(
                    f"{rule_path}: uncalibrated_preset: preset {preset_name} on deployment {deployment!r} "
                    f"({capable.model or capable.kind}) has no calibrated threshold; the rule uses 0.5")
        # A family's trained ID where its model declares one; else the Router-owned ID (spec 5.1).
        wire_id = (capable.trained_ids.get(preset_name) if capable is not None else None) or preset.wire_id
        self.add(LearnedRule(
            condition_type, rule.name, rule_path, preset.type, options, chosen, frozenset(ignore),
            _threshold(predicate, default), stage, Share(wire_id, deployment, stage, spec),
            rule.timeout_ms, on_unknown, preset=preset, threshold=_bound(predicate, default),
            # Compiled jailbreak and pii rules count unreadable text as an attack or as personal data.
            on_unscanned="match" if condition_type in ("jailbreak", "pii") else "unknown",
        ))

    def systemone_rule(self, rule: app.SystemOneRule) -> None:
        rule_path = f"{self.path}.signals.systemone[{rule.name}]"
        q = rule.question
        options: tuple[str, ...] = ()
        if q.type in ("choice", "set", "span"):
            if q.criteria is None:
                self.errors.add(f"{rule_path}.question.criteria", "invalid_value",
                                f"a {q.type} question needs criteria: option -> description")
                self.out.refused.add((SYSTEMONE, rule.name))
                return
            for i, name in enumerate(q.criteria if isinstance(q.criteria, list) else ()):
                if name in q.criteria[:i]:
                    self.errors.add(f"{rule_path}.question.criteria[{i}]", "duplicate_name",
                                    f"option {name!r} is written twice")
            options = tuple(dict.fromkeys(q.criteria))
        if q.type == "score" and not isinstance(q.criteria, list):
            self.errors.add(f"{rule_path}.question.criteria", "invalid_value", "a score question needs criteria: a list of levels")
            self.out.refused.add((SYSTEMONE, rule.name))
            return
        if q.type in wire.LIMITS:
            low, high = wire.LIMITS[q.type]
            count = len(q.criteria or ())
            if not low <= count <= high:
                self.errors.add(f"{rule_path}.question.criteria", "invalid_value",
                                f"a {q.type} question takes {low} to {high} options, not {count}")
        if q.type == "score" and rule.predicate is None:
            self.errors.add(f"{rule_path}.predicate", "invalid_value", "a score rule matches on its expected level: give a predicate")
        for i, label in enumerate(rule.labels or ()):
            if label not in options:
                self.errors.add(f"{rule_path}.labels[{i}]", "invalid_value", f"{label!r} is not an option of the question")
        deployment = self.deployment_for(None, rule.deployment)
        media = {m for m in ("image", "audio", "video") if getattr(rule.input, m)}
        capable = self.check_deployment(rule_path, deployment, q.type, q.head, media, None)
        self.check_parts(rule_path, deployment, capable, rule.stage, None, q.type,
                         _parts(rule.input, ("history", "previous_turns", "tool_results", "context")))
        spec = StateSpec(rule.input.history, rule.input.previous_turns, rule.input.tool_results, rule.input.image,
                         coverage=rule.coverage, answer=rule.input.answer, context=rule.input.context)
        if rule.stage == "request" and (rule.input.answer or rule.input.context):
            self.errors.add(f"{rule_path}.stage", "invalid_value",
                            "input.answer and input.context read the model's answer: set stage: response")
        wire_id = f"{SYSTEMONE}:{rule.name}"
        question = _custom_question(q)
        learned = LearnedRule(
            SYSTEMONE, rule.name, rule_path, q.type, options, tuple(rule.labels or ()), frozenset(rule.ignore_labels),
            _threshold(rule.predicate, NEUTRAL_THRESHOLD), rule.stage, Share(wire_id, deployment, rule.stage, spec),
            rule.timeout_ms, None, question=question, threshold=_bound(rule.predicate, NEUTRAL_THRESHOLD),
            on_unscanned=rule.on_unscanned, min_coverage=rule.min_coverage,
        )
        self.add(learned)
        self.out.questions[learned.share] = question


def _parts(rule_input, names: tuple[str, ...]) -> tuple[str, ...]:
    """The parts of ``names`` a rule's ``input`` block asks for (a true flag, a positive turn count)."""
    return tuple(n for n in names if getattr(rule_input, n))


def _custom_question(q: app.QuestionSpec) -> wire.Question:
    if q.type == "noul":
        return wire.NoulQuestion(instructions=q.instructions)
    if q.type == "score":
        return wire.ScoreQuestion(criteria=list(q.criteria or []), instructions=q.instructions)
    # A list of options names them without descriptions: each is read by its name alone.
    criteria = dict.fromkeys(q.criteria) if isinstance(q.criteria, list) else dict(q.criteria or {})
    if q.type == "choice":
        return wire.ChoiceQuestion(criteria=criteria, instructions=q.instructions)
    if q.type == "set":
        return wire.SetQuestion(criteria=criteria, instructions=q.instructions)
    return wire.SpanQuestion(criteria=criteria, instructions=q.instructions, head=q.head)


def compile_learned(signals: app.Signals, recipe_path: str, recipe_bindings: dict[str, str], catalog: ModelCatalog,
                    capable: Callable[[str], caps.Capable | None], errors: CompileErrors,
                    warnings: list[str]) -> LearnedSignals:
    """Compile a recipe's learned rules into shared questions, with the load checks of spec 6.9."""
    c = _Compiler(recipe_path, catalog, recipe_bindings, caps.deployments(catalog), capable, errors, warnings)
    for rule in signals.systemone:
        c.systemone_rule(rule)
    for rule in signals.domains:
        c.preset_rule("domains", rule, labels=rule.labels, predicate=rule.predicate)
    for signal in ("fact_check", "user_feedbacks", "modality"):
        for rule in getattr(signals, signal):
            c.preset_rule(signal, rule, labels=rule.labels, predicate=rule.predicate,
                          spec=StateSpec(previous_answer=signal == "user_feedbacks"))
    for rule in signals.jailbreak:
        c.preset_rule("jailbreak", rule, predicate=rule.predicate, stage=rule.stage,
                      spec=StateSpec(history=rule.input.history, coverage="full"),
                      parts=_parts(rule.input, ("history",)),
                      # At the response stage the guard's own on_unknown decides an unknown answer.
                      on_unknown=rule.on_unknown if rule.stage == "request" else None)
    for rule in signals.safety:
        c.preset_rule("safety", rule, labels=rule.labels, predicate=rule.predicate, stage=rule.stage,
                      spec=StateSpec(coverage="full"))
    for rule in signals.pii:
        c.preset_rule("pii", rule, predicate=rule.predicate, ignore=tuple(rule.ignore_labels),
                      spec=StateSpec(history=rule.input.history, tool_results=rule.input.tool_results, coverage="full"),
                      on_unknown=rule.on_unknown, parts=_parts(rule.input, SPAN_PARTS))
    for signal in ("hallucination", "refusal"):
        for rule in getattr(signals, signal):
            c.preset_rule(signal, rule, predicate=rule.predicate, stage="response")
    for rule in signals.turn_relation:
        c.preset_rule("turn_relation", rule, labels=rule.labels,
                      spec=StateSpec(previous_turns=rule.input.previous_turns),
                      parts=_parts(rule.input, ("previous_turns",)))
    for rule in signals.complexity:
        c.preset_rule("complexity", rule, labels=rule.labels)
    _merge_shares(c.out, capable)
    return c.out


def _merge_shares(out: LearnedSignals, capable: Callable[[str], caps.Capable | None]) -> None:
    """One wire question per share: a set question carries the union of its rules' labels, and is
    asked label by label of a deployment that answers noul but no set (spec 5.2)."""
    by_share: dict[Share, list[LearnedRule]] = {}
    for rule in out.rules.values():
        by_share.setdefault(rule.share, []).append(rule)
    for share, rules in by_share.items():
        first = rules[0]
        if first.preset is None:
            if first.question_type == "set":
                answers = capable(share.deployment)
                if answers is not None and answers.known and "set" not in answers.question_types:
                    out.questions[share] = SetAsNoul(out.questions[share])
                    for r in rules:
                        r.question = out.questions[share]
            continue
        if first.question_type == "set":
            wanted = {label for r in rules for label in (r.labels or r.options)}
            question = first.preset.question(tuple(o for o in first.options if o in wanted))
            answers = capable(share.deployment)
            if answers is not None and answers.known and "set" not in answers.question_types:
                question = SetAsNoul(question)
        elif first.question_type == "span":
            # Only the labels some rule keeps: a label every rule ignores is not asked, so a model skips its
            # detector (vsr-static's named-entity stage runs only when a rule keeps one of its labels).
            wanted = {o for r in rules for o in r.options if o not in r.ignore}
            question = first.preset.question(tuple(o for o in first.options if o in wanted) or None)
        else:
            question = first.preset.question()
        out.questions[share] = question
        for r in rules:
            r.question = question


# -- answers to outcomes -----------------------------------------------------------------------


def fold_parts(own: Outcome, parts: list[tuple[str, Outcome]]) -> Outcome:
    """A rule's outcome over the current turn and each earlier text it reads asked on its own (a span rule's
    earlier turns, a long earlier turn's windows: ``history_windows``): it matches when any of them does, and is
    unknown when none does and one is unknown. The spans stay the current turn's: their offsets index the
    request, and masking reuses them as its own."""
    if not parts:
        return own
    hits = [name for name, o in parts if o.matched]
    unknown = [name for name, o in parts if o.matched is None]
    matched = True if own.matched or hits else (None if own.matched is None or unknown else False)
    labels = dict(own.labels or {})
    for _, o in parts:
        for label, hit in (o.labels or {}).items():
            labels[label] = labels.get(label, False) or hit
    values = [o.value for o in (own, *(o for _, o in parts)) if o.value is not None]
    detail = f"{own.detail}; {len(parts)} earlier texts read"
    if hits:
        detail += f", matched in {', '.join(hits)}"
    if unknown:
        detail += f", unknown in {', '.join(unknown)}"
    # Matched by an earlier text alone: as sure as the surest of those texts.
    confidence = max(o.confidence for _, o in parts if o.matched) if hits and not own.matched else own.confidence
    return dataclasses.replace(own, matched=matched, value=max(values) if values else None, labels=labels,
                               confidence=confidence, detail=detail)


def why_unknown(answers, share: Share) -> str:
    """Why ``share`` has no answer in ``answers`` (``client.Answered``), ``<reason>: <detail>``: what the client
    layer said (its call's failure, its question's, an answer left out), else the deadline passed first."""
    return getattr(answers, "failed", {}).get(share) or "timeout: no answer within the signals' deadline"


def outcome_of(rule: LearnedRule, answer: wire.Answer | None, why: str = "no answer") -> Outcome:
    """The rule's Outcome from its shared question's answer; None or an error is unknown."""
    if answer is None or isinstance(answer, wire.QuestionError):
        if isinstance(answer, wire.QuestionError):
            detail = f"unknown: {answer.code}: {answer.message}" if answer.message else f"unknown: {answer.code}"
        else:
            detail = f"unknown: {why}"
        if rule.on_unknown == "match":
            return Outcome(True, confidence=0.0, detail=detail + " (on_unknown: match)")
        if rule.on_unknown == "no_match":
            return Outcome(False, confidence=0.0, detail=detail + " (on_unknown: no_match)")
        return Outcome(None, confidence=0.0, detail=detail)
    if isinstance(answer, wire.NoulAnswer):
        hit = rule.passes(answer.noul)
        return Outcome(hit, value=answer.noul, confidence=answer.noul, detail=f"P(yes)={answer.noul:.3g}")
    if isinstance(answer, wire.ScoreAnswer):
        return Outcome(rule.passes(answer.score), value=answer.score, confidence=answer.confidence,
                       detail=f"score={answer.score:.3g}")
    if isinstance(answer, (wire.ChoiceAnswer, wire.SetAnswer)):
        probs = answer.probabilities
        labels = {o: rule.passes(probs.get(o, 0.0)) for o in rule.options if o not in rule.ignore}
        mine = [o for o in rule.labels if o not in rule.ignore]
        best = max((probs.get(o, 0.0) for o in mine), default=0.0)
        hit = any(labels.get(o, False) for o in mine)
        top = max(probs, key=probs.get) if probs else "-"
        return Outcome(hit, value=best, confidence=best, labels=labels,
                       detail=f"top {top} {probs.get(top, 0.0):.3g}; {'/'.join(mine) or 'no labels'} {best:.3g}")
    if isinstance(answer, wire.SpanAnswer):
        kept = [s for s in answer.spans if s.label not in rule.ignore and rule.passes(s.probability)]
        mine = set(rule.labels) if rule.labels else set(rule.options)
        labels = {o: any(s.label == o for s in kept) for o in rule.options if o not in rule.ignore}
        hit = any(s.label in mine for s in kept)
        best = max((s.probability for s in kept if s.label in mine), default=0.0)
        return Outcome(hit, value=best, confidence=best if hit else 1.0, labels=labels, spans=kept,
                       detail=f"{len(kept)} spans: {', '.join(sorted({s.label for s in kept})) or 'none'}")
    return Outcome(None, detail=f"unknown: unexpected answer {type(answer).__name__}")
