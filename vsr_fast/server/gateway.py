"""The inference hot path for every client API: Chat Completions, Messages, Responses, Images.

A lean ASGI handler (no quart: ~40-60 % more CPU per request, STACK-NOTES):
read body → decode in the client's protocol → route on the canonical request
→ run the decision's output-contract rules → dispatch with fallback, each
candidate in its own ``api_format`` → answer in the client's protocol, whole
or streamed → public headers, events, metrics. Same-protocol pairs forward
the client's bytes with only ``model`` rewritten and relay answers unchanged.
"""
from __future__ import annotations

import logging
import time

import trio

from ..config import output as output_rules
from ..decisions import engine
from ..plugins import fast_response
from ..systemone import overload
from ..errors import RequestError, RoutingError, UpstreamError, VsrError
from ..headers import registry as h
from ..headers.public import public_headers
from ..protocol.adapters import Adapter, Inbound
from ..protocol.translate import render_warnings
from ..routing import Route
from ..upstream import Stream, Whole
from .asgi import ClientGone, DisconnectWatch, HeaderList, Receive, Scope, Send, header, read_body, send_whole
from .recording import Recording
from .state import AppState

log = logging.getLogger("vsr_fast.gateway")
_TO_PROVIDER = tuple(name.encode() for name in h.TO_PROVIDER)
_TRACE = h.TRACE.encode()
_DEBUG = h.DEBUG.encode()
_WARNINGS = h.WARNINGS.encode()


class Exchange:
    """What one request has decided so far; read by headers, metrics and errors."""

    __slots__ = ("api", "recipe", "decision", "model", "path", "status", "started", "trace", "extra", "rec",
                 "warnings", "codes")

    def __init__(self, api: str) -> None:
        self.api = api
        self.recipe: str | None = None
        self.decision: str | None = None
        self.model: str | None = None
        self.path = h.ResponsePath.UPSTREAM
        self.status = 500
        self.started = time.perf_counter()
        self.trace: str | None = None
        self.extra: list[tuple[bytes, bytes]] = []
        self.rec: Recording | None = None
        self.warnings: str = ""
        self.codes: list[str] = []        # warning codes ahead of translation losses (scan_partial, ...)

    def headers(self, state: AppState) -> HeaderList:
        out = public_headers(config_version=state.config_version, path=self.path,
                             recipe=self.recipe, decision=self.decision, model=self.model)
        if self.warnings:
            out.append((_WARNINGS, self.warnings.encode()))
        if self.trace is not None:
            out.append((_TRACE, self.trace.encode()))
        out += self.extra
        return out


def provider_headers(scope: Scope) -> list[tuple[str, bytes]]:
    """The client headers registered to reach providers; every other one, x-vsr-* included, stays here.
    Values stay bytes: httpx encodes a str value as ASCII and would fail on a client's non-ASCII one."""
    return [(k.decode(), v) for k, v in scope["headers"] if k in _TO_PROVIDER]


async def handle_api(state: AppState, api: str, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one inference request of client API ``api`` end to end."""
    ex = Exchange(api)
    ex.rec = Recording(state, scope)
    adapter = state.adapters[api]
    try:
        await _serve(state, adapter, ex, scope, receive, send)
    except VsrError as exc:
        ex.rec.failed(_stage(exc), exc)
        await _send_error(state, adapter, ex, send, exc)
    except ClientGone:
        ex.status = 499
        state.metrics.disconnects.inc(api)
        ex.rec.answered(status=499, path=ex.path.value, model=ex.model, streamed=False, complete=False, content_type=None)
    except Exception:  # the ASGI edge: a bug, never Cancelled (a BaseException)
        log.exception("internal error on %s", scope.get("path"))
        await _send_error(state, adapter, ex, send, VsrError("internal error"))
    finally:
        m = state.metrics
        m.requests.inc(api, ex.recipe or "", ex.decision or "", ex.model or "", str(ex.status))
        m.latency.observe(time.perf_counter() - ex.started, api, ex.decision or "", ex.model or "")


async def _serve(state: AppState, adapter: Adapter, ex: Exchange, scope: Scope, receive: Receive, send: Send) -> None:
    raw = await read_body(scope, receive, state.max_body_bytes)
    req = await adapter.prepare(adapter.decode(raw, scope["headers"]))
    route = await state.table.route(adapter.model(req), lambda: adapter.canonical(req, state.identity(scope)),
                                    state.systemone)
    ex.recipe, ex.decision = route.recipe, route.decision
    ex.model = route.candidates[0].name if route.candidates else None
    if route.readings is not None and any(c != "full" for c in route.readings.coverage.values()):
        ex.codes.append("scan_partial")
    req = _apply_output_contract(adapter, req, route)
    if ex.api == "images" or output_rules.is_image_decision(_output(route)):
        ex.path = h.ResponsePath.IMAGE_GENERATION
    if state.debug_policy != "none" and header(scope, _DEBUG) is not None:
        ex.trace = state.trace_for(scope, route)
    if route.fallback:
        ex.path = h.ResponsePath.FALLBACK
    ex.rec.routed(state, scope, raw, req, route)
    replay = ex.rec.replay_header()
    if replay is not None:
        ex.extra.append(replay)
    fast = state.policies.fast(route.recipe, route.decision)
    _refuse_if_overloaded(state, ex, route, fast is not None)
    if fast is not None:
        await _send_fast(state, adapter, ex, send, req, fast.message)
        return
    cached = await ex.rec.cached(route)
    if cached is not None:
        await _send_cached(state, ex, send, cached)
        return
    outbound: dict[str, object] = {}

    def outbound_for(model):
        out = outbound.get(model.name)
        if out is None:
            out = outbound[model.name] = adapter.upstream(req, model.api_format, model.upstream_model)
        return out

    extra = provider_headers(scope)
    failure: VsrError | None = None
    with trio.CancelScope() as cancel_on_leave:
        watch = DisconnectWatch(receive, send, cancel_on_leave)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            # Expected failures are kept as values: a nursery would wrap them in an ExceptionGroup.
            try:
                await _answer(state, adapter, ex, watch.send, req, route, outbound_for, outbound, extra)
            except VsrError as exc:
                failure = exc
            nursery.cancel_scope.cancel()
    if watch.gone:
        raise ClientGone
    if failure is not None:
        raise failure


class OverloadedRetryable(VsrError):
    """The decision model was too busy to read a rule that refuses requests: the client should retry."""

    status, code, type = 429, "overloaded", "overloaded_error"


def _refuse_if_overloaded(state: AppState, ex: Exchange, route: Route, chosen_refuses: bool) -> None:
    """The two cases of spec "When the decision model is overloaded" that answer a retryable error.

    1. Only rules that failed closed on the overloaded model refuse the request.
    2. A rule left unread for overload would have refused it had it matched.
    Never forward a request while such a rule is unread; a routing question left
    unread lets the request go on.
    """
    readings, chosen = route.readings, route.chosen
    client = state.systemone_client
    if readings is None or not readings.overloaded or chosen is None or client is None:
        return
    if client.overload.config.action != "retry":
        return
    policies, recipe = state.policies, route.recipe
    if chosen_refuses and chosen.decision is not None:
        held = [(leaf.type or "", leaf.name or "") for leaf in engine.leaves(chosen.decision.rules)
                if engine.leaf_truth(leaf, readings) is True]
        if held and all(key in readings.overloaded for key in held):
            _raise_retryable(state, ex, client)
    floor = chosen.decision.priority if chosen.decision is not None else None
    for decision in state.table.recipes[recipe].recipe.decisions if recipe else ():
        if chosen.decision is not None and decision.name == chosen.decision.name:
            continue
        if floor is not None and decision.priority < floor:
            continue
        if policies.fast(recipe, decision.name) is None:
            continue
        if any((leaf.type or "", leaf.name or "") in readings.overloaded for leaf in engine.leaves(decision.rules)):
            _raise_retryable(state, ex, client)


def _raise_retryable(state: AppState, ex: Exchange, client) -> None:
    ex.codes.append(overload.WARNING)
    ex.extra.append((b"retry-after", str(client.overload.retry_after_s).encode()))
    client.overload.count_retryable(ex.api)
    raise OverloadedRetryable("the decision model is overloaded; retry after the Retry-After delay")


async def _send_fast(state: AppState, adapter: Adapter, ex: Exchange, send: Send, req: Inbound, message: str) -> None:
    """The decision's fast_response, in the client's protocol, with no model called."""
    ex.path = h.ResponsePath.FAST_RESPONSE
    ex.model = None
    ex.status = 200
    model = ex.decision or "fast_response"
    if adapter.stream(req):
        tr = adapter.stream_translator(req, "openai")
        body = tr.feed(fast_response.chat_stream(message, model)) + tr.close()
        content_type = "text/event-stream"
    else:
        reply = adapter.whole(req, "openai", 200, fast_response.chat_completion(message, model))
        body, content_type = reply.body, reply.content_type
    ex.warnings = render_warnings([], codes=ex.codes)
    headers = ex.headers(state)
    headers.append((b"content-type", content_type.encode()))
    await send_whole(send, 200, headers, body)
    ex.rec.feed(body)
    ex.rec.answered(status=200, path=ex.path.value, model=None, streamed=adapter.stream(req), complete=True,
                    content_type=content_type)


def _output(route: Route):
    chosen = route.chosen
    return chosen.decision.output if chosen is not None and chosen.decision is not None else None


def _apply_output_contract(adapter: Adapter, req: Inbound, route: Route) -> Inbound:
    """The decision's output contract, enforced before any model is called (spec 5.8)."""
    if route.recipe is None:
        return req   # a provider model named directly: its own api_format decides
    output = _output(route)
    refused = output_rules.refusal(adapter.api, output, getattr(req.body, "tool_choice", None))
    if refused is not None:
        raise refused
    if adapter.api == "responses":
        tools = [getattr(t, "type", None) for t in (getattr(req.body, "tools", None) or ())]
        plan = output_rules.image_tool_plan("responses", output, [t for t in tools if t], getattr(req.body, "tool_choice", None))
        if plan.add_tool or plan.force_tool:
            req = adapter.with_image_tool(req, add=plan.add_tool, force=plan.force_tool)  # type: ignore[attr-defined]
    return req


async def _answer(state: AppState, adapter: Adapter, ex: Exchange, send: Send, req: Inbound, route: Route,
                  outbound_for, outbound: dict, extra) -> None:
    candidates = route.candidates
    if adapter.stream(req):
        answer = await state.dispatcher.stream(candidates, outbound_for, extra)
    else:
        answer = await state.dispatcher.whole(candidates, outbound_for, extra)
    ex.model = answer.model.name
    ex.status = answer.status
    if answer.model.name != candidates[0].name:
        ex.path = h.ResponsePath.FALLBACK
    ex.rec.attempts(answer.attempts)
    losses = list(getattr(outbound.get(answer.model.name), "losses", ()))
    if isinstance(answer, Stream):
        await _relay(state, adapter, ex, send, req, answer, losses)
    elif adapter.stream(req) and answer.status < 400 and answer.model.api_format == "images":
        await _send_whole_as_stream(state, adapter, ex, send, req, answer, losses)
    else:
        await _send_whole_answer(state, adapter, ex, send, req, answer, losses)


async def _send_whole_as_stream(state: AppState, adapter: Adapter, ex: Exchange, send: Send, req: Inbound,
                                answer: Whole, losses: list) -> None:
    """An images model answers whole; a client that asked for a stream still gets its protocol's events."""
    tr = adapter.stream_translator(req, "images")
    body = tr.feed(answer.body) + tr.close()
    ex.warnings = render_warnings(losses + list(tr.losses), codes=ex.codes)
    headers = ex.headers(state) + [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send_whole(send, answer.status, headers, body)
    ex.rec.feed(body)
    ex.rec.answered(status=answer.status, path=ex.path.value, model=ex.model, streamed=True, complete=True,
                    content_type="text/event-stream")
    await adapter.remember(req, tr.final())


async def _send_whole_answer(state: AppState, adapter: Adapter, ex: Exchange, send: Send, req: Inbound,
                             answer: Whole, losses: list) -> None:
    reply = adapter.whole(req, answer.model.api_format, answer.status, answer.body, answer.content_type)
    ex.status = reply.status
    ex.warnings = render_warnings(losses + list(reply.losses), codes=ex.codes)
    headers = ex.headers(state)
    headers.append((b"content-type", reply.content_type.encode()))
    await send_whole(send, reply.status, headers, reply.body)
    ex.rec.feed(reply.body)
    ex.rec.answered(status=reply.status, path=ex.path.value, model=ex.model, streamed=False, complete=True,
                    content_type=reply.content_type)
    if reply.status < 400:
        await adapter.remember(req, reply.body)


async def _send_cached(state: AppState, ex: Exchange, send: Send, cached) -> None:
    """A stored answer, whole or as the SSE bytes it was streamed as, on the cache response path."""
    ex.path = h.ResponsePath.CACHE
    ex.status = cached.status
    headers = ex.headers(state)
    headers.append((b"content-type", cached.content_type.encode()))
    await send_whole(send, cached.status, headers, cached.body)
    ex.rec.answered(status=cached.status, path=ex.path.value, model=ex.model, streamed=cached.streamed,
                    complete=True, content_type=cached.content_type)


async def _relay(state: AppState, adapter: Adapter, ex: Exchange, send: Send, req: Inbound, stream: Stream,
                 losses: list) -> None:
    """Relay the backend's SSE in the client's protocol as it comes; a failure ends it with an error event.

    The translator releases whole events only (the same-protocol one passes bytes
    through unchanged), so an upstream that dies mid-event never leaves half a
    JSON line before the error event.
    """
    tr = adapter.stream_translator(req, stream.model.api_format)
    ex.warnings = render_warnings(losses, codes=ex.codes)
    headers = ex.headers(state)
    headers += [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    rec = ex.rec
    complete = False
    try:
        await send({"type": "http.response.start", "status": stream.status, "headers": headers})
        out = tr.feed(stream.first)
        if out:
            rec.feed(out)
            await send({"type": "http.response.body", "body": out, "more_body": True})
        try:
            async for chunk in stream.rest:
                out = tr.feed(chunk)
                if out:
                    rec.feed(out)
                    await send({"type": "http.response.body", "body": out, "more_body": True})
            tail = tr.close()
            complete = True
        except Exception as exc:  # httpx stream errors after the first byte: no fallback now
            log.warning("upstream %s failed mid-stream: %r", stream.backend.label, exc)
            state.metrics.upstream_errors.inc(stream.model.name, stream.backend.label, "midstream")
            ex.status = 502
            tail = tr.fail(UpstreamError(f"upstream {stream.backend.label} failed mid-stream"))
        rec.feed(tail)
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        rec.answered(status=ex.status, path=ex.path.value, model=ex.model, streamed=True, complete=complete,
                     content_type="text/event-stream")
        if complete:
            await adapter.remember(req, tr.final())
    finally:
        # Shielded: when the client left, this scope is already cancelled, and
        # the upstream connection must still be closed so the model stops.
        with trio.CancelScope(shield=True):
            with trio.move_on_after(5):
                await stream.aclose()


def _stage(exc: VsrError) -> str:
    if isinstance(exc, UpstreamError):
        return "upstream"
    if isinstance(exc, RoutingError):
        return "route"
    return "decode" if isinstance(exc, RequestError) else "internal"


async def _send_error(state: AppState, adapter: Adapter, ex: Exchange, send: Send, exc: VsrError) -> None:
    status, content_type, body = adapter.error(exc)
    ex.status = status
    ex.recipe = ex.recipe or getattr(exc, "recipe", None)
    ex.path = h.ResponsePath.ERROR
    ex.warnings = render_warnings([], codes=ex.codes)
    headers = ex.headers(state)
    headers.append((b"content-type", content_type.encode()))
    await send_whole(send, status, headers, body)
