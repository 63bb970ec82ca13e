"""OpenTelemetry spans over real processes: the router, turned on through its own configuration, sends OTLP/HTTP
to a collector stand-in (a real HTTP server here that decodes each export with the OTLP protobuf); a request's
span continues the client's traceparent, with routing, System One and each upstream attempt as its children.
Off (the default), the SDK is not even imported; on without the otel extra, the router refuses to start."""
from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from .procs import ROOT, config, model, refused_port, router, wait_until, write_config
from .test_e2e_systemone import MATH_HARD, config as s1_config, set_rules

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Collector:
    """An OTLP/HTTP trace receiver: every span of every export POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.resources: list[dict] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                export = ExportTraceServiceRequest.FromString(body)
                for rs in export.resource_spans:
                    collector.resources.append({a.key: a.value.string_value for a in rs.resource.attributes})
                    for ss in rs.scope_spans:
                        collector.spans.extend(ss.spans)
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def __enter__(self) -> "Collector":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def _attributes(span: Span) -> dict:
    out = {}
    for a in span.attributes:
        v = a.value
        kind = v.WhichOneof("value")
        out[a.key] = list(x.string_value for x in v.array_value.values) if kind == "array_value" else getattr(v, kind)
    return out


def test_spans_continue_the_traceparent_with_routing_systemone_and_each_attempt(tmp_path, mock, fake):
    set_rules(fake, MATH_HARD)
    doc = s1_config(mock.url, fake.url)
    dead = f"http://127.0.0.1:{refused_port()}/v1"
    doc["providers"]["models"][0]["backend_refs"] = [{"endpoint": dead, "name": "dead"},
                                                     {"endpoint": f"{mock.url}/v1", "name": "live"}]
    with Collector() as collector:
        doc["global"]["router"] = {"tracing": {"enabled": True, "endpoint": collector.url, "service_name": "vsr-test"},
                                   "upstream": {"retries": {"max_retries": 0}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                           headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
                           json={"model": "auto", "messages": [{"role": "user", "content": "Prove sqrt(2) #t"}]})
            assert r.status_code == 200, r.text
            assert r.headers["x-vsr-selected-model"] == "math-model"
            # SIGTERM: the router sends what it has queued before it exits.
            proc.stop()
            assert proc.popen.returncode == 0
        wait_until(lambda: len(collector.spans) >= 5, "the router's spans at the collector")

    assert collector.resources[0]["service.name"] == "vsr-test"
    by_name: dict[str, list[Span]] = {}
    for span in collector.spans:
        by_name.setdefault(span.name, []).append(span)
    (request,) = by_name["vsr chat"]
    assert request.trace_id.hex() == TRACE_ID and request.parent_span_id.hex() == PARENT_ID
    assert request.kind == Span.SPAN_KIND_SERVER
    attrs = _attributes(request)
    assert (attrs["http.response.status_code"], attrs["vsr.model"], attrs["vsr.decision"]) == (200, "math-model",
                                                                                            "hard_math")
    children = [s for s in collector.spans if s is not request]
    assert all(s.trace_id == request.trace_id and s.parent_span_id == request.span_id for s in children)
    (route,) = by_name["vsr.route"]
    assert _attributes(route)["vsr.decision"] == "hard_math"
    assert _attributes(route)["vsr.candidates"] == ["math-model"]
    (s1,) = by_name["vsr.systemone.call"]
    assert _attributes(s1)["vsr.deployment"] == "s1" and _attributes(s1)["vsr.outcome"] == "ok"
    attempts = sorted(by_name["vsr.upstream.attempt"], key=lambda s: s.start_time_unix_nano)
    assert [_attributes(a)["vsr.backend"] for a in attempts] == ["dead", "live"]
    assert _attributes(attempts[0])["vsr.upstream.cause"] == "connect_refused"
    assert attempts[0].status.code == Status.STATUS_CODE_ERROR and attempts[0].kind == Span.SPAN_KIND_CLIENT
    assert _attributes(attempts[1])["http.response.status_code"] == 200
    assert attempts[1].status.code != Status.STATUS_CODE_ERROR


def test_off_by_default_the_tracing_sdk_is_never_imported():
    # redis-py imports OpenTelemetry's API and metrics SDK by itself when they are installed; the tracing SDK
    # and the exporter are what tracing would load.
    code = ("import sys; from vsr_fast import tracing; from vsr_fast.config.schema import TracingConfig; "
            "import vsr_fast.server.serve, vsr_fast.server.pipeline.run, vsr_fast.upstream.dispatch; "
            "tracing.start(TracingConfig()); "
            "print(tracing.tracer, sorted(m for m in sys.modules if m.startswith("
            "('opentelemetry.sdk.trace', 'opentelemetry.exporter'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None []"


@pytest.mark.parametrize("blocked", ["opentelemetry", "opentelemetry.exporter.otlp.proto.http.trace_exporter"])
def test_on_without_the_extra_the_router_refuses_to_start(tmp_path, blocked):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"tracing": {"enabled": True}}}
    path = write_config(doc, str(tmp_path))
    # A None in sys.modules makes the import fail, as it does where the extra is not installed.
    code = (f"import sys; sys.modules[{blocked!r}] = None; from vsr_fast.cli import main; "
            f"sys.argv = ['vsr-fast', 'serve', '--config', {path!r}, '--port', '0']; sys.exit(main())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "global.router.tracing.enabled: missing_dependency: tracing needs the otel extra" in out.stderr


def test_the_upstream_request_carries_the_attempt_span_as_its_parent(tmp_path, mock):
    # W3C Trace Context: a hop that takes part in the trace rewrites the parent id. The provider's request names
    # the router's attempt span as its parent, in the client's trace (its tracestate passed on), or in the trace
    # the router began when the client sent none.
    doc = config([model("m", f"{mock.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    seen: list[dict] = []
    with Collector() as collector:
        doc["global"] = {"router": {"tracing": {"enabled": True, "endpoint": collector.url}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            for headers in ({"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=abc"}, {}):
                r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20, headers=headers,
                               json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200, r.text
                seen.append(httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["headers"])
            proc.stop()
        wait_until(lambda: len([s for s in collector.spans if s.name == "vsr.upstream.attempt"]) == 2,
                   "the two attempts' spans")
    attempts = sorted((s for s in collector.spans if s.name == "vsr.upstream.attempt"),
                      key=lambda s: s.start_time_unix_nano)
    for sent, attempt in zip(seen, attempts):
        version, trace_id, parent_id, flags = sent["traceparent"].split("-")
        assert (trace_id, parent_id) == (attempt.trace_id.hex(), attempt.span_id.hex()), (sent, attempt)
    assert attempts[0].trace_id.hex() == TRACE_ID
    assert seen[0]["tracestate"] == "vendor=abc"
    assert "tracestate" not in seen[1]
