"""The routing view a deployment reads: head and tail around an omission marker (spec "Long inputs")."""
from __future__ import annotations

from collections.abc import Callable

from .._ext.windows import routing_view
from ..config.catalog import Deployment
from .capabilities import Capable

BYTES_PER_TOKEN = 4
QUESTION_RESERVE_TOKENS = 1024


def budget_bytes(dep: Deployment, capable: Capable | None, validated_tokens: int | None = None) -> int:
    """The view's size: routing_view.max_tokens at 4 bytes a token, capped by the model's validated length."""
    default_tokens = 4096 if dep.provider == "systemone" else 8192
    budget = (dep.routing_view.max_tokens or default_tokens) * BYTES_PER_TOKEN
    if validated_tokens and validated_tokens - QUESTION_RESERVE_TOKENS >= 256:
        # A byte-level tokenizer gives no byte more than one token: cap at one byte a token.
        budget = min(budget, validated_tokens - QUESTION_RESERVE_TOKENS)
    elif validated_tokens:
        # A small encoder (vsr-static-1 and -2 read 512 tokens) reads no further than its length:
        # give it the head and tail that fit, rather than a head it would cut itself.
        budget = min(budget, max(validated_tokens * BYTES_PER_TOKEN, 1024))
    return budget


def view_for(dep: Deployment, capable: Capable | None) -> Callable[[str], str]:
    """``view(text)``: the text as is when it fits, else its head and tail around the marker."""
    budget = budget_bytes(dep, capable, capable.validated_tokens if capable else None)
    share = dep.routing_view.head_share

    def view(text: str) -> str:
        if len(text) * 4 <= budget:       # at most 4 bytes a character: fits without encoding
            return text
        data = text.encode()
        if len(data) <= budget:
            return text
        return routing_view(data, budget, share).decode()

    return view
