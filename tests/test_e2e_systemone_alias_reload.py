"""End to end: a reload that adds a System One native alias served by its own backend_refs (a remote the router
did not start) says so: ``restart_required`` in the admin answer and in /ready names it, and after a restart the
alias answers. The fake System One API (bench.fake_systemone) is the remote."""
from __future__ import annotations

import os

import httpx
import yaml

from .procs import config, router, write_config

QUESTION = {"model": "router-s1", "state": {"request": "What is the integral of x squared?"},
            "questions": {"preset:domain": {"type": "choice", "criteria": {"math": "", "other": ""}}}}


def _doc(mock, fake, alias: bool) -> dict:
    doc = config([{"name": "chat-model", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "all", "modelRefs": [{"model": "chat-model"}]}])
    if alias:
        doc["providers"]["models"].append({"name": "s1-remote", "api_format": "systemone",
                                           "provider_model_id": "fake-deployed",
                                           "backend_refs": [{"endpoint": f"{fake.url}/v1/systemone"}]})
        doc["recipes"].append({"name": "native", "decisions": [{"name": "to_s1", "modelRefs": [{"model": "s1-remote"}]}]})
        doc["entrypoints"].append({"api": "systemone", "model_names": ["router-s1"], "recipe": "native"})
    return doc


def _write(path: str, doc: dict) -> None:
    with open(path + ".new", "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(path + ".new", path)


def test_a_reload_adding_a_remote_alias_lists_it_until_a_restart(mock, fake, tmp_path):
    path = write_config(_doc(mock, fake, alias=False), str(tmp_path))
    with router(path) as proc:
        _write(path, _doc(mock, fake, alias=True))
        r = httpx.post(f"{proc.url}/admin/reload", timeout=60)
        assert r.status_code == 200, r.text
        later = r.json()["restart_required"]
        assert later == ["providers.models[s1-remote].backend_refs: System One alias 's1-remote' opens at start"]
        assert httpx.get(f"{proc.url}/ready").json()["restart_required"] == later
        # Until the restart the alias has no running deployment: the client is told so, the router keeps serving.
        assert httpx.post(f"{proc.url}/v1/systemone", json=QUESTION, timeout=20).status_code == 502
    with router(path) as proc:       # the restart: the alias runs and answers
        r = httpx.post(f"{proc.url}/v1/systemone", json=QUESTION, timeout=20)
        assert r.status_code == 200, r.text
        assert "restart_required" not in httpx.get(f"{proc.url}/ready").json()
