"""One request's events and response cache, as the chat handler uses them.

Everything here only enqueues events or reads the cache: nothing on this
path awaits the event stream. Policies (router_replay, response_cache) are
merged per (recipe, decision) once and kept.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from functools import lru_cache
from typing import NamedTuple

import msgspec

from ..plugins import layers as plugin_config
from ..errors import VsrError
from ..events import ids
from ..events.request import RequestEvents
from ..events.capture import AnswerCapture
from ..events.types import AnswerCompleted, CacheIntent, Usage
from ..headers import registry as h
from ..plugins import PLUGINS, SHAPING, context, masking, response_cache, router_replay, tools
from ..plugins.shaping import Shaping
from ..protocol.adapters import Inbound
from ..routing import Route
from ..upstream import Attempt
from .asgi import Scope, header
from .delegation import delegated_credential

_REQUEST_ID = h.REQUEST_ID.encode()


# A client's id is kept when it is a token every log, header and record can carry as it is: printable ASCII, no
# space at either end, at most 200 bytes (an id of 7,000 was echoed and logged whole). Any other is replaced by a
# new one, as Envoy regenerates an x-request-id it cannot use (documented with the access log, docs/config.md).
_SANE_ID = re.compile(rb"[\x21-\x7e](?:[\x20-\x7e]{0,198}[\x21-\x7e])?")


def kept_request_id(value: bytes | None) -> str:
    """The client's x-request-id ``value`` when it is sane, else a new id."""
    if value and _SANE_ID.fullmatch(value):
        return value.decode("ascii")
    return ids.request_id()


# The scope key of the id a request's ``Recording`` answers and logs it under, set as it starts: the connection
# layer's refusal of its body (``edge_refusal``) answers under it too, and leaves the request's accounting to it.
REQUEST_ID_KEY = "vsr.request_id"


def request_id(scope: Scope) -> str:
    """The request's correlation id: the client's x-request-id when it sent a sane one (kept as Envoy keeps it),
    else a new one. The answer returns it in x-request-id, the provider receives it, the access log carries it."""
    return kept_request_id(header(scope, _REQUEST_ID))


class Plan(NamedTuple):
    """What recording one request of a (recipe, decision) reads of its policies, merged once."""

    cache: response_cache.CachePolicy   # exact only when ``private``: the semantic cache keeps the request's text
    replay: router_replay.ReplayPolicy
    withhold: bool              # ``Policies.withholds_request``
    guard: bytes | None         # ``Policies.guard_key``, read only when the cache is on
    # The request's personal data stays out of the event stream and the cache store: ``withhold``, or
    # capture_personal_data: false. Its answer reaches the cache writer in this process (``CacheWriter.submit``).
    private: bool


class Hit(NamedTuple):
    """A stored answer found for a request: under its own key, or a similar earlier one's (``semantic``)."""

    key: str
    answer: response_cache.CachedAnswer
    semantic: bool
    similarity: float | None = None     # a semantic hit's: its request's to the stored one (x-vsr-trace)


class Policies:
    """The merged router_replay and response_cache policies of each (recipe, decision)."""

    def __init__(self, loaded) -> None:
        self.config = loaded.config
        self.recipes = {r.name: r for r in loaded.config.recipes}
        self.replay = lru_cache(maxsize=1024)(self._replay)
        self.cache = lru_cache(maxsize=1024)(self._cache)
        self.fast = lru_cache(maxsize=1024)(self._fast)
        self.shaping = lru_cache(maxsize=1024)(self._shaping)
        self.masking = lru_cache(maxsize=1024)(self._masking)
        self.context = lru_cache(maxsize=1024)(self._context)
        # One look-up a request instead of four (cache, guard, replay, masking + replay layers).
        self.plan = lru_cache(maxsize=1024)(self._plan)
        # Resolved now, for every route a request can take: a tools catalog is read from disk, never on the
        # request path. Each decision; each recipe's fallback (decision None: the recipe's and the global layers,
        # spec 6.5); a provider model named directly (recipe None: the global layer).
        routes = [(None, None), *((r.name, d) for r in loaded.config.recipes
                                  for d in (None, *(d.name for d in r.decisions)))]
        self._tools = {route: tools.resolve(*self._layers(*route, "tools")) for route in routes}
        self.table = loaded.table

    def guard_key(self, recipe: str | None, decision: str | None) -> bytes | None:
        """The decision's response_guard configuration as the cache key reads it; None without a guard."""
        guard = self.table.guard_for(recipe, decision)
        return guard.policy.key if guard is not None else None

    def _layers(self, recipe: str | None, decision: str | None, type_: str) -> list:
        return plugin_config.layers(self.config, self.recipes.get(recipe or ""), decision, type_)

    def _replay(self, recipe: str | None, decision: str | None) -> router_replay.ReplayPolicy:
        return router_replay.resolve(*self._layers(recipe, decision, "router_replay"))

    def _cache(self, recipe: str | None, decision: str | None) -> response_cache.CachePolicy:
        return response_cache.resolve(*self._layers(recipe, decision, "response_cache"))

    def _fast(self, recipe: str | None, decision: str | None):
        """The fast_response that answers for this decision (the most specific layer), or None."""
        layers = [layer for layer in self._layers(recipe, decision, "fast_response") if layer is not None]
        return layers[-1] if layers else None

    def _shaping(self, recipe: str | None, decision: str | None) -> Shaping | None:
        """The shaping plugins (system_prompt, header_mutation, request_params, prompt_cache) resolved, or None."""
        steps = []
        for type_ in SHAPING:
            policy = PLUGINS[type_].resolve(*self._layers(recipe, decision, type_))
            if policy is not None:
                steps.append((type_, policy))
        return Shaping(tuple(steps)) if steps else None

    def _context(self, recipe: str | None, decision: str | None) -> context.Context | None:
        memory = self.config.global_.stores.memory
        return context.resolve(*self._layers(recipe, decision, context.TYPE), memory_limit=memory.default_retrieval_limit,
                               memory_threshold=memory.default_similarity_threshold)

    def _masking(self, recipe: str | None, decision: str | None) -> masking.Masking | None:
        return masking.resolve(*self._layers(recipe, decision, "masking"))

    def tools(self, recipe: str | None, decision: str | None) -> tools.Tools | None:
        """The route's tools policy: its decision's, the recipe's fallback's (recipe and global layers), or a model
        named directly's (the global layer)."""
        return self._tools.get((recipe, decision))

    def withholds_request(self, recipe: str | None, decision: str | None) -> bool:
        """Whether the record must not carry this request as received (a shadow copy never does): its decision masks,
        and no router_replay layer says ``capture_personal_data: true`` (the default leaves it unset)."""
        if self.masking(recipe, decision) is None:
            return False
        return not any(layer is not None and layer.capture_personal_data is True
                       for layer in self._layers(recipe, decision, "router_replay"))

    def _plan(self, recipe: str | None, decision: str | None) -> Plan:
        replay, withhold = self.replay(recipe, decision), self.withholds_request(recipe, decision)
        private = withhold or not replay.capture_personal_data
        cache = self.cache(recipe, decision)
        if private and cache.similar:
            # A semantic entry is the request's text (the index, Redis' semantic stream, the judge's question):
            # none is kept of this request, and the cache answers only the same request, by its hashed key.
            cache = dataclasses.replace(cache, mode="exact", semantic=None, match=None)
        return Plan(cache, replay, withhold, self.guard_key(recipe, decision), private)

    @functools.cached_property
    def unrouted_private(self) -> bool:
        """Whether a request refused before it has a decision is private (its error quotes none of its values):
        the global layer says so, or a decision some entrypoint reaches is private (masks, or keeps no personal
        data): the request may have been one of that decision's, and its refusal must not say otherwise."""
        reached = {ep.recipe for ep in self.config.entrypoints}
        return self.plan(None, None).private or any(
            self.plan(r.name, d.name).private for r in self.config.recipes if r.name in reached for d in r.decisions)

    def private(self, recipe: str | None, decision: str | None) -> bool:
        """Whether a request of (recipe, decision) is private; one without a decision yet: ``unrouted_private``."""
        return self.plan(recipe, decision).private if decision is not None else self.unrouted_private

    def global_replay(self) -> router_replay.ReplayPolicy:
        return router_replay.resolve(plugin_config.layer_of(self.config.global_.plugins, "router_replay"))


def session_id(scope: Scope, names: tuple[bytes, ...]) -> bytes | None:
    """The session's name: x-vsr-session-id, else the first of the configured client headers (spec 5.10).

    As the client wrote it: the record keeps it so. Affinity keys it with the caller's owner
    (``pipeline.looper``), so a name another tenant also uses never moves their session."""
    for name in names:
        value = header(scope, name)
        if value:
            return value
    return None


class Recording:
    """The events and cache intent of one request; without an event stream, only the cache's part
    (``AppState.direct_cache``), and a no-op without either."""

    __slots__ = ("events", "intent", "capture", "services", "direct", "cache_policy", "turn", "request_id",
                 "not_accepted")

    def __init__(self, state, scope: Scope) -> None:
        self.services = state.events
        self.direct = state.direct_cache if self.services is None else None
        self.events: RequestEvents | None = None
        self.intent: CacheIntent | None = None
        self.cache_policy: response_cache.CachePolicy | None = None
        self.capture = None
        self.turn = None        # pipeline.context.Turn: the answer a memory write reads, fed like the capture
        self.not_accepted = False   # ``Exchange.not_accepted``: the answer is never cached
        if self.services is not None:
            # One pass over the headers for x-request-id and the session's (``session_id`` reads the same).
            rid = None
            names = state.session_headers
            found: dict[bytes, bytes] | None = None
            for key, value in scope["headers"]:
                if key == _REQUEST_ID:
                    if rid is None:
                        rid = value
                elif key in names:
                    if found is None:
                        found = {}
                    found.setdefault(key, value)
            sid = next((found[n] for n in names if found.get(n)), None) if found is not None else None
            self.request_id = kept_request_id(rid)
            self.events = RequestEvents(
                self.services.sink, config_version=state.loaded.version_hash, request_id=self.request_id,
                session_id=sid.decode("latin-1") if sid else None,
            )
        else:
            self.request_id = request_id(scope)
        scope[REQUEST_ID_KEY] = self.request_id

    @property
    def store(self):
        """The response cache this request reads, or None."""
        if self.services is not None:
            return self.services.cache
        return self.direct.cache if self.direct is not None else None

    def routed(self, state, scope: Scope, raw: bytes, req: Inbound, route: Route) -> None:
        """Record the request (its client API, and the body as received where capture allows), its
        signals and its decision; decide whether its answer may be cached."""
        ev = self.events
        store = self.services.cache if ev is not None else (self.direct.cache if self.direct is not None else None)
        if ev is None and store is None:
            return
        plan = state.policies.plan(route.recipe, route.decision)
        cache = plan.cache
        identity = who = None
        if cache.enabled and store is not None:
            identity = state.identity(scope)
            # None: a caller known only by identities wider than the scope; its answers are not cached.
            who = response_cache.principal(cache.scope, user=identity.user, team=identity.team,
                                           tenant=identity.tenant, key=identity.key_id)
        if who is not None:
            # A route that can reach a delegated upstream: its credential is read before the cache is (401
            # delegated_credential_missing, as dispatch would answer; a hit must not answer in its stead), and
            # its digest joins the principal, so an answer serves only requests carrying the credential that
            # obtained it, whatever the scope's principal (anonymous callers are one). Rejected: skipping the
            # cache on such routes, which a user repeating a question would pay for at each call.
            credential = delegated_credential(state, scope, route.candidates)
            if credential is not None:
                who += "|credential:" + hashlib.sha256(credential.encode()).hexdigest()
            guard = plan.guard
            key = response_cache.cache_key(raw, recipe=route.recipe, decision=route.decision, guard=guard,
                                           policy=cache, principal=who, api=req.api)
            partition = text = None
            if cache.similar:
                canonical = state.adapters[req.api].canonical(req)
                text = canonical.text
                # Only the current user turn is compared by meaning; every other message must be the same.
                current = set(canonical.current)
                others = [(m.role, m.text()) for i, m in enumerate(canonical.messages) if i not in current]
                partition = response_cache.semantic_partition(raw, recipe=route.recipe, decision=route.decision,
                                                              guard=(guard, others), policy=cache, principal=who,
                                                              api=req.api)
            decision = route.chosen.decision if route.chosen is not None else None
            drop = bool(decision is not None and decision.retention is not None and decision.retention.drop)
            self.intent = CacheIntent(key=key, ttl_seconds=cache.ttl_seconds, partition=partition, text=text,
                                      drop=drop)
            self.cache_policy = cache
        if ev is None:
            self.capture = AnswerCapture(store.max_entry_bytes) if self.intent is not None else None
            return
        ev.policy = replay = plan.replay
        # A masking decision's request reaches neither the record nor a shadow model as received (a shadow copy is
        # the masked provider-bound request); a private one's (masking, or capture_personal_data: false) travels
        # in no event, nor does its answer (``answered``), nor a model name it gave that no entrypoint serves (a
        # default entrypoint routes any: an address, perhaps).
        private = plan.private
        if (replay.request_bytes > 0 or replay.shadow is not None) and identity is None:
            # The record keeps it beside the request copy; a shadow copy goes only where its key reaches.
            identity = state.identity(scope)
        api = req.api
        # A shadow copy is the live provider-bound request (``shadowed``): masked where the decision masks.
        shadow = len(route.candidates) >= 1 and route.recipe is not None
        if api == "chat":
            # RequestEvents reads the model and stream of a Chat body from the body itself.
            ev.routed(raw, req.body, route, identity=identity, shadow=shadow, api=api, withhold=private,
                      model_shown=not private or state.table.knows_model(req.body.model))
        else:
            adapter = state.adapters[api]
            ev.routed(raw, None, route, identity=identity, shadow=shadow, api=api,
                      model=adapter.model(req), stream=adapter.stream(req), withhold=private,
                      model_shown=not private or state.table.knows_model(adapter.model(req)))
        if ev.shadow_refused and self.services.shadow is not None:
            self.services.shadow.skipped[ev.shadow_refused] += 1
        self.capture = ev.capture(self.intent, store.max_entry_bytes)

    def replay_header(self) -> tuple[bytes, bytes] | None:
        replay_id = self.replay_id
        return (h.REPLAY_ID.encode(), replay_id.encode()) if replay_id is not None else None

    @property
    def replay_id(self) -> str | None:
        """The replay record's id, when one is kept (x-vsr-replay-id)."""
        ev = self.events
        return ev.replay_id if ev is not None and ev.kept else None

    async def cached(self) -> Hit | None:
        """A stored answer for this request, or None; recorded as served only once taken (``served``)."""
        store = self.store
        if self.intent is None or store is None or (self.cache_policy and not self.cache_policy.exact):
            return None
        answer = await store.lookup(self.intent.key)
        return Hit(self.intent.key, answer, False) if answer is not None else None

    def served(self, hit: Hit, route: Route) -> None:
        """A cache hit taken: recorded under the key of the request it was stored for (a semantic hit's
        earlier request)."""
        if self.events is not None:
            self.events.cache_hit(hit.key, hit.answer, decision=route.decision)

    def shadowed(self, model: str, api_format: str, body: bytes) -> None:
        """The request one provider answered through single-model dispatch, as sent: a sampled shadow copy's."""
        if self.events is not None:
            self.events.shadowed(model, api_format, body)

    def attempts(self, attempts: list[Attempt], *, hops: bool = False) -> None:
        if self.events is not None:
            self.events.attempts(attempts, hops=hops)

    def feed(self, chunk: bytes) -> None:
        if self.capture is not None:
            self.capture.feed(chunk)
        if self.turn is not None:
            self.turn.answer.feed(chunk)

    def answered(self, *, status: int, path: str, model: str | None, streamed: bool, complete: bool,
                 content_type: str | None, guard: str = "none", guard_codes: list[str] | None = None,
                 held: bool = False, cost: tuple[float | None, str | None] = (None, None),
                 usage: tuple[int, int, int] | tuple[int, int, int, bool] | None = None, first_byte: float | None = None) -> None:
        """The answer's end; ``first_byte``: perf_counter() as the backend's answer began (``Whole``, ``Stream``)."""
        ev = self.events
        if ev is not None:
            ev.answer(cost=cost[0], cost_currency=cost[1], usage=None if usage is None else Usage(*usage),
                      ttfb_ms=None if first_byte is None else (first_byte - ev.started) * 1000,
                      status=status, response_path=path, model=model, streamed=streamed, complete=complete,
                      content_type=content_type, captured=self.capture, guard=guard,  # type: ignore[arg-type]
                      guard_codes=guard_codes or (), held=held, cache=self._intent(status, complete, guard, path),
                      handoff=self.services.cache_writer.submit)
        elif self.direct is not None and self._intent(status, complete, guard, path) is not None:
            captured = self.capture
            self.direct.submit(AnswerCompleted(
                replay_id="", status=status, response_path=path, model=model, streamed=streamed, held=held,
                complete=complete, guard=guard, guard_codes=guard_codes or [], content_type=content_type,  # type: ignore[arg-type]
                body=captured.body() if captured else None, body_bytes=captured.size if captured else 0,
                body_truncated=captured.truncated if captured else False, cache=self.intent))

    def _intent(self, status: int, complete: bool, guard: str, path: str) -> CacheIntent | None:
        """The cache intent for the writer: a released answer to store, or one to count as a skip (a guard's
        verdict; an answer that did not end whole, guarded or not: ``incomplete``). None for an answer the cache
        served: it is stored already (and its bytes are not captured)."""
        if path == h.ResponsePath.CACHE.value:
            return None
        if status < 400 or not complete or guard not in ("none", "passed", "noted"):
            intent = self.intent
            if intent is not None and self.not_accepted:
                intent = msgspec.structs.replace(intent, not_accepted=True)    # counted as a skip, never stored
            return intent
        return None

    def plugins_applied(self, model: str | None, changes: list[str]) -> None:
        if self.events is not None:
            self.events.plugins_applied(model, changes)

    def failed(self, stage: str, exc: VsrError) -> None:
        if self.events is not None:
            self.events.error(stage=stage, code=exc.code, status=exc.status, message=exc.detail)
