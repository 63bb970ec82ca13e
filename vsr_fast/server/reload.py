"""Hot reload: SIGHUP, ``POST /admin/reload`` or a change of the file (``config_watch``) loads the configuration
file again, checks it, and swaps it in.

A generation is one AppState and the ASGI apps built over it. A reload builds the next one beside the
current one and swaps the reference the listeners call through: a request already in an app finishes on its
generation, the next request starts on the new one. A file that does not load changes nothing; the answer,
the log and ``vsr_config_reloads_total{outcome="failed"}`` say why. Backends whose model and ref did not
change are kept (their connections and health); the others close once the old generation's requests ended.
What the process holds for its life (listeners, auth and key store, rate limits, stores, System One's
client, the access log) changes with a restart only.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable

import trio

from ..errors import ConfigError
from ..routing import load_file
from ..upstream.pool import Upstreams
from .asgi import Receive, Scope, Send
from .state import AppState

log = logging.getLogger("vsr_fast.reload")
_RETIRE_POLL_S = 0.5


class Generations:
    """The current generation, the apps every listener serves through, and the retired ones still running."""

    def __init__(self, state: AppState, config_path: str, build: Callable[[AppState], dict],
                 nursery: trio.Nursery) -> None:
        self.current = state
        self.every = [state]
        self.apps = build(state)
        self._build, self._path, self._nursery = build, config_path, nursery
        self._lock = trio.Lock()
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

    async def reload(self) -> tuple[bool, str]:
        """Load, check and swap; (False, why) leaves the current generation serving.

        Whatever goes wrong before the swap refuses the reload, an unexpected exception included: SIGHUP and
        the file watch run this in the process's own nursery, where an exception would end the router."""
        async with self._lock:
            old = self.current
            try:
                loaded = await trio.to_thread.run_sync(load_file, self._path)
                if loaded.version_hash == old.loaded.version_hash:
                    old.metrics.reloads.inc("unchanged")
                    return True, f"config {loaded.version_hash} unchanged"
                upstreams = Upstreams(loaded.config, previous=old.upstreams)
                new = old.regenerated(loaded, upstreams)
            except ConfigError as exc:
                return self._refused(old, "; ".join(exc.lines) or str(exc))
            except Exception as exc:   # noqa: BLE001 - a bug in loading is a refused reload, never a dead router
                log.exception("reload: unexpected error loading %s", self._path)
                return self._refused(old, f"unexpected error: {type(exc).__name__}: {exc}")
            if old.draining:
                new.drain(old.drain_deadline)
            self.apps = self._build(new)
            self.current = new
            self.every.append(new)
            old.metrics.reloads.inc("ok")
            log.warning("reloaded %s: config %s (was %s)", self._path, loaded.version_hash, old.loaded.version_hash)
            self._nursery.start_soon(self._retire, old, upstreams)
            return True, f"config {loaded.version_hash} loaded"

    def _refused(self, old: AppState, why: str) -> tuple[bool, str]:
        old.metrics.reloads.inc("failed")
        log.error("reload refused: %s does not load (%s); still serving config %s", self._path, why,
                  old.loaded.version_hash)
        return False, why

    async def reload_and_say(self, trigger: str) -> None:
        """Reload, and say how it went on stderr (what SIGHUP and the file watch started)."""
        ok, message = await self.reload()
        sys.stderr.write(f"vsr-fast: reload {'done' if ok else 'refused'} ({trigger}): {message}\n")
        sys.stderr.flush()

    async def watch(self) -> None:
        """Reload whenever the file's modification time, size or inode change (``config_watch``), until cancelled.
        A change is acted on once: a file that does not load is tried again at its next change, not every poll."""
        seen = await _signature(self._path)
        while True:
            watch = self.current.loaded.config.global_.router.config_watch
            await trio.sleep(watch.interval_ms / 1000)
            now = await _signature(self._path)
            # A missing file (an editor's rename in between) is no change to act on yet.
            if not watch.enabled or now is None or now == seen:
                continue
            seen = now
            await self.reload_and_say("the file changed")

    async def _retire(self, old: AppState, kept: Upstreams) -> None:
        """Once the old generation's requests ended, close its backends the new one did not keep."""
        while old.inflight:
            await trio.sleep(_RETIRE_POLL_S)
        self.every.remove(old)
        await old.upstreams.aclose(keep=kept)


async def _signature(path: str) -> tuple[int, int, int] | None:
    """What tells a changed file: modification time, size, inode (stat in a worker thread)."""
    try:
        st = await trio.to_thread.run_sync(os.stat, path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
