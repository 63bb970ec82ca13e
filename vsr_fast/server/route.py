"""Decode a Chat Completions body and route it: shared by the hot path and the routing preview."""
from __future__ import annotations

from collections.abc import Callable

from ..config.schema import RouterConfig
from ..protocol.chat import REQUEST_DECODER, ChatRequest
from ..protocol.errors import BodyProblem, decode_body, openai_request_error
from ..routing import Route, RoutingTable
from ..routing.plan import SystemOneAsker
from ..signals.base import ANONYMOUS, CanonicalRequest, Identity
from .asgi import Scope, header

IdentityReader = Callable[[Scope], Identity]


def identity_reader(config: RouterConfig) -> IdentityReader:
    """How this server learns who the caller is: trusted listener headers, or nobody.

    Client-sent identity headers count only where a listener sets
    ``identity.trust_headers: true`` (an authenticator in front writes them);
    otherwise every caller is anonymous and role bindings fail closed.
    """
    listener = config.listeners[0] if config.listeners else None
    if listener is None or not listener.identity.trust_headers:
        return lambda scope: ANONYMOUS
    user_name = listener.identity.user_header.lower().encode()
    groups_name = listener.identity.groups_header.lower().encode()
    team_name = listener.identity.team_header.lower().encode()
    tenant_name = listener.identity.tenant_header.lower().encode()

    def one(scope: Scope, name: bytes) -> str | None:
        value = header(scope, name)
        return value.decode("latin-1").strip() or None if value else None

    def read(scope: Scope) -> Identity:
        groups = header(scope, groups_name)
        return Identity(
            user=one(scope, user_name),
            groups=frozenset(g.strip() for g in groups.decode("latin-1").split(",") if g.strip()) if groups else frozenset(),
            team=one(scope, team_name), tenant=one(scope, tenant_name),
        )

    return read


def decode_chat(raw: bytes) -> ChatRequest:
    """The typed request; a 400 RequestError naming the bad field's path otherwise (depth included)."""
    try:
        return decode_body(REQUEST_DECODER, raw)
    except BodyProblem as exc:
        raise openai_request_error(exc.problem) from None


async def route_chat(table: RoutingTable, request: ChatRequest, identity: Callable[[], Identity],
                     systemone: SystemOneAsker | None = None) -> Route:
    """Route a decoded request; the canonical form is built only if a signal is read."""
    return await table.route(request.model, lambda: CanonicalRequest.from_chat(request, identity()), systemone)
