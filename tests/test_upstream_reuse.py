"""A pooled upstream connection is lent to the next request only when nothing of the last answer is left on it,
and a request a kept-alive connection dropped unanswered is sent again on another: over real sockets, a router
process in front of hostile backends (``tests.hostile_upstream``)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from .procs import Proc, config, router, write_config

MODES = ("extra-answer", "trailing-crlf", "one-per-connection", "idle-close")


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    with Proc(["-m", "tests.hostile_upstream"], "listening") as hostile:
        models = [{"name": f"m-{mode}", "backend_refs": [{"endpoint": f"{hostile.url}/{mode}/v1"}]}
                  for mode in MODES]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "m-extra-answer"}]}])
        with router(write_config(doc, str(tmp_path_factory.mktemp("reuse")))) as proc:
            yield proc


def chat(edge, model: str, content: str = "hello") -> httpx.Response:
    return httpx.post(f"{edge.url}/v1/chat/completions", timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": content}]})


def said(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_an_answer_a_backend_sent_unasked_never_reaches_the_next_user(edge):
    # One request after another: each leases the same pooled connection, were it kept.
    for n in range(12):
        assert said(chat(edge, "m-extra-answer", f"user{n}")) == f"answer for user{n}"


def test_bytes_past_an_answers_length_close_its_connection_instead_of_failing_the_next_request(edge):
    for n in range(8):
        assert said(chat(edge, "m-trailing-crlf", f"user{n}")) == f"answer for user{n}"
    log = "\n".join(edge.lines)
    assert "past the end of its answer" in log


def test_a_request_a_reused_connection_dropped_unanswered_is_sent_again_on_a_new_one(edge):
    for _ in range(8):
        assert said(chat(edge, "m-one-per-connection")) == "fine"
    metrics = httpx.get(f"{edge.url}/metrics", timeout=10).text.splitlines()
    # Not the backend's failure: none counted against it.
    assert not [line for line in metrics if line.startswith('vsr_upstream_errors_total{model="m-one-per-connection"')]


def test_a_backend_closing_idle_kept_alive_connections_costs_no_request(edge):
    # Back to back: each request after the first goes out on the connection the backend is about to close.
    for _ in range(6):
        assert said(chat(edge, "m-idle-close")) == "fine"


def test_a_request_every_reused_connection_drops_is_sent_again_once_not_once_per_pooled_connection(tmp_path):
    # One pool of eight connections (pool_shards: 1). A request that kills the backend's worker (read, then its connection closed with nothing answered) looks,
    # on a kept-alive connection, like an idle close; resent on every pooled connection it would kill as many.
    with Proc(["-m", "tests.hostile_upstream"], "listening") as hostile:
        doc = config([{"name": "m-poison", "backend_refs": [{"endpoint": f"{hostile.url}/poison/v1",
                                                                 "pool_shards": 1, "max_connections": 8}]}],
                     [{"name": "only", "modelRefs": [{"model": "m-poison"}]}])
        with router(write_config(doc, str(tmp_path))) as proc:
            with ThreadPoolExecutor(4) as pool:     # four requests at once: four pooled connections
                assert [said(r) for r in pool.map(lambda _: chat(proc, "m-poison", "warm"), range(4))] == ["fine"] * 4
            r = chat(proc, "m-poison", "poison")
            assert r.status_code == 502, r.text
            sent = int(said(chat(proc, "m-poison", "count")))
    assert sent <= 2, f"the backend received the request {sent} times"
