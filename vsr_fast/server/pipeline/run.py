"""The request pipeline, top to bottom: one inference request of any client API from its first byte to its last.

    admit ─► read body ─► decode ─► names ─► route ─► request plugins ─► dispatch ─► answer ─► record
   (limits,                        (a key's  (a key's  (fast_response,     (candidates   (whole,
    body unread)                   names)    models)   response_cache:     in order,     streamed,
                                                       may answer here)    shaped)       or an error)

The caller's identity is read before any of these, at the edge (``app.py``).

One deadline covers the whole request (``global.router.limits.request_timeout_ms``,
or the chosen decision's own): every stage runs under it, and the stream relay
ends with the protocol's error event when it passes. Once the body is read, a
disconnect watch cancels every stage the moment the client leaves (System One
calls and upstream attempts included).
"""
from __future__ import annotations

import logging
import time

import trio

from ... import tracing
from ...errors import BodyTimeout, RequestTimeout, ShuttingDown, UpstreamError, VsrError
from ...headers.registry import ResponsePath
from ...upstream import cut as cut_attempts
from ...upstream.billing import BILLING
from ..asgi import ClientGone, Receive, Scope, Send, header, is_whole, take_queued, watching
from ..edge_refusal import refusal_of
from ..failure_log import FailureLog
from ..forwarded import client_address
from ..state import AppState
from .admit import admit, check_names, release
from .answer import answer, error, prompt_size
from .context import remember
from .decode import decode, read
from .dispatch import dispatch
from .exchange import Exchange
from .plugins import request_plugins
from .route import route

log = logging.getLogger("vsr_fast.gateway")
# Time past the deadline for the answer stage to write its own timeout (a 504 or a stream's error event).
_GRACE_S = 1.0


async def handle_api(state: AppState, api: str, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one inference request of client API ``api`` end to end."""
    ex = Exchange(state, api, scope)
    span = tracing.begin_request(f"vsr {api}", scope["headers"]) if tracing.tracer is not None else None
    state.inflight.add(ex)
    billing = BILLING.set(None)     # this request's meter once admitted: never the last request's on the connection
    left = cut_attempts.LEFT.set([])    # the attempts a cancellation cut, for the record (``upstream.cut``)
    try:
        await _serve(ex, receive, send)
    except VsrError as exc:
        ex.failure = exc
        ex.rec.failed(exc.stage, exc)
        if not ex.responded:
            await error(ex, send, exc)
    except ClientGone:
        edge = refusal_of(scope)
        if edge is not None:
            # Not gone: the connection layer answered its body's broken framing (a 400, closing), which ended it.
            ex.failure, ex.status, ex.path = edge.error, edge.status, ResponsePath.ERROR
            ex.rec.failed(edge.error.stage, edge.error)
        else:
            ex.status = 499
            if ex.path is ResponsePath.UPSTREAM and not ex.attempts:
                ex.path = ResponsePath.ERROR        # gone before any upstream was tried: none answered it
            state.metrics.disconnects.inc(api)
        _unfinished(ex)
    except Exception:  # the ASGI edge: a bug, never Cancelled (a BaseException)
        log.exception("internal error on %s", scope.get("path"))
        failure = ex.failure = VsrError("internal error")
        ex.rec.failed("internal", failure)
        if not ex.responded:
            await error(ex, send, failure)
    finally:
        cut_attempts.LEFT.reset(left)
        BILLING.reset(billing)
        state.inflight.discard(ex)
        try:
            release(ex)     # the key's place given back, its tokens charged
        except Exception as exc:  # noqa: BLE001 - the answer has gone: its access log line must still be written
            _accounting_failed.report(exc)
        accounted(ex, span)


def accounted(ex, span) -> None:
    """One finished request counted (``vsr_requests_total``...), logged (the access log) and its span ended: an
    ``Exchange``, or the System One API's own (``systemone_accounting``), which reads the same fields. A part that
    raises is logged (``_accounting_failed``) and the access log line still written, with what is known."""
    try:
        usage = _counted(ex)
    except Exception as exc:  # noqa: BLE001 - a request's answer is never lost to its accounting
        _accounting_failed.report(exc)
        usage = None
    state = ex.state
    if state.access_log is None and span is None:
        return
    try:
        fields = _access_fields(ex, usage)
        if state.access_log is not None:
            state.access_log.log(fields)
    except Exception as exc:  # noqa: BLE001 - as above
        _accounting_failed.report(exc)
        fields = _known_fields(ex)
        if state.access_log is not None:
            state.access_log.log(fields)
    if span is not None:
        tracing.end_request(span, _span_attributes(fields), fields["error"])


# An exception accounting a request (its charge, its counts, its access log fields): said once a minute at most.
_accounting_failed = FailureLog(log, "request accounting raised; each such request's answer stood and its access "
                                     "log line was written with what was known")


def _known_fields(ex) -> dict:
    """The access log's fields of a request whose own (``_access_fields``) raised: those that cannot."""
    rec, path, failure = getattr(ex, "rec", None), getattr(ex, "path", None), getattr(ex, "failure", None)
    started = getattr(ex, "started", None)
    return {"request_id": getattr(rec, "request_id", None), "api": getattr(ex, "api", None),
            "status": getattr(ex, "status", None), "path": getattr(path, "value", None),
            "latency_s": round(time.perf_counter() - started, 6) if isinstance(started, float) else None,
            "error": getattr(failure, "code", None), "message": getattr(failure, "detail", None)}


def _counted(ex) -> tuple[int, int, int, bool] | None:
    """The request counted in the metrics; the answer's usage (``UsageMeter.usage``), for its access log line."""
    state, api = ex.state, ex.api
    m = state.metrics
    m.requests.inc(api, ex.recipe or "", ex.decision or "", ex.model or "", str(ex.status))
    m.responses.inc(api, ex.path.value)
    m.latency.observe(time.perf_counter() - ex.started, api, ex.decision or "", ex.model or "")
    if ex.first_byte is not None:
        m.first_byte.observe(ex.first_byte - ex.started, api, ex.model or "")
    # The answer's usage, or its estimate when the backend reported none; an executor's calls were counted each
    # under its model.
    usage = ex.meter.usage() if ex.meter is not None and not ex.meter.prepaid else None
    if usage is not None:
        m.tokens.inc(ex.model or "", "input", by=usage[0])
        m.tokens.inc(ex.model or "", "output", by=usage[1])
        if usage[3]:
            m.tokens_estimated.inc(ex.model or "", "input", by=usage[0])
            m.tokens_estimated.inc(ex.model or "", "output", by=usage[1])
    return usage


def refused(state: AppState, api: str | None, scope: Scope, request_id: str, status: int, failure: VsrError,
            uri: str | None = None) -> None:
    """A request of client API ``api`` refused before its pipeline ran (app.py: its method, media type, key,
    framing, path...), counted and logged as the pipeline's answers are; it has no route. Its latency is from the
    app's start, or the first byte the connection server read of it (``STARTED``). One the connection server
    refused is logged with its ``uri`` (bounded), on any path; one of no client API (``api`` None) is counted in
    no API's requests."""
    started = scope.get(STARTED)
    if api is not None:
        m = state.metrics
        m.requests.inc(api, "", "", "", str(status))
        m.responses.inc(api, ResponsePath.ERROR.value)
    if state.access_log is not None:
        who = state.identity(scope)
        state.access_log.log({
            "request_id": request_id, **client_fields(scope, state.trusted_proxies),
            "uri": uri[:_MAX_URI] if uri is not None else None,
            "key_id": who.key_id, "user": who.user, "team": who.team, "tenant": who.tenant,
            "api": api, "status": status, "path": ResponsePath.ERROR.value,
            "latency_s": round(time.perf_counter() - started, 6) if started is not None else None,
            "error": failure.code, "message": failure.detail,
        })


def refused_connection(state: AppState, request_id: str, peer: str | None, code: str, message: str) -> None:
    """A connection the listener answered 503 before reading any request (its connection cap, the drain): its
    access log line, as nginx logs the 503s of its limit_conn. No request was read: no API, method or caller."""
    if state.access_log is not None:
        state.access_log.log({"request_id": request_id, "remote_addr": peer, "status": 503,
                              "path": ResponsePath.ERROR.value, "error": code, "message": message})


# The scope key of the perf_counter() a request reached the app at (app.make_app): a refusal's latency.
STARTED = "vsr.started"
# A client's User-Agent is logged up to this many characters (a header may be 64 KiB), and so is the path of a
# request the connection server refused (its head may be 16 KiB).
_MAX_USER_AGENT = _MAX_URI = 256
# What the access log says for a masking decision's User-Agent.
WITHHELD_AGENT = "(not shown)"
# The client's fields as OpenTelemetry's semantic conventions name them on the request span.
_OTEL_NAMES = {"remote_addr": "client.address", "peer_addr": "network.peer.address", "method": "http.request.method", "user_agent": "user_agent.original"}


def client_fields(scope: Scope, trusted: tuple = ()) -> dict:
    """Who sent the request, as nginx's $remote_addr, $request_method and $http_user_agent say it: the peer's
    address, or the client's a ``trusted`` proxy forwarded (``peer_addr`` then the proxy's), the method, the
    User-Agent (bounded)."""
    client = scope.get("client")
    peer = client[0] if client else None
    remote = client_address(peer, scope["headers"], trusted)
    agent = header(scope, b"user-agent")
    fields = {"remote_addr": remote, "method": scope.get("method"),
              "user_agent": agent[:_MAX_USER_AGENT].decode("latin-1") if agent else None}
    if remote != peer:
        fields["peer_addr"] = peer
    return fields


def _span_attributes(fields: dict) -> dict:
    """The request span's attributes: the access log's fields under ``vsr.`` (the client's under their OTel
    names), the status under its OTel name."""
    attributes = {_OTEL_NAMES.get(k) or f"vsr.{k}": v for k, v in fields.items()
                  if k not in ("status", "time", "message")}
    attributes["http.response.status_code"] = fields["status"]
    return attributes


def _access_fields(ex: Exchange, usage: tuple[int, int, int, bool] | None) -> dict:
    """The access log's fields for one request (``access_log``); ``usage``: the answer's (``UsageMeter.usage``)."""
    now = time.perf_counter()
    meter, failure = ex.meter, ex.failure
    if usage is None and meter is not None and meter.prepaid:   # an executor's answer: the usage it reported
        usage = meter.usage()
    who = ex.state.identity(ex.scope)
    client = client_fields(ex.scope, ex.state.trusted_proxies)
    if ex.masking is not None and client["user_agent"] is not None:
        # A client's User-Agent is free text ("SupportDesk (agent Maria ...)"): a masking decision keeps it from
        # the log as it keeps it from the provider (``Exchange.provider_headers``).
        client["user_agent"] = WITHHELD_AGENT
    return {
        # The client's x-request-id, else the router's: the answer's x-request-id either way.
        "request_id": ex.rec.request_id, "replay_id": ex.rec.replay_id, **client,
        # Who called: the key's id (never the key or its hash) and whom it names, or a trusted listener's headers.
        "key_id": who.key_id, "user": who.user, "team": who.team, "tenant": who.tenant,
        "api": ex.api, "recipe": ex.recipe, "decision": ex.decision, "model": ex.model,
        # The backend that answered, or the last one tried when every attempt failed.
        "backend": ex.backend or (failure.backend if isinstance(failure, UpstreamError) else None)
        or (ex.attempts[-1].backend if ex.attempts else None),
        # How many upstream attempts it took, and the backends of those that failed (in order): a request that
        # failed over shows where it went first, not only where it ended.
        "attempts": len(ex.attempts) or None,
        "failed_backends": ",".join(a.backend for a in ex.attempts if a.failed) or None,
        "status": ex.status,
        "path": ex.path.value, "latency_s": round(now - ex.started, 6),
        "ttfb_s": round(ex.first_byte - ex.started, 6) if ex.first_byte is not None else None,
        "input_tokens": usage[0] if usage is not None else None,
        "output_tokens": usage[1] if usage is not None else None,
        # The tokens are the router's estimate (four bytes a token of text): the backend reported no usage.
        "usage_estimated": True if usage is not None and usage[3] else None,
        "error": failure.code if failure is not None else None,
        # An upstream failure's cause in one word (connect_refused, read_timeout...); the message says the rest.
        "cause": failure.cause if isinstance(failure, UpstreamError) else None,
        # The whole story (backend, address, exception), which the client's message leaves out.
        "message": failure.detail if failure is not None else None,
    }


async def _serve(ex: Exchange, receive: Receive, send: Send) -> None:
    # The limits first, before the body is read: a key over its rpm or in-flight limit holds no body reads.
    ex.stage = "auth"
    await admit(ex)
    BILLING.set(ex.meter)       # told by the dispatcher of any attempt cut after it reached a backend
    first = take_queued(receive)
    if is_whole(first):         # the whole body is here: nothing to wait for, no deadline to set
        await read(ex, receive, first)
        cut = None
    else:
        with ex.deadline_scope() as cut:
            await read(ex, receive, first)
    if cut is not None and cut.cancelled_caught:
        ex.state.metrics.timeouts.inc(ex.api, "body")
        if ex.drained():
            raise ShuttingDown("the router is stopping; its graceful timeout passed while the body arrived")
        raise BodyTimeout("the request body did not arrive within the request's deadline")
    if ex.meter is not None:
        ex.meter.request_bytes = len(ex.raw)
    # One scope ends the stages when the client leaves and when the answer stage overruns the deadline.
    failure: VsrError | None = None
    with ex.deadline_scope(_GRACE_S) as outer:
        async with watching(ex.scope, receive, send, outer) as watch:
            ex.watch = watch
            failure = await _kept(ex, watch.send, outer)
    _left_behind(ex)             # attempts the client's leaving or the grace cut
    if watch.cut is not None:   # the router closed the connection of a client that did not read
        ex.state.metrics.timeouts.inc(ex.api, watch.cut.stage)
        ex.status = watch.cut.status
        if not watch.finished:      # cut before its last message: the answer stage never recorded its end
            _unfinished(ex)
        raise watch.cut
    if watch.gone:
        raise ClientGone
    if outer.cancelled_caught and failure is None and not ex.responded:
        failure = _timed_out(ex)    # a stage that overran the grace before any answer left
    # Cut past the grace after the answer started: its stage has recorded why (a stream's deadline, or the error
    # event its client did not take), and hypercorn closes a connection whose answer did not end.
    if failure is not None:
        raise failure


def _unfinished(ex: Exchange) -> None:
    """The record of an answer whose client left, or was cut for not reading, before its end (the answer stage
    never recorded it): streamed when the client asked for a stream, as its answer was (or would have been)."""
    ex.rec.answered(status=ex.status, path=ex.path.value, model=ex.model, complete=False, content_type=None,
                    streamed=ex.req is not None and ex.adapter.stream(ex.req), first_byte=ex.backend_first_byte,
                    usage=ex.meter.usage() if ex.meter is not None else None)     # what it was charged


async def _kept(ex: Exchange, send: Send, outer: trio.CancelScope) -> VsrError | None:
    # Expected failures are kept as values: a nursery would wrap them in an ExceptionGroup.
    try:
        await _stages(ex, send, outer)
    except VsrError as exc:
        return exc
    return None


async def _stages(ex: Exchange, send: Send, outer: trio.CancelScope) -> None:
    """The stages, each under the request's deadline; the answer stage keeps to it on its own, within
    ``outer``'s grace past it."""
    with ex.deadline_scope() as cut:
        ex.stage = "decode"
        await decode(ex)
        if ex.meter is not None and ex.req is not None:
            ex.meter.prompt = prompt_size(ex.adapter, ex.req, ex.raw)
        ex.stage = "auth"
        check_names(ex)
        ex.stage = "route"
        started = time.perf_counter() if tracing.tracer is not None else 0.0
        await route(ex)
        if tracing.tracer is not None:
            tracing.record("vsr.route", started, {"vsr.recipe": ex.recipe, "vsr.decision": ex.decision,
                                                  "vsr.candidates": [m.name for m in ex.route.candidates]
                                                  if ex.route is not None else None})
        # The chosen decision may set its own deadline, later or earlier than the router's.
        cut.deadline, outer.deadline = ex.deadline, ex.deadline + _GRACE_S
        ex.stage = "plugins"
        result = await request_plugins(ex)
        if result is None:
            ex.stage = "dispatch"
            result = await dispatch(ex)
    if cut.cancelled_caught:
        _left_behind(ex)
        raise _timed_out(ex)
    ex.stage = "answer"
    await answer(ex, send, result)
    await remember(ex)      # the context plugin's memory write, once the client has its answer


def _left_behind(ex: Exchange) -> None:
    """The upstream attempts a cancellation cut (the request's deadline, the client's leaving): recorded like any,
    each with its outcome, the Looper's as its hops."""
    left = cut_attempts.taken()
    if left:
        ex.tried(left, hops=ex.path == ResponsePath.LOOPER)


def _timed_out(ex: Exchange) -> RequestTimeout | ShuttingDown:
    ex.state.metrics.timeouts.inc(ex.api, ex.stage)
    if ex.drained():
        return ShuttingDown(f"the router is stopping; its graceful timeout passed at the {ex.stage} stage")
    return RequestTimeout(f"the request was not answered within its deadline ({ex.timeout_s:g} s; "
                          f"it was at the {ex.stage} stage)")
