"""Everything off the hot path, on quart-trio: models, health, readiness, metrics."""
from __future__ import annotations

from quart import Response, jsonify
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from ..headers import registry as h
from .state import AppState


def make_admin(state: AppState) -> QuartTrio:
    """The quart-trio app serving the routes that are not the hot path."""
    app = QuartTrio("vsr_fast")
    # Quart cuts responses after RESPONSE_TIMEOUT (60 s) silently (STACK-NOTES).
    app.config["RESPONSE_TIMEOUT"] = None
    app.config["MAX_CONTENT_LENGTH"] = state.max_body_bytes

    @app.after_request
    async def version_headers(response: Response) -> Response:
        response.headers[h.SCHEMA_VERSION] = h.PUBLIC_SCHEMA
        response.headers[h.CONFIG_VERSION] = state.loaded.version_hash
        return response

    @app.get("/v1/models")
    async def models() -> Response:
        chat_models = [n for n, m in state.table.models.items() if m.api_format != "systemone"]
        names = list(state.table.entrypoint_names) + chat_models
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "vsr-fast"} for n in names]
        return jsonify({"object": "list", "data": data})

    @app.get("/health")
    async def health() -> Response:
        return jsonify({"status": "ok"})

    @app.get("/ready")
    async def ready() -> tuple[Response, int]:
        if state.draining:
            return jsonify({"status": "draining"}), 503
        return jsonify({"status": "ready", "config_version": state.loaded.version_hash}), 200

    @app.get("/metrics")
    async def metrics() -> Response:
        extra = [state.systemone_client.metrics.render()] if state.systemone_client else []
        return Response(state.metrics.render(*extra), content_type="text/plain; version=0.0.4; charset=utf-8")

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> tuple[Response, int]:
        body = {"error": {"message": exc.description or exc.name, "type": "invalid_request_error",
                          "param": None, "code": exc.name.lower().replace(" ", "_")}}
        return jsonify(body), exc.code or 500

    return app
