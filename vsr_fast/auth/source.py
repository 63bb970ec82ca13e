"""Where the caller's identity comes from: the router's client keys, or a trusted listener's headers.

With ``global.router.auth.enabled`` every client API needs a key, read from
``Authorization: Bearer`` (every API) or ``x-api-key`` (Messages, as
Anthropic's SDK sends it); never from the query string. Without it, identity
headers count only on a listener with ``identity.trust_headers: true``, and
everyone else is anonymous. Stored keys are reloaded by ``run`` whenever their
version in Redis moves; the request path only reads the current keyring.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ..events.redis_client import errors as redis_errors
from ..config.auth import ClientKey
from ..config.schema import Listener, RouterConfig
from ..errors import AuthError, KeyStoreUnavailable, MissingKey
from ..headers import registry as h
from ..protocol.canonical import Identity
from .keys import Keyring, StoredKey
from .store import KeyStore

log = logging.getLogger("vsr_fast.auth")

ANONYMOUS = Identity()
_AUTHORIZATION = b"authorization"
_API_KEY = h.API_KEY.encode()
_BEARER = b"bearer "
# Where scope carries the identity once read: the rest of the request reads it from there.
SCOPE_KEY = "vsr.identity"
# The routes of Anthropic's SDK, which sends its key as x-api-key: Messages and the model lists it reads too.
KEY_HEADER_APIS = frozenset({"messages", "count_tokens", "models"})


def presented_key(scope, api: str) -> bytes | None:
    """The key the caller sent: a Bearer token, else (Messages) x-api-key. The first of each header counts."""
    bearer = api_key = None
    for name, value in scope["headers"]:
        if name == _AUTHORIZATION and bearer is None:
            bearer = value
        elif name == _API_KEY and api_key is None:
            api_key = value
    if bearer is not None and bearer[:7].lower() == _BEARER:
        token = bearer[7:].strip()
        if token:
            return token
    if api_key is not None and api in KEY_HEADER_APIS:
        return api_key.strip() or None
    return None


def trusted_reader(listener: Listener | None) -> Callable[[object], Identity]:
    """The identity an authenticator in front wrote, on a listener that trusts it; anonymous otherwise."""
    if listener is None or not listener.identity.trust_headers:
        return lambda scope: ANONYMOUS
    ident = listener.identity
    names = {ident.user_header.lower().encode(): "user", ident.groups_header.lower().encode(): "groups",
             ident.team_header.lower().encode(): "team", ident.tenant_header.lower().encode(): "tenant"}

    def read(scope) -> Identity:
        found: dict[str, str] = {}
        for name, value in scope["headers"]:
            field = names.get(name)
            if field is not None and field not in found:
                found[field] = value.decode("latin-1").strip()
        if not found:
            return ANONYMOUS
        groups = found.get("groups")
        return Identity(user=found.get("user") or None, team=found.get("team") or None,
                        tenant=found.get("tenant") or None,
                        groups=frozenset(g.strip() for g in groups.split(",") if g.strip()) if groups else frozenset())

    return read


def serving_listener(config: RouterConfig) -> Listener | None:
    return next((listener for listener in config.listeners if listener.role == "serving"), None)


class StoredKeys:
    """The key store's keys, followed for the process's life and shared by every generation.

    ``keys`` is None until the store first answers; then the last keys read, kept while it is away."""

    def __init__(self, store_config) -> None:
        self.config = store_config
        self._store = KeyStore(store_config)
        self._version = -1
        self.keys: tuple[StoredKey, ...] | None = None
        self.reads = 0          # bumped whenever ``keys`` changes: what each generation's keyring is built for
        self._reading = trio.CapacityLimiter(1)     # one read at a time: the poll's and an admin change's

    def refresh(self) -> bool:
        """Reload stored keys when their version moved (blocking: a worker thread calls it)."""
        if self.keys is not None and self._store.version() == self._version:
            return False
        version, stored = self._store.load()
        self.keys, self._version = tuple(stored), version
        self.reads += 1
        return True

    async def load(self) -> None:
        """The first load, before serving; a Redis that is away leaves only the declared keys until it answers."""
        try:
            await trio.to_thread.run_sync(self.refresh)
        except redis_errors() as exc:
            log.warning("client keys: the key store did not answer (%s); serving declared keys only (a key "
                        "matching none is answered 503 key_store_unavailable until the store answers)",
                        type(exc).__name__)

    async def reread(self) -> None:
        """Read the stored keys now, not at the next poll: after this process changed them (the admin routes),
        so a rotated-out or revoked key is refused here from the change's answer on. A store that does not
        answer leaves it to the poll."""
        try:
            await trio.to_thread.run_sync(self.refresh, limiter=self._reading)
        except redis_errors() as exc:
            log.warning("client keys: the key store did not answer after a change (%s); the next poll reads it",
                        type(exc).__name__)

    async def run(self) -> None:
        """Follow the stored keys until cancelled: a revocation reaches this router within ``refresh_ms``."""
        period = self.config.refresh_ms / 1000
        failing = False
        while True:
            await trio.sleep(period)
            try:
                await trio.to_thread.run_sync(self.refresh, limiter=self._reading, abandon_on_cancel=True)
                failing = False
            except redis_errors() as exc:
                if not failing:
                    log.warning("client keys: the key store did not answer (%s); keeping the last keys read",
                                type(exc).__name__)
                failing = True

    def close(self) -> None:
        self._store.close()


def merged(declared: list[ClientKey], stored: tuple[StoredKey, ...]) -> tuple[list, list[str]]:
    """Declared and stored keys in one list, and the ids of stored keys left out because a declared key has
    their id (the file decides: two secrets of one identity would share its limits and lists)."""
    ids = {k.id for k in declared}
    clashing = sorted({k.id for k in stored if k.id in ids})
    return [*declared, *(k for k in stored if k.id not in ids)], clashing


class Authenticator:
    """Reads each request's identity once and leaves it on the scope.

    One per generation: a reload's declared keys (``regenerated``) apply from its first request on. What is
    read at start only (``enabled``, the store, the trusted listener) and the stored keys are shared."""

    def __init__(self, config: RouterConfig, stored: StoredKeys | None = None, *, first: bool = True) -> None:
        auth = config.global_.router.auth
        self.enabled = auth.enabled
        self.store_config = auth.store
        self._declared = list(auth.keys)
        self._trusted = trusted_reader(serving_listener(config))
        if first:
            stored = StoredKeys(auth.store) if auth.enabled and auth.store.backend == "redis" else None
        self._stored = stored
        self._built = -1
        self._clashing: list[str] = []
        self._keyring = Keyring(self._declared)

    def regenerated(self, config: RouterConfig) -> "Authenticator":
        """This process's authenticator with ``config``'s declared keys (a reload's next generation)."""
        new = Authenticator(config, self._stored, first=False)
        new.enabled, new.store_config, new._trusted = self.enabled, self.store_config, self._trusted
        return new

    @property
    def stores_keys(self) -> bool:
        return self._stored is not None

    @property
    def keyring(self) -> Keyring:
        """Declared and stored keys, rebuilt when the stored keys were read again."""
        stored = self._stored
        if stored is not None and stored.reads != self._built:
            self._built = stored.reads
            keys, clashing = merged(self._declared, stored.keys or ())
            if clashing != self._clashing:
                self._clashing = clashing
                if clashing:
                    log.warning("client keys: stored keys with the id of a declared key are not accepted (the "
                                "file's declaration is): %s", ", ".join(clashing))
            self._keyring = Keyring(keys)
        return self._keyring

    def identify(self, scope, api: str) -> Identity:
        """The caller's identity (kept on the scope); MissingKey or AuthError when keys are on and it has none."""
        if self.enabled:
            key = presented_key(scope, api)
            if key is None:
                raise MissingKey("no API key: send it as 'Authorization: Bearer <key>'"
                                 + (" or 'x-api-key: <key>'" if api in KEY_HEADER_APIS else ""))
            identity = self.keyring.lookup(key)
            if identity is None:
                if self._stored is not None and self._stored.keys is None:
                    raise KeyStoreUnavailable("the key store has not answered since the router started, so this "
                                              "key cannot be checked yet; retry shortly")
                raise AuthError("invalid API key")
        else:
            identity = self._trusted(scope)
        scope[SCOPE_KEY] = identity
        return identity

    def identity(self, scope) -> Identity:
        """The identity ``identify`` read for this request (the trusted headers' for a route that did not)."""
        found = scope.get(SCOPE_KEY)
        if found is None:
            found = scope[SCOPE_KEY] = ANONYMOUS if self.enabled else self._trusted(scope)
        return found

    # --- stored keys: the process's, whichever generation serve holds --------------------------

    async def load(self) -> None:
        if self._stored is not None:
            await self._stored.load()
            self.keyring        # built now, so a stored key clashing with a declared one is logged at start

    async def run(self) -> None:
        if self._stored is not None:
            await self._stored.run()

    async def reread(self) -> None:
        """The stored keys read now (this process changed them); see ``StoredKeys.reread``."""
        if self._stored is not None:
            await self._stored.reread()

    def close(self) -> None:
        if self._stored is not None:
            self._stored.close()
