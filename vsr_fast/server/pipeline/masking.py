"""The masking step of dispatch: the last rewrite of each candidate's provider-bound request (spec 5.7).

It reads the body as it is sent (after the shaping plugins), asks the named
pii rule about every text position it has not read yet, and replaces every
copy of each labelled value. Spans are kept per request by text, so a
fallback candidate pays only for texts its own format wrote differently;
the request stage's answer about the current turn is reused by its text, and
the System One client's reuse cache answers any text already asked about.
A text it cannot read whole fails the request closed (``MaskingUnavailable``),
before anything is sent; so does an attachment it cannot clean, a binary file or a URL holding personal
data (``MaskingRefused``, 400 naming the field; a text file is decoded, masked and encoded again).
Placeholders are numbered in order of first appearance, past the client's own literal ones; one in an assistant
turn is the router's own carried back, and names the value it named on the turn that wrote it (``_replaced``).
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

import msgspec

from ...errors import MaskingRefused, MaskingUnavailable, VsrError
from ...plugins import masking
from ...plugins.unmask import Restorer, answer_texts
from ...protocol.canonical import TURN_JOIN
from ...routing import Route
from ..state import AppState
from .exchange import Exchange
from .offload import off_loop

_DECODE = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder()


class Masked:
    """What masking reads and keeps of a request that has no ``Exchange`` (a count_tokens body): the same
    fields as an ``Exchange``'s."""

    __slots__ = ("state", "route", "masked_spans", "masked_values")

    def __init__(self, state: AppState, route: Route) -> None:
        self.state, self.route = state, route
        self.masked_spans: dict | None = None
        self.masked_values: dict[str, str] | None = None


async def mask(ex: Exchange | Masked, body: bytes, api_format: str,
               policy: masking.Masking) -> tuple[bytes, str | None]:
    """``body`` with its personal data replaced, and what changed (counts by label, never a value)."""
    doc, found, names = await off_loop(ex.state.metrics, "masking", len(body), _read, body, api_format)
    if doc is None:
        return body, None
    spans = ex.masked_spans
    if spans is None:
        spans = ex.masked_spans = _from_routing(ex, policy)
    missing = [t for t in found if t not in spans]
    if missing:
        rule = _rule(ex, policy)
        asker = ex.state.systemone
        if asker is None:
            raise MaskingUnavailable("masking could not read the request: no decision model serves its pii rule")
        got = await asker.spans(rule, missing, policy.entity_types)
        unread = sum(1 for t in missing if got.get(t) is None)
        if unread:
            raise MaskingUnavailable(f"masking could not read {unread} of the request's {len(found)} texts "
                                     f"(pii rule {policy.signal!r}); the request was not sent")
        spans.update(got)   # type: ignore[arg-type]
    return await off_loop(ex.state.metrics, "masking", len(body), _replaced, ex, body, doc, found, api_format, policy,
                          spans, names)


def _read(body: bytes, api_format: str) -> tuple[dict | None, list[str], dict[str, str]]:
    """The body's document, its texts in ``api_format`` and its Chat names by their spoken forms
    (``masking.texts``); None for a body that is no object."""
    doc = _DECODE.decode(body)
    names: dict[str, str] = {}
    if not isinstance(doc, dict):
        return None, [], names
    with _refusing(doc):
        return doc, masking.texts(doc, api_format, names), names


@contextmanager
def _refusing(doc: dict):
    """An attachment masking cannot clean as the request's 400, naming its field (``MaskingRefused``)."""
    try:
        yield
    except masking.Unreadable as exc:
        where = masking.path(doc, exc.node, exc.key) or exc.key
        raise MaskingRefused(f"masking cannot read and clean {exc.what} at {where}; the request was not sent (send it as "
                             "text, or through a decision that does not mask)", param=where) from None


def _replaced(ex: Exchange | Masked, body: bytes, doc: dict, found: list[str], api_format: str, policy: masking.Masking,
              spans: dict, names: dict[str, str]) -> tuple[bytes, str | None]:
    """``doc`` with each labelled value of ``spans`` replaced by its placeholder, encoded, and what changed."""
    # One numbering for the whole request: a fallback candidate of another format names each value as the
    # first did, and numbers only the values its own text adds.
    numbered = ex.masked_values
    if numbered is None:
        numbered = ex.masked_values = {}
    # A placeholder the client wrote itself ("[PERSON_1]" in a template) is its text: numbering goes past it, so
    # the answer's copy of it stays the client's, never a value. One in an assistant turn is the router's own,
    # carried back (the model's thinking sealed in a reasoning item, a stored response, an answer left masked):
    # it names the value it named when the router wrote it, which numbering in order of first appearance over
    # the same conversation gives it again, so the model's history agrees with itself and its answer's copy is
    # restored. The client's copy of one of those (a user quoting the masked answer it read) names that value too.
    named = policy.named()
    own = masking.client_texts(doc, api_format)
    routers = {m.group(0) for text in found if text not in own for m in named.finditer(text)}
    literal = {m.group(0) for text in found if text in own for m in named.finditer(text)} - routers
    # A signed thinking block comes back as the model wrote it, or the provider refuses the turn: a value the model
    # wrote there itself adds no placeholder (the provider wrote it: nothing reaches it that it had not), while the
    # copies of the request's values, which the router restored for the client, are masked again as they were.
    signed = masking.signed_texts(doc, api_format) - own
    values: dict[str, str] = {}
    labels: Counter[str] = Counter()
    # Another spelling of a value numbered already ("MARIA GONZALEZ" of "Maria Gonzalez") is that value.
    folded = {masking.fold(v): p for v, p in numbered.items()}
    for text in found:
        for s in sorted(spans[text] or () if text not in signed else (), key=lambda s: s.start):
            value = text[s.start:s.end]
            if value.strip() and policy.wants(s.label) and value not in values:
                placeholder = numbered.get(value)
                if placeholder is None:
                    placeholder = folded.get(masking.fold(value)) or _next(numbered, policy, s.label, literal)
                    # A Chat name's value as the client wrote it ("juergen_mueller" of the spoken "Juergen
                    # Mueller"), first: the answer restores the client's text, and its copies are masked too.
                    own = names[text][s.start:s.end] if text in names else value
                    if own != value and own not in numbered:
                        numbered[own] = values[own] = placeholder
                    numbered[value] = folded[masking.fold(value)] = placeholder
                values[value] = placeholder
                labels[s.label] += 1
    with _refusing(doc):
        if not masking.replace(doc, api_format, values):
            return body, None
    return _ENCODE.encode(doc), "masked " + ", ".join(f"{n} {label}" for label, n in sorted(labels.items()))


def _next(numbered: dict[str, str], policy: masking.Masking, label: str, literal: set[str]) -> str:
    """``label``'s next free placeholder: two labels sharing a placeholder text share its numbers, and none the
    client's text holds (``literal``) is used."""
    taken = set(numbered.values()) | literal
    n = 1
    while (placeholder := policy.placeholder(label, n)) in taken:
        n += 1
    return placeholder


def restorer(ex: Exchange) -> Restorer | None:
    """What turns this request's placeholders back into its values in the answer, when its policy unmasks
    and masking replaced anything."""
    policy = ex.masking
    if policy is None or not policy.unmask or not ex.masked_values:
        return None
    restored: dict[str, str] = {}
    for value, placeholder in ex.masked_values.items():
        restored.setdefault(placeholder, value)      # the first spelling of a value its others share
    return Restorer(restored)


def defines(ex: Exchange, cached) -> bool:
    """Whether this request's own values name every placeholder a cached answer holds: a similar request's answer
    may name a value this one lacks ("[EMAIL_ADDRESS_2]" for a request with one address), which nothing could
    restore."""
    named = ex.masking.named() if ex.masking is not None else None
    if named is None or ex.masked_values is None:
        return True             # masking is off (a request it could not read never gets here: ``number``)
    known = set(ex.masked_values.values())
    body = cached.body
    if not cached.streamed and b"\\" not in body and named.search(body.decode("utf-8", "replace")) is None:
        # No escape in the JSON, so each of its strings is its text as written: none holds a placeholder, and
        # nothing needs decoding. (A stream's placeholder may be split across its deltas: those are joined.)
        return True
    texts = answer_texts(body, ex.adapter.native if cached.streamed else None)
    return all(m.group(0) in known for text in texts for m in named.finditer(text))


def echo(ex: Exchange) -> None:
    """A Responses answer repeats the request's ``instructions``, ``tools``, ``user`` and ``metadata``; one
    translated from another API's answer has them written by the router, from the client's request. Masked
    here as the provider read them, as a Responses backend's own echo is: the record, the events and the cache
    keep what the provider was sent, and the client reads its values back (``restorer``)."""
    req = ex.req
    if req is None or req.api != "responses" or not ex.masked_values:
        return
    b = req.body
    doc = {"instructions": b.instructions, "user": b.user, "metadata": dict(b.metadata or {}),
           "tools": [msgspec.to_builtins(t) for t in b.tools or ()]}
    if masking.replace(doc, "responses", ex.masked_values):
        req.echoed = {**doc, "tools": [msgspec.Raw(_ENCODE.encode(t)) for t in doc["tools"]]}


def _rule(ex: Exchange | Masked, policy: masking.Masking):
    """The pii rule masking names, in the route's recipe (the default recipe's, for a provider model named
    directly); a rule no recipe gives fails the request closed, never open."""
    r = ex.route
    compiled = ex.state.table.signals_of(r.recipe) if r is not None else None
    rule = compiled.learned.rule("pii", policy.signal) if compiled is not None else None
    if rule is None:
        raise MaskingUnavailable(f"masking names pii rule {policy.signal!r}, which no recipe serving this request "
                                 "declares; the request was not sent")
    return rule


def _from_routing(ex: Exchange | Masked, policy: masking.Masking) -> dict:
    """The pii rule's spans about the current turn, when routing read that turn whole."""
    readings = ex.route.readings if ex.route is not None else None
    if readings is None or readings.request_text is None:
        return {}
    key = ("pii", policy.signal)
    outcome = readings.outcomes.get(key)
    if outcome is None or outcome.matched is None or outcome.spans is None:
        return {}
    text = readings.request_text
    coverage = readings.coverage.get(key)
    if coverage is None:
        # Read through the routing view: its offsets index the text only when the view kept it whole.
        asker = ex.state.systemone
        view = asker.views.get(_rule(ex, policy).share.deployment) if asker is not None else None
        if view is None or view(text) != text:
            return {}
    elif coverage != "full":
        return {}
    return {text: list(outcome.spans), **_per_message(text, readings.request_parts, outcome.spans)}


def _per_message(text: str, parts: list[str], spans) -> dict:
    """The spans of the current turn ``text`` (its user messages ``parts`` joined by ``TURN_JOIN``) for each
    message, offsets made its own: a message the provider-bound body holds as one text needs no question. A
    message a span crosses out of, or whose text is another's too, is left to be asked."""
    if len(parts) < 2:
        return {}
    counts = Counter(parts)
    out, at = {}, 0
    for part in parts:
        end = at + len(part)
        inside = [s for s in spans if at <= s.start and s.end <= end]
        crossing = any(s.start < end and s.end > at for s in spans if s not in inside)
        if counts[part] == 1 and not crossing:
            out[part] = [msgspec.structs.replace(s, start=s.start - at, end=s.end - at) for s in inside]
        at = end + len(TURN_JOIN)
    return out


def restores(policy: masking.Masking | None, cached) -> bool:
    """Whether a cached answer may hold placeholders this request's policy puts values back in."""
    if policy is None or not policy.unmask:
        return False
    if policy.entity_types is None or cached.streamed:      # a stream's deltas may split every placeholder
        return True
    body = cached.body
    return any(policy.placeholder(label, 0)[:-2].encode() in body for label in policy.entity_types)


async def number(ex: Exchange) -> bool:
    """Number this request's values as its first candidate's request would, for a cached answer: False when
    the request cannot be read, so the hit is a miss (served, its stored answer would reach the client masked:
    placeholders where its values were); the request is then read again before it is sent, or fails closed."""
    r, req = ex.route, ex.req
    if ex.masking is None or r is None or req is None or not r.candidates:
        return True
    model = r.candidates[0]
    try:
        out = ex.adapter.upstream(req, model.api_format, model.upstream_model, stream_usage=model.stream_usage,
                                  reasoning=model.reasoning, max_tokens_field=model.max_tokens_field)
        body = out.body
        if ex.shaping is not None:
            body = ex.shaping.apply(body, model.api_format, out.headers, model.reasoning, ex.system_context).body
        await mask(ex, body, model.api_format, ex.masking)
    except VsrError:
        ex.masked_values = None
        return False
    return True
