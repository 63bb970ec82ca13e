"""The semantic response cache on the request path (spec 5.4, 5.7): recall the partition's nearest cached
requests, drop the polarity flips, let the ``same_request`` judge confirm one, serve its stored answer unless
it calls a tool (``calls_tool``: a tool call serves the same request alone, the exact cache's).

The partition (``response_cache.semantic_partition``) already holds the scope's
principal, the decision's guard and revision and every request field but the
current user turn, so only requests that may share an answer are compared. The
answer served is the one the guard released for the earlier request, as it was
stored; a hit runs no guard (spec 5.7).
"""
from __future__ import annotations

import time

from ...events.cache_store import calls_tool
from ...plugins.response_cache import SEMANTIC
from ..recording import Hit
from .exchange import Exchange
from .match import judge, recalled


async def similar(ex: Exchange) -> Hit | None:
    rec, r = ex.rec, ex.route
    intent, policy, store = rec.intent, rec.cache_policy, rec.store
    if intent is None or policy is None or store is None or intent.partition is None or not intent.text:
        return None
    match = policy.match
    assert match is not None and r is not None
    recall = match.recall
    started = time.perf_counter()
    hits = await store.recall(intent.partition, intent.text, (recall.top_k or 3) if recall else 3,
                              recall.min_similarity if recall else None)
    recalled(ex, SEMANTIC, "embedding", len(hits), time.perf_counter() - started)
    if not hits:
        return None
    order = [(key, score) for score, key, _ in hits]
    if match.judge is not None:
        kept = await judge(ex, SEMANTIC, match.judge, intent.text, [text for _, _, text in hits])
        order = [order[i] for i in kept]
    for key, score in order:
        answer = await store.lookup(key)        # an entry whose answer expired or left the store is a miss
        # A tool call indexed by an older router (a shared Redis stream): served to the same request alone.
        if answer is not None and not calls_tool(answer.body, answer.streamed):
            return Hit(key, answer, True, float(score))
    return None
