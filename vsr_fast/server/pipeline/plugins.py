"""Stage 3, request plugins: those that answer instead of a model (fast_response, response_cache), then
tools and context on the client's request, then the rewrites the dispatch applies to each candidate's request
(system_prompt, header_mutation, request_params, prompt_cache, and masking last)."""
from __future__ import annotations

from dataclasses import dataclass

import msgspec

from ...headers import trace
from ...plugins.response_cache import CachedAnswer
from ...protocol.adapters import JSON
from .exchange import Exchange
from ..recording import Hit
from .masking import defines, number, restores
from .offload import off_loop
from .context import assemble
from .semantic_cache import similar
from .tools import govern


SSE = "text/event-stream"


@dataclass(frozen=True, slots=True)
class Fast:
    """The decision's fixed message."""

    message: str


async def request_plugins(ex: Exchange) -> Fast | CachedAnswer | None:
    """An answer that needs no model (fast_response, then a cache hit), or None after setting the shaping."""
    r, policies = ex.route, ex.state.policies
    assert r is not None
    fast = policies.fast(r.recipe, r.decision)
    if fast is not None:
        return Fast(fast.message)
    hit = await ex.rec.cached() or await similar(ex)
    if hit is not None:
        hit = await _as_asked(ex, hit)
    if hit is not None and not restores(policies.masking(r.recipe, r.decision), hit.answer):
        return _served(ex, hit)
    await govern(ex)      # tools: first of the request rewrites, on the request as the client wrote it
    # context after tools: tools.strip_history would otherwise strip the tool exchange context injects.
    await assemble(ex)
    ex.shaping = policies.shaping(r.recipe, r.decision)
    ex.masking = policies.masking(r.recipe, r.decision)
    if hit is None:
        return None
    # The cache keeps the answer masked: this request's own values go back in, numbered as the request
    # would have been sent (the rewrites above included), so an exact hit reads what the first client read.
    # A request masking cannot read now is a miss: read again before it is sent, it fails closed if it still can't.
    if not await number(ex):
        return None
    # Reads the whole stored answer (a JSON decode, every event of a stream's): a big one off the loop.
    if not await off_loop(ex.state.metrics, "unmask", len(hit.answer.body), defines, ex, hit.answer):
        return None                     # a miss: the request goes to a model, its values numbered as above
    return _served(ex, hit)


async def _as_asked(ex: Exchange, hit: Hit) -> Hit | None:
    """The hit in the form the request asks: one entry serves a whole request and a streamed one, as LiteLLM's
    does (``Adapter.replayed``); None, a miss, when it cannot be told in that form. A big one off the loop."""
    answer, req = hit.answer, ex.req
    assert req is not None
    if answer.status >= 400:
        return hit
    body = await off_loop(ex.state.metrics, "cache", len(answer.body), ex.adapter.replayed, req, answer.body,
                          answer.streamed)
    if body is None:
        return None
    if body is answer.body:
        return hit
    streamed = ex.adapter.stream(req)
    return hit._replace(answer=msgspec.structs.replace(answer, body=body, streamed=streamed,
                                                       content_type=SSE if streamed else JSON))


def _served(ex: Exchange, hit: Hit) -> CachedAnswer:
    assert ex.route is not None
    ex.rec.served(hit, ex.route)
    if ex.trace is not None:
        ex.trace = trace.with_member(ex.trace, trace.token_member("cache", "semantic", similarity=hit.similarity)
                                     if hit.semantic and hit.similarity is not None
                                     else trace.token_member("cache", "semantic" if hit.semantic else "exact"))
    return hit.answer
