"""Active health checks (``health_check``, off by default): each backend that has one is probed with ``GET
path`` on a connection of its own every ``interval_ms``, with no client traffic needed. Its verdict is part of
the same state passive health keeps (``Backend.up``): a backend down by either is out of the rotation, of
``/ready`` and of ``vsr_backend_up``. Each worker checks for itself, as each keeps its own health. And the
sweep of idle connections (``sweep_idle``), with no client traffic needed either.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ..errors import status_cause
from . import transport
from .pool import Backend, Upstreams

log = logging.getLogger("vsr_fast.upstream")
# How often the backend list is read again without a check due: a reload's new backends start within it.
_RESCAN_S = 1.0
# How often idle upstream connections are looked at: the pools' keep-alive (transport.new_pool) is 5 s, so an
# expired or backend-closed one is closed within 5 s to 10 s of going idle.
SWEEP_S = 5.0


async def check_backends(current: Callable[[], Upstreams]) -> None:
    """Probe the current generation's checked backends when each one's interval passed, until cancelled."""
    async with trio.open_nursery() as nursery:
        while True:
            now = trio.current_time()
            soonest = now + _RESCAN_S
            for backend in current().checked():
                if backend.next_probe <= now and not backend.probing:
                    assert backend.health is not None
                    backend.probing = True
                    backend.next_probe = now + backend.health.interval_ms / 1000
                    nursery.start_soon(_probe, backend)
                soonest = min(soonest, backend.next_probe)
            await trio.sleep_until(soonest)


async def sweep_idle(current: Callable[[], Upstreams]) -> None:
    """Every ``SWEEP_S``, closes the current generation's idle connections that expired or that their backend
    closed, until cancelled: one timer for every pool, not one per connection (a pool found them only when a
    request came to it, and a backend that closed its idle connections left them in CLOSE-WAIT until then)."""
    while True:
        await trio.sleep(SWEEP_S)
        for backends in current().backends.values():
            for backend in backends:
                try:
                    await backend.sweep()
                except Exception as exc:  # noqa: BLE001 - a sweep must never take the router down
                    log.warning("closing idle connections of backend %s failed: %r", backend.label, exc)


async def _probe(backend: Backend) -> None:
    health = backend.health
    assert health is not None
    headers = backend.probe_headers
    outcome = "timeout"     # not answered within timeout_ms, whichever step it was at
    try:
        with trio.move_on_after(health.timeout_ms / 1000):
            status = await transport.probe(backend.prober(), backend.probe_origin, health.path, headers)
            outcome = "ok" if 200 <= status < 300 else status_cause(status)
    except transport.TransportError as exc:
        outcome = transport.cause(exc)
    except Exception as exc:  # noqa: BLE001 - a check must never take the router down (a pool a reload closed)
        log.warning("health check of backend %s failed: %r", backend.label, exc)
        outcome = "probe_error"
    finally:
        backend.probing = False
    change = backend.checked(outcome)
    if change == "down":
        log.warning("backend %s out of the rotation: %d health checks failed in a row (the last: %s)",
                    backend.label, health.unhealthy_threshold, outcome)
    elif change == "up":
        log.warning("backend %s back in the rotation: %d health checks passed in a row", backend.label,
                    health.healthy_threshold)
