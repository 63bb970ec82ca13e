"""Stage 4, dispatch: each candidate's request in its own ``api_format``, shaped by the request plugins (masking last),
sent in fallback order under the request's deadline."""
from __future__ import annotations

import dataclasses
import logging

import msgspec

from ...config.algorithm import kind_of
from ...config.schema import ProviderModel
from ...errors import UpstreamError
from ...headers import trace
from ...plugins.prompt_cache import TYPE as PROMPT_CACHE, retain_prefix
from ...protocol.adapters import Inbound, Outbound
from ...upstream import Attempt, Stream, Whole
from ..delegation import delegated_credential
from ...selection.cost import Tally
from . import executors, looper
from . import guard as response_guard
from .looper import Tune
from .exchange import Exchange
from .masking import mask
from .offload import off_loop

log = logging.getLogger("vsr_fast.gateway")
WRITERS = frozenset({"ratings", "remom", "fusion", "workflows"})   # executors that write their own answer


async def dispatch(ex: Exchange) -> Stream | Whole:
    """The first answer (an open stream, or a whole body) of the candidates in order."""
    r, req = ex.route, ex.req
    assert r is not None and req is not None
    credential = delegated_credential(ex.state, ex.scope, r.candidates)

    def built(model: ProviderModel, inbound: Inbound, tune: Tune | None) -> Outbound:
        out = ex.adapter.upstream(inbound, model.api_format, model.upstream_model,
                                  stream_usage=model.stream_usage, reasoning=model.reasoning,
                                  max_tokens_field=model.max_tokens_field)
        if tune is not None:
            out = dataclasses.replace(out, body=tune(out.body, model))
        # The client's forwarded headers join the request's own, so header_mutation sees them all.
        return dataclasses.replace(out, headers=(*client_headers, *out.headers), credential=credential)

    async def written(model: ProviderModel, inbound: Inbound, tune: Tune | None = None) -> Outbound:
        # A translation to another protocol, or a re-encoding, of a big body: off the loop.
        return await _shaped(ex, await off_loop(ex.state.metrics, "upstream", len(ex.raw), built, model, inbound, tune), model)

    async def outbound_for(model: ProviderModel) -> Outbound:
        out = ex.outbound.get(model.name)
        if out is None:
            out = ex.outbound[model.name] = await written(model, req)
        return out

    async def rewritten(model: ProviderModel, raw: bytes, tune: Tune | None = None) -> Outbound:
        """An executor's own question to ``model``: the client's request rewritten, in the client's protocol;
        ``tune`` writes the executor's own settings in the model's format, before the shaping plugins constrain
        them as they do the client's."""
        return await written(model, ex.adapter.with_raw(req, raw), tune)

    client_headers = tuple(ex.provider_headers())
    dispatcher = ex.state.dispatcher
    streamed = ex.adapter.stream(req)
    alg = looper.algorithm_of(r)
    r = ex.route = await looper.select(ex, r, alg)
    kind = kind_of(alg) if alg is not None else "static"
    # Before any candidate is called: a later one of another format must not be the first to find the
    # conversation empty, after an earlier one was tried. An executor that writes its own answer asks each
    # call for one choice (``executors.Calls``): no candidate is left out for the client's n.
    if kind not in WRITERS:
        r = ex.route = _carrying(ex, r)
    ex.adapter.refuse_empty(req, (c.api_format for c in r.candidates))
    ex.model = r.candidates[0].name if r.candidates else None
    tally = ex.cost = Tally()
    if alg is not None and kind == "escalate":
        answer = await looper.escalate(ex, r.candidates, outbound_for, alg, streamed, tally,  # counts its calls
                                       rewritten)
    elif alg is not None and kind in WRITERS:
        assert r.chosen is not None and r.chosen.decision is not None
        weights = {ref.model: ref.weight for ref in reversed(r.chosen.decision.modelRefs)}
        refs = [(c.name, weights.get(c.name, 1.0)) for c in r.candidates]
        answer = await executors.run(ex, kind, alg, r.candidates, refs, rewritten, streamed, tally)
    else:
        guard = response_guard.guard_of(ex) if streamed else None
        send = _held_first(ex) if guard is not None and guard.holds else \
            dispatcher.stream if streamed else dispatcher.whole
        try:
            answer = await send(r.candidates, outbound_for, [])
        except UpstreamError as exc:        # every attempt failed: the record still shows each one
            ex.tried(exc.attempts)
            if exc.attempts:    # the failure relayed is the last attempt's: its model, beside its backend
                ex.model = exc.attempts[-1].model
            raise
        ex.tried(answer.attempts)
        # router_replay.shadow compares single-model provider dispatch only (spec 5.7): its copy is the request
        # this provider was sent, every request plugin applied (the tools policy, context, masking last).
        ex.rec.shadowed(answer.model.name, answer.model.api_format, ex.outbound[answer.model.name].body)
        answer = looper.count_cost(ex, answer, tally)
    if not (isinstance(answer, Whole) and answer.status >= 400):
        looper.served(ex, answer.model.name)      # multi_factor's affinity, retention's current model
    return answer


def _held_first(ex: Exchange):
    """The dispatcher's ``stream`` for an answer the response guard holds: nothing of it leaves before its end, so
    a candidate whose stream breaks on the way is a failed attempt and the next one answers, as the same request
    whole falls back (Envoy and LiteLLM retry what the client never received). The last candidate's stream goes to
    the answer stage as it comes: its failure is what the client gets (an incomplete held stream's, spec 5.7)."""
    dispatcher = ex.state.dispatcher

    async def send(candidates: tuple[ProviderModel, ...], outbound_for, extra) -> Stream | Whole:
        earlier: list[Attempt] = []
        while True:
            try:
                answer = await dispatcher.stream(candidates, outbound_for, extra)
            except UpstreamError as exc:
                exc.attempts = [*earlier, *_after_failure(exc.attempts, earlier)]
                raise
            answer.attempts = [*earlier, *_after_failure(answer.attempts, earlier)]
            names = [c.name for c in candidates]
            candidates = candidates[names.index(answer.model.name) + 1:]
            if isinstance(answer, Whole) or not candidates:
                return answer
            try:
                return (await looper.held(answer, keep_headers=True))[0]
            except UpstreamError as exc:
                log.warning("upstream %s failed mid-stream (held, the next candidate answers): cause=%s: %s",
                            answer.backend.label, exc.cause, exc.detail)
                ex.state.metrics.upstream_errors.inc(answer.model.name, answer.backend.label, exc.cause)
                earlier = exc.attempts
    return send


def _after_failure(attempts: list[Attempt], earlier: list[Attempt]) -> list[Attempt]:
    """A later call's attempts, each a fallback when an earlier call's stream broke."""
    if earlier:
        for a in attempts:
            a.fallback = True
    return attempts


def _rewritten(ex: Exchange, out: Outbound, model: ProviderModel, retains: bool, changes: list[str]) -> Outbound:
    """The shaping plugins, then the retention's prefix when the decision ``retains`` it, on ``out``; what each
    changed joins ``changes``."""
    if ex.shaping is not None:
        shaped = ex.shaping.apply(out.body, model.api_format, out.headers, model.reasoning, ex.system_context)
        changes += shaped.changes
        out = dataclasses.replace(out, body=shaped.body, headers=shaped.headers)
    if retains:
        doc = msgspec.json.decode(out.body)
        change = retain_prefix(doc, model.api_format) if isinstance(doc, dict) else None
        if change:
            changes.append(f"retention: {change}")
            out = dataclasses.replace(out, body=msgspec.json.encode(doc))
    return out


_PROMPT_CACHE = f"{PROMPT_CACHE}: "


def _trace_prompt_cache(ex: Exchange, model: ProviderModel, changes: list[str]) -> None:
    """The trace's ``prompt_cache``: for each model a request was written for, the markers the plugin placed, or
    why it placed none (another format caches prefixes on its own)."""
    if not any(kind == PROMPT_CACHE for kind, _ in ex.shaping.steps):
        return
    did = next((c.removeprefix(_PROMPT_CACHE) for c in changes if c.startswith(_PROMPT_CACHE)), None)
    if did is None:
        did = "no marker placed" if model.api_format == "anthropic" else \
            f"no marker: {model.api_format} caches prefixes on its own"
    ex.trace = trace.with_items(ex.trace, "prompt_cache", [f"{model.name}: {did}"])


def _carrying(ex: Exchange, r):
    """The route less the candidates that cannot answer in the shape the client reads (Chat's ``n`` above one to
    a backend answering one choice): a 400 naming the field and the models when none is left, before any call."""
    kept = tuple(c for c in r.candidates if ex.adapter.carried_by(ex.req, c.api_format))
    if len(kept) == len(r.candidates):
        return r
    if not kept:
        raise ex.adapter.uncarried(ex.req, r.candidates)
    return dataclasses.replace(r, candidates=kept)


async def _shaped(ex: Exchange, out: Outbound, model: ProviderModel) -> Outbound:
    """The shaping plugins in order, then masking, the last rewrite, on what they wrote."""
    changes: list[str] = []
    d = ex.route.chosen.decision if ex.route is not None and ex.route.chosen is not None else None
    retains = bool(d is not None and d.retention is not None and d.retention.prefer_prefix_retention)
    if ex.shaping is not None or retains:
        out = await off_loop(ex.state.metrics, "shaping", len(out.body), _rewritten, ex, out, model, retains, changes)
        if ex.trace is not None and ex.shaping is not None:
            _trace_prompt_cache(ex, model, changes)
    if ex.masking is not None:
        body, change = await mask(ex, out.body, model.api_format, ex.masking)
        if change:
            changes.append(f"masking: {change}")
            out = dataclasses.replace(out, body=body)
    if changes:
        ex.rec.plugins_applied(model.name, changes)
    return out
