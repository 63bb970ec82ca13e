"""One request's shared state: what each stage reads and writes, and nothing else.

decode writes ``raw`` and ``req``; route writes ``route`` and the decision's
facts; the request plugins write ``shaping``; dispatch writes ``answer``; the
answer stage writes the status and path; ``rec`` records every step.
"""
from __future__ import annotations

import time
from typing import Any

import trio

from ...headers import registry as h
from ...headers.public import public_headers
from ...protocol.adapters import Adapter, Inbound, Outbound
from ...routing import Route
from ..asgi import HeaderList, Scope
from ..recording import Recording
from ..state import AppState

_TO_PROVIDER = tuple(name.encode() for name in h.TO_PROVIDER)
_TRACE = h.TRACE.encode()
_WARNINGS = h.WARNINGS.encode()


class Exchange:
    """What one request has decided so far; read by headers, metrics, errors and the record."""

    __slots__ = ("adapter", "api", "codes", "deadline", "decision", "extra", "model", "outbound", "path", "raw",
                 "rec", "recipe", "req", "responded", "route", "scope", "shaping", "stage", "started", "state",
                 "status", "trace", "warnings", "arrived", "guard_outcome", "guard_codes", "held")

    def __init__(self, state: AppState, api: str, scope: Scope) -> None:
        self.state, self.api, self.scope = state, api, scope
        self.adapter: Adapter = state.adapters[api]
        self.started = time.perf_counter()
        self.arrived = trio.current_time()
        self.deadline = self.arrived + state.request_timeout_s
        self.responded = False          # the response has started: an error can no longer be sent whole
        self.stage = "decode"
        self.raw = b""
        self.req: Inbound | None = None
        self.route: Route | None = None
        self.shaping: Any = None
        self.outbound: dict[str, Outbound] = {}
        self.recipe: str | None = None
        self.decision: str | None = None
        self.model: str | None = None
        self.path = h.ResponsePath.UPSTREAM
        self.status = 500
        self.trace: str | None = None
        self.extra: HeaderList = []
        self.warnings = ""
        self.codes: list[str] = []        # warning codes ahead of translation losses (scan_partial, ...)
        self.guard_outcome = "none"       # what response_guard did (events.types.GuardOutcome)
        self.guard_codes: list[str] = []
        self.held = False                 # a streamed answer held for the guard
        self.rec = Recording(state, scope)

    def headers(self, content_type: str | None = None) -> HeaderList:
        """The public headers of the answer, with its warnings, trace and extras."""
        out = public_headers(config_version=self.state.config_version, path=self.path,
                             recipe=self.recipe, decision=self.decision, model=self.model)
        if self.warnings:
            out.append((_WARNINGS, self.warnings.encode()))
        if self.trace is not None:
            out.append((_TRACE, self.trace.encode()))
        out += self.extra
        if content_type is not None:
            out.append((b"content-type", content_type.encode()))
        return out

    def provider_headers(self) -> list[tuple[str, bytes]]:
        """The client headers registered to reach providers; every other one, x-vsr-* included, stays here.
        Values stay bytes: httpx encodes a str value as ASCII and would fail on a client's non-ASCII one."""
        return [(k.decode(), v) for k, v in self.scope["headers"] if k in _TO_PROVIDER]

    def time_left(self) -> float:
        return self.deadline - trio.current_time()
