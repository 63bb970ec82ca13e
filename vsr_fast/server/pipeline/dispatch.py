"""Stage 4, dispatch: each candidate's request in its own ``api_format``, shaped by the request plugins (masking last),
sent in fallback order under the request's deadline."""
from __future__ import annotations

import dataclasses

from ...config.schema import ProviderModel
from ...protocol.adapters import Outbound
from ...upstream import Stream, Whole
from ..delegation import delegated_credential
from ...selection.cost import Tally
from . import looper
from .exchange import Exchange
from .masking import mask


async def dispatch(ex: Exchange) -> Stream | Whole:
    """The first answer (an open stream, or a whole body) of the candidates in order."""
    r, req = ex.route, ex.req
    assert r is not None and req is not None
    credential = delegated_credential(ex.state, ex.scope, r.candidates)

    async def outbound_for(model: ProviderModel) -> Outbound:
        out = ex.outbound.get(model.name)
        if out is None:
            out = ex.adapter.upstream(req, model.api_format, model.upstream_model)
            # The client's forwarded headers join the request's own, so header_mutation sees them all.
            out = dataclasses.replace(out, headers=(*client_headers, *out.headers), credential=credential)
            out = ex.outbound[model.name] = await _shaped(ex, out, model)
        return out

    client_headers = tuple(ex.provider_headers())
    dispatcher = ex.state.dispatcher
    streamed = ex.adapter.stream(req)
    alg = looper.algorithm_of(r)
    r = ex.route = looper.select(ex, r, alg)
    ex.model = r.candidates[0].name if r.candidates else None
    tally = ex.cost = Tally()
    if alg is not None and alg.type == "escalate":
        answer = await looper.escalate(ex, r.candidates, outbound_for, alg, streamed, tally)   # counts its calls
    else:
        send = dispatcher.stream if streamed else dispatcher.whole
        answer = await send(r.candidates, outbound_for, [])
        ex.rec.attempts(answer.attempts)
        answer = looper.count_cost(ex, answer, tally)
    if alg is not None and alg.type == "multi_factor":
        looper.served(ex, answer.model.name)
    return answer


async def _shaped(ex: Exchange, out: Outbound, model: ProviderModel) -> Outbound:
    """The shaping plugins in order, then masking, the last rewrite, on what they wrote."""
    changes: list[str] = []
    if ex.shaping is not None:
        shaped = ex.shaping.apply(out.body, model.api_format, out.headers)
        changes += shaped.changes
        out = dataclasses.replace(out, body=shaped.body, headers=shaped.headers)
    if ex.masking is not None:
        body, change = await mask(ex, out.body, model.api_format, ex.masking)
        if change:
            changes.append(f"masking: {change}")
            out = dataclasses.replace(out, body=body)
    if changes:
        ex.rec.plugins_applied(model.name, changes)
    return out
