"""A model's backends as a pool, over real processes: weighted spread, passive health (ejection and
re-admission), retries that honour Retry-After, never after the first byte, and /ready."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import openai
import pytest

from .procs import config, mock_upstream, refused_port, router, wait_for_value, write_config

CHAT = [{"role": "user", "content": "Say hello"}]


def pool_config(tmp_path, refs: list[dict], **upstream) -> str:
    doc = config([{"name": "m", "backend_refs": refs}], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"upstream": upstream}}
    return write_config(doc, str(tmp_path))


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


def post(client: httpx.Client, proc, **extra) -> httpx.Response:
    return client.post(f"{proc.url}/v1/chat/completions", json={"model": "m", "messages": CHAT, **extra})


def metric(proc, name: str, backend: str, model: str = "m") -> float | None:
    text = httpx.get(f"{proc.url}/metrics").text
    found = re.search(rf'^{name}\{{model="{model}",backend="{backend}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


@pytest.fixture(scope="module")
def other():
    """A second mock upstream with the default settings, beside the module's ``mock``."""
    with mock_upstream() as proc:
        yield proc


def zeroed(*mocks):
    """The mocks, their counters zeroed: the module's mocks serve several tests."""
    for mock in mocks:
        httpx.post(f"{mock.url}/_mock/reset").raise_for_status()
    return mocks


def test_weights_spread_eight_hundred_requests(mock, other, tmp_path):
    # Smooth weighted round robin: 3:1 to within a twentieth, though eight clients send at once.
    heavy, light = zeroed(mock, other)
    path = pool_config(tmp_path, [{"endpoint": f"{heavy.url}/v1", "name": "heavy", "weight": 3},
                                  {"endpoint": f"{light.url}/v1", "name": "light", "weight": 1}])
    with router(path) as proc, httpx.Client(timeout=30) as client:
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _: post(client, proc).status_code, range(800)))
        assert codes.count(200) == 800
        h, l_ = stats(heavy)["completed"], stats(light)["completed"]
        assert h + l_ == 800
        assert abs(h - 600) <= 30 and abs(l_ - 200) <= 10, (h, l_)


def test_a_replica_answering_503_is_ejected_then_readmitted(mock, tmp_path):
    good = mock
    with mock_upstream("--fail-rate", "1", "--fail-status", "503") as bad:
        path = pool_config(tmp_path, [{"endpoint": f"{bad.url}/v1", "name": "bad"},
                                      {"endpoint": f"{good.url}/v1", "name": "good"}],
                           outlier={"consecutive_failures": 3, "base_ejection_ms": 4000})
        with router(path) as proc, httpx.Client(timeout=30) as client:
            assert metric(proc, "vsr_backend_up", "bad") == 1
            # Round robin puts bad first every other request; good answers each one it fails.
            for _ in range(6):
                r = post(client, proc)
                assert r.status_code == 200 and r.headers["x-vsr-response-path"] in ("upstream", "fallback")
            assert stats(bad)["failures_injected"] == 3
            assert metric(proc, "vsr_backend_ejections_total", "bad") == 1
            assert metric(proc, "vsr_backend_up", "bad") == 0
            for _ in range(10):
                assert post(client, proc).status_code == 200
            # Still the same ejection and still out: it saw none of those ten.
            assert metric(proc, "vsr_backend_ejections_total", "bad") == 1 and metric(proc, "vsr_backend_up", "bad") == 0
            assert stats(bad)["requests"] == 3
            httpx.post(f"{bad.url}/_mock/config", json={"fail_rate": 0}).raise_for_status()

            def readmitted() -> bool:
                assert post(client, proc).status_code == 200
                return stats(bad)["completed"] > 0

            wait_for_value(readmitted, "the recovered replica to get traffic again", timeout=30)
            assert metric(proc, "vsr_backend_up", "bad") == 1
            assert httpx.get(f"{proc.url}/ready").status_code == 200


@pytest.fixture(scope="module")
def lone(mock, tmp_path_factory):
    """A router whose model is one backend (the module's mock), with the default upstream settings:
    (router, mock)."""
    with router(pool_config(tmp_path_factory.mktemp("lone"), [{"endpoint": f"{mock.url}/v1"}])) as proc:
        yield proc, mock


@contextmanager
def first_fails(mock, **settings) -> Iterator[None]:
    """The mock's next request fails as ``settings`` say, its counters zeroed; its defaults back afterwards."""
    httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 1, **settings}).raise_for_status()
    httpx.post(f"{mock.url}/_mock/reset").raise_for_status()
    try:
        yield
    finally:
        httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 0, "fail_status": 500, "fail_mode": "status",
                                                     "retry_after": None}).raise_for_status()


@pytest.mark.parametrize("status", [503, 429])
def test_retry_after_is_honoured_before_the_retry(lone, status):
    proc, mock = lone
    with first_fails(mock, fail_status=status, retry_after="1"), httpx.Client(timeout=30) as client:
        r = post(client, proc)
        assert r.status_code == 200, r.text
        arrivals = stats(mock)["arrivals"]
        assert len(arrivals) == 2
        # The retry came after the delay the backend asked for (a lower bound the router guarantees).
        assert arrivals[1] - arrivals[0] >= 1.0


def test_a_retry_after_past_the_bound_is_not_waited_for(lone):
    proc, mock = lone
    with first_fails(mock, fail_status=503, retry_after="120"), httpx.Client(timeout=30) as client:
        r = post(client, proc)
        assert r.status_code in (502, 503) and stats(mock)["requests"] == 1
        assert post(client, proc).status_code == 200    # the next request is not held back either


def test_no_retry_after_the_first_byte(lone):
    proc, mock = lone
    with first_fails(mock, fail_mode="midstream"), httpx.Client(timeout=30) as client:
        r = post(client, proc, stream=True)
        assert r.status_code == 200 and '"error"' in r.text
        assert stats(mock)["requests"] == 1


def test_one_entrypoint_without_a_live_backend_leaves_the_router_ready(mock, tmp_path):
    """Readiness says whether this process can serve: one provider's outage behind one entrypoint is reported,
    not a reason for a load balancer to take every healthy route out with it."""
    port = refused_port()
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
                  {"name": "gone", "backend_refs": [{"endpoint": f"http://127.0.0.1:{port}/v1", "name": "dead"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["recipes"].append({"name": "other", "decisions": [{"name": "o", "modelRefs": [{"model": "gone"}]}]})
    doc["entrypoints"].append({"api": "chat", "model_names": ["vsr/other"], "recipe": "other"})
    doc["global"] = {"router": {"upstream": {"outlier": {"consecutive_failures": 1, "base_ejection_ms": 60_000},
                                             "retries": {"max_retries": 0}}}}
    with router(write_config(doc, str(tmp_path))) as proc, httpx.Client(timeout=30) as client:
        r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/other", "messages": CHAT})
        assert r.status_code == 502
        ready = client.get(f"{proc.url}/ready")
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "ready" and ready.json()["no_live_backend"] == ["vsr/other"]
        r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200


def test_every_entrypoint_down_leaves_the_router_ready_while_a_model_named_directly_serves(mock, tmp_path):
    """Trial 36: with every backend behind the entrypoints ejected, /ready answered 503 though a model named
    directly still served, so a readiness probe took every replica out of rotation, working traffic with it.
    Not ready only when nothing at all can be served: no model has a backend in the rotation."""
    working = mock
    with mock_upstream() as other:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"http://127.0.0.1:{refused_port()}/v1", "name": "dead"}]},
                      {"name": "gpt-agent", "backend_refs": [{"endpoint": f"{working.url}/v1", "name": "agent"}]},
                      {"name": "spare", "backend_refs": [{"endpoint": f"{other.url}/v1", "name": "spare"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"upstream": {"outlier": {"consecutive_failures": 1, "base_ejection_ms": 60_000},
                                                 "retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path))) as proc, httpx.Client(timeout=30) as client:
            assert post(client, proc, model="vsr/auto").status_code == 502
            assert metric(proc, "vsr_backend_up", "dead") == 0
            ready = client.get(f"{proc.url}/ready")
            assert ready.status_code == 200, ready.text
            assert ready.json()["no_live_backend"] == ["vsr/auto"]
            r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "gpt-agent", "messages": CHAT})
            assert r.status_code == 200
            # Every model's backends out (the last two ejected by 503s): nothing can be served, not ready.
            for mock_, name in ((working, "gpt-agent"), (other, "spare")):
                httpx.post(f"{mock_.url}/_mock/config", json={"fail_rate": 1, "fail_status": 503}).raise_for_status()
                try:
                    assert client.post(f"{proc.url}/v1/chat/completions",
                                       json={"model": name, "messages": CHAT}).status_code == 503
                finally:
                    httpx.post(f"{mock_.url}/_mock/config", json={"fail_rate": 0, "fail_status": 500}).raise_for_status()
                if name == "gpt-agent":
                    assert client.get(f"{proc.url}/ready").status_code == 200, "spare still serves"
            assert client.get(f"{proc.url}/ready").status_code == 200
            ready = client.get(f"{proc.url}/ready?upstreams=1")
            assert ready.status_code == 503 and ready.json()["status"] == "no_live_backend", ready.text


def test_a_refused_connection_is_retried_and_ready_follows_the_backends(tmp_path):
    port = refused_port()
    path = pool_config(tmp_path, [{"endpoint": f"http://127.0.0.1:{port}/v1", "name": "dead"}],
                       outlier={"consecutive_failures": 3, "base_ejection_ms": 60_000},
                       retries={"max_retries": 2, "backoff_base_ms": 1})
    with router(path) as proc, httpx.Client(timeout=30) as client:
        assert httpx.get(f"{proc.url}/ready").status_code == 200
        r = post(client, proc)
        assert r.status_code == 502
        # Three attempts (one and two retries) on connection refused, then ejected: not ready.
        assert metric(proc, "vsr_backend_ejections_total", "dead") == 1
        # Trial 88: readiness is the router's own (config loaded, listening, not draining): a provider outage
        # must not pull every replica out of the Service at once. Upstream health is asked for by name.
        ready = httpx.get(f"{proc.url}/ready")
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "ready" and ready.json()["no_live_backend"] == ["vsr/auto"]
        ready = httpx.get(f"{proc.url}/ready", params={"upstreams": "1"})
        assert ready.status_code == 503 and ready.json() == {"status": "no_live_backend", "entrypoints": ["vsr/auto"]}
        attempts = httpx.get(f"{proc.url}/metrics").text
        assert re.search(r'vsr_upstream_attempts_total\{model="m",backend="dead",outcome="connect_refused"\} 3', attempts)


def _by_label(text: str, name: str, label: str) -> dict[str, float]:
    return {value: float(n) for value, n in
            re.findall(rf'^{name}\{{model="m",backend="b"\,{label}="([^"]+)"\}} (\S+)$', text, re.M)}


def test_attempts_and_errors_count_the_same_events_in_one_vocabulary(mock, tmp_path):
    """Trial 88: vsr_upstream_attempts_total{outcome} said http_500, upstream_timeout and upstream_failed where
    vsr_upstream_errors_total{cause} said status_5xx, read_timeout and connection_closed for the same events,
    and a stream that broke mid-way was counted an attempt with outcome="ok"."""
    zeroed(mock)
    path = pool_config(tmp_path, [{"endpoint": f"{mock.url}/v1", "name": "b"}], retries={"max_retries": 0})
    with router(path) as proc, httpx.Client(timeout=30) as client:
        with first_fails(mock, fail_mode="midstream"):
            r = post(client, proc, stream=True)
            assert r.status_code == 200 and '"error"' in r.text
        with first_fails(mock, fail_status=500):
            assert post(client, proc).status_code == 500
        assert post(client, proc, stream=True).status_code == 200
        text = httpx.get(f"{proc.url}/metrics").text
        attempts = _by_label(text, "vsr_upstream_attempts_total", "outcome")
        errors = _by_label(text, "vsr_upstream_errors_total", "cause")
        assert set(errors) == {"status_5xx", "midstream_connection_closed"}, errors
        assert attempts == {"ok": 1, **errors}, attempts


def fallback_config(tmp_path, first: dict, second: dict, **upstream) -> str:
    doc = config([{"name": "first", "backend_refs": [{"name": "b1", **first}]},
                  {"name": "second", "backend_refs": [{"name": "b2", **second}]}],
                 [{"name": "d", "modelRefs": [{"model": "first"}, {"model": "second"}]}])
    doc["global"] = {"router": {"upstream": upstream}}
    return write_config(doc, str(tmp_path))


@pytest.mark.parametrize("stream", [False, True])
def test_an_ejected_lone_backend_waits_behind_the_next_models_until_its_time_is_up(mock, tmp_path, stream):
    # Trial 5: a model's only backend, ejected for stalling past its read timeout, was still tried first
    # on every request, so each one waited out the timeout before the fallback model answered.
    good = mock
    with mock_upstream("--latency-ms", "5000") as stalled:
        path = fallback_config(tmp_path, {"endpoint": f"{stalled.url}/v1", "read_timeout_ms": 400},
                               {"endpoint": f"{good.url}/v1"},
                               outlier={"consecutive_failures": 2, "base_ejection_ms": 5000})
        with router(path) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0, timeout=30)

            def ask() -> tuple[str, float]:
                started = time.monotonic()
                if stream:
                    with client.chat.completions.with_streaming_response.create(
                            model="vsr/auto", messages=CHAT, stream=True) as r:
                        r.read()
                        served = r.headers["x-vsr-selected-model"]
                else:
                    r = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT)
                    served = r.headers["x-vsr-selected-model"]
                return served, time.monotonic() - started

            assert [ask()[0] for _ in range(2)] == ["second", "second"]
            assert stats(stalled)["requests"] == 2
            assert metric(proc, "vsr_backend_up", "b1", "first") == 0
            ejected_at = time.monotonic()
            answers = [ask() for _ in range(5)]
            # Nothing reached the ejected backend, and no answer waited for its read timeout.
            assert stats(stalled)["requests"] == 2
            assert all(served == "second" and took < 0.4 for served, took in answers), answers
            assert time.monotonic() - ejected_at < 5, "the ejection ran out before the check"
            # Once base_ejection_ms is over it is the first choice again.
            time.sleep(max(0.0, ejected_at + 5.2 - time.monotonic()))
            assert ask()[0] == "second" and stats(stalled)["requests"] == 3


def test_with_every_backend_ejected_they_are_still_tried(tmp_path):
    # Envoy's panic threshold: ejection orders the backends, it never fails a request on its own.
    with mock_upstream("--fail-rate", "1", "--fail-status", "500") as bad, \
            mock_upstream("--fail-rate", "1", "--fail-status", "500") as recovering:
        path = fallback_config(tmp_path, {"endpoint": f"{bad.url}/v1"}, {"endpoint": f"{recovering.url}/v1"},
                               outlier={"consecutive_failures": 1, "base_ejection_ms": 60_000})
        with router(path) as proc, httpx.Client(timeout=30) as client:
            assert client.post(f"{proc.url}/v1/chat/completions",
                               json={"model": "vsr/auto", "messages": CHAT}).status_code == 500    # the last's
            assert metric(proc, "vsr_backend_up", "b1", "first") == metric(proc, "vsr_backend_up", "b2", "second") == 0
            httpx.post(f"{recovering.url}/_mock/config", json={"fail_rate": 0}).raise_for_status()
            r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
            assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "second"
            assert stats(bad)["requests"] == 2 and stats(recovering)["requests"] == 2

