"""``POST /v1/messages/count_tokens``: how many input tokens a Messages request holds.

The request is routed as the same body sent to ``/v1/messages`` would be.
When the model it would reach is served in Anthropic's format, the count comes
from that backend (the body goes with the model name rewritten, the client's
anthropic-beta and anthropic-version with it), so it is the model's own. Any
other backend has no such endpoint, and an Anthropic one may lack it (404,
405, 501) or be down: then the router answers an estimate, marked with
``x-vsr-token-count: estimate``: the number of tokens vsr-static-1's WordPiece
tokenizer makes of the text the request carries (system prompt, message texts,
tool calls and results, tool definitions and a structured output's schema as JSON; images and documents count
nothing). It is an estimate of size, not the model's own count.

A route whose decision masks sends the body masked, as ``/v1/messages`` would
send it (``pipeline.masking``): the backend counts what the model would read,
placeholders in place of the values (``[PERSON_1]`` may be a token more or
less than the name it stands for), and no personal data leaves. A body masking
cannot read is not sent: the estimate answers (of the client's text, read here).

The caller's key is held as on ``/v1/messages``: its ``entrypoints`` and
``models`` decide what it may name and have counted (403 ``permission_error``),
then a key over one of its limits gets 429 with Retry-After, both before any
provider is asked (a count the key may never ask is never told to retry). A count is authorised like a completion but not charged as
one (as LiteLLM does): it takes no place in the requests-per-minute window and
spends no tokens, since nothing is generated.

No routing events are recorded: nothing is generated.
"""
from __future__ import annotations

import logging

import msgspec
import trio

from ..auth.access import allowed_route, check_name
from ..errors import MaskingUnavailable, RateLimited, UpstreamError, VsrError
from ..headers import registry as h
from ..headers.public import public_headers
from ..protocol import anthropic
from ..protocol.adapters import Inbound, Outbound, same_format_headers
from ..protocol.rewrite import ModelRewriter
from ..protocol.prompt_texts import conversation_texts
from .asgi import Receive, Scope, Send, read_body, send_whole
from .delegation import delegated_credential
from .pipeline.masking import Masked, mask
from .pipeline.offload import off_loop, signals_runner
from .recording import kept_request_id, request_id
from .state import AppState

log = logging.getLogger("vsr_fast.count_tokens")
PATH = "/messages/count_tokens"
_TO_PROVIDER = frozenset(name.encode() for name in h.TO_PROVIDER)
ESTIMATED = (h.TOKEN_COUNT.encode(), b"estimate")
_NO_ENDPOINT = frozenset({404, 405, 501})
_JSON = msgspec.json.Encoder()
_REQUEST_ID, _ANTHROPIC_REQUEST_ID = h.REQUEST_ID.encode(), h.ANTHROPIC_REQUEST_ID.encode()


class Counted(msgspec.Struct, frozen=True):
    input_tokens: int


async def handle_count_tokens(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one count_tokens request in Anthropic's shape, errors included."""
    adapter = state.adapters["messages"]
    recipe = decision = model = None
    extra: list[tuple[bytes, bytes]] = []
    limited = False
    identity = state.identity(scope)
    try:
        raw = await read_body(scope, receive, state.max_body_bytes, state.body_pace)
        kept = same_format_headers("anthropic", scope["headers"])
        # A big body's decode and signals off the loop, as the pipeline's (``pipeline.offload``).
        body = await off_loop(state.metrics, "decode", len(raw), adapter.decode_as, anthropic.COUNT_TOKENS_DECODER,
                              raw, kept)
        req = Inbound("messages", raw, body, headers=kept)
        check_name(identity, req.body.model, state.table.by_name, state.table.models)
        if state.limiter.active:
            # Refused when a completion would be, admitted without being counted as one (the module's note).
            extra += await state.limiter.check(identity, "count_tokens")
        route = allowed_route(identity, await state.table.route(req.body.model,
                                                                lambda: adapter.canonical(req, identity),
                                                                state.systemone,
                                                                signals_runner(state.metrics, len(raw))))
        recipe, decision = route.recipe, route.decision
        model = route.candidates[0].name if route.candidates else None
        status, out = await _forwarded(state, adapter, req, route, scope)
        if status is None:
            conv, _ = adapter.conversation(req)
            count = await trio.to_thread.run_sync(estimate, conversation_texts(conv))
            status, out = 200, _JSON.encode(Counted(count))
            extra.append(ESTIMATED)
    except VsrError as exc:
        recipe = recipe or getattr(exc, "recipe", None)
        status, out, limited = refused_count(adapter, exc, extra)
    # The request's id, under the Anthropic SDK's name too (``request-id``) and in an error's body.
    rid = request_id(scope)
    extra += [(_REQUEST_ID, rid.encode("latin-1")), (_ANTHROPIC_REQUEST_ID, rid.encode("latin-1"))]
    if status >= 400:
        out = anthropic.with_request_id(out, rid)
    await send_count(state, send, status, out, extra, limited, recipe=recipe, decision=decision, model=model)


def refused_count(adapter, exc: VsrError, extra: list[tuple[bytes, bytes]]) -> tuple[int, bytes, bool]:
    """A count's error in the client's shape: ``(status, body, rate limited)``; its headers go into ``extra``."""
    status, _, out = adapter.error(exc)
    limited = isinstance(exc, RateLimited)
    if limited:
        extra += exc.headers
    if exc.retry_after_s is not None:
        extra.append((b"retry-after", str(exc.retry_after_s).encode()))
    return status, out, limited


async def send_count(state: AppState, send: Send, status: int, out: bytes, extra: list[tuple[bytes, bytes]],
                     limited: bool, *, recipe=None, decision=None, model=None) -> None:
    """A count's answer (or its refusal) with the router's public headers and ``extra``."""
    path = h.ResponsePath.UPSTREAM if status < 400 else \
        h.ResponsePath.RATE_LIMITED if limited else h.ResponsePath.ERROR
    headers = public_headers(config_version=state.config_version, path=path, recipe=recipe, decision=decision,
                             model=model)
    headers += extra
    headers.append((b"content-type", b"application/json"))
    await send_whole(send, status, headers, out)


async def _forwarded(state: AppState, adapter, req: Inbound, route, scope: Scope) -> tuple[int | None, bytes]:
    """The count from the first candidate models served in Anthropic's format, with fallback among
    them; ``(None, b"")`` when the first candidate is not one, or none of them counts."""
    candidates = route.candidates
    anthropic_models = tuple(m for m in candidates if m.api_format == "anthropic")
    if not candidates or candidates[0].api_format != "anthropic":
        return None, b""
    body = adapter.same_format(req, True)[0]
    policy = state.policies.masking(route.recipe, route.decision)
    if policy is not None:
        try:
            body, _ = await mask(Masked(state, route), body, "anthropic", policy)
        except MaskingUnavailable as exc:
            log.warning("count_tokens: %s; answering an estimate", exc.message)
            return None, b""
    rewrite = ModelRewriter(body, req.body.model)
    headers = adapter.provider_headers(req, "anthropic")
    credential = delegated_credential(state, scope, anthropic_models)

    def outbound_for(model) -> Outbound:
        return Outbound(PATH, rewrite(model.upstream_model), False, headers, credential=credential)

    # bytes: see Exchange.provider_headers; a client's x-request-id only when the router keeps it.
    extra = [(k.decode(), h.ROUTER_AGENT if k == b"user-agent" and policy is not None else v) for k, v in scope["headers"]
             if k in _TO_PROVIDER and (k != b"x-request-id" or kept_request_id(v) == v.decode("latin-1"))]
    try:
        answer = await state.dispatcher.whole(anthropic_models, outbound_for, extra)
    except UpstreamError as exc:
        log.warning("count_tokens: no Anthropic backend counted (%s); answering an estimate", exc.detail)
        return None, b""
    if answer.status in _NO_ENDPOINT:
        return None, b""
    if answer.status >= 400:    # in Anthropic's error shape, as /v1/messages answers it
        reply = adapter.whole(req, "anthropic", answer.status, answer.body, answer.content_type)
        return reply.status, reply.body
    return answer.status, answer.body


__all__ = ["ESTIMATED", "estimate", "handle_count_tokens", "refused_count", "send_count"]


def estimate(texts: list[str]) -> int:
    """The embedded model's WordPiece count, imported on the first estimate (in a worker thread): a router whose
    configuration asks the embedded model nothing does not load its tokenizer, phonenumbers and the NER rules at
    start (a tenth of a process's imports)."""
    from ..models import vsr_static

    return vsr_static.count_tokens(texts)
