"""A backend's 401, 403, 404 or 408 may be that backend failing (LiteLLM's reading: the router's own credential
revoked, the model missing on that deployment, a timeout): the next backend is tried, then the next model. Only a
401 (the router's own key refused) counts against the backend's health as a 5xx does: a request's content can make
a backend answer 403, 404 or 408, and one client must not eject a backend for everyone. A delegated backend's
4xx is the client's own answer, relayed, never another backend on the router's key; a 400/413/422 is the
request's fault, never retried. Over real processes: the router, the bench mock upstreams as its backends."""
from __future__ import annotations

import json
import re

import httpx
import pytest

from .procs import config, mock_upstream, refused_port, router, wait_for_value, write_config

CHAT = [{"role": "user", "content": "Say hello"}]
FAULTS = (401, 403, 404, 408)


@pytest.fixture(scope="module")
def bad():
    """Four mock upstreams, failing every request with what each test sets (``failing``)."""
    procs = [mock_upstream() for _ in range(4)]
    for p in procs:
        p.__enter__()
    try:
        yield procs
    finally:
        for p in procs:
            p.__exit__(None, None, None)


def failing(mock, status: int):
    httpx.post(f"{mock.url}/_mock/config", json={"fail_rate": 1, "fail_status": status}).raise_for_status()
    httpx.post(f"{mock.url}/_mock/reset").raise_for_status()
    return mock


def requests_seen(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


def metric(proc, name: str, model: str, backend: str, extra: str = "") -> float | None:
    text = httpx.get(f"{proc.url}/metrics").text
    found = re.search(rf'^{name}\{{model="{model}",backend="{backend}"{extra}\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


# Every attempt once; a backend out after two failures in a row, for longer than any test.
ROUTER = {"access_log": {"enabled": True},
          "upstream": {"retries": {"max_retries": 0},
                       "outlier": {"consecutive_failures": 2, "base_ejection_ms": 60_000}}}


def routed(tmp_path, models: list[dict], refs: list[str], **global_) -> str:
    doc = config(models, [{"name": "d", "modelRefs": [{"model": m} for m in refs]}])
    doc["global"] = {"router": ROUTER, **global_}
    return write_config(doc, str(tmp_path))


def ask(client: httpx.Client, proc, model: str, stream: bool = False, **headers) -> httpx.Response:
    return client.post(f"{proc.url}/v1/chat/completions", headers=headers,
                       json={"model": model, "messages": CHAT, "stream": stream})


def access_lines(proc, count: int, since: int = 0) -> list[dict]:
    """The access log lines among the router's stderr lines after the first ``since``, once there are ``count``."""
    def found():
        lines = [json.loads(x) for x in proc.lines[since:] if x.startswith("{")]
        return lines if len(lines) >= count else None
    return wait_for_value(found, f"{count} access log lines")


OWN_FAULTS = (400, 413, 422)


@pytest.fixture(scope="module")
def shared(mock, bad, tmp_path_factory):
    """One router for the tests below but the delegated one, each case on models of its own (a backend's health
    and round robin are its model's), named in each test; a case's decision in a recipe of its own, reached by
    the model name ``vsr/<recipe>``. ``claude-sonnet`` (``mock``, backend ``well``) is every fallback."""
    def named(model: str, *backends: tuple[str, str]) -> dict:
        return {"name": model, "backend_refs": [{"endpoint": f"{url}/v1", "name": n} for n, url in backends]}

    gone = f"http://127.0.0.1:{refused_port()}"
    models = [*(named(f"gpt-4o-{s}", ("sick", bad[0].url), ("well", mock.url)) for s in FAULTS),
              *(named(f"own-{s}", ("b", bad[0].url)) for s in OWN_FAULTS),
              *(named(f"all-{k}", *((f"s{s}", m.url) for m, s in zip(bad, FAULTS))) for k in ("whole", "stream")),
              named("gone-model", ("gone", gone)), named("nf-model", ("nf", bad[0].url)),
              named("claude-sonnet", ("well", mock.url))]
    recipes = {**{f"own-{s}": [f"own-{s}", "claude-sonnet"] for s in OWN_FAULTS},
               **{f"all-{k}": [f"all-{k}", "claude-sonnet"] for k in ("whole", "stream")},
               "last": ["gone-model", "nf-model"]}
    doc = config(models, [{"name": "d", "modelRefs": [{"model": "claude-sonnet"}]}])
    doc["recipes"] += [{"name": name, "decisions": [{"name": "d", "modelRefs": [{"model": m} for m in refs]}]}
                       for name, refs in recipes.items()]
    doc["entrypoints"] += [{"api": "chat", "model_names": [f"vsr/{name}"], "recipe": name} for name in recipes]
    doc["global"] = {"router": ROUTER}
    with router(write_config(doc, str(tmp_path_factory.mktemp("shared")))) as proc:
        yield proc


@pytest.mark.parametrize("status", FAULTS)
def test_a_backend_answering_a_fault_status_is_skipped_and_counted_and_only_a_401_ejects(shared, mock, bad, status):
    # ``mock`` (conftest's) answers well; ``bad`` fail as each test sets them.
    sick, proc, name = failing(bad[0], status), shared, f"gpt-4o-{status}"
    with httpx.Client(timeout=30) as client:
        # Round robin puts the sick backend first every other request: the other one answers each it fails.
        for n in range(4):
            r = ask(client, proc, name, stream=bool(n % 2))
            assert r.status_code == 200, r.text
            assert r.headers["x-vsr-selected-model"] == name
        tried = requests_seen(sick)
        assert tried == 2
        ejected = status == 401
        assert metric(proc, "vsr_backend_up", name, "sick") == (0 if ejected else 1)
        assert (metric(proc, "vsr_backend_ejections_total", name, "sick") or 0) == (1 if ejected else 0)
        assert metric(proc, "vsr_upstream_errors_total", name, "sick", ',cause="status_4xx"') == tried
        for _ in range(3):
            assert ask(client, proc, name).status_code == 200
        if ejected:
            assert requests_seen(sick) == tried, "an ejected backend waits behind its live peer"
        else:
            assert requests_seen(sick) > tried, "a backend a request's content can fail stays in the rotation"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_every_backend_of_a_model_failing_so_falls_back_to_the_next_model(shared, bad, stream):
    sick, proc, before = [failing(m, s) for m, s in zip(bad, FAULTS)], shared, len(shared.lines)
    with httpx.Client(timeout=30) as client:
        r = ask(client, proc, f"vsr/all-{'stream' if stream else 'whole'}", stream=stream)
        assert r.status_code == 200, r.text
        assert r.headers["x-vsr-selected-model"] == "claude-sonnet"
        assert r.headers["x-vsr-response-path"] == "fallback"
        assert [requests_seen(m) for m in sick] == [1, 1, 1, 1]
        # Trial 88: the line named only the backend that answered; how many were tried, and which failed, too.
        [line] = access_lines(proc, 1, before)
    assert (line["backend"], line["attempts"]) == ("well", 5), line
    assert sorted(line["failed_backends"].split(",")) == [f"s{s}" for s in FAULTS], line


def test_when_every_attempt_fails_the_last_answer_reaches_the_client_and_the_log_names_each(shared, bad):
    failing(bad[0], 404)
    proc, before = shared, len(shared.lines)
    with httpx.Client(timeout=30) as client:
        r = ask(client, proc, "vsr/last")
        assert r.status_code == 404, r.text
        message = r.json()["error"]["message"]
        assert "gone-model: connect_refused" in message and "nf-model: HTTP 404" in message, message
        [line] = access_lines(proc, 1, before)
    assert (line["status"], line["error"], line["cause"], line["backend"]) == (404, "upstream_failed", "status_4xx",
                                                                                "nf"), line
    # Each attempt's backend and cause, not only its error code.
    assert "gone (gone-model): connect_refused" in line["message"], line
    assert "nf (nf-model): HTTP 404 status_4xx" in line["message"], line
    assert (line["attempts"], line["failed_backends"]) == (2, "gone,nf"), line


@pytest.mark.parametrize("status", OWN_FAULTS)
def test_the_requests_own_fault_is_relayed_at_once_and_logged(shared, mock, bad, status):
    wrong, proc = failing(bad[0], status), shared
    httpx.post(f"{mock.url}/_mock/reset").raise_for_status()
    before = len(proc.lines)
    with httpx.Client(timeout=30) as client:
        for _ in range(3):
            assert ask(client, proc, f"vsr/own-{status}").status_code == status
        assert requests_seen(wrong) == 3 and requests_seen(mock) == 0
        assert metric(proc, "vsr_backend_up", f"own-{status}", "b") == 1
        line = access_lines(proc, 3, before)[0]
    assert (line["status"], line["cause"], line["backend"]) == (status, "status_4xx", "b"), line
    assert line["error"] and f"backend b answered HTTP {status}" in line["message"], line


def test_a_delegated_backends_4xx_are_the_clients_answer(tmp_path, mock, bad):
    """The client's own credential refused, or its own access to the model (OpenAI's 404 "does not exist or you do
    not have access"): relayed, no other backend or model tried with the router's key, no ejection."""
    first, second = failing(bad[0], 401), failing(bad[1], 401)
    delegated = {"auth": {"credential": "delegated"}}
    path = routed(tmp_path, [{"name": "for-user", "backend_refs": [
        {"endpoint": f"{first.url}/v1", "name": "u1", **delegated},
        {"endpoint": f"{second.url}/v1", "name": "u2", **delegated}]},
        # A model on the router's own key after it: never reached with a delegated answer.
        {"name": "shared", "backend_refs": [{"endpoint": f"{mock.url}/v1", "name": "well"}]}], ["for-user", "shared"],
        services={"authz": {"delegated_credential": {"enabled": True}}})
    httpx.post(f"{mock.url}/_mock/reset").raise_for_status()
    own = {"x-vsr-delegated-credential": "the-users-own-key"}
    with router(path) as proc, httpx.Client(timeout=30) as client:
        statuses = [ask(client, proc, "vsr/auto", stream=bool(n % 2), **own).status_code for n in range(4)]
        for m in (first, second):
            failing(m, 403)
        statuses += [ask(client, proc, "vsr/auto", **own).status_code for _ in range(2)]
        assert statuses == [401] * 4 + [403] * 2
        assert requests_seen(first) + requests_seen(second) == 2, "one attempt per request"
        assert metric(proc, "vsr_backend_up", "for-user", "u1") == metric(proc, "vsr_backend_up", "for-user", "u2") == 1
        line = access_lines(proc, 6)[-1]
        assert (line["status"], line["cause"]) == (403, "status_4xx") and line["backend"] in ("u1", "u2"), line
        for status in (404, 408):
            for m in (first, second):
                failing(m, status)
            assert ask(client, proc, "vsr/auto", **own).status_code == status
            assert requests_seen(first) + requests_seen(second) == 1, "one attempt"
        assert requests_seen(mock) == 0, "the router's own key never answers for a delegated refusal"
        assert metric(proc, "vsr_backend_up", "for-user", "u1") == metric(proc, "vsr_backend_up", "for-user", "u2") == 1
