"""Delegated credentials (spec 6.7): the requesting user's credential, for the upstreams that act for them.

The authenticator in front writes it into ``global.services.authz.
delegated_credential.header``. It stays on the request: only a delegated
backend receives it (under that backend's header and prefix, ``upstream.pool``);
no client header reaches a provider otherwise, and nothing records headers, so
it never reaches logs, the trace, replay or a cache key. A request whose route
could reach a delegated upstream and that carries none is refused with 401
``delegated_credential_missing`` before any upstream call. A delegated System
One deployment (``global.model_catalog.deployments.*.auth.credential``) reads
the credential from the request's context (``protocol.credential``), set here
before routing.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..config.schema import ProviderModel
from ..errors import DelegatedCredentialMissing
from ..protocol.credential import DELEGATED
from .asgi import Scope, header

_TOKEN = re.compile(rb"[\x21-\x7e]+")


def delegated_credential(state, scope: Scope, candidates: Iterable[ProviderModel]) -> str | None:
    """The credential for this request's delegated candidates; None when none of them is delegated."""
    delegated = state.delegated_models
    if not delegated or not any(m.name in delegated for m in candidates):
        return None
    return _read(state, scope, "this route reaches an upstream that acts for you")


def bind_for_systemone(state, scope: Scope) -> None:
    """Before routing: put the request's credential where its delegated System One calls read it.

    The rules of a router with a delegated deployment may ask it for any request, so a request without a
    credential is refused here, before any System One or upstream call. Set on every request (never left
    unset), so a task can never see another request's value.
    """
    if state.delegated_deployments:
        DELEGATED.set(_read(state, scope, "this router's rules ask a decision model that acts for you"))


def _read(state, scope: Scope, why: str) -> str:
    value = header(scope, state.delegated_header)
    credential = value.strip() if value else b""
    if not credential:
        raise DelegatedCredentialMissing(f"{why}, and the request carries no delegated credential")
    if not _TOKEN.fullmatch(credential):
        # A folded or spaced value is no credential: it would travel as something else than what was issued.
        raise DelegatedCredentialMissing("the delegated credential is malformed (visible ASCII without spaces only)")
    return credential.decode("ascii")
