"""Active health checks: a backend that goes down is taken out of the rotation (vsr_backend_up, /ready) and
brought back once it answers again, by the checker alone, with no client traffic in between."""
from __future__ import annotations

import re

import httpx
import msgspec

from vsr_fast.config.schema import HealthCheck, ProviderModel
from vsr_fast.routing.loaded import load_raw
from vsr_fast.upstream.pool import Backend, Upstreams
from vsr_fast.upstream.transport import ssl_context

from .procs import config, free_port, mock_upstream, router, wait_until, write_config


def _sample(text: str, name: str, labels: str) -> float | None:
    found = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def test_the_checker_ejects_a_dead_backend_and_readmits_it(tmp_path):
    port = free_port()
    check = {"enabled": True, "interval_ms": 100, "timeout_ms": 1000, "unhealthy_threshold": 2,
             "healthy_threshold": 2}
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"http://127.0.0.1:{port}/v1", "name": "flaky",
                                                  "health_check": check}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    labels = 'model="m",backend="flaky"'
    with mock_upstream("--port", str(port)) as first, router(write_config(doc, str(tmp_path))) as proc:
        def metrics() -> str:
            return httpx.get(f"{proc.url}/metrics").text

        def checks(outcome: str) -> float:
            return _sample(metrics(), "vsr_backend_health_checks_total", f'{labels},outcome="{outcome}"') or 0

        wait_until(lambda: checks("ok") >= 2, "passing health checks")
        assert _sample(metrics(), "vsr_backend_up", labels) == 1
        assert httpx.get(f"{proc.url}/ready").status_code == 200

        first.stop()
        wait_until(lambda: _sample(metrics(), "vsr_backend_up", labels) == 0, "the checker to eject the dead backend")
        text = metrics()
        assert _sample(text, "vsr_backend_ejections_total", labels) == 1
        assert checks("connect_refused") >= 2
        assert httpx.get(f"{proc.url}/ready").status_code == 200    # the router's own readiness
        ready = httpx.get(f"{proc.url}/ready?upstreams=1")
        assert ready.status_code == 503 and ready.json()["status"] == "no_live_backend"
        assert any("out of the rotation: 2 health checks failed in a row (the last: connect_refused)" in x
                   for x in proc.lines)

        with mock_upstream("--port", str(port)) as second:
            wait_until(lambda: _sample(metrics(), "vsr_backend_up", labels) == 1, "the checker to re-admit it")
            assert httpx.get(f"{proc.url}/ready?upstreams=1").status_code == 200
            assert httpx.get(f"{second.url}/_mock/stats").json()["requests"] == 0    # no client traffic did it
            r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                           json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200 and httpx.get(f"{second.url}/_mock/stats").json()["completed"] == 1
            assert _sample(metrics(), "vsr_backend_ejections_total", labels) == 1



def test_checks_are_off_by_default_and_a_backend_s_block_wins():
    def checked(upstream: dict, ref: dict) -> list[str]:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1", "name": "a"},
                                                     {"endpoint": "http://127.0.0.1:9/v1", "name": "b", **ref}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"upstream": upstream}}
        loaded = load_raw(doc)
        return [b.label for b in Upstreams(loaded.config).checked()]

    assert checked({}, {}) == []
    assert checked({"health_check": {"enabled": True}}, {}) == ["a", "b"]
    assert checked({"health_check": {"enabled": True}}, {"health_check": {"enabled": False}}) == ["a"]
    assert checked({}, {"health_check": {"enabled": True, "path": "/health"}}) == ["b"]


def test_a_check_flips_only_after_its_thresholds():
    model = msgspec.convert({"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}, ProviderModel)
    backend = Backend(model, model.backend_refs[0], 0, ssl_context())
    backend.health = HealthCheck(enabled=True, unhealthy_threshold=3, healthy_threshold=2)
    assert [backend.checked(o) for o in ("status_5xx", "status_5xx", "ok", "status_5xx", "status_5xx")] == [None] * 5
    assert backend.up(0.0) and backend.checked("read_timeout") == "down" and not backend.up(0.0)
    assert [backend.checked(o) for o in ("ok", "timeout", "ok", "ok")] == [None, None, None, "up"]
    assert backend.up(0.0) and backend.ejections == 1
    assert backend.checks == {"status_5xx": 4, "ok": 4, "read_timeout": 1, "timeout": 1}
