"""``context`` signals: the request's estimated tokens lie in a band (spec 5.2).

The estimate is the spec's unit, 4 UTF-8 bytes a token, over the text of every
message: no tokenizer, so it is the same for every model and costs one pass.
"""
from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal

from ..config.signals import ContextRule, TokenCount
from .base import CanonicalRequest, CompileErrors, Outcome, RuleFamily, compile_each

BYTES_PER_TOKEN = 4

# "8000", "16K", "1.5k", "1M": decimal SI multipliers, case-insensitive. ASCII
# digits only: str.isdigit and \d also accept other scripts' digits.
_COUNT = re.compile(r"([0-9]+(?:\.[0-9]+)?)([kKmM]?)")
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}


def estimate_tokens(request: CanonicalRequest) -> int:
    """ceil(UTF-8 bytes / 4) over every message's text."""
    return -(-request.all_text_bytes // BYTES_PER_TOKEN)


def parse_token_count(raw: TokenCount) -> int:
    """8000, "8K" or "1.5M" as a whole number of tokens; ValueError says why not."""
    if isinstance(raw, int):
        if raw < 0:
            raise ValueError(f"{raw} is below 0")
        return raw
    found = _COUNT.fullmatch(raw)
    if not found:
        raise ValueError(f"{raw!r} is not a token count such as 8000, \"16K\" or \"1.5M\"")
    # Decimal, not float: "1.1K" must be exactly 1100, not 1100.0000000000002.
    tokens = Decimal(found[1]) * _SCALE[found[2].lower()]
    if tokens != tokens.to_integral_value():
        raise ValueError(f"{raw!r} is {tokens.normalize()} tokens, not a whole number")
    return int(tokens)


@dataclass(frozen=True, slots=True)
class _Compiled:
    low: int
    high: int | None          # None: unbounded

    def band(self) -> str:
        return f"[{self.low}, {'inf)' if self.high is None else f'{self.high}]'}"


class ContextFamily(RuleFamily):
    """The compiled ``context`` rules of one recipe."""

    condition_type = "context"

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        if not names:
            return {}
        tokens = estimate_tokens(request)
        return {name: _answer(self._rules[name], tokens) for name in names}


def _answer(rule: _Compiled | None, tokens: int) -> Outcome:
    if rule is None:
        return Outcome(None, value=tokens, confidence=0.0, detail="rule failed to load")
    hit = rule.low <= tokens and (rule.high is None or tokens <= rule.high)
    return Outcome(hit, value=tokens, detail=f"{tokens} tokens {'in' if hit else 'not in'} {rule.band()}")


def compile(rules: list[ContextRule], path: str, errors: CompileErrors) -> ContextFamily:
    """Check and compile ``rules``; problems go to ``errors``, never raised."""
    return ContextFamily(compile_each(rules, path, errors, _compile_rule))


def _compile_rule(rule: ContextRule, rule_path: str, errors: CompileErrors) -> _Compiled | None:
    low = _bound(rule.min_tokens, f"{rule_path}.min_tokens", errors)
    high = None if rule.max_tokens is None else _bound(rule.max_tokens, f"{rule_path}.max_tokens", errors)
    if low is None or (rule.max_tokens is not None and high is None):
        return None                     # a bound did not parse, and said so
    if high is not None and low > high:
        errors.add(rule_path, "invalid_value",
                   f"min_tokens {low} is above max_tokens {high}: no request can match")
        return None
    return _Compiled(low, high)


def _bound(raw: TokenCount, field_path: str, errors: CompileErrors) -> int | None:
    try:
        return parse_token_count(raw)
    except ValueError as exc:
        errors.add(field_path, "invalid_value", str(exc))
        return None


__all__ = ["BYTES_PER_TOKEN", "ContextFamily", "compile", "estimate_tokens", "parse_token_count"]
