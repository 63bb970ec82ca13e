"""A System One request answered by its native aliases in order: the next one when the last failed (spec 6.3).

The rule is the providers' (``upstream.dispatch``), read from the remote's HTTP status first, never from the
code its body claims: a connect error, a timeout, an answer that does not fit its questions
(``invalid_response``, ``validity``), a 429, a 5xx and a 401, 403, 404 or 408 (a delegated alias's 401, 403, 404
or 408 excepted: the client's own credential answering) move on to the next alias. Any other status is a
verdict on the request (a 400, a 422 ``question_failed``): relayed at once, with the remote's message, question
and entry. When every alias failed, the client gets the last failure's status and code (and Retry-After), as
nginx passes the last upstream answer on, in words naming each alias and its cause, never a deployment's name,
address or exception (those go to the log).
"""
from __future__ import annotations

import logging
import math

import msgspec

from ..config.schema import ProviderModel
from ..protocol import systemone as wire
from ..routing.open_systemone import alias_key
from ..systemone.deployments import CallFailed
from ..upstream.dispatch import CLIENTS_OWN_STATUS, RETRYABLE_STATUS
from .state import AppState

log = logging.getLogger("vsr_fast.gateway")
STATUS = {"invalid_request": 400, "model_not_found": 404, "question_failed": 422, "invalid_input": 422,
          "overloaded": 429, "timeout": 504, "request_timeout": 504, "body_timeout": 408, "request_too_large": 413,
          "internal_error": 500}
# Our own failures, which carry no status of the remote's: the next alias may answer.
PASS_ON = frozenset({"timeout", "unreachable", "invalid_response"})

# (alias, status, body, extra headers, the error's message for the logs when not the body's: a remote's own words
# relayed to the client may quote the request's text, which the access log and the events never keep)
Answer = tuple[str, int, bytes, list[tuple[bytes, bytes]], str | None]


def error(code: str, message: str, *, question: str | None = None, state: str | None = None,
          status: int | None = None) -> tuple[int, bytes]:
    """An error in the System One API's shape and its status: ``status``, else the code's, else 502."""
    body = wire.ErrorResponse(wire.ErrorBody(code=code, message=message, question=question, state=state))
    return status or STATUS.get(code, 502), wire.ENCODER.encode(body)


def runner(state: AppState, alias: ProviderModel):
    """The running deployment that answers a native alias, if any."""
    client = state.systemone_client
    if client is None:
        return None
    return client.runners.get(alias.deployment or "") or client.runners.get(alias_key(alias.name))


async def ask(state: AppState, alias: ProviderModel, body: wire.StandardRequest | wire.BatchRequest, acct=None):
    """One native alias's whole answer to the original typed request, every answer fitting its question
    (``strict``: a client or an escalation's quality gate reads the bundle as it is); with ``acct`` (the
    request's ``SystemOneExchange``), counted and recorded as one of its upstream attempts."""
    found = runner(state, alias)
    if found is None:
        raise CallFailed("unreachable", "no running deployment", detail=f"{alias.name}: no running deployment")
    # The client's model names this router's entrypoint, never a model the deployment knows: the alias's
    # provider_model_id, else the deployment's own model (filled in by the runner).
    request = msgspec.structs.replace(body, model=alias.provider_model_id)
    if acct is not None:
        return await acct.call(alias, found, request, strict=True)
    return await found.call(request, strict=True)


def moves_on(failure: CallFailed, delegated: bool) -> bool:
    """Whether the next alias is tried after ``failure``: by the remote's status when it answered one."""
    if failure.status is None:
        return failure.code in PASS_ON
    return failure.status in RETRYABLE_STATUS and not (delegated and failure.status in CLIENTS_OWN_STATUS)


def _said(failure: CallFailed) -> str:
    """One attempt's outcome for the client: the status and code it answered, or our cause."""
    return f"HTTP {failure.status} {failure.code}" if failure.status is not None else failure.code


async def answer(state: AppState, candidates, body, acct=None) -> Answer:
    """The first alias's answer that fits the questions, or the error the failures above make."""
    tried: list[tuple[str, CallFailed]] = []
    model = candidates[0].name
    for alias in candidates:
        model = alias.name
        try:
            response = await ask(state, alias, body, acct)
        except CallFailed as exc:
            log.info("native alias %s failed: %s", alias.name, exc.detail)
            found = runner(state, alias)
            if not moves_on(exc, getattr(found, "delegated", None) is not None):
                status, out = error(exc.code, exc.said or exc.message, question=exc.question, state=exc.state,
                                    status=exc.status)
                return model, status, out, _retry_after(exc), exc.message if exc.said else None
            tried.append((alias.name, exc))
            continue
        return model, 200, wire.ENCODER.encode(response), [], None
    if not tried:
        status, out = error("unreachable", "no native alias could answer")
        return model, status, out, [], None
    last = tried[-1][1]
    said = ", ".join(f"{name}: {_said(exc)}" for name, exc in tried)
    status, out = error(last.code, f"every native alias failed ({said}); the last: {last.message}",
                        status=last.status)
    return model, status, out, _retry_after(last), None


def _retry_after(failure: CallFailed) -> list[tuple[bytes, bytes]]:
    """The remote's Retry-After, in whole seconds, going with its error."""
    if failure.retry_after is None:
        return []
    return [(b"retry-after", str(math.ceil(failure.retry_after)).encode())]
