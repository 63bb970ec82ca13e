"""``response_cache``, exact mode: reuse an answer the guard released for the same request (spec 5.7).

The request path computes the key here and looks it up in the store
(``vsr_fast.events.cache_store``); on a miss it puts the key in the answer's
event, and the cache writer stores the answer later, off the request path.

The key covers the client API, the canonical request, the recipe and decision, the decision's
guard configuration, the whole ``revision`` block and the scope's principal:
changing a guard or a revision starts the decision's cache fresh.

What is never stored (``llm_cache_write_skipped_total{reason}``): an answer
the guard ``blocked``; one it ``flagged`` only in x-vsr-warnings (a hit
carries no guard headers, so the flag would be lost); a held answer
``over_limit``; an ``incomplete`` one (no finish reason, a stream that did not
end, a guard that could not read it whole); a ``truncated`` one (finish reason
``length``); an ``error`` answer; one ``too_large`` for the store; one whose decision's ``retention`` says
``retention_drop`` (looked up, never stored); one ``not_accepted``: the router served it though its own accept
check refused it (``Exchange.not_accepted``: escalate's ``on_error: last_attempt``), and a cached copy would
outlive the better model's recovery for the whole TTL.

Personal data (router_replay ``capture_personal_data: false``, or a decision that masks without a router_replay
layer saying ``capture_personal_data: true``; ``server.recording.Plan.private``): the cache keeps only the hashed
key and the answer, as the client received it (masked, for a masking decision), and the answer reaches the store
through the cache writer of the router that served it, never the event stream. The semantic cache needs the
request's text (its index, the Redis stream every router's index follows, the judge's question), so such a
request gets none: its decision's cache works as ``mode: exact``. Rejected: a hash-only semantic key, which is an
exact key; keeping only the vector, which the polarity check and the judge cannot read. A decision whose answers
must not be kept at all says ``retention: {drop: true}``.

Whole and streamed: ``stream`` is not part of the key, so one entry serves the request whole and streamed, as
LiteLLM's cache does: a whole answer is replayed as the client protocol's stream, a stream's events assembled
into the whole answer (``Adapter.replayed``; Chat's usage chunk follows the request's ``stream_options``). A
stored answer that cannot be told in the other form is a miss: a Chat answer of ``n`` > 1 choices. A replayed
stream is one event per block, not the model's pacing.

Tool calls: an answer that calls a tool (finish reason ``tool_calls``: Chat's tool_calls, Messages' tool_use,
a Responses function or custom tool call) is stored for the exact cache and left out of the semantic index, and
a semantic hit whose answer calls one (indexed by an older router) is a miss. The spec says nothing of it; a
cached ``tool_use`` served for "Delete the files in dist" when "Show the files in dist" was asked runs the wrong
command, and the judge cannot be trusted with verbs and objects (bench/semantic_cache.py, tool-call set).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from ..config.schema_base import Block
from .match import Match
from .match import check as check_match
from .match import resolve as resolve_match

TYPE = "response_cache"


class CacheRevision(Block):
    """``response_cache.revision``: bump ``policy_revision`` after changing a signal the guard reads."""

    policy_revision: str | None = None


class SemanticConfig(Block):
    """``response_cache.semantic``: the match block that finds a similar cached request (spec 5.4). Only the
    conversation's text is compared by meaning: its images, files and audio, like every other field, must match.
    An answer that calls a tool is served again only to the same request (the exact cache), never to a similar
    one: the call is a command the client runs, and near words may ask for another (delete for show, another
    file), which neither the similarity nor the ``same_request`` judge reliably tells apart. Before the judge a
    lexical check drops a recalled request that reads almost the same but asks otherwise: a negation or an
    antonym (enable / disable), another number or name (5 / 15 miles, Austria / Australia), or the same words with
    their roles swapped (flights from London to Paris / from Paris to London, 100 USD to EUR / 100 EUR to USD,
    Python faster than Java / Java faster than Python), which the embedding and the judge, reading words and not
    their order, both score as the same request. A swap across "and", "or" or "vs" (TCP and UDP) is the same."""

    # Unset (or no semantic block): the feature's default, recall {method: embedding, top_k: 3,
    # min_similarity: 0.8} then judge {preset: same_request, min_score: 0.8}.
    match: Match | None = None


class ResponseCacheConfig(Block):
    """``{type: response_cache, configuration: ...}`` at one layer (fields override field by field).

    Under router_replay ``capture_personal_data: false``, or on a decision that masks (unless a router_replay layer
    says ``capture_personal_data: true``), the cache keeps no request text: it stores the answer under the
    request's hashed key, written by the router itself (the event stream never carries it), and no semantic entry,
    so ``semantic`` and ``exact_then_semantic`` answer only the same request there, as ``exact`` does.

    One entry serves a request whole and streamed (``stream`` is no part of the key, as in LiteLLM's cache): a
    whole answer is replayed as the client protocol's stream (one event per block, not the model's pacing; Chat's
    usage chunk when ``stream_options.include_usage`` asks), a streamed one assembled into the whole answer. A Chat
    answer of ``n`` > 1 choices is served only in the form it was stored in (else a miss). Never stored: an answer
    the guard blocked or flagged, an incomplete, truncated or error answer, and one the router served though its
    own accept check refused it (escalate's ``on_error: last_attempt``): the next request asks the models again
    (``llm_cache_write_skipped_total{reason}``)."""

    enabled: bool | UnsetType = UNSET
    # exact: the same request; semantic: a similar one the match block accepts; exact_then_semantic: both.
    mode: Literal["exact", "semantic", "exact_then_semantic"] | UnsetType = UNSET
    # No block in any layer: the semantic modes run the default match block (SemanticConfig.match).
    semantic: SemanticConfig | UnsetType = UNSET
    ttl_seconds: Annotated[int, Meta(ge=1, le=30 * 86_400)] | UnsetType = UNSET
    revision: CacheRevision | UnsetType = UNSET
    # user: one caller's answers serve only that caller (required with delegated upstreams, spec 6.7). A caller
    # without the scope's attribute (a key with no tenant under tenant) is its key (else user, else team): never
    # wider, and not cached when it has only wider ones. Callers with no identity at all share one partition.
    scope: Literal["user", "team", "tenant", "global"] | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class CachePolicy:
    enabled: bool = True
    mode: str = "exact"
    ttl_seconds: int = 1800
    revision: CacheRevision | None = None
    scope: str = "user"
    semantic: SemanticConfig | None = None
    match: Match | None = None          # the semantic match block: the one written, else the default

    @property
    def exact(self) -> bool:
        return self.mode != "semantic"

    @property
    def similar(self) -> bool:
        return self.mode != "exact"


SEMANTIC = "response_cache.semantic"
DISABLED = CachePolicy(enabled=False)


def resolve(*layers: ResponseCacheConfig | None) -> CachePolicy:
    """The policy of a request, ``layers`` lowest first; no layer at all means no cache."""
    present = [layer for layer in layers if layer is not None]
    if not present:
        return DISABLED
    values: dict[str, Any] = {}
    for layer in present:
        for f in msgspec.structs.fields(ResponseCacheConfig):
            value = getattr(layer, f.name)
            if value is not UNSET:
                values[f.name] = value
    if values.get("mode", "exact") != "exact":
        semantic = values.get("semantic")
        values["match"] = resolve_match(semantic.match if semantic else None, SEMANTIC)
    return CachePolicy(**values)


def check(raw: dict, path: str) -> list[str]:
    """What the block's types cannot say: its semantic match block, checked against the cache's feature."""
    semantic = raw.get("semantic")
    if not isinstance(semantic, dict):
        return []
    return check_match(semantic.get("match"), f"{path}.semantic.match", SEMANTIC)


# --- the key -----------------------------------------------------------------------

_ANY = msgspec.json.Decoder()
_SORTED = msgspec.json.Encoder(order="sorted")
_KEY_PARTS = msgspec.msgpack.Encoder(order="sorted")
KEY_VERSION = "v2"      # v2: ``stream`` left out, so an older router never reads a stream stored for a whole request
# Fields that never change the answer: ``user`` is the client's end-user tag (scope covers users); ``stream`` and
# ``stream_options`` are its form, which a hit is told in (``Adapter.replayed``): one entry serves both forms.
_NOT_IN_KEY = ("user", "stream", "stream_options")


def canonical_request(raw: bytes) -> bytes:
    """The request body with its keys sorted and ``_NOT_IN_KEY`` left out: one spelling per request."""
    doc = _ANY.decode(raw)
    if isinstance(doc, dict):
        for name in _NOT_IN_KEY:
            doc.pop(name, None)
    return _SORTED.encode(doc)


# The identities a caller may have, narrowest first: a scope's fallback is one before it here.
_NARROWEST_FIRST = ("key", "user", "team", "tenant")
ANONYMOUS = "anonymous"


def principal(scope: str, *, user: str | None, team: str | None = None, tenant: str | None = None,
              key: str | None = None) -> str | None:
    """Whose answers a key is for: the scope's attribute of the caller, else the narrowest identity it has
    (its key, else its user, else its team), never a wider one; None when it has only wider ones (no cache).

    Rejected: one ``tenant:anonymous`` partition for every key without a tenant, which served one key's
    answers to every other such key. Anonymous callers (no keys, no trusted identity) are one principal:
    the router cannot tell them apart. The kind prefixes the name, so a team and a key of one name never share.
    """
    if scope == "global":
        return ""
    known = {"key": key, "user": user, "team": team, "tenant": tenant}
    if known[scope]:
        return f"{scope}:{known[scope]}"
    for kind in _NARROWEST_FIRST[:_NARROWEST_FIRST.index(scope)]:
        if known[kind]:
            return f"{kind}:{known[kind]}"
    return None if any(known.values()) else ANONYMOUS


def cache_key(raw_request: bytes, *, recipe: str | None, decision: str | None, guard: object,
              policy: CachePolicy, principal: str, api: str = "chat") -> str:
    """The exact-mode key: sha256 over the client API, the canonical request and everything that may
    change the answer.

    ``guard`` is the decision's response_guard configuration (any msgspec-encodable
    value; None without a guard). ``api``: the answer is stored in its client's protocol,
    and one body can be valid in two (a Messages body is a Chat body too), so a Messages
    answer never serves a Chat client.
    """
    parts = [KEY_VERSION, api, canonical_request(raw_request), recipe, decision, guard, policy.revision, principal]
    return hashlib.sha256(_KEY_PARTS.encode(parts)).hexdigest()


# What the semantic cache compares by meaning; everything else in the request must be identical.
_CONVERSATION = ("messages", "input", "system", "instructions", "prompt")
# The parts whose ``text`` is the conversation's text, in the three client APIs.
_TEXT_PARTS = frozenset(("text", "input_text", "output_text"))


def _without_text(value: object) -> object:
    """``value`` (a conversation field) with its text left out and everything else kept: images, files, file ids,
    audio, tool calls, roles. A message's string content and a text part's ``text`` become ""."""
    if isinstance(value, str):
        return ""
    if isinstance(value, list):
        return [_without_text(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for name, item in value.items():
        if isinstance(item, str) and (name == "text" and value.get("type") in _TEXT_PARTS
                                      or name == "content" and "role" in value):
            out[name] = ""
        elif isinstance(item, (list, dict)):
            out[name] = _without_text(item)
        else:
            out[name] = item
    return out


def semantic_partition(raw_request: bytes, *, recipe: str | None, decision: str | None, guard: object,
                       policy: CachePolicy, principal: str, api: str = "chat") -> str:
    """The semantic cache's partition: the exact key's parts with the conversation's text left out. Two requests
    are compared by meaning only inside one partition, so a similar request of another principal, decision,
    guard, revision, client API, model or parameter set (temperature, tools, ...; not ``stream``), or about another
    image, file or audio clip, never hits."""
    doc = _ANY.decode(raw_request)
    if isinstance(doc, dict):
        for name in _NOT_IN_KEY:
            doc.pop(name, None)
        for name in _CONVERSATION:
            if name in doc:
                doc[name] = _without_text(doc[name])
    parts = [KEY_VERSION, "semantic", api, doc, recipe, decision, guard, policy.revision, principal]
    return hashlib.sha256(_KEY_PARTS.encode(parts)).hexdigest()


# --- what is stored ----------------------------------------------------------------


class CachedAnswer(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An answer as the client received it; served with x-vsr-response-path: cache."""

    status: int
    content_type: str
    body: bytes
    streamed: bool
    model: str | None = None
    decision: str | None = None
    guard: str = "none"
    stored_ms: int = 0


__all__ = [
    "CachePolicy", "CacheRevision", "CachedAnswer", "DISABLED", "KEY_VERSION", "ResponseCacheConfig", "SEMANTIC",
    "SemanticConfig", "TYPE", "cache_key", "canonical_request", "check", "principal", "resolve", "semantic_partition",
]
