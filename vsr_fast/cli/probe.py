"""``vsr-fast route probe``: prompts through a configuration's routing, checked against what they should get.

    vsr-fast route probe --config FILE (--prompt TEXT | --probes FILE) [--expect-decision D] ...
    vsr-fast route probe --endpoint URL (--prompt TEXT | --probes FILE) [--api-key KEY] ...

With ``--config`` the routing runs in this process, with the decision model
the configuration resolves to (the embedded one included); with ``--endpoint``
each probe goes to a running router's ``POST /api/v1/routing/preview``. Either
way a probe's receipt holds the public headers and the parsed ``x-vsr-trace``
(asked for unless ``--no-debug``), and the route the preview reports. The
summary has one row per decision; the exit code is 1 on any mismatch (a probe
whose request would fail is one), 2 when the probes cannot run at all (spec 7.1).
The route is the preview's: the decision's selector run as the request path runs it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

import http_sf
import httpx
import trio

from ..errors import ConfigError, DecisionFailed, VsrError
from ..headers import registry as h
from ..headers.public import public_headers
from ..headers.registry import ResponsePath
from ..routing import load_file
from ..routing.open_systemone import open_systemone, read_attached_cards
from ..selection.selectors import SelectionState
from ..server.pipeline import looper
from ..server.preview import (preview_body, preview_model, preview_path, previewed_route, unresolved_body,
                              with_notes)
from ..server.recording import Policies
from ..server.route import decode_chat, request_text, trace_of
from ..signals.base import Identity
from ._parser import ROUTE_FACTS as _ROUTE_FACTS
from .probes_file import Expect, Probe, prompt_body, read_probes

PREVIEW = "/api/v1/routing/preview"
_PUBLIC_PREFIX = "x-vsr-"


@dataclass
class Receipt:
    """What one probe got and whether it is what it should get."""

    probe: Probe
    route: dict = field(default_factory=dict)        # the preview document
    public: dict[str, str] = field(default_factory=dict)
    trace: dict | None = None
    error: dict | None = None                        # {status, code, message} of an error answer
    mismatches: list[str] = field(default_factory=list)

    def check(self, expect: Expect) -> None:
        if self.error is not None:      # the request would fail: whatever was expected, it is not met
            self.mismatches.append(f"error: {self.error['status']} {self.error['code']}")
        for fact in _ROUTE_FACTS:
            want = getattr(expect, fact)
            got = self.route.get(fact)
            if want is not None and want != got:
                self.mismatches.append(f"{fact}: expected {want}, got {got or '(none)'}")

    def json(self) -> dict:
        return {"group": self.probe.group, "id": self.probe.id, "model_requested": self.probe.body.get("model"),
                **{fact: self.route.get(fact) for fact in (*_ROUTE_FACTS, "model")},
                "signals": [f"{s['type']}:{s['name']}" for s in self.route.get("signals", ()) if s.get("matched")],
                "why": self.route.get("why"), "public": self.public, "trace": self.trace, "error": self.error,
                "expected": {k: v for k, v in vars(self.probe.expect).items() if v is not None},
                "ok": not self.mismatches, "mismatches": self.mismatches}


def run(args: argparse.Namespace) -> int:
    """The command; returns the exit code."""
    cli_expect = Expect(args.expect_recipe, args.expect_decision, args.expect_algorithm)
    try:
        if args.probes:
            probes = read_probes(args.probes, args.model)
        else:
            probes = [Probe("(prompt)", "prompt", prompt_body(args.prompt, args.model), Expect())]
        probes = [Probe(p.group, p.id, p.body, cli_expect.over(p.expect)) for p in probes]
        receipts = _first_error(lambda: trio.run(_in_process if args.config else _remote, args, probes))
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"error: {args.endpoint}: {exc!r}", file=sys.stderr)
        return 2
    refused = next((r.error for r in receipts if r.error and r.error["status"] in (401, 403)), None)
    if refused is not None:     # the router would not preview for this caller: nothing was probed
        print(f"error: {args.endpoint}: {refused['status']} {refused['code']}: {refused['message']}", file=sys.stderr)
        return 2
    for receipt in receipts:
        receipt.check(receipt.probe.expect)
    if args.json:
        print(json.dumps({"probes": [r.json() for r in receipts], "decisions": summary(receipts)}, indent=2))
    else:
        print(render(receipts, single=args.prompt is not None))
    return 1 if any(r.mismatches for r in receipts) else 0


def _first_error(run):
    """``run()``, a failure inside the probes' nursery raised as itself (the first one), not as a group."""
    try:
        return run()
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


async def _in_process(args: argparse.Namespace, probes: list[Probe]) -> list[Receipt]:
    loaded = await read_attached_cards(load_file(args.config))
    async with open_systemone(loaded) as client:
        asker = loaded.table.asker(client) if client is not None else None
        selection = SelectionState()        # no measurements in this process: multi_factor ranks on config alone
        policies = Policies(loaded)         # fast_response decides the response path, as on the request path

        async def one(probe: Probe) -> Receipt:
            receipt = Receipt(probe)
            try:
                request = decode_chat(json.dumps(probe.body).encode())
                started = time.perf_counter_ns()
                route = await previewed_route(loaded.table, request, Identity, asker, policies)
                routing_us = (time.perf_counter_ns() - started) / 1000
                route, picked = await looper.previewed(route, loaded.table, asker, selection,
                                                       request_text(request, Identity))
            except VsrError as exc:
                receipt.error = {"status": exc.status, "code": exc.code, "message": exc.message}
                if isinstance(exc, DecisionFailed) and exc.readings is not None:
                    receipt.route = unresolved_body(exc, str(probe.body.get("model")))     # the signals that led to it
                receipt.public = _public(public_headers(config_version=loaded.version_hash.encode(),
                                                        path=ResponsePath.ERROR, recipe=None, decision=None,
                                                        model=None))
                return receipt
            path = preview_path(route, policies)
            receipt.route = preview_body(route, request.model, routing_us, picked, path)
            receipt.public = _public(public_headers(
                config_version=loaded.version_hash.encode(), path=path, recipe=route.recipe,
                decision=route.decision, model=None if path == ResponsePath.FAST_RESPONSE
                else preview_model(route, picked)))
            if args.debug:
                receipt.trace = parse_trace(with_notes(trace_of(route), picked))
            return receipt

        return await _all(probes, one, args.concurrency)


async def _remote(args: argparse.Namespace, probes: list[Probe]) -> list[Receipt]:
    headers = {h.DEBUG: "1"} if args.debug else {}
    if args.api_key:
        headers["authorization"] = f"Bearer {args.api_key}"
    url = args.endpoint.rstrip("/") + PREVIEW
    async with httpx.AsyncClient(timeout=httpx.Timeout(300, connect=10), headers=headers) as http:

        async def one(probe: Probe) -> Receipt:
            answer = await http.post(url, json=probe.body)
            receipt = Receipt(probe, public={k: v for k, v in answer.headers.items()
                                             if k.startswith(_PUBLIC_PREFIX) and k != h.TRACE})
            try:
                doc = answer.json()
            except ValueError:
                doc = {}
            if answer.status_code != 200:
                err = doc.get("error", {}) if isinstance(doc, dict) else {}
                receipt.error = {"status": answer.status_code, "code": err.get("code"),
                                 "message": err.get("message", answer.text[:200])}
                if isinstance(doc, dict) and "signals" in doc:     # a decision error's breakdown
                    receipt.route = {k: v for k, v in doc.items() if k != "error"}
            else:
                receipt.route = doc
            if h.TRACE in answer.headers:
                receipt.trace = parse_trace(answer.headers[h.TRACE])
            return receipt

        return await _all(probes, one, args.concurrency)


async def _all(probes: list[Probe], one, concurrency: int) -> list[Receipt]:
    """Every probe through ``one``, at most ``concurrency`` at a time, receipts in the probes' order."""
    out: list[Receipt | None] = [None] * len(probes)
    limit = trio.CapacityLimiter(max(concurrency, 1))

    async def task(i: int) -> None:
        async with limit:
            out[i] = await one(probes[i])

    async with trio.open_nursery() as nursery:
        for i in range(len(probes)):
            nursery.start_soon(task, i)
    return [r for r in out if r is not None]


def _public(pairs: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in pairs}


def parse_trace(value: str) -> dict:
    """``x-vsr-trace`` (an RFC 8941 dictionary) as plain JSON values: inner lists as lists."""
    parsed = http_sf.parse(value.encode(), tltype="dictionary")
    return {name: _plain(member) for name, member in parsed.items()}


def _plain(member):
    value = member[0] if isinstance(member, tuple) else member
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)      # a token or byte sequence


def summary(receipts: list[Receipt]) -> dict[str, dict]:
    """Per decision (the probes file's group, else the decision routed): probes, passed, rate, got instead."""
    rows: dict[str, dict] = {}
    for r in receipts:
        key = r.probe.group if r.probe.group != "(prompt)" else (r.route.get("decision") or "(none)")
        row = rows.setdefault(key, {"probes": 0, "passed": 0, "got": Counter()})
        row["probes"] += 1
        if r.mismatches:
            row["got"][r.route.get("decision") or (r.error or {}).get("code") or "(none)"] += 1
        else:
            row["passed"] += 1
    return {k: {"probes": v["probes"], "passed": v["passed"], "pass_rate": round(100 * v["passed"] / v["probes"], 1),
                "got_instead": dict(v["got"])} for k, v in rows.items()}


def render(receipts: list[Receipt], *, single: bool) -> str:
    """The text report: each probe that missed (every probe's route for one prompt), then the table."""
    lines: list[str] = []
    for r in receipts:
        got = r.json()
        if single:
            lines += [f"{k}: {got[k]}" for k in ("recipe", "decision", "algorithm", "model", "why") if got[k]]
            lines.append("signals: " + (" ".join(got["signals"]) or "(none matched)"))
            if r.error:
                lines.append(f"error: {r.error['status']} {r.error['code']}: {r.error['message']}")
        if r.mismatches:
            lines.append(f"MISS {r.probe.group}/{r.probe.id}: " + "; ".join(r.mismatches))
    rows = summary(receipts)
    width = max([len(k) for k in rows] + [len("decision"), len("total")])
    lines += ["", f"{'decision':<{width}}  probes  passed    rate  got instead"]
    for name, row in rows.items():
        instead = ", ".join(f"{k} x{n}" for k, n in row["got_instead"].items())
        lines.append(f"{name:<{width}}  {row['probes']:>6}  {row['passed']:>6}  {row['pass_rate']:>5.1f}%  "
                     f"{instead}".rstrip())
    total, passed = len(receipts), sum(not r.mismatches for r in receipts)
    lines.append(f"{'total':<{width}}  {total:>6}  {passed:>6}  {100 * passed / max(total, 1):>5.1f}%")
    return "\n".join(lines).lstrip("\n")
