"""Diagnostics classify (spec 6.8): a text asked of the decision model through a recipe's rules of one signal.

Each task reads one application signal. When the recipe configures rules of
it, those rules are asked (their deployments, labels and predicates: what the
recipe's decisions would see); otherwise the signal's preset is asked on the
deployment the recipe binds it to, with one rule of the preset's own. The
questions of one call are merged per deployment, and a long text is read in
windows by the guard tasks, exactly as at the request stage.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import msgspec

from ..config import application as app
from ..errors import ClassifyFailed, ContextLengthExceeded, RoutingError, echoing
from ..protocol import systemone as wire
from ..protocol.chat import ChatRequest
from ..signals.base import CanonicalRequest, CompileErrors
from ..signals.registry import Readings
from ..systemone.asker import SystemOneAsker
from ..systemone.client import SystemOneClient
from ..systemone.learned import LearnedRule, LearnedSignals, compile_learned
from ..systemone.presets import APPLICATION_SIGNALS, DOMAINS, PRESETS
from ..systemone.scan import MAX_WINDOWS
from .plan import RoutingTable, read_learned

# Task (the path's last step) -> the application signal it reads.
TASKS = MappingProxyType({"intent": "domains", "pii": "pii", "security": "jailbreak", "fact-check": "fact_check",
                          "user-feedback": "user_feedbacks"})
COMBINED = ("intent", "pii", "security")
_FEEDBACK = tuple(o for o in PRESETS["feedback"].options if o != "NO_FEEDBACK")
# The rule a task asks when the recipe configures none: the preset, calibrated as the deployment's card says.
_PRESET_RULES = MappingProxyType({
    "domains": app.DomainRule(name="intent", labels=[d for d in DOMAINS if d != "other"]),
    "pii": app.PiiRule(name="pii"),
    "jailbreak": app.JailbreakRule(name="security"),
    "fact_check": app.LabelledRule(name="fact_check"),
    "user_feedbacks": app.LabelledRule(name="user_feedback", labels=list(_FEEDBACK)),
})


@dataclass
class TaskSet:
    """The compiled rules of some tasks on one recipe, and where each task's rules came from."""

    recipe: str
    learned: LearnedSignals
    sources: dict[str, str]                 # task -> "signals" (the recipe's rules) or "preset"
    rules: dict[str, list[LearnedRule]]     # task -> its rules
    asker: SystemOneAsker | None = None


class Classifier:
    """Classify requests over one loaded table; task sets compile on first use, once per (recipe, tasks)."""

    def __init__(self, table: RoutingTable, client: SystemOneClient | None) -> None:
        self.table, self.client = table, client
        self._sets: dict[tuple[str, tuple[str, ...]], TaskSet] = {}

    def task_set(self, recipe_name: str | None, tasks: tuple[str, ...]) -> TaskSet:
        """The compiled rules of ``tasks`` on a recipe (the default one when unnamed); 400 for an unknown one."""
        compiled = self.table.recipes.get(recipe_name) if recipe_name else self.table.default
        if compiled is None:
            raise (echoing(RoutingError, "No recipe {}", recipe_name, param="recipe") if recipe_name else
                   RoutingError("The configuration has no default recipe: name one in 'recipe'", param="recipe"))
        key = (compiled.recipe.name, tasks)
        found = self._sets.get(key)
        if found is None:
            found = self._sets[key] = self._compile(compiled.recipe, tasks)
        return found

    def _compile(self, recipe, tasks: tuple[str, ...]) -> TaskSet:
        fields, sources = {}, {}
        for task in tasks:
            signal = TASKS[task]
            configured = [r for r in getattr(recipe.signals, signal) if getattr(r, "stage", "request") == "request"]
            fields[signal] = configured or [_PRESET_RULES[signal]]
            sources[task] = "signals" if configured else "preset"
        errors = CompileErrors()
        learned = compile_learned(app.Signals(**fields), f"recipes[{recipe.name}]", recipe.model_bindings,
                                  self.table.catalog, self.table.resolved, errors, [])
        if errors.lines:
            raise ClassifyFailed("; ".join(errors.lines))
        learned.mark_read(list(learned.rules))
        used = self.table.used_deployments()
        for rule in learned.read:
            if rule.share.deployment not in used:
                raise ClassifyFailed(f"deployment {rule.share.deployment!r} is not started: no rule of this "
                                     f"configuration resolves to it, so {rule.path} has no model to ask")
        by_task = {task: [r for r in learned.read if r.condition_type == _condition(TASKS[task])] for task in tasks}
        asker = self.table.asker(self.client, learned.questions) if self.client is not None else None
        return TaskSet(recipe.name, learned, sources, by_task, asker)

    async def classify(self, tasks: tuple[str, ...], text: str, *, recipe: str | None = None,
                       previous_answer: str | None = None) -> dict:
        """Each task's result for ``text``: what the rules say, and the summary of spec 6.8's classify APIs."""
        task_set = self.task_set(recipe, tasks)
        if task_set.asker is None:
            raise ClassifyFailed("no decision model is started for this configuration")
        for rule in task_set.learned.read:
            params = task_set.asker.scan_params.get(rule.share.deployment)
            size = len(text.encode())
            if params is not None and size > params.reach_bytes:
                raise ContextLengthExceeded(
                    f"The text is {size} bytes; deployment {rule.share.deployment!r} reads at most "
                    f"{params.reach_bytes} bytes ({MAX_WINDOWS} windows of up to {params.max_bytes})", param="text")
        canonical = CanonicalRequest.from_chat(_chat(text, previous_answer))
        readings = Readings()
        answers = await read_learned(task_set.learned, canonical, readings, task_set.asker) or {}
        out = {}
        for task in tasks:
            rules = task_set.rules[task]
            outcomes = [(r, readings.outcomes[(r.condition_type, r.name)]) for r in rules]
            if all(o.matched is None for _, o in outcomes):
                raise ClassifyFailed(f"the decision model did not answer the {task} question: "
                                     + "; ".join(o.detail or "unknown" for _, o in outcomes))
            out[task] = {"source": task_set.sources[task], **_summary(task, outcomes, answers, text),
                         "signals": [{"type": r.condition_type, "name": r.name, "matched": o.matched,
                                      "value": o.value, "confidence": o.confidence, "detail": o.detail}
                                     for r, o in outcomes]}
        return {"recipe": task_set.recipe, "results": out}


def _condition(signal: str) -> str:
    return APPLICATION_SIGNALS[signal][0]


def _chat(text: str, previous_answer: str | None) -> ChatRequest:
    messages = [{"role": "assistant", "content": previous_answer}] if previous_answer is not None else []
    return msgspec.convert({"model": "classify", "messages": [*messages, {"role": "user", "content": text}]},
                           ChatRequest)


def _summary(task: str, outcomes: list, answers, text: str) -> dict:
    """The task's own fields: a category, an attack score, entities, a need for checking, a reaction."""
    matched = any(o.matched for _, o in outcomes)
    best = max((o.value for _, o in outcomes if o.value is not None), default=None)
    if task in ("intent", "user-feedback"):
        answer = answers.get(outcomes[0][0].share)
        probabilities = dict(answer.probabilities) if isinstance(answer, (wire.ChoiceAnswer, wire.SetAnswer)) else {}
        top = max(probabilities, key=probabilities.get) if probabilities else None
        key = "category" if task == "intent" else "feedback"
        return {key: top, "confidence": probabilities.get(top) if top else None, "probabilities": probabilities,
                "matched": matched}
    if task == "pii":
        seen, entities = set(), []
        for _, o in outcomes:
            for span in o.spans or ():
                if (span.label, span.start, span.end) not in seen:
                    seen.add((span.label, span.start, span.end))
                    entities.append({"type": span.label, "start": span.start, "end": span.end,
                                     "text": span.text if span.text is not None else text[span.start:span.end],
                                     "confidence": span.probability})
        return {"has_pii": matched, "entities": sorted(entities, key=lambda e: (e["start"], e["type"]))}
    if task == "security":
        return {"is_jailbreak": matched, "risk_score": best}
    return {"needs_fact_check": matched, "confidence": best}

