"""Delegated credentials (spec 6.7): the requesting user's credential, for the upstreams that act for them.

The authenticator in front writes it into ``global.services.authz.
delegated_credential.header``. It stays on the request: only a delegated
backend receives it (under that backend's header and prefix, ``upstream.pool``);
no client header reaches a provider otherwise, and nothing records headers, so
it never reaches logs, the trace, replay or a cache key. A request whose route
could reach a delegated upstream and that carries none is refused with 401
``delegated_credential_missing`` before any upstream call.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..config.schema import ProviderModel
from ..errors import DelegatedCredentialMissing
from .asgi import Scope, header

_TOKEN = re.compile(rb"[\x21-\x7e]+")


def delegated_credential(state, scope: Scope, candidates: Iterable[ProviderModel]) -> str | None:
    """The credential for this request's delegated candidates; None when none of them is delegated."""
    delegated = state.delegated_models
    if not delegated or not any(m.name in delegated for m in candidates):
        return None
    value = header(scope, state.delegated_header)
    credential = value.strip() if value else b""
    if not credential:
        raise DelegatedCredentialMissing(
            "this route reaches an upstream that acts for you, and the request carries no delegated credential")
    if not _TOKEN.fullmatch(credential):
        # A folded or spaced value is no credential: it would travel as something else than what was issued.
        raise DelegatedCredentialMissing("the delegated credential is malformed (visible ASCII without spaces only)")
    return credential.decode("ascii")
