"""Upper bounds on a request's integers.

JSON numbers have no size: without a bound, ``"max_tokens": 1e42``'s integer
spelling or a 5,000-digit ``seed`` decoded (or passed by unread) and went
upstream unchanged, where OpenAI and Anthropic answer 400. Refused here, the
client gets the 400 in its protocol's shape naming the field. A ``seed`` is an
int64, as OpenAI declares it; a count (tokens, tool calls, top_k) is bounded at
int32's largest, far past any model's context. msgspec refuses an integer of
more than 4,300 digits itself ("Integer value out of range"), in linear time.
"""
from __future__ import annotations

from typing import Annotated

from msgspec import Meta

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

Int64 = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
Count = Annotated[int, Meta(ge=0, le=INT32_MAX)]
PositiveCount = Annotated[int, Meta(ge=1, le=INT32_MAX)]

__all__ = ["INT32_MAX", "INT64_MAX", "INT64_MIN", "Count", "Int64", "PositiveCount"]
