"""``vsr-replay`` on real traffic of every client API, from a real router's embedded journal.

- A router with body capture records Chat, Messages and Responses requests with their client
  API and the body as received; ``vsr-replay run`` re-routes every one of them under a changed
  keyword rule and shows exactly the moves the change makes.
- The quickstart (no ``event_stream.path``, no capture): ``export``, ``run`` and ``diff`` all
  work from ``--from-config config/quickstart.yaml``; ``run`` counts each skipped request by
  reason, and ``--fail-on-change`` fails when nothing could be compared.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from bench._procs import Proc
from replay.cli import main as replay_main
from .procs import ROOT, model, run_main

TEXTS = {"chat": "how do I write rust macros", "messages": "a rust borrow checker question",
         "responses": "rust lifetimes explained"}


def keyword_config(mock_url: str, code_keywords: list[str], events_path: str) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [model(m, f"{mock_url}/v1") for m in ("code-model", "general-model")]},
        "recipes": [{
            "name": "default",
            "signals": {"keywords": [{"name": "code", "keywords": code_keywords}]},
            "decisions": [
                {"name": "code", "priority": 20, "modelRefs": [{"model": "code-model"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "code"}]}},
                {"name": "general", "priority": 0, "modelRefs": [{"model": "general-model"}]},
            ],
        }],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {"plugins": [{"type": "router_replay", "configuration": {"capture_request_body": True}}],
                   "stores": {"event_stream": {"backend": "embedded", "path": events_path}}},
    }


def vsr_replay(*args: str, state_dir: str | None = None) -> subprocess.CompletedProcess:
    """``vsr-replay ARGS``: its main() in this process (a process costs a second of imports; test_replay_cli runs
    the installed command), with ``$VSR_STATE_DIR`` set to ``state_dir`` for the call."""
    before = os.environ.get("VSR_STATE_DIR")
    if state_dir:
        os.environ["VSR_STATE_DIR"] = state_dir
    try:
        return run_main(replay_main, args, "vsr-replay", thread=True)
    finally:
        if before is None:
            os.environ.pop("VSR_STATE_DIR", None)
        else:
            os.environ["VSR_STATE_DIR"] = before


def send_one_of_each(url: str) -> None:
    for api, text in TEXTS.items():
        if api == "chat":
            r = httpx.post(f"{url}/v1/chat/completions", json={
                "model": "vsr/auto", "messages": [{"role": "user", "content": text}]}, timeout=30)
        elif api == "messages":
            r = httpx.post(f"{url}/v1/messages", json={
                "model": "vsr/auto", "max_tokens": 16, "system": "be brief",
                "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}, timeout=30)
        else:
            r = httpx.post(f"{url}/v1/responses", json={"model": "vsr/auto", "input": text, "stream": True},
                           timeout=30)
        assert r.status_code == 200, (api, r.text)


def _bytes(value: str) -> bytes:
    """A body field of an exported event: msgspec writes bytes as base64 in JSON."""
    return base64.b64decode(value)


def exported(path: Path) -> list[dict]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines() if line.strip()]


def wait_for_export(args: list[str], out: Path, n_answers: int, state_dir: str | None = None) -> list[dict]:
    """Export until the router's writer has appended every request's answer (poll, with a deadline)."""
    deadline = time.monotonic() + 30
    while True:
        done = vsr_replay("export", *args, "-o", str(out), state_dir=state_dir)
        assert done.returncode == 0, done.stderr
        events = exported(out)
        if sum(1 for e in events if e["kind"] == "answer_completed") >= n_answers or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


@pytest.fixture
def recorded(mock, tmp_path):
    """A router with capture on, after one request of each client API; its configs, before and after."""
    events_path = str(tmp_path / "events")
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(keyword_config(mock.url, ["rust"], events_path)))
    new.write_text(yaml.safe_dump(keyword_config(mock.url, ["python"], events_path)))
    with Proc(["-m", "vsr_fast", "serve", "--config", str(old), "--host", "127.0.0.1", "--port", "0"],
              "vsr-fast: serving on") as proc:
        send_one_of_each(proc.url)
        events = wait_for_export(["--from-config", str(old)], tmp_path / "export.jsonl", 3)
    return old, new, events


def test_every_client_api_is_recorded_as_received_and_re_routed(recorded, tmp_path):
    old, new, events = recorded
    received = {e.get("api", "chat"): e for e in events if e["kind"] == "request_received"}   # defaults omitted
    assert set(received) == {"chat", "messages", "responses"}
    messages = received["messages"]
    body = json.loads(_bytes(messages["request"]))   # the body as the client sent it
    assert body["messages"][0]["content"][0]["text"] == TEXTS["messages"] and body["system"] == "be brief"
    assert (messages["model"], messages.get("stream", False)) == ("vsr/auto", False)
    assert received["responses"]["stream"] is True
    assert json.loads(_bytes(received["responses"]["request"]))["input"] == TEXTS["responses"]

    same = vsr_replay("run", "--config", str(old), "--from-config", str(old), "--json", "--fail-on-change")
    assert same.returncode == 0, same.stderr
    result = json.loads(same.stdout)
    assert (result["compared"], result["unchanged"], result["skipped"]) == (3, 3, {})

    moved = vsr_replay("run", "--config", str(new), "--from-config", str(old), "--json", "--fail-on-change")
    assert moved.returncode == 1
    result = json.loads(moved.stdout)
    assert (result["compared"], result["changed"]) == (3, 3)
    assert [(m["from"]["decision"], m["to"]["decision"], m["count"]) for m in result["moves"]] == [
        ("code", "general", 3)]


def test_from_config_reads_only_the_records_of_that_configuration(mock, tmp_path):
    """Two routers ran other configurations with the default journals (one per router under
    ``$VSR_STATE_DIR/events``): ``--from-config OLD.yaml`` compares only OLD.yaml's records and counts the
    others as ``other_config``, never as moves."""
    state = str(tmp_path / "state")
    configs, journals = [], set()
    for name, words in (("old", ["rust"]), ("other", ["python"])):
        doc = keyword_config(mock.url, words, "")
        del doc["global"]["stores"]
        configs.append(tmp_path / f"{name}.yaml")
        configs[-1].write_text(yaml.safe_dump(doc))
        with Proc(["-m", "vsr_fast", "serve", "--config", str(configs[-1]), "--host", "127.0.0.1", "--port", "0"],
                  "vsr-fast: serving on", env={"VSR_STATE_DIR": state}) as proc:
            send_one_of_each(proc.url)
            (journal,) = set(Path(state, "events").iterdir()) - journals     # this router's own
            journals.add(journal)
            wait_for_export(["--journal", str(journal)], tmp_path / f"{name}.jsonl", 3)
    old = str(configs[0])
    run = vsr_replay("run", "--config", old, "--from-config", old, "--json", "--fail-on-change", state_dir=state)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout)
    assert (result["compared"], result["unchanged"], result["skipped"]) == (3, 3, {"other_config": 3})
    shown = vsr_replay("run", "--config", old, "--from-config", old, state_dir=state)
    assert "skipped    3 (other config)" in shown.stdout, shown.stdout


def test_every_command_works_on_the_quickstarts_embedded_journal(mock, tmp_path):
    doc = yaml.safe_load((ROOT / "config" / "quickstart.yaml").read_text())
    for m in doc["providers"]["models"]:
        m["backend_refs"] = [{**ref, "endpoint": f"{mock.url}/v1"} for ref in m["backend_refs"]]
    quickstart = tmp_path / "quickstart.yaml"
    quickstart.write_text(yaml.safe_dump(doc))
    state = str(tmp_path / "state")
    with Proc(["-m", "vsr_fast", "serve", "--config", str(quickstart), "--host", "127.0.0.1", "--port", "0"],
              "vsr-fast: serving on", env={"VSR_STATE_DIR": state}) as proc:
        send_one_of_each(proc.url)
        export = tmp_path / "export.jsonl"
        events = wait_for_export(["--from-config", str(quickstart)], export, 3, state_dir=state)
    apis = {e.get("api", "chat") for e in events if e["kind"] == "request_received"}
    assert apis == {"chat", "messages", "responses"}

    run = vsr_replay("run", "--config", str(quickstart), "--from-config", str(quickstart), state_dir=state)
    assert run.returncode == 0, run.stderr
    assert "compared   0" in run.stdout and "skipped    3 (no request copy)" in run.stdout
    # The quickstart captures no request body: the summary says which switch would have kept one.
    assert "set router_replay.capture_request_body" in run.stderr, run.stderr
    gate = vsr_replay("run", "--config", str(quickstart), "--from-config", str(quickstart), "--json",
                      "--fail-on-change", state_dir=state)
    assert gate.returncode == 1 and "nothing was compared" in gate.stderr
    assert json.loads(gate.stdout)["skipped"] == {"no_request_copy": 3}

    diff = vsr_replay("diff", str(export), str(export), "--json", "--fail-on-change")
    assert diff.returncode == 0, diff.stderr
    assert (json.loads(diff.stdout)["compared"], json.loads(diff.stdout)["changed"]) == (3, 0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not json\n")
    nothing = vsr_replay("diff", str(export), str(empty), "--json", "--fail-on-change")
    assert nothing.returncode == 1
    assert json.loads(nothing.stdout)["skipped"] == {"only_in_a": 3, "undecodable_line_in_b": 1}

    missing = vsr_replay("export", "--from-config", str(quickstart), state_dir=str(tmp_path / "elsewhere"))
    assert missing.returncode == 2 and "no embedded stream journal" in missing.stderr
    assert "Traceback" not in missing.stderr
