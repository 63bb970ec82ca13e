"""``request_params``: constrain or remove request parameters, and set the decision's generation shape (spec 5.7).

Constraints: ``blocked_params`` are removed, ``max_tokens_limit`` caps the
answer's token budget (and sets it where the request has none), ``max_n`` caps ``n``, ``temperature`` is clamped.
The generation shape (``generation``) bounds a turn as the tier report
(``conversation-tier-budgets.md``) does: thinking on or off, a token budget,
a thinking budget, and ``reasoning_effort`` only together with thinking (a
served vLLM rejects effort without it). Every value is written in the target
``api_format``'s own fields; what a format cannot carry is left out. The thinking
part reaches only a model that reasons (``capabilities: [reasoning]``), and
vLLM's ``chat_template_kwargs`` only one whose ``reasoning_family`` says it takes
them: gpt-4o and its like answer 400 to a reasoning field, OpenAI to an argument
it does not know.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from ..config.schema_base import Block
from ..protocol.anthropic import MIN_THINKING_BUDGET, enable_thinking, thinking_block_missing
from ._merge import merged_fields

TYPE = "request_params"
Tokens = Annotated[int, Meta(ge=1, le=10_000_000)]
# Fields that make the request what it is: blocking them would not constrain it, it would break it.
_ESSENTIAL = frozenset({"model", "messages", "input", "prompt", "stream"})
# The fields each api_format spells the answer's token budget with; the first is the one a cap adds (OpenAI's
# reasoning models refuse max_tokens, which the Chat API deprecated; vLLM reads either).
_MAX_TOKENS = {"openai": ("max_completion_tokens", "max_tokens"), "anthropic": ("max_tokens",),
               "responses": ("max_output_tokens",)}


class TemperatureBounds(Block):
    min: Annotated[float, Meta(ge=0, le=2)] = 0.0
    max: Annotated[float, Meta(ge=0, le=2)] = 2.0


class Generation(Block):
    """One tier's generation shape."""

    thinking: bool | None = None
    max_tokens: Tokens | None = None
    thinking_budget: Tokens | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high", "xhigh"] | None = None


class RequestParamsConfig(Block):
    """``{type: request_params, configuration: ...}`` at one layer."""

    enabled: bool | UnsetType = UNSET
    blocked_params: list[Annotated[str, Meta(min_length=1)]] | UnsetType = UNSET
    max_tokens_limit: Tokens | UnsetType = UNSET
    max_n: Annotated[int, Meta(ge=1, le=128)] | UnsetType = UNSET
    temperature: TemperatureBounds | UnsetType = UNSET
    generation: Generation | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class RequestParams:
    blocked: frozenset[str] = frozenset()
    max_tokens_limit: int | None = None
    max_n: int | None = None
    temperature: TemperatureBounds | None = None
    generation: Generation | None = None

    def apply(self, body: dict[str, Any], api_format: str, reasoning: str | None = None) -> str | None:
        """Rewrite ``body`` in place for ``api_format`` and a model whose reasoning syntax is ``reasoning``
        (``ProviderModel.reasoning``: None when it does not reason); what changed, for the replay record."""
        if api_format not in _MAX_TOKENS:
            return None
        changes: list[str] = []
        for name in sorted(self.blocked & body.keys()):
            del body[name]
            changes.append(f"-{name}")
        gen = self.generation
        limit = min(x for x in (self.max_tokens_limit, gen.max_tokens if gen else None, 1 << 62) if x)
        if limit < 1 << 62:
            # A request without a budget takes the backend's own (often the context's rest): the cap sets one.
            changes += _cap_tokens(body, api_format, limit)
        if self.max_n is not None and isinstance(body.get("n"), int) and body["n"] > self.max_n:
            body["n"] = self.max_n
            changes.append(f"n={self.max_n}")
        t = self.temperature
        if t is not None and isinstance(body.get("temperature"), (int, float)):
            clamped = min(max(body["temperature"], t.min), t.max)
            if clamped != body["temperature"]:
                body["temperature"] = clamped
                changes.append(f"temperature={clamped:g}")
        if gen is not None and gen.thinking is not None:
            if reasoning is None:
                changes.append("thinking not sent (model_does_not_reason)")
            elif api_format == "openai":
                changes += _chat_thinking(body, gen, reasoning == "chat_template_kwargs")
            else:
                changes += _THINKING[api_format](body, gen)
        return " ".join(changes) or None


def resolve(*layers: RequestParamsConfig | None) -> RequestParams | None:
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False:
        return None
    params = RequestParams(blocked=frozenset(values.get("blocked_params", ())),
                           max_tokens_limit=values.get("max_tokens_limit"), max_n=values.get("max_n"),
                           temperature=values.get("temperature"), generation=values.get("generation"))
    return None if params == RequestParams() else params


def check(raw: dict, path: str) -> list[str]:
    """Load errors the block's types cannot say."""
    errors = []
    for i, name in enumerate(raw.get("blocked_params") or []):
        if name in _ESSENTIAL:
            errors.append(f"{path}.blocked_params[{i}]: invalid_value: {name!r} makes the request what it is; "
                          "it cannot be removed")
    t = raw.get("temperature")
    if isinstance(t, dict) and isinstance(t.get("min"), (int, float)) and isinstance(t.get("max"), (int, float)) \
            and t["min"] > t["max"]:
        errors.append(f"{path}.temperature: invalid_value: min {t['min']} is above max {t['max']}")
    gen = raw.get("generation")
    if isinstance(gen, dict):
        if gen.get("reasoning_effort") is not None and gen.get("thinking") is not True:
            errors.append(f"{path}.generation.reasoning_effort: invalid_value: reasoning_effort is sent only "
                          "together with thinking: true (a served vLLM rejects it otherwise)")
        if gen.get("thinking_budget") is not None and gen.get("thinking") is not True:
            errors.append(f"{path}.generation.thinking_budget: invalid_value: a thinking budget needs thinking: true")
        budget, most = gen.get("thinking_budget"), gen.get("max_tokens")
        if isinstance(budget, int) and isinstance(most, int) and budget >= most:
            errors.append(f"{path}.generation.thinking_budget: invalid_value: the thinking budget ({budget}) must "
                          f"be below max_tokens ({most}): thinking is billed against the same budget")
    return errors


def _cap_tokens(body: dict, api_format: str, limit: int) -> list[str]:
    names = _MAX_TOKENS[api_format]
    present = [n for n in names if isinstance(body.get(n), int)]
    changes = []
    for name in present:
        if body[name] > limit:
            body[name] = limit
            changes.append(f"{name}={limit}")
    if not present:
        body[names[0]] = limit
        changes.append(f"{names[0]}={limit}")
    return changes


def _chat_thinking(body: dict, gen: Generation, template: bool) -> list[str]:
    """Chat's ``reasoning_effort`` with thinking, and for a vLLM model (``template``) its chat template switches:
    ``chat_template_kwargs.enable_thinking`` and ``thinking_budget``. OpenAI's API has neither switch nor budget."""
    changes = [f"thinking={'on' if gen.thinking else 'off'}"]
    if template:
        kwargs = body.get("chat_template_kwargs")
        kwargs = dict(kwargs) if isinstance(kwargs, dict) else {}
        kwargs["enable_thinking"] = bool(gen.thinking)
        if gen.thinking and gen.thinking_budget:
            kwargs["thinking_budget"] = gen.thinking_budget
            changes.append(f"thinking_budget={gen.thinking_budget}")
        else:
            kwargs.pop("thinking_budget", None)
        body["chat_template_kwargs"] = kwargs
    if gen.thinking and gen.reasoning_effort:
        body["reasoning_effort"] = gen.reasoning_effort
        changes.append(f"reasoning_effort={gen.reasoning_effort}")
    else:
        body.pop("reasoning_effort", None)
    return changes


def _messages_thinking(body: dict, gen: Generation) -> list[str]:
    """Anthropic's ``thinking`` block; its budget must be at least 1,024 and below ``max_tokens``, and Anthropic
    rejects it beside a changed temperature, a top_k, a top_p below 0.95 or a tool choice that forces a tool."""
    if not gen.thinking:
        body["thinking"] = {"type": "disabled"}
        return ["thinking=off"]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        # The client's forced tool is what it asked for; the tier's thinking is what the router would add.
        body.pop("thinking", None)
        return ["thinking=off (tool_choice forces a tool)"]
    if thinking_block_missing(body):
        # The client's tool loop lacks Claude's signed thinking block: Anthropic refuses thinking on without it.
        body.pop("thinking", None)
        return ["thinking=off (the last tool call has no thinking block)"]
    budget = max(gen.thinking_budget or MIN_THINKING_BUDGET, MIN_THINKING_BUDGET)
    changes = enable_thinking(body, budget, gen.max_tokens)
    return ["thinking=on", f"budget_tokens={budget}", *changes]


def _responses_thinking(body: dict, gen: Generation) -> list[str]:
    """Responses has no thinking switch or budget: ``reasoning.effort`` with thinking, no reasoning block without."""
    if not gen.thinking:
        body.pop("reasoning", None)
        return ["thinking=off"]
    if gen.reasoning_effort:
        reasoning = dict(body["reasoning"]) if isinstance(body.get("reasoning"), dict) else {}
        reasoning["effort"] = gen.reasoning_effort
        body["reasoning"] = reasoning
        return ["thinking=on", f"reasoning.effort={gen.reasoning_effort}"]
    return ["thinking=on"]


_THINKING = {"anthropic": _messages_thinking, "responses": _responses_thinking}
