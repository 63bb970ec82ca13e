"""Running the router: one trio process on hypercorn's trio worker, or several sharing a socket."""
from __future__ import annotations

import dataclasses
import errno
import gc
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import contextlib
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from wsgiref.handlers import format_date_time

import hypercorn.config
import msgspec
import resource
import trio

from .. import scopes, tracing
from ..routing import Loaded
from ..plugins import layers as plugin_config
from ..config.schema import Limits
from ..config.stores import default_events_dir
from ..auth.source import serving_listener
from ..errors import ConfigError, ListenError, StartError, VsrError
from ..embeddings import Embedders
from ..events.cache_store import cache_of
from ..events.cache_writer import CacheWriter
from ..events.service import open_event_services
from ..events.types import ShadowCopy
from ..headers.registry import SERVER
from ..routing.open_systemone import open_systemone, read_attached_cards
from ..upstream import open_upstreams
from ..upstream.health import check_backends, sweep_idle
from . import heap, process
from .app import connection_refusals, edge_refusals, make_app
from .context_stores import context_stores
from .listen import Connections, serve_http
from .metrics_view import keep_restarts, serve_peers
from .reload import Generations
from .restarts import Restarts, how_ended
from .recording import Policies
from .state import AppState

log = logging.getLogger("vsr_fast.serve")


@dataclass(frozen=True)
class ServeOptions:
    host: str | None = None            # None: the serving listener's address (127.0.0.1 without one)
    port: int | None = None            # None: the serving listener's port (8080 without one)
    workers: int = 1
    fd: int | None = None              # an inherited listening socket (worker processes)
    config_path: str = ""              # what workers load
    worker: int = 0                    # this worker's index under a supervisor
    graceful_timeout_s: float = 30.0   # how long SIGTERM waits for in-flight requests
    drain_delay_s: float = 0.0         # how long SIGTERM keeps accepting (/ready 503) before the drain
    metrics_dir: str | None = None     # under a supervisor: the workers' metrics sockets (metrics_view)
    settle_heap: bool = False          # the process is the router's own: freeze its start-up heap (heap.settle)


def resolve_bind(loaded: Loaded, opts: ServeOptions) -> ServeOptions:
    """The serving address: the command line's, else ``listeners[]``' serving listener's, else 127.0.0.1:8080."""
    listener = serving_listener(loaded.config)
    host = opts.host if opts.host is not None else (listener.address if listener else "127.0.0.1")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]       # an IPv6 address as a URL writes it
    port = opts.port if opts.port is not None else (listener.port if listener else 8080)
    return dataclasses.replace(opts, host=host, port=port)


_SERVER = (b"server", SERVER.encode())


class EdgeConfig(hypercorn.config.Config):
    """hypercorn's configuration, whose Date header is formatted once a second (it names whole seconds), not on
    every answer, and whose Server header names the router (``headers.registry.SERVER``)."""

    _date_second: int | None = None
    _date_value = b""

    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        # hypercorn 0.18's, the Date aside (tests/test_headers_wire.py pins the original).
        headers = []
        if self.include_date_header:
            now = int(time.time())          # what format_date_time's gmtime keeps of it
            if now != self._date_second:
                self._date_second, self._date_value = now, format_date_time(now).encode("ascii")
            headers.append((b"date", self._date_value))
        if self.include_server_header:
            headers.append(_SERVER)

        for alt_svc_header in self.alt_svc_headers:
            headers.append((b"alt-svc", alt_svc_header.encode()))
        if len(self.alt_svc_headers) == 0 and self._quic_addresses:
            from aioquic.h3.connection import H3_ALPN

            for version in H3_ALPN:
                for addr in self._quic_addresses:
                    port = addr[1]
                    headers.append((b"alt-svc", b'%s=":%d"; ma=3600' % (version.encode(), port)))

        return headers


def _hypercorn_config(opts: ServeOptions, limits: Limits) -> hypercorn.config.Config:
    cfg = EdgeConfig()
    cfg.graceful_timeout = opts.graceful_timeout_s
    # hypercorn's idle timer runs from a connection's opening (or an answer's end) until a request's headers
    # are whole: the header timeout. Its read_timeout stays unset: it bounds every read, including while a
    # client silently waits for a long answer, and would cut those; the body's pace covers the body.
    cfg.keep_alive_timeout = limits.header_timeout_ms / 1000
    cfg.accesslog = None
    cfg.errorlog = logging.getLogger("hypercorn.error")
    return cfg


async def serve(loaded: Loaded, opts: ServeOptions, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve until SIGTERM or SIGINT, then drain in-flight requests for up to the graceful timeout."""
    opts = resolve_bind(loaded, opts)
    loaded = await read_attached_cards(loaded)
    tracing.start(loaded.config.global_.router.tracing)
    try:
        await _serve(loaded, opts, task_status)
    finally:
        if tracing.tracer is not None:
            # The spans still queued are sent before the process ends (the SDK's exporter blocks: a thread).
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(tracing.stop)


@dataclasses.dataclass
class _Listeners:
    """The sockets a router serves on, bound before its other parts start, with their hypercorn settings."""
    cfg: hypercorn.config.Config
    serving: socket.socket
    admin_cfg: hypercorn.config.Config | None = None
    admin: socket.socket | None = None


async def _serve(loaded: Loaded, opts: ServeOptions, task_status) -> None:
    # The listening sockets first: a busy port is said as such, before a part that would refuse for a reason of
    # its own (the port's default event journal is held by the router that holds the port).
    limits = loaded.config.global_.router.limits
    cfg = _hypercorn_config(opts, limits)
    admin = _admin_listener(loaded, opts)
    with contextlib.ExitStack() as bound:
        listeners = _Listeners(cfg, bound.enter_context(_listening_socket(opts, cfg)))
        if admin is not None:
            admin_opts = dataclasses.replace(opts, fd=None, host=admin.address, port=admin.port)
            listeners.admin_cfg = _hypercorn_config(admin_opts, limits)
            listeners.admin = bound.enter_context(_listening_socket(admin_opts, listeners.admin_cfg))
        await _serve_on(loaded, opts, listeners, task_status)


async def _serve_on(loaded: Loaded, opts: ServeOptions, listeners: _Listeners, task_status) -> None:
    holder: list[AppState] = []
    current: list = [lambda: holder[0]]     # the serving generation's state, once the generations are made

    async def send_shadow(copy: ShadowCopy, recipe: str | None) -> tuple[int, bytes]:
        # The current generation's: a reload's models and plugins apply to the copies sent after it.
        return await shadow_call(current[0](), copy, recipe)

    stores = _resolve_stores(loaded, opts)
    replay = Policies(loaded).global_replay()
    uses = plugin_config.types_used(loaded.config)
    embedders = Embedders(loaded.config.global_.model_catalog)
    events_cm = (open_event_services(stores, replay=replay, embedders=embedders,
                                     send_shadow=send_shadow if plugin_config.shadow_used(loaded.config) else None,
                                     consumer_name=f"{socket.gethostname()}-{opts.port}-{opts.worker}",
                                     record="router_replay" in uses, cache_writes="response_cache" in uses,
                                     adopt=_orphan_event_dirs(loaded, opts))
                 if stores.event_stream.backend != "none" else _nothing())
    # Without an event stream the response cache still works: looked up in line, written by a task of its own.
    direct = "response_cache" in uses and stores.event_stream.backend == "none"
    async with open_upstreams(loaded.config) as upstreams, open_systemone(loaded) as systemone, events_cm as events, \
            _direct_cache(stores if direct else None, embedders) as direct_cache, _closing(embedders), \
            context_stores(stores if "context" in uses else None, embedders) as (vectors, memories):
        state = AppState(loaded=loaded, upstreams=upstreams, systemone_client=systemone, events=events,
                         direct_cache=direct_cache, embedders=embedders, vectors=vectors, memories=memories, metrics_dir=opts.metrics_dir, worker=opts.worker)
        holder.append(state)
        if state.access_log is not None:
            state.access_log.open()
        shutdown = trio.Event()
        await state.auth.load()
        state.limiter.start()
        async with trio.open_nursery() as background:
            # Work that leaves the request path (the responses store's writes) outlives the drain.
            background.start_soon(state.response_store.run)
            background.start_soon(state.auth.run)
            background.start_soon(state.limiter.run)
            background.start_soon(state.tally.run)
            if direct_cache is not None:
                background.start_soon(direct_cache.run)
            if state.access_log is not None:
                background.start_soon(state.access_log.run)
            async with trio.open_nursery() as nursery:
                limits = loaded.config.global_.router.limits
                state.connections = Connections(max_connections(limits))
                admin_bound = listeners.admin is not None
                generations = Generations(state, opts.config_path, lambda s: _apps(s, admin_bound), background)
                current[0] = lambda: generations.current
                if opts.metrics_dir is not None:
                    # Started before the worker says it serves: its series are kept by then, so a worker stopped
                    # before any scrape asked it still counts (its .last file), however soon it stops.
                    await background.start(serve_peers, lambda: generations.current, opts.metrics_dir, opts.worker)
                refusals = edge_refusals(lambda: generations.current)
                unread = connection_refusals(lambda: generations.current)
                await background.start(_on_signals, generations, shutdown, opts)
                await background.start(_on_hangup, generations)
                background.start_soon(_on_user1, generations)
                background.start_soon(check_backends, lambda: generations.current.upstreams)
                background.start_soon(sweep_idle, lambda: generations.current.upstreams)
                if loaded.config.global_.router.config_watch.enabled and opts.config_path:
                    background.start_soon(generations.watch)
                if listeners.admin is not None:
                    admin_binds = await nursery.start(serve_http, generations.app("admin"), listeners.admin_cfg,
                                                      listeners.admin, shutdown.wait,
                                                      Connections(max_connections(limits)), refusals,
                                                      limits.send_timeout_ms / 1000, unread)
                    sys.stderr.write(f"vsr-fast: admin on {', '.join(admin_binds)}\n")
                binds = await nursery.start(serve_http, generations.app("serving"), listeners.cfg,
                                            listeners.serving,
                                            shutdown.wait, state.connections, refusals, limits.send_timeout_ms / 1000,
                                            unread)
                if opts.settle_heap:
                    heap.settle()
                # One write, newline included: workers share the supervisor's stderr, and print's two
                # writes (text, then newline) let two workers' lines run together.
                trusted = loopback_admin(loaded.config)
                if trusted and not opts.worker:
                    sys.stderr.write(f"warning: {trusted}\n")
                apart = limits_per_worker(loaded.config, opts.workers)
                if apart and not opts.worker:
                    sys.stderr.write(f"warning: {apart}\n")
                sys.stderr.write(f"vsr-fast: serving on {', '.join(binds)} (config {loaded.version_hash})\n")
                sys.stderr.flush()
                process.serving()       # to the supervisor: from now on a death of this worker is restarted
                task_status.started(binds)
                if process.take_held_hangup():
                    background.start_soon(generations.reload_and_say, "SIGHUP received while starting")
                await shutdown.wait()
                # hypercorn returns once drained; then stop the signal watchers (a repeated SIGTERM from
                # now on: process._stop, ignored).
            background.cancel_scope.cancel()
        await generations.current.upstreams.aclose(keep=upstreams)    # the first generation's: open_upstreams
        state.limiter.stop()
        state.auth.close()
        log.info("vsr-fast: stopped")


def loopback_admin(config) -> str | None:
    """The warning when the serving listener answers the admin routes to whoever connects from a loopback address
    (no listener with role: admin, no admin keys: app's ``_local``), or None. Said at start, as both are read only
    then: a sidecar proxy (Istio's connects from 127.0.0.6) or a reverse proxy on the same host makes every client
    such a peer, which ``config validate`` cannot know."""
    if config.global_.router.auth.enabled or any(listener.role == "admin" for listener in config.listeners):
        return None
    serving = next((listener for listener in config.listeners if listener.role == "serving"), None)
    where = f"listeners[{serving.name}]" if serving is not None else "listeners"
    return (f"{where}: admin_by_loopback: the admin routes (reload, replay records, key and store writes) answer "
            "any peer on a loopback address; behind a sidecar proxy (Istio connects from 127.0.0.6) or a reverse "
            "proxy on this host that is every client: add a listener with role: admin on a port of its own, or "
            "admin keys (global.router.auth)")


def limits_per_worker(config, workers: int) -> str | None:
    """The warning when several workers each keep their own limit windows, or None. Without a shared key store
    (``auth.store``) every window (rpm, tpm, concurrent, budget) lives in a worker's memory, and the supervisor
    hands connections to whichever worker accepts: a key of rpm 3 under 2 workers was admitted 5 times of 8.
    Said at start, naming what has limits, as ``config validate`` cannot know the worker count."""
    auth = config.global_.router.auth
    if workers <= 1 or auth.store.backend == "redis":
        return None
    rates = config.global_.router.rate_limits
    limited = [*(f"keys[{k.id}]" for k in auth.keys if not k.limits.empty()),
               *(f"teams[{name}]" for name, limits in rates.teams.items() if not limits.empty()),
               *(f"tenants[{name}]" for name, limits in rates.tenants.items() if not limits.empty())]
    if not limited:
        return None
    shown = ", ".join(limited[:8]) + (f" and {len(limited) - 8} more" if len(limited) > 8 else "")
    return (f"global.router.auth: limits_per_worker: {shown} have limits (rpm, tpm, concurrent, budget), and with "
            f"no shared key store (auth.store) each of the {workers} workers enforces them with windows of its "
            f"own: the effective limit is up to {workers}x the declared one; set global.router.auth.store to a "
            "Redis (backend: redis) to share the windows, or serve with --workers 1")


def _admin_listener(loaded: Loaded, opts: ServeOptions):
    """The admin listener this process binds: under a supervisor, worker 0 alone (one port, one owner)."""
    admin = next((listener for listener in loaded.config.listeners if listener.role == "admin"), None)
    return admin if admin is not None and opts.worker == 0 else None


@asynccontextmanager
async def _nothing():
    yield None


@asynccontextmanager
async def _closing(embedders: Embedders):
    try:
        yield embedders
    finally:
        embedders.close()


@asynccontextmanager
async def _direct_cache(stores, embedders: Embedders):
    """The response cache and its writer for a router with no event stream; None when not needed."""
    if stores is None:
        yield None
        return
    cache = cache_of(stores, embedders)
    try:
        yield CacheWriter(cache)
    finally:
        cache.close()


def _resolve_stores(loaded: Loaded, opts: ServeOptions):
    """The stores with the event journal's default place filled in: one per listener port, and per worker for
    the embedded stream (one process each). A Redis stream's workers share the place: each takes a spill slot
    there, and adopts the slots of workers a restart on fewer no longer runs (``events.service``)."""
    stores = loaded.config.global_.stores
    stream = stores.event_stream
    if stream.path is not None:
        return stores
    where = str(opts.port) if opts.port else f"pid{os.getpid()}"
    if opts.worker and stream.backend == "embedded":
        where += f"-w{opts.worker}"
    path = os.path.join(default_events_dir(), where)
    return msgspec.structs.replace(stores, event_stream=msgspec.structs.replace(stream, path=path))


def _orphan_event_dirs(loaded: Loaded, opts: ServeOptions) -> list[Path]:
    """The default embedded event directories of this port's workers past ``opts.workers``: a restart on fewer
    workers left them, maybe with events their consumers never read. Worker 0 (or the lone process) reads them;
    never a worker that runs, so no sibling starting beside it finds its journal taken."""
    stream = loaded.config.global_.stores.event_stream
    if stream.backend != "embedded" or stream.path is not None or opts.worker or not opts.port:
        return []
    found = []
    for directory in Path(default_events_dir()).glob(f"{opts.port}-w*"):
        index = directory.name.removeprefix(f"{opts.port}-w")
        if index.isdigit() and int(index) >= opts.workers:
            found.append((int(index), directory))
    return [directory for _, directory in sorted(found)]


async def shadow_call(state: AppState, copy: ShadowCopy, recipe: str | None) -> tuple[int, bytes]:
    """A shadow copy to its model with the router's own backend key, never the user's credential: read in its
    client API, written in the model's format. A ``shaped`` copy is the live provider-bound request, every
    request plugin made (masking last): it gets only header_mutation's headers. An earlier version's copy (the
    client's body) gets the decision's per-model rewrites (system_prompt, header_mutation, request_params,
    prompt_cache), as the live dispatch writes a candidate's request."""
    model = state.table.models[copy.model]
    adapter = state.adapters[copy.api]
    shaping = state.policies.shaping(recipe, copy.decision) if recipe is not None else None

    def outbound(m):
        out = adapter.upstream(req, m.api_format, m.upstream_model, stream_usage=m.stream_usage, reasoning=m.reasoning,
                               max_tokens_field=m.max_tokens_field)
        if shaping is None:
            return out
        if copy.shaped:
            return dataclasses.replace(out, headers=shaping.headers(out.headers))
        shaped = shaping.apply(out.body, m.api_format, out.headers, m.reasoning)
        return dataclasses.replace(out, body=shaped.body, headers=shaped.headers)

    try:
        req = adapter.decode(copy.body)
        answer = await state.dispatcher.whole((model,), outbound, [])
    except VsrError as exc:
        return exc.status, exc.message.encode()
    return answer.status, answer.body


def _listening_socket(opts: ServeOptions, cfg: hypercorn.config.Config) -> socket.socket:
    """The socket inherited from a supervisor (``--fd``), or one bound here."""
    if opts.fd is not None:
        sock = socket.socket(fileno=opts.fd)
    else:
        sock = _bound(opts.host, opts.port, backlog=cfg.backlog)
    sock.setblocking(False)
    return sock


def _bound(host: str, port: int, **kwargs) -> socket.socket:
    """A listening socket on host:port, of the address's own family (IPv4 or IPv6, as getaddrinfo resolves it:
    one worker and a supervisor of many alike); a busy port or a bad address is a one-line ListenError."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        return socket.create_server((host, port), family=family, **kwargs)
    except OSError as exc:      # socket.gaierror included
        # create_server appends "(while attempting to bind on address ...)": the address is said already.
        why = (exc.strerror or str(exc)).split(" (while attempting")[0]
        raise ListenError([f"cannot listen on {host_port(host, port)}: {why}"]) from None


def host_port(host: str, port: int) -> str:
    """``host:port`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def max_connections(limits: Limits) -> int:
    """``limits.max_connections``, or half the open-file limit: each connection may hold a backend's too."""
    if limits.max_connections is not None:
        return limits.max_connections
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(16, (soft if soft != resource.RLIM_INFINITY else 65_536) // 2)


def _apps(state: AppState, admin: bool) -> dict:
    """A generation's ASGI apps, one per role of a listener this process bound: each is a quart app of its own
    (~5 ms to build), and most routers have no admin listener."""
    apps = {"serving": make_app(state)}
    if admin:
        apps["admin"] = make_app(state, "admin")
    return apps


async def _on_hangup(generations: Generations, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """SIGHUP: reload the configuration file (a supervisor sends it on to every worker). One that came while
    the router was starting was held (``process``) and is acted on once it serves."""
    with trio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        async for _ in signals:
            await generations.reload_and_say("SIGHUP")


def user1(generations: Generations) -> None:
    """SIGUSR1 in a serving process (a supervisor sends it on to every worker): reopen the access log at its
    path, as nginx reopens its log files (after logrotate renamed them); it must not end the process, as its
    default did."""
    log.warning("vsr-fast: SIGUSR1: reopening the access log")
    generations.reopen_logs()


async def _on_user1(generations: Generations) -> None:
    with trio.open_signal_receiver(signal.SIGUSR1) as signals:
        async for _ in signals:
            user1(generations)


async def _on_signals(generations: Generations, shutdown: trio.Event, opts: ServeOptions, *,
                      task_status=trio.TASK_STATUS_IGNORED) -> None:
    """At SIGTERM or SIGINT: ``/ready`` answers 503 at once, and for ``drain_delay_s`` new connections and
    requests are still served (a load balancer polling ``/ready`` stops sending meanwhile, as Envoy's drain
    does); then the accept loop stops and the listening socket closes (``listen``), and in-flight connections
    drain. Each request in flight is held to a deadline ahead of the graceful timeout (counted from the
    socket's close), so one still running then is answered 503 shutting_down (a stream: its protocol's error
    event) rather than cut with no status.

    A repeated SIGTERM or SIGINT is the same request (systemd or supervisord signal the process group, so a
    worker gets the supervisor's copy too): the drain goes on. SIGKILL ends the process at once, and the first
    SIGTERM or SIGINT arms a hard deadline past the drain (``process.hard_exit_after``): a drain something
    blocks still ends."""
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            # Whatever blocks the drain, the process ends past it (a worker orphaned by kill -9 included).
            process.arm_on((signal.SIGTERM, signal.SIGINT),
                           opts.drain_delay_s + opts.graceful_timeout_s + process.HARD_EXIT_MARGIN_S)
            task_status.started()
            draining = False
            async for signum in signals:
                name = signal.Signals(signum).name
                if draining:
                    if not process.orphaned():      # a killed supervisor's second parent-death signal: no news
                        _say(opts, f"vsr-fast: {name} again: already draining")
                    continue
                draining = True
                process.note_draining()
                delay, graceful = opts.drain_delay_s, opts.graceful_timeout_s
                generations.drain(trio.current_time() + delay + max(0.0, graceful - drain_margin_s(graceful)))
                _say(opts, f"vsr-fast: {name}: draining" + (f"; accepting for {delay:g} s more" if delay else "")
                     + f", then up to {graceful:g} s for requests in flight")
                nursery.start_soon(_stop_accepting, generations, shutdown, delay)


async def _stop_accepting(generations: Generations, shutdown: trio.Event, delay_s: float) -> None:
    await trio.sleep(delay_s)
    generations.close()
    shutdown.set()


def _say(opts: ServeOptions, line: str) -> None:
    """A line of the process's stopping: on stderr alone, in the log under a supervisor (which says it) unless
    that supervisor is gone (the signal is its death's: process.die_with_supervisor)."""
    if opts.fd is not None and not process.orphaned():
        log.info("%s", line)
    else:
        process.say(line + (" (the supervisor is gone)" if opts.fd is not None else ""))


def drain_margin_s(graceful_timeout_s: float) -> float:
    """How long before the graceful timeout requests are stopped: time to write their answers."""
    return min(1.0, graceful_timeout_s / 4)


def run(loaded: Loaded, opts: ServeOptions) -> int:
    """Entry point of ``vsr-fast serve``: one process, or a supervisor of ``workers`` processes."""
    failed: list[ConfigError] = []
    code = 0
    scopes.install()        # cancel scopes' deadline bookkeeping without a generator per use (~4 % of a request)
    try:
        if opts.workers <= 1 or opts.fd is not None:
            if opts.settle_heap:
                heap.freeze_loaded()
            try:
                trio.run(_serve_or_refuse, loaded, opts)
            finally:
                if opts.metrics_dir is not None and process.orphaned():
                    # Its supervisor was killed, and cleans nothing up: the workers' sockets go with them.
                    shutil.rmtree(opts.metrics_dir, ignore_errors=True)
        else:
            gc.enable()         # a supervisor never settles its heap: its collector back on (cli.main)
            _check_workers(loaded, opts.workers)
            code = trio.run(_supervise, resolve_bind(loaded, opts))
    except* ConfigError as group:
        failed = _leaves(group)
    for exc in failed:
        if isinstance(exc, (ListenError, StartError)):
            print(f"vsr-fast: refusing to start: {exc.lines[0]}", file=sys.stderr)
            continue
        # What only shows once the parts start: an attached runtime's model card, a deployment's files.
        print("vsr-fast: refusing to start: the configuration does not hold where the router runs", file=sys.stderr)
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
    return 2 if failed else code


def _check_workers(loaded: Loaded, workers: int) -> None:
    """What several workers cannot share, refused before any starts: a worker that refused alone left the
    supervisor serving on fewer processes than asked, saying nothing."""
    events = loaded.config.global_.stores.event_stream
    if events.backend == "embedded" and events.path is not None:
        raise ConfigError([f"global.stores.event_stream.path: invalid_value: {workers} workers cannot share one "
                           "embedded stream; leave path unset (one journal per listener and worker) or use "
                           "backend: redis"])


async def _serve_or_refuse(loaded: Loaded, opts: ServeOptions) -> None:
    """``serve``, with an OSError raised before it serves (a path it cannot create or open) as a StartError:
    one line each, exit 2, never a traceback. Once it serves, an error is the process's own and shows whole."""
    async with trio.open_nursery() as nursery:
        try:
            await nursery.start(serve, loaded, opts)
        except* OSError as group:
            raise StartError([_start_line(exc) for exc in _leaves(group)]) from None


def _start_line(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename is not None else ""
    line = f"cannot open {where}{exc.strerror or exc}"
    state = os.path.abspath(os.environ.get("VSR_STATE_DIR", ".vsr"))
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and exc.filename is not None \
            and os.path.abspath(exc.filename).startswith(state):
        # A read-only root file system (readOnlyRootFilesystem) meets the state directory first: say both ways out.
        line += (f"; the event journal lives under the state directory {state}: set VSR_STATE_DIR to a writable "
                 "directory (a volume of its own, such as an emptyDir), or keep no journal with "
                 "global.stores.event_stream: {backend: none}")
    return line


def _leaves(group: BaseExceptionGroup) -> list:
    """The exceptions of ``group`` and of the groups in it."""
    found: list = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


async def _supervise(opts: ServeOptions) -> int:
    """Bind once, start one worker process per CPU asked for, forward SIGTERM, wait for all."""
    assert opts.host is not None and opts.port is not None
    sock = _bound(opts.host, opts.port, reuse_port=False, backlog=1024)
    metrics_dir = tempfile.mkdtemp(prefix="vsr-workers-")
    keep_restarts(metrics_dir, 0)
    try:
        code = await _run_workers(opts, sock, metrics_dir)
    finally:
        sock.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
    process.say(f"vsr-fast: supervisor exiting with code {code}")
    return code


async def _run_workers(opts: ServeOptions, sock: socket.socket, metrics_dir: str) -> int:
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    where = host_port(sock.getsockname()[0], port)
    # --workers: how many siblings run (worker 0 reads the embedded journals of workers past them).
    worker_argv = ["serve", "--config", opts.config_path, "--fd", str(sock.fileno()), "--port", str(port),
                   "--workers", str(opts.workers),
                   "--graceful-timeout", str(opts.graceful_timeout_s), "--drain-delay", str(opts.drain_delay_s),
                   "--metrics-dir", metrics_dir]
    procs: list[subprocess.Popen] = []     # started once SIGTERM is the drain's (forward); index: the worker's
    ready: list[int] = []                  # the pipe each says it serves on (process.spawn_blocked)
    restarts = [Restarts() for _ in range(opts.workers)]
    stopping = False
    failed = 0                             # the exit code a crash loop leaves, whatever the others' drain
    stop_started = trio.Event()

    def spawn(index: int) -> tuple[subprocess.Popen, int]:
        return process.spawn_blocked([sys.executable, "-m", "vsr_fast", *worker_argv, "--worker-index", str(index)],
                                     (sock.fileno(),))

    def stop_all(signum: int) -> None:
        nonlocal stopping
        stopping = True
        stop_started.set()
        process.note_draining()
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
        # The workers close their copies of the listening socket as they stop accepting; this one kept it
        # listening, so connections arriving during the drain were queued and then dropped. Closed now, the
        # last worker's close refuses them (ECONNREFUSED).
        sock.close()

    async def watch(index: int) -> None:
        nonlocal failed
        while True:
            proc, started = procs[index], trio.current_time()
            code = await _exited(proc)
            served = process.served(ready[index])
            if stopping:
                return          # the drain's (or SIGQUIT's) end: nothing is started again
            how = how_ended(code)
            if not served and not restarts[index].count:
                # A worker that refused to start (its configuration, a port): the rest stop too, so the
                # process manager sees the failure instead of a router serving on fewer workers than asked.
                process.say(f"vsr-fast: worker {index} {how} before it served; stopping the others", "ERROR")
                stop_all(signal.SIGTERM)
                return
            now = trio.current_time()
            wait = restarts[index].died(now, now - started, served)
            if wait is None:
                process.say(f"vsr-fast: worker {index} (pid {proc.pid}) {how}: {restarts[index].loop}; stopping "
                            "the others", "ERROR")
                failed = abs(code) or 1
                stop_all(signal.SIGTERM)
                return
            # Its connections are lost; the others' and the listening socket's go on (nginx's master alike).
            process.say(f"vsr-fast: worker {index} (pid {proc.pid}) {how} "
                        f"{'after serving' if served else 'before serving'}; restarting it in {wait:g} s", "ERROR")
            # The wait also lets a SIGTERM to the whole process group reach this loop before a new start.
            await trio.sleep(wait)
            if stopping:
                return
            procs[index], ready[index] = spawn(index)
            restarts[index].count += 1
            await trio.to_thread.run_sync(keep_restarts, metrics_dir, sum(r.count for r in restarts))
            process.say(f"vsr-fast: supervisor: worker {index} restarted (pid {procs[index].pid}, restart "
                        f"{restarts[index].count} of this worker)", "WARNING")

    def kill_all(why: str) -> None:
        for index, p in enumerate(procs):
            if p.poll() is None:
                process.say(f"vsr-fast: supervisor: worker {index} still running {why}; SIGKILL", "WARNING")
                p.kill()
        sock.close()

    async def kill_late() -> None:
        # A worker ends itself past its drain (process.hard_exit_after); one that cannot (stopped, or its
        # deadline lost) is killed a little later, so the supervisor always exits (gunicorn, Envoy likewise).
        await stop_started.wait()
        await trio.sleep(opts.drain_delay_s + opts.graceful_timeout_s + 2 * process.HARD_EXIT_MARGIN_S)
        kill_all("past the graceful timeout")

    async with trio.open_nursery() as nursery:
        async def forward(task_status=trio.TASK_STATUS_IGNORED) -> None:
            nonlocal stopping
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1,
                                           signal.SIGQUIT) as signals:
                # The workers start only now: a SIGTERM from here on drains them (one before exits 0 at once,
                # process._stop, with none started). Each dies with this process (process.spawn_blocked), so a
                # supervisor killed leaves no orphan on the port.
                for index in range(opts.workers):
                    proc, said = spawn(index)
                    procs.append(proc)
                    ready.append(said)
                print(f"vsr-fast: supervisor of {opts.workers} workers on http://{where}", file=sys.stderr,
                      flush=True)
                task_status.started()
                if process.take_held_hangup():
                    _send_on(procs, signal.SIGHUP)
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if signum == signal.SIGQUIT:
                        # The quick stop: no drain, the workers killed (each would only drain at a signal).
                        stopping = True
                        live = sum(p.poll() is None for p in procs)
                        process.say(f"vsr-fast: supervisor: SIGQUIT: ending {live} workers at once")
                        kill_all("at SIGQUIT")
                    elif signum in (signal.SIGHUP, signal.SIGUSR1):
                        # A reload (or USR1's meaning): every worker, each holding it until it serves.
                        _send_on(procs, signum)
                    elif stopping:
                        # The same request again (a process group's signal reaches the workers too): a
                        # worker already draining is not signalled twice.
                        process.say(f"vsr-fast: supervisor: {name} again: already draining")
                    else:
                        live = sum(p.poll() is None for p in procs)
                        process.say(f"vsr-fast: supervisor: {name}: draining {live} workers (up to "
                                    f"{opts.drain_delay_s + opts.graceful_timeout_s:g} s)")
                        stop_all(signum)
        await nursery.start(forward)
        nursery.start_soon(kill_late)
        async with trio.open_nursery() as waiting:
            for index in range(len(procs)):
                waiting.start_soon(watch, index)
        codes = [p.returncode for p in procs]
        nursery.cancel_scope.cancel()
    return max((failed, *(abs(c) for c in codes)))


def _send_on(procs: list[subprocess.Popen], signum: int) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signum)


async def _exited(proc: subprocess.Popen) -> int:
    """``proc``'s exit code, once it exits (its pidfd readable; a thread's wait where there is none)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return await trio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
    return proc.wait()


__all__ = ["ServeOptions", "run", "serve"]
