"""End to end: the routing preview of a System One body whose decision escalates lists the calls
``POST /v1/systemone`` makes: its ``escalate.stages`` in order (a native alias answered by a deployment has no
backend for health checks to eject, and the stages, not the modelRefs, are what it calls).

A real router, the fake System One API behind a hosted native alias, the scripted in-process model, a mock Chat
model as the judge.
"""
from __future__ import annotations

import httpx
import pytest

from .procs import router, write_config
from .test_e2e_systemone_escalate import DECISIONS, config, judge  # noqa: F401 - judge: a fixture

QUESTIONS = {"ok": {"type": "noul"}}


@pytest.fixture(scope="module")
def api(fake, judge, tmp_path_factory):  # noqa: F811
    with router(write_config(config(fake.url, judge.url, DECISIONS), str(tmp_path_factory.mktemp("pesc")))) as proc:
        yield proc


@pytest.mark.parametrize("word,calls", [("passes", ["hosted", "local-scripted"]),
                                        ("judged", ["hosted", "local-scripted", "judge-llm"])])
def test_the_preview_lists_the_stages_the_request_calls(api, fake, word, calls):
    httpx.post(f"{fake.url}/_fake/reset")
    body = {"model": "router-s1", "state": {"request": f"{word} please"}, "questions": QUESTIONS}
    r = httpx.post(f"{api.url}/api/v1/routing/preview", json=body, timeout=20)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert (doc["decision"], doc["response_path"], doc["model"]) == (word, "looper", "hosted"), doc
    assert doc["selection"]["calls"] == calls, doc["selection"]
    assert "moved" not in doc["selection"], doc["selection"]
    assert httpx.get(f"{fake.url}/_fake/calls").json()["calls"] == [], "the preview calls no model"
