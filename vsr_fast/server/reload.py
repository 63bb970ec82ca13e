"""Hot reload: SIGHUP, ``POST /admin/reload`` or a change of the file (``config_watch``) loads the configuration
file again, checks it, and swaps it in.

A generation is one AppState and the ASGI apps built over it. A reload builds the next one beside the
current one and swaps the reference the listeners call through: a request already in an app finishes on its
generation, the next request starts on the new one. A file that does not load changes nothing; the answer,
the log and ``vsr_config_reloads_total{outcome="failed"}`` say why. Backends whose model and ref did not
change are kept (their connections and health); the others close once the old generation's requests ended.
The declared client keys (``global.router.auth.keys``: their roles, lists and limits) are the generation's:
a key removed from the file is refused from the next request on. What the process holds for its life
(listeners, whether client keys are on and their store, rate limits, stores, System One's client, the access
log) changes with a restart only: a reload that changes one of them still swaps the rest in,
and names each such field (``restart_required``: the admin answer, the log and the stderr line), a rule or
judge that asks a System One deployment the client does not run among them, and a native System One alias
served by backend_refs the client did not start.

The context plugin's stores are the exception: a reload that makes a decision use the plugin in a process
that has not opened them opens them (``global.stores`` as the process started), so the new sources are served
at once. A store that cannot open refuses the reload: the decisions keep serving as they were, never without
a source they declare (whatever its ``on_failure``).

Every reload reads again the secrets the file names (``api_key_env``, ``api_key_file``, ``password_*``): the
version covers their digests (``config.secrets``), so a rotated key file is a change, and a kept backend takes
its new key. The file's load warnings (a ``missing_credential``) are logged as serve prints them at start, and
returned by ``POST /admin/reload``.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import msgspec
import trio

from ..events.redis_client import errors as redis_errors
from ..config.schema import RouterConfig
from ..config.secrets import secret_files
from ..errors import ConfigError, EmbeddingFailed, StoreFull, StoreUnavailable, redact
from ..plugins.layers import shadow_used, types_used
from ..routing import load_file
from ..routing.open_systemone import alias_key
from ..upstream.pool import Upstreams
from .asgi import Receive, Scope, Send
from .context_stores import held, open_context_stores
from .state import AppState

log = logging.getLogger("vsr_fast.reload")
# A reload's outcome, at INFO when done: shown at the default WARNING level too, as an operator who sent SIGHUP
# reads whether it took (nginx logs its reconfiguring at notice).
lifecycle = logging.getLogger("vsr_fast.lifecycle")
lifecycle.setLevel(logging.INFO)


def say_reloaded(path: str | None, trigger: str, ok: bool, message: str, serving: str,
                 warnings: tuple[str, ...] = ()) -> None:
    """A reload's outcome in one log line (time, level), once per process, then the load warnings of the file
    it swapped in, one line each, as serve prints them at start (a ``missing_credential`` above all)."""
    if ok:
        lifecycle.info("vsr-fast: reload done (%s): %s", trigger, message)
        for line in warnings:
            lifecycle.warning("vsr-fast: reload (%s): warning: %s", trigger, line)
    else:
        lifecycle.error("vsr-fast: reload refused (%s): %s does not load: %s; still serving config %s", trigger,
                        path, message, serving)
_RETIRE_POLL_S = 0.5

# What serve (and AppState.__post_init__) reads once, at start, by its path in the file.
AT_START = ("listeners", "global.stores", "global.model_catalog", "global.router.access_log",
            "global.router.auth.enabled", "global.router.auth.store", "global.router.rate_limits", "global.router.tracing", "global.router.config_watch.enabled",
            "global.router.limits.header_timeout_ms", "global.router.limits.send_timeout_ms",
            "global.router.limits.max_connections")
# Plugin types whose stores or services serve opens at start only when some layer names one. The context
# plugin's stores a reload opens (``Generations._context``).
OPENED_AT_START = ("response_cache", "router_replay")


class Reloaded(NamedTuple):
    """How a reload went: ``restart_required`` lists the changed fields the process reads only at start;
    ``warnings``: the load warnings of the file loaded (said in the log when it was swapped in)."""

    ok: bool
    message: str
    restart_required: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    swapped: bool = False       # a new generation serves (not an unchanged file, not a refusal)


def restart_required(old: RouterConfig, new: RouterConfig, old_secrets: dict[str, str] | None = None,
                     new_secrets: dict[str, str] | None = None) -> list[str]:
    """The paths of what changed from ``old`` to ``new`` that takes effect only after a restart: a secret read
    at start (a store's password file, a System One deployment's key) by its digest (``Loaded.secrets``)."""
    found: list[str] = []
    for path in AT_START:
        found += _changed(_at(old, path), _at(new, path), path)
    before, after = old_secrets or {}, new_secrets or {}
    for key in sorted(after):
        block, kind = key.rsplit(".", 1)       # kind: env or file
        if key.startswith(AT_START) and before.get(key, after[key]) != after[key] \
                and not any(p.startswith(f"{block}.") for p in found):
            found.append(f"{block} (the secret in its {kind} changed)")
    added = (types_used(new) - types_used(old)) & set(OPENED_AT_START)
    # Named where the file puts them: the first entry of each type no layer had before.
    for kind in sorted(added):
        where = next(path for path, entry in new.plugin_entries() if entry.type == kind)
        found.append(f"{where} ({kind}): what it needs opens at start")
    if shadow_used(new) and not shadow_used(old):
        where = next(path for path, entry in new.plugin_entries()
                     if entry.type == "router_replay" and entry.configuration.get("shadow"))
        found.append(f"{where}.configuration.shadow: the shadow opens at start")
    return found


def systemone_unstarted(client, table) -> list[str]:
    """Where the new table asks a System One deployment the process's client does not run: the client starts
    its deployments at start only, so until a restart such a rule is unknown and a selector or answer_check
    has no answer (a reload adding the first ``systemone`` selector to keyword-only signals, trial 6c)."""
    running = client.runners if client is not None else {}
    found = [f"{path}: System One deployment {name!r} opens at start"
             for name, path in table.asked_by().items() if name not in running]
    # A native alias served by its own backend_refs runs as a remote of its own (``open_systemone``), started
    # with the client too: added by a reload, it would answer 502 "no running deployment" until a restart.
    return found + [f"providers.models[{name}].backend_refs: System One alias {name!r} opens at start"
                    for name, m in table.native_aliases().items()
                    if m.backend_refs and not m.deployment and alias_key(name) not in running]


def _at(node: object, path: str) -> object:
    for name in path.split("."):
        node = next(getattr(node, f.name) for f in msgspec.structs.fields(node) if f.encode_name == name)
    return node


def _changed(old: object, new: object, path: str) -> list[str]:
    """The leaf paths where ``old`` and ``new`` differ (a list of another length, or another type: ``path``)."""
    if old == new:
        return []
    if isinstance(old, msgspec.Struct) and type(old) is type(new):
        return [p for f in msgspec.structs.fields(old)
                for p in _changed(getattr(old, f.name), getattr(new, f.name), f"{path}.{f.encode_name}")]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new)) for p in _changed(a, b, f"{path}[{i}]")]
    if isinstance(old, dict) and isinstance(new, dict):
        return [p for key in sorted(set(old) | set(new), key=str)
                for p in _changed(old.get(key), new.get(key), f"{path}.{key}")]
    return [path]


class Generations:
    """The current generation, the apps every listener serves through, and the retired ones still running."""

    def __init__(self, state: AppState, config_path: str, build: Callable[[AppState], dict],
                 nursery: trio.Nursery) -> None:
        self.current = state
        # Fields read only at start stay as this file had them until a restart: a reload compares with it.
        self.started = state.loaded.config
        self.started_secrets = state.loaded.secrets
        self.every = [state]
        self.apps = build(state)
        self._build, self._path, self._nursery = build, config_path, nursery
        self._lock = trio.Lock()
        # SIGHUPs this process asked its supervisor for after a reload of its own (``POST /admin/reload``):
        # the supervisor sends them to every worker, this one included, whose reload then is not counted again.
        self._echoes = 0
        state.reloader = self.reload

    def app(self, role: str):
        """The ASGI app of listener ``role``: each request enters the generation current when it arrives.

        A plain function returning that generation's coroutine, not a coroutine of its own: an awaiting frame
        here would be resumed at every suspension of every request."""
        def through(scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
            return self.apps[role](scope, receive, send)
        return through

    def drain(self, deadline: float) -> None:
        for state in self.every:
            state.drain(deadline)

    def close(self) -> None:
        """The listeners close: every generation refuses the requests read from now on (``AppState.closed``)."""
        for state in self.every:
            state.closed = True

    def reopen_logs(self) -> None:
        """Reopen the access log file at its path (after logrotate renamed it): what SIGUSR1 asks, as of nginx,
        and what every reload does first. Returns at once; the access log's writer reopens before its next line."""
        access_log = self.current.access_log
        if access_log is not None:
            access_log.reopen()

    async def reload(self, *, count: bool = True, echoed: bool = False, said: str | None = None) -> Reloaded:
        """``_reload``; ``said``: what asked for it, its outcome then said in one log line (``say_reloaded``)."""
        outcome = await self._reload(count=count, echoed=echoed)
        if said is not None:
            say_reloaded(self._path, said, outcome.ok, outcome.message, self.current.loaded.version_hash,
                         outcome.warnings if outcome.swapped else ())
        return outcome

    async def _reload(self, *, count: bool, echoed: bool) -> Reloaded:
        """Load, check and swap; (False, why) leaves the current generation serving.

        Whatever goes wrong before the swap refuses the reload, an unexpected exception included: SIGHUP and
        the file watch run this in the process's own nursery, where an exception would end the router.
        ``count``: add the outcome to ``vsr_config_reloads_total``. ``echoed``: the caller sends this reload on
        to every worker as SIGHUP (``POST /admin/reload`` under a supervisor): this process's own copy of that
        SIGHUP reloads without counting, as each reload counts once per worker and the workers' counts merge
        as their maximum (``metrics_view``). The access log is reopened whatever the outcome (logrotate's
        postrotate sends SIGHUP to an unchanged file)."""
        self.reopen_logs()
        if echoed:
            self._echoes += 1
        async with self._lock:
            old = self.current
            outcomes = old.metrics.reloads if count else None
            try:
                loaded = await trio.to_thread.run_sync(load_file, self._path)
                if loaded.version_hash == old.loaded.version_hash:
                    if outcomes is not None:
                        outcomes.inc("unchanged")
                    old.metrics.reloaded(True)
                    # What an earlier reload changed that waits for a restart still does (``/ready`` lists it).
                    return Reloaded(True, _with_pending(f"config {loaded.version_hash} unchanged",
                                                        old.restart_required),
                                    old.restart_required, tuple(loaded.warnings))
                upstreams = Upstreams(loaded.config, previous=old.upstreams)
                new = old.regenerated(loaded, upstreams)
                later = tuple(restart_required(self.started, loaded.config, self.started_secrets, loaded.secrets)
                              + systemone_unstarted(old.systemone_client, loaded.table))
                await self._context(new)
            except ConfigError as exc:
                return self._refused(old, "; ".join(exc.shown) or str(exc), count)
            except Exception as exc:   # noqa: BLE001 - a bug in loading is a refused reload, never a dead router
                log.exception("reload: unexpected error loading %s", self._path)
                return self._refused(old, redact(f"unexpected error: {type(exc).__name__}: {exc}"), count)
            new.restart_required = later
            if old.draining:
                new.drain(old.drain_deadline)
            new.closed = old.closed
            self.apps = self._build(new)
            self.current = new
            self.every.append(new)
            if outcomes is not None:
                outcomes.inc("ok")
            new.metrics.reloaded(True)
            self._nursery.start_soon(self._retire, old, upstreams)
            await _rebound_records(old, new)
            message = _with_pending(f"config {loaded.version_hash} loaded", later)
            if later:
                log.warning("reload: %s changed what is read only at start, in effect after a restart: %s",
                            self._path, ", ".join(later))
            return Reloaded(True, message, later, tuple(loaded.warnings), swapped=True)

    async def _context(self, new: AppState) -> None:
        """Open the context plugin's stores for ``new`` when it is the first generation to use the plugin; a
        ConfigError naming the first decision that uses it when they cannot open."""
        if new.vectors is not None or "context" not in types_used(new.loaded.config) or new.embedders is None:
            return
        try:
            new.vectors, new.memories = await open_context_stores(self.started.global_.stores, new.embedders)
        except (OSError, EmbeddingFailed, StoreFull, *redis_errors()) as exc:
            where = next(path for path, entry in new.loaded.config.plugin_entries() if entry.type == "context")
            raise ConfigError([f"{where} (context): its vector store and memory store (global.stores) could not "
                               f"open: {type(exc).__name__}: {redact(str(exc))}"]) from None
        self._nursery.start_soon(held, new.vectors, new.memories)

    def _refused(self, old: AppState, why: str, count: bool) -> Reloaded:
        old.metrics.reloaded(False)
        if count:
            old.metrics.reloads.inc("failed")
        return Reloaded(False, why)

    async def reload_and_say(self, trigger: str) -> None:
        """Reload, and say how it went in one log line (what SIGHUP, the file watch and POST /admin/reload
        started): at INFO when done, which the default WARNING level shows too (``lifecycle``), ERROR when
        refused."""
        count = True
        if trigger == "SIGHUP" and self._echoes:
            self._echoes, count = self._echoes - 1, False
        await self.reload(count=count, said=trigger)

    async def watch(self) -> None:
        """Reload whenever the file's modification time, size or inode change (``config_watch``), or those of a
        secret file it names (a rotated Kubernetes Secret: kubelet swaps the volume's symlink, a new inode), until
        cancelled. A change is acted on once: a file that does not load is tried again at its next change, not
        every poll."""
        seen = await _signature(self._path)
        secrets = await self._secret_signatures()
        while True:
            watch = self.current.loaded.config.global_.router.config_watch
            await trio.sleep(watch.interval_ms / 1000)
            now = await _signature(self._path)
            rotated = await self._secret_signatures()
            # A missing file (an editor's rename in between) is no change to act on yet.
            if not watch.enabled or now is None or (now == seen and rotated == secrets):
                continue
            trigger = "the file changed" if now != seen else "a secret file changed"
            seen, secrets = now, rotated
            await self.reload_and_say(trigger)
            secrets = await self._secret_signatures()      # the files the configuration now loaded names

    async def _secret_signatures(self) -> dict[str, tuple[int, int, int] | None]:
        return {path: await _signature(path) for path in secret_files(self.current.loaded.config)}

    async def _retire(self, old: AppState, kept: Upstreams) -> None:
        """Once the old generation's requests ended, close its backends the new one did not keep."""
        while old.inflight:
            await trio.sleep(_RETIRE_POLL_S)
        self.every.remove(old)
        await old.upstreams.aclose(keep=kept)


def _with_pending(message: str, later: tuple[str, ...]) -> str:
    """A reload's message, naming the changed fields that take effect only after a restart."""
    return f"{message}; these take effect only after a restart: {', '.join(later)}" if later else message


async def _rebound_records(old: AppState, new: AppState) -> None:
    """The global router_replay's ``max_records`` and ``ttl_seconds``, changed by a reload, bound the record store
    from now on (records past a lowered bound go, or are read no more): no restart needed."""
    if new.events is None:
        return
    before, after = old.policies.global_replay(), new.policies.global_replay()
    if (before.max_records, before.ttl_seconds) == (after.max_records, after.ttl_seconds):
        return
    try:
        await new.events.records.bound(max_records=after.max_records, ttl_seconds=after.ttl_seconds)
    except StoreUnavailable as exc:
        # The bounds are set before the store is asked: the next write trims, and each read checks the age.
        log.warning("reload: replay records bounded at their next write (%s)", exc.detail)


async def _signature(path: str) -> tuple[int, int, int] | None:
    """What tells a changed file: modification time, size, inode (stat in a worker thread)."""
    try:
        st = await trio.to_thread.run_sync(os.stat, path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
