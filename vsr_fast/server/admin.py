"""Everything off the hot path, on quart-trio: models, stored responses, health, readiness, metrics."""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from functools import partial
from typing import Annotated

import msgspec
import trio
from quart import Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from ..events.redis_client import errors as redis_errors
from ..auth import spend
from ..auth.keys import KeyFields, StoredKey
from ..auth.source import merged
from ..config.auth_checks import key_name_errors
from ..auth.store import KeyStore
from ..errors import BodyTooLarge, EmbeddingFailed, MethodNotAllowed, RouteNotFound, StoreFull, VsrError, shown
from ..headers import registry as h
from ..protocol.error_types import openai_type
from ..protocol.errors import BodyProblem, decode_body, openai_error_body, openai_request_error
from . import models_api, responses_api
from .metrics_view import gathered, replay_get, replay_list
from .shapes import error_for_request, unrouted_message
from .state import AppState


def make_admin(state: AppState) -> QuartTrio:
    """The quart-trio app serving the routes that are not the hot path."""
    app = QuartTrio("vsr_fast")
    # Inner slashes matched as spelled (werkzeug merges them by default, and strips leading ones whatever this
    # says): app.py refuses every such path before quart sees it (server/paths.py); this is the second line.
    app.url_map.merge_slashes = False
    # Quart cuts responses after RESPONSE_TIMEOUT (60 s) silently (STACK-NOTES).
    app.config["RESPONSE_TIMEOUT"] = None
    app.config["MAX_CONTENT_LENGTH"] = state.max_body_bytes

    @app.after_request
    async def version_headers(response: Response) -> Response:
        response.headers[h.SCHEMA_VERSION] = h.PUBLIC_SCHEMA
        response.headers[h.CONFIG_VERSION] = state.loaded.version_hash
        return response

    @app.get(models_api.PATH)
    async def models() -> Response:
        return _answered(lambda anthropic: models_api.listing(state, anthropic, request.args))

    @app.get(models_api.PATH + "/<path:model_id>")      # path: an id may hold a slash (vsr/auto)
    async def model(model_id: str) -> Response:
        return _answered(lambda anthropic: models_api.one(state, anthropic, model_id))

    @app.route(responses_api.ROUTE, methods=["GET", "DELETE"])
    async def stored_response(response_id: str) -> Response:
        route = "delete" if request.method == "DELETE" else "retrieve"
        return await responses_api.stored_response(state, response_id, route)

    @app.get(responses_api.ITEMS_ROUTE)
    async def stored_input_items(response_id: str) -> Response:
        return await responses_api.stored_response(state, response_id, "input_items")

    @app.post(responses_api.CANCEL_ROUTE)
    async def cancel_response(response_id: str) -> Response:
        await request.get_data()    # read (bounded: MAX_CONTENT_LENGTH) so the connection stays usable
        return await responses_api.stored_response(state, response_id, "cancel")

    @app.post(responses_api.COMPACT_PATH)
    async def compact_response() -> Response:
        await request.get_data()
        return responses_api.not_served(responses_api.COMPACT_PATH)

    # LiteLLM's probe paths too, which its users' Kubernetes manifests name (liveliness is LiteLLM's spelling).
    @app.get("/health")
    @app.get("/health/liveliness")
    @app.get("/health/liveness")
    async def health() -> Response:
        return jsonify({"status": "ok"})

    @app.get("/ready")
    @app.get("/health/readiness")
    async def ready() -> tuple[Response, int]:
        # Readiness is this process's own: the configuration loaded, the listener answering, not draining. An
        # upstream outage would otherwise take every replica out of a load balancer at once, the one that still
        # serves the models named directly, and an unready replica gets no traffic to re-admit its backends by
        # (nginx and Envoy never fail their own readiness for an upstream). ``?upstreams=1`` asks for the
        # upstreams too: 503 then while nothing at all can be served (no model has a backend in the rotation).
        if state.draining:
            return jsonify({"status": "draining"}), 503
        down = state.unready()
        if request.args.get("upstreams") in ("1", "true") and not state.upstreams.servable():
            return jsonify({"status": "no_live_backend", "entrypoints": down}), 503
        body = {"status": "ready", "config_version": state.loaded.version_hash}
        if down:
            body["no_live_backend"] = down
        if state.restart_required:
            # Fields a reload changed that the process reads only at start: they still run the old value.
            body["restart_required"] = list(state.restart_required)
        return jsonify(body), 200

    @app.get("/metrics")
    async def metrics() -> Response:
        body = await gathered(state, state.metrics_dir, state.worker)
        return Response(body, content_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/admin/reload")
    async def reload() -> tuple[Response, int]:
        # Under a supervisor the SIGHUP sent on below reloads this worker too, and says its outcome: said once.
        echoed = state.metrics_dir is not None
        ok, message, later, warnings, _ = await state.reloader(echoed=echoed,
                                                               said=None if echoed else "POST /admin/reload")
        if echoed:
            # Under a supervisor: it sends SIGHUP on to every worker, so all of them load the file.
            os.kill(os.getppid(), signal.SIGHUP)
        if not ok:
            body = {"error": {"message": f"the configuration does not load; still serving the one before: {message}",
                              "type": "invalid_request_error", "param": None, "code": "config_invalid"}}
            return jsonify(body), 422
        # Changed fields the process reads only at start: the rest is in effect, these after a restart. The
        # file's load warnings, as serve prints them at start (a backend whose key variable is unset).
        return jsonify({"status": "reloaded", "message": message, "restart_required": list(later),
                        "warnings": list(warnings)}), 200

    @app.get("/api/v1/replay/<replay_id>")
    async def replay_record(replay_id: str) -> Response | tuple[Response, int]:
        # Every worker's records (under a supervisor each keeps those of the requests it served).
        record = await replay_get(state, replay_id)
        if record is None:
            return _not_found(f"no replay record {shown(replay_id)}"), 404
        return Response(record, content_type="application/json")

    @app.get("/api/v1/replay")
    async def replay_listing() -> Response | tuple[Response, int]:
        args = request.args
        try:
            limit = min(int(args.get("limit", 100)), 1000)
            since = int(args["since_ms"]) if "since_ms" in args else None
            until = int(args["until_ms"]) if "until_ms" in args else None
        except ValueError:
            return _bad("limit, since_ms and until_ms are integers"), 400
        rows = await replay_list(state, decision=args.get("decision"), model=args.get("model"),
                                 recipe=args.get("recipe"), since_ms=since, until_ms=until, limit=max(1, limit))
        return Response(msgspec.json.encode({"records": rows}), content_type="application/json")

    @app.get("/api/v1/inventory/embedding-models")
    async def embedding_models() -> Response:
        """The embedding deployments (spec 5.5): recall only, each started when something first embeds."""
        rows = state.embedders.inventory() if state.embedders is not None else []
        return Response(msgspec.json.encode({"object": "list", "data": rows}), content_type="application/json")

    _context_routes(app, state)
    _key_routes(app, state)

    @app.errorhandler(VsrError)
    async def vsr_error(exc: VsrError) -> Response:
        # A store a route reads (replay records, stored keys) away: its own status and code (503
        # store_unavailable), not quart's 500.
        status, body = error_for_request(request.scope, exc)
        return Response(body, status=status, content_type="application/json")

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Response | tuple[Response, int]:
        kind = _ROUTING_ERRORS.get(exc.code)
        if kind is None:
            body = {"error": {"message": exc.description or exc.name, "type": openai_type(exc.code or 500),
                              "param": None, "code": exc.name.lower().replace(" ", "_")}}
            return jsonify(body), exc.code or 500
        # A route missing or asked with a wrong method: in the shape of the API the path belongs to, a 405 with
        # the methods the route serves (RFC 9110 15.5.6: werkzeug knows them, quart's answer dropped them).
        message = exc.description or exc.name
        if exc.code == 404:
            message = unrouted_message(request.method, request.path, message)
        status, body = error_for_request(request.scope, kind(message))
        allow = getattr(exc, "valid_methods", None)
        headers = {"allow": ", ".join(sorted(allow))} if allow else {}
        return Response(body, status=status, content_type="application/json", headers=headers)

    return app


# quart's routing and size refusals -> the router's errors, answered in the path's API shape (a 413 with the code
# the API routes give it, not werkzeug's request_entity_too_large).
_ROUTING_ERRORS = {404: RouteNotFound, 405: MethodNotAllowed, 413: BodyTooLarge}


class Document(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=512)]
    text: Annotated[str, msgspec.Meta(min_length=1)]


def _context_routes(app: QuartTrio, state: AppState) -> None:
    """The vector store's documents: ingest one (cut, embedded, indexed), list the chunks (spec 5.7)."""

    def no_store() -> tuple[Response, int]:
        return _bad("no vector store: no decision uses a context plugin"), 400

    @app.post("/api/v1/context/documents")
    async def ingest() -> Response | tuple[Response, int]:
        if state.vectors is None:
            return no_store()
        doc = await _body(Document, "document")
        if not isinstance(doc, Document):
            return doc
        try:
            added = await trio.to_thread.run_sync(partial(state.vectors.ingest_sync, whole=True), doc.name, doc.text)
        except StoreFull as exc:
            # Not a 201 that kept nothing: the caller learns the text is not there, and nothing of it is.
            return Response(openai_error_body(exc), status=exc.status, content_type="application/json")
        except (EmbeddingFailed, *redis_errors()) as exc:
            return jsonify({"error": {"message": f"not ingested: {exc}", "type": openai_type(503), "param": None,
                                      "code": "store_unavailable"}}), 503
        return jsonify({"document": doc.name, "chunks_added": added}), 201

    @app.get("/api/v1/context/chunks")
    async def chunks() -> Response | tuple[Response, int]:
        if state.vectors is None:
            return no_store()
        rows = await trio.to_thread.run_sync(state.vectors.listed_sync)
        return Response(msgspec.json.encode({"chunks": rows}), content_type="application/json")


def _key_routes(app: QuartTrio, state: AppState) -> None:
    """Key management over HTTP, as ``vsr-fast keys`` does it: on the admin surface only (``app.py`` keeps it
    off the serving listener or behind an admin key). A key is in the answer of create and rotate only."""
    store_config = state.loaded.config.global_.router.auth.store

    async def call(fn, *args, **kwargs):
        if store_config.backend != "redis":
            return None
        store = KeyStore(store_config)
        try:
            return await trio.to_thread.run_sync(lambda: fn(store, *args, **kwargs))
        finally:
            store.close()

    async def changed(fn, *args):
        """``call`` for a change: this process reads the keys again before answering, so the change holds
        here from the answer on (other routers and workers read it at their next poll, within refresh_ms)."""
        try:
            return await call(fn, *args)
        finally:
            await state.auth.reread()

    def no_store() -> tuple[Response, int]:
        return _bad("no key store: set global.router.auth.store.backend: redis"), 400

    def declared(key_id: str, then: str) -> tuple[Response, int] | None:
        """The 409 for a key id the configuration declares (its file is where it changes), else None."""
        if any(k.id == key_id for k in state.loaded.config.global_.router.auth.keys):
            return _bad(f"{shown(key_id)} is declared in the configuration (global.router.auth.keys[{key_id}]); "
                        f"{then}"), 409
        return None

    async def listed(key_id: str | None = None) -> list[dict]:
        """Every key (declared ones first, marked by ``source``; never a secret) with its current use of its
        limits, as LiteLLM's /key/info: only ``key_id``'s when given."""
        stored = await call(KeyStore.list)
        keys, _ = merged(state.loaded.config.global_.router.auth.keys, tuple(stored or ()))
        keys = [k for k in keys if key_id is None or k.id == key_id]
        pairs = [(k.id, k.limits) for k in keys]
        used = await call(KeyStore.usage, pairs) if stored is not None else spend.local(state.limiter, pairs)
        counts = await counted([("key", k.id) for k in keys])
        return [{"id": k.id, "source": "store" if isinstance(k, StoredKey) else "config",
                 **msgspec.to_builtins(k), "usage": u, "counts": c} for k, u, c in zip(keys, used, counts)]

    async def counted(scopes: list[tuple[str, str]]) -> list[dict]:
        """Each scope's requests and tokens this UTC day and month (``auth.tally``), every router's."""
        return await trio.to_thread.run_sync(state.tally.counts, scopes, time.time())

    async def team_rows() -> list[dict]:
        """Every team the configuration or a key names, with its counts and its limits where it has some."""
        auth, teams = state.loaded.config.global_.router.auth, state.loaded.config.global_.router.rate_limits.teams
        keys, _ = merged(auth.keys, tuple(await call(KeyStore.list) or ()))
        names = sorted({*teams, *(k.team for k in keys if k.team)})
        counts = await counted([("team", name) for name in names])
        return [{"team": name, "limits": teams.get(name), "counts": c} for name, c in zip(names, counts)]

    @app.get("/api/v1/keys")
    async def list_keys() -> Response:
        # The teams beside the keys: under the keys' admin path (a team's counts are its keys' requests).
        return Response(msgspec.json.encode({"keys": await listed(), "teams": await team_rows()}),
                        content_type="application/json")

    @app.get("/api/v1/keys/<key_id>")
    async def get_key(key_id: str) -> Response | tuple[Response, int]:
        rows = await listed(key_id)
        if not rows:
            return _not_found(f"no key {shown(key_id)}"), 404
        return Response(msgspec.json.encode(rows[0]), content_type="application/json")

    @app.post("/api/v1/keys")
    async def create_key() -> Response | tuple[Response, int]:
        body = await _body(KeyFields, "key")
        if not isinstance(body, KeyFields):
            return body
        if "/" in body.id or "%" in body.id or body.id in (".", ".."):
            # DELETE /api/v1/keys/{id} and .../rotate could never name it (a path segment; canonical paths only).
            return _bad(f"a key id is one path segment: {shown(body.id)} holds '/', '%' or is a dot segment",
                        param="id"), 400
        # Two secrets under one identity would share its limits and records; the router refuses such a stored key.
        clash = declared(body.id, "choose another id")
        if clash is not None:
            return clash
        unknown = key_name_errors(state.loaded.config, body.entrypoints, body.models, "")
        if unknown:
            # As the file's loader refuses them in a declared key: the first, with the path to its field.
            where, code, message = unknown[0].split(": ", 2)
            return _bad(message, code=code, param=where), 400
        try:
            key = await changed(KeyStore.create, body)
        except ValueError as exc:
            return _bad(str(exc)), 409
        if key is None:
            return no_store()
        return jsonify({"id": body.id, "key": key}), 201

    @app.delete("/api/v1/keys/<key_id>")
    async def revoke_key(key_id: str) -> Response | tuple[Response, int]:
        clash = declared(key_id, "remove it from the file")
        if clash is not None:
            return clash
        gone = await changed(KeyStore.revoke, key_id)
        if gone is None:
            return no_store()
        return (jsonify({"id": key_id, "revoked": True}), 200) if gone else (_not_found(f"no key {shown(key_id)}"), 404)

    @app.post("/api/v1/keys/<key_id>/rotate")
    async def rotate_key(key_id: str) -> Response | tuple[Response, int]:
        clash = declared(key_id, "change its sha256 in the file")
        if clash is not None:
            return clash
        try:
            key = await changed(KeyStore.rotate, key_id)
        except KeyError:
            return _not_found(f"no key {shown(key_id)}"), 404
        if key is None:
            return no_store()
        return jsonify({"id": key_id, "key": key}), 200


_DECODERS: dict[type, msgspec.json.Decoder] = {}


async def _body(type_: type, what: str):
    """The request's JSON body as ``type_``, or the 400 answer that says what is wrong with it: in OpenAI's shape
    with the path to the field, under the client APIs' bounds (depth, 200,000 values, UTF-8)."""
    decoder = _DECODERS.get(type_) or _DECODERS.setdefault(type_, msgspec.json.Decoder(type_))
    try:
        return decode_body(decoder, await request.get_data())
    except BodyProblem as exc:
        error = openai_request_error(exc.problem)
        return Response(openai_error_body(error), status=400, content_type="application/json")


def _answered(build: Callable[[bool], bytes]) -> Response:
    """The JSON ``build`` makes for this request (told whether Anthropic's SDK asks), or its error in the
    request's shape."""
    try:
        body, status = build(request.headers.get(models_api.ANTHROPIC_VERSION) is not None), 200
    except VsrError as exc:
        status, body = error_for_request(request.scope, exc)
    return Response(body, status=status, content_type="application/json")


def _not_found(message: str) -> Response:
    return jsonify({"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "not_found"}})


def _bad(message: str, *, code: str = "invalid_value", param: str | None = None) -> Response:
    return jsonify({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})
