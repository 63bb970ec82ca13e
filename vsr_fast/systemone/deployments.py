"""Deployments as the client calls them: embedded, attached runtime, remote System One API (spec 5.9).

Each runner has one ``call(body)`` taking a standard or batch request and
returning the matching response; a failure of the whole call raises
``CallFailed`` with the API's error code and, when named, the failed
question and entry. httpx errors are mapped here, once.
"""
from __future__ import annotations

import http.cookiejar
import os
import ssl
from urllib.parse import urlsplit

import httpx
import msgspec
import trio

from ..config.catalog import Deployment
from ..config.credentials import static_key
from ..errors import ConfigError
from ..protocol import systemone as wire
from ..protocol.credential import DELEGATED
from .runtime import DecisionModel

DEFAULT_TIMEOUT_MS = 1000
Body = wire.StandardRequest | wire.BatchRequest
Response = wire.StandardResponse | wire.BatchResponse


def refuse_cookies(client: httpx.AsyncClient) -> None:
    """Keep no cookie a deployment sets: one client serves every user, so a kept cookie would ride
    on the next user's request (and parsing it into a jar costs time on every answer)."""
    client.cookies.jar.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


class CallFailed(Exception):
    """A whole System One call failed; ``code`` is the API's (or ours: timeout, unreachable, http_5xx)."""

    def __init__(self, code: str, message: str, *, question: str | None = None, state: str | None = None,
                 status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.question, self.state, self.status = code, message, question, state, status


def entries_of(body: Body) -> list[tuple[str, wire.Entry]]:
    """A body's entries in order; a standard request is one entry named ""."""
    if isinstance(body, wire.StandardRequest):
        return [("", wire.Entry(state=body.state, questions=body.questions))]
    return list(body.states.items())


class Embedded:
    """A model served in this process; its forward pass runs in a worker thread."""

    kind = "embedded"
    local = True

    def __init__(self, name: str, model: DecisionModel) -> None:
        self.name = name
        self.model = model
        self.model_name = model.card.name
        # numpy releases the GIL in its kernels; two threads keep both cores busy without thrashing.
        self._limiter = trio.CapacityLimiter(2)

    async def call(self, body: Body) -> Response:
        named = entries_of(body)
        # Past the signals' deadline the request goes on without the answer: the thread is left to finish (it keeps
        # its limiter token until then, so abandoned calls never pile up past two).
        answers = await trio.to_thread.run_sync(self.model.answer, [e for _, e in named], limiter=self._limiter,
                                                abandon_on_cancel=True)
        if isinstance(body, wire.StandardRequest):
            return wire.StandardResponse(model=self.model_name, answers=answers[0])
        return wire.BatchResponse(model=self.model_name, states={
            n: wire.EntryResponse(answers=a, usage=wire.Usage()) for (n, _), a in zip(named, answers)})

    async def aclose(self) -> None:
        return None


class _Http:
    """A System One API over HTTP: a remote one, or an attached model runtime."""

    path = "/v1/systemone"
    kind = "remote"
    local = False

    def __init__(self, name: str, dep: Deployment) -> None:
        self.name = name
        self.url = _url(dep.endpoint or "", self.path)
        self.base = _url(dep.endpoint or "", "")
        self.model_name = dep.model or ""
        self.max_retries = dep.max_retries
        headers = dict(dep.headers)
        auth = dep.auth
        # (header, prefix) of a delegated deployment: each call carries its own request's credential.
        self.delegated: tuple[str, str] | None = (auth.header, auth.prefix) \
            if auth is not None and auth.credential == "delegated" else None
        key = key_of(name, dep) if self.delegated is None else None
        if key:
            assert auth is not None
            headers[auth.header] = f"{auth.prefix} {key}" if auth.prefix else key
        # A CA file is a context of its own: httpx 0.28 deprecates verify=<path>.
        verify = ssl.create_default_context(cafile=dep.tls.ca_file) if dep.tls.ca_file else dep.tls.verify
        timeout_s = (dep.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
        self._client = httpx.AsyncClient(
            headers=headers, verify=verify, trust_env=False, timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=16),
        )
        refuse_cookies(self._client)

    async def call(self, body: Body) -> Response:
        if self.model_name and body.model is None:
            body = msgspec.structs.replace(body, model=self.model_name)
        payload = wire.ENCODER.encode(body)
        headers = {"content-type": "application/json"}
        if self.delegated is not None:
            credential = DELEGATED.get()
            if credential is None:
                # Never asked without the user's credential: the edge refuses such a request first, so this is
                # a call made outside any client request, which a delegated deployment does not answer.
                raise CallFailed("delegated_credential_missing", f"{self.name}: no delegated credential on this call")
            header, prefix = self.delegated
            headers[header] = f"{prefix} {credential}" if prefix else credential
        for attempt in range(self.max_retries + 1):
            try:
                resp = await self._client.post(self.url, content=payload, headers=headers)
            except httpx.TimeoutException as exc:
                failure = CallFailed("timeout", f"{self.name}: {type(exc).__name__}")
            except httpx.TransportError as exc:
                failure = CallFailed("unreachable", f"{self.name}: {type(exc).__name__}: {exc}")
            else:
                if resp.status_code < 400:
                    return _decode(body, resp.content)
                failure = _error(resp)
                if resp.status_code < 500:
                    raise failure   # 4xx: the API's verdict; retrying the same body changes nothing
            if attempt == self.max_retries:
                raise failure
        raise AssertionError("unreachable")

    async def models(self) -> wire.ModelList:
        """The API's model list (capabilities), for the start-time checks."""
        resp = await self._client.get(self.base + "/v1/models")
        resp.raise_for_status()
        return msgspec.json.decode(resp.content, type=wire.ModelList)

    async def aclose(self) -> None:
        await self._client.aclose()


class Remote(_Http):
    kind = "remote"
    path = "/v1/systemone"


class Attached(_Http):
    """A model runtime the router does not manage: answers failed questions in place."""

    kind = "attached"
    path = "/v1/decisions"
    local = True


def _url(endpoint: str, path: str) -> str:
    if "://" not in endpoint:
        endpoint = f"http://{endpoint}"
    parts = urlsplit(endpoint)
    base_path = parts.path.rstrip("/")
    for suffix in ("/v1/systemone", "/v1/decisions", "/v1"):
        if base_path.endswith(suffix):
            base_path = base_path[: -len(suffix)]
            break
    return f"{parts.scheme}://{parts.netloc}{base_path}{path}"


def key_of(name: str, dep: Deployment) -> str | None:
    """A deployment's static key (env or file), or None."""
    # The load checks read a key file too; one that became unreadable since is still no reason to call keyless.
    try:
        return static_key(dep.auth)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError([f"global.model_catalog.deployments.{name}.auth.api_key_file: "
                           f"file_unreadable: {dep.auth.api_key_file}: {why}"]) from None


def _decode(body: Body, content: bytes) -> Response:
    try:
        if isinstance(body, wire.StandardRequest):
            return wire.STANDARD_RESPONSE.decode(content)
        return wire.BATCH_RESPONSE.decode(content)
    except msgspec.DecodeError as exc:
        raise CallFailed("invalid_response", str(exc)) from None


def _error(resp: httpx.Response) -> CallFailed:
    try:
        err = wire.ERROR_RESPONSE.decode(resp.content).error
        return CallFailed(err.code, err.message, question=err.question, state=err.state, status=resp.status_code)
    except msgspec.DecodeError:
        code = "overloaded" if resp.status_code == 429 else f"http_{resp.status_code}"
        return CallFailed(code, resp.text[:200], status=resp.status_code)


def runner(name: str, dep: Deployment, models: dict[str, DecisionModel]):
    """The runner for one deployment; an embedded model must already be loaded in ``models``."""
    if dep.provider == "systemone":
        return Remote(name, dep)
    if dep.endpoint:
        return Attached(name, dep)
    return Embedded(name, models[name])


__all__ = ["Attached", "CallFailed", "Embedded", "Remote", "entries_of", "key_of", "refuse_cookies", "runner"]
