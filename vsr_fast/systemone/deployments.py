"""Deployments as the client calls them: embedded, attached runtime, remote System One API (spec 5.9).

Each runner has one ``call(body)`` taking a standard or batch request and
returning the matching response; a failure of the whole call raises
``CallFailed`` with the API's error code and, when named, the failed
question and entry. httpx errors are mapped here, once.
"""
from __future__ import annotations

import http.cookiejar
import logging
import os
import ssl
from urllib.parse import urlsplit

import httpx
import msgspec
import trio

from ..config.catalog import Deployment
from ..config.credentials import static_key
from ..errors import ConfigError, told
from ..protocol import systemone as wire
from ..protocol.credential import DELEGATED
from ..offloop import OFF_LOOP_BYTES, OFF_LOOP_LIMITER
from ..upstream.dispatch import retry_after_seconds
from . import validity
from .runtime import DecisionModel
from .validity import INVALID

log = logging.getLogger("vsr_fast.systemone")

DEFAULT_TIMEOUT_MS = 1000
Body = wire.StandardRequest | wire.BatchRequest
Response = wire.StandardResponse | wire.BatchResponse


def refuse_cookies(client: httpx.AsyncClient) -> None:
    """Keep no cookie a deployment sets: one client serves every user, so a kept cookie would ride
    on the next user's request (and parsing it into a jar costs time on every answer)."""
    client.cookies.jar.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


class CallFailed(Exception):
    """A whole System One call failed; ``code`` is the API's (or ours: timeout, unreachable, invalid_response,
    http_5xx).

    ``message`` is for the client: the cause in words, never the deployment's name, its address or an
    exception's text (``detail`` has those, for the log). ``status`` is the remote's HTTP status when it answered
    one, ``said`` its own error message (relayed only as a verdict on the request: question_failed...),
    ``retry_after`` its Retry-After in seconds.
    """

    def __init__(self, code: str, message: str, *, question: str | None = None, state: str | None = None,
                 status: int | None = None, detail: str | None = None, said: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{code}: {detail or message}")
        self.code, self.message, self.question, self.state, self.status = code, message, question, state, status
        self.detail, self.said, self.retry_after = detail or message, said, retry_after

    @property
    def reason(self) -> str:
        """Why, for a signal's unknown and a decision's error: the code and the client's words."""
        return f"{self.code}: {self.message}" if self.message else self.code


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

    async def call(self, body: Body, *, strict: bool = False) -> Response:
        """The model's answers; ``strict`` is for the HTTP runners' untrusted answers (this model is ours)."""
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
        self.max_response_bytes = dep.max_response_bytes
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

    async def call(self, body: Body, *, strict: bool = False) -> Response:
        """The remote's answer to ``body``, held to its questions (``validity``): ``strict``, any invalid or
        missing answer fails the call (``invalid_response``); else each is an in-place ``invalid_response``."""
        if self.model_name and body.model is None:
            body = msgspec.structs.replace(body, model=self.model_name)
        payload = wire.ENCODER.encode(body)
        headers = {"content-type": "application/json"}
        if self.delegated is not None:
            credential = DELEGATED.get()
            if credential is None:
                # Never asked without the user's credential: the edge refuses such a request first, so this is
                # a call made outside any client request, which a delegated deployment does not answer.
                raise CallFailed("delegated_credential_missing", "no delegated credential on this call",
                                 detail=f"{self.name}: no delegated credential on this call")
            header, prefix = self.delegated
            headers[header] = f"{prefix} {credential}" if prefix else credential
        for attempt in range(self.max_retries + 1):
            try:
                async with self._client.stream("POST", self.url, content=payload, headers=headers) as resp:
                    status = resp.status_code
                    content = await self._read(resp)
            except httpx.TimeoutException as exc:
                failure = CallFailed("timeout", "no answer within the deployment's timeout_ms",
                                     detail=f"{self.name}: {type(exc).__name__}")
            except httpx.TransportError as exc:
                failure = CallFailed("unreachable", _cause_words(exc), detail=f"{self.name}: {type(exc).__name__}: {exc}")
            else:
                if status < 400:
                    return await _decode(self.name, body, content, strict)
                failure = _error(self.name, status, resp.headers, content)
                if status < 500:
                    raise failure   # 4xx: the API's verdict; retrying the same body changes nothing
            if attempt == self.max_retries:
                raise failure
        raise AssertionError("unreachable")

    async def _read(self, resp: httpx.Response) -> bytes:
        """The answer's body up to ``max_response_bytes``: past it, ``invalid_response`` and no byte more is read
        (the connection is let go), so a remote cannot make the router hold an answer of any size."""
        limit = self.max_response_bytes
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(self.name, limit, f"Content-Length {declared}")
        chunks, size = [], 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise _too_large(self.name, limit, f"more than {size} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

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


def _decode_checked(name: str, body: Body, content: bytes, strict: bool) -> Response:
    try:
        decoded = (wire.STANDARD_RESPONSE if isinstance(body, wire.StandardRequest) else wire.BATCH_RESPONSE
                   ).decode(content)
    except msgspec.DecodeError as exc:
        raise CallFailed(INVALID, "the answer is not a System One response of the form asked",
                         detail=f"{name}: {exc}") from None
    response, problems = validity.checked(body, decoded)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        if strict:
            raise CallFailed(INVALID, f"the answers do not fit the questions ({shown})", detail=f"{name}: {shown}")
        log.info("System One deployment %s answered invalidly: %s", name, shown)
    return response


async def _decode(name: str, body: Body, content: bytes, strict: bool) -> Response:
    """The answer decoded and checked; a big one in a worker thread, as the pipeline's big bodies are (msgspec
    holds the loop for a whole decode)."""
    if len(content) < OFF_LOOP_BYTES:
        return _decode_checked(name, body, content, strict)
    return await trio.to_thread.run_sync(_decode_checked, name, body, content, strict, limiter=OFF_LOOP_LIMITER)


def _too_large(name: str, limit: int, seen: str) -> CallFailed:
    return CallFailed(INVALID, f"the answer is larger than max_response_bytes ({limit} bytes): too_large",
                      detail=f"{name}: answer past max_response_bytes {limit} ({seen})")


def _cause_words(exc: httpx.TransportError) -> str:
    """A transport failure in words: no address, no errno (the log has those)."""
    if isinstance(exc, httpx.ConnectError):
        return "the connection failed"
    if isinstance(exc, (httpx.ReadError, httpx.WriteError)):
        return "the connection broke"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the answer was not valid HTTP"
    return "the connection failed"


def _error(name: str, status: int, headers: httpx.Headers, content: bytes) -> CallFailed:
    """A remote's error answer: its code, question and entry, its status and Retry-After; its own message kept
    apart (``said``), as a remote's words may name its hosts."""
    retry_after = retry_after_seconds(headers.get("retry-after"))
    try:
        err = wire.ERROR_RESPONSE.decode(content).error
    except msgspec.DecodeError:
        code = "overloaded" if status == 429 else f"http_{status}"
        return CallFailed(code, f"the deployment answered HTTP {status}", status=status, retry_after=retry_after,
                          detail=f"{name}: HTTP {status}: {content[:200]!r}")
    # The remote's words, capped (``errors.told``): they reach the client's error, the reason and the log.
    code, said = told(err.code), told(err.message)
    question, entry = (told(v) if v is not None else None for v in (err.question, err.state))
    return CallFailed(code, f"the deployment answered HTTP {status} {code}", question=question,
                      state=entry, status=status, said=said, retry_after=retry_after,
                      detail=f"{name}: HTTP {status} {code}: {said}")


def runner(name: str, dep: Deployment, models: dict[str, DecisionModel]):
    """The runner for one deployment; an embedded model must already be loaded in ``models``."""
    if dep.provider == "systemone":
        return Remote(name, dep)
    if dep.endpoint:
        return Attached(name, dep)
    return Embedded(name, models[name])


__all__ = ["Attached", "CallFailed", "Embedded", "Remote", "entries_of", "key_of", "refuse_cookies", "runner"]
