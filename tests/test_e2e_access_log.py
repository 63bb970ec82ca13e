"""The access log: one structured line per inference request, JSON or logfmt, with the route and the cause."""
from __future__ import annotations

import hashlib
import json
import re

import httpx
import openai

from vsr_fast.server.access_log import logfmt

from .procs import config, free_port, router, wait_for_value, wait_until, write_config


def _config(tmp_path, endpoint: str, **access) -> str:
    doc = config([{"name": "m", "backend_refs": [{"endpoint": endpoint, "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, **access},
                                "upstream": {"retries": {"max_retries": 0}}}}
    return write_config(doc, str(tmp_path))


def test_one_json_line_per_request_with_route_tokens_and_cause(tmp_path, mock):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    path = _config(tmp_path, f"{mock.url}/v1")
    with router(path) as proc:
        for i in range(3):
            r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-request-id": f"req-{i}"}, timeout=20,
                           json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}],
                                 **({"stream": True, "stream_options": {"include_usage": True}} if i == 2 else {})})
            assert r.status_code == 200
        bad = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": []})
        assert bad.status_code == 400

        def lines():
            found = [json.loads(line) for line in proc.lines if line.startswith("{")]
            return found if len(found) == 4 else None

        logged = wait_for_value(lines, "four access log lines")
        metrics = httpx.get(f"{proc.url}/metrics").text
    # The same usage feeds the metrics: two whole answers and the stream's usage chunk.
    out = re.search(r'^vsr_tokens_total\{model="m",direction="output"\} (\S+)$', metrics, re.M)
    assert out and float(out.group(1)) == sum(e["output_tokens"] for e in logged[:3])
    assert re.search(r'^vsr_time_to_first_byte_seconds_count\{api="chat",model="m"\} 3$', metrics, re.M)
    assert [e.get("request_id") for e in logged[:3]] == ["req-0", "req-1", "req-2"]
    first = logged[0]
    assert (first["api"], first["recipe"], first["decision"], first["model"], first["status"], first["path"]) == \
        ("chat", "default", "d", "m", 200, "upstream")
    assert first["input_tokens"] > 0 and first["output_tokens"] > 0
    assert 0 < first["ttfb_s"] <= first["latency_s"] and first["time"].endswith("Z")
    assert logged[2]["output_tokens"] > 0 and logged[2]["status"] == 200     # read from the stream's usage
    assert 0 < logged[2]["ttfb_s"] <= logged[2]["latency_s"]
    assert logged[3]["status"] == 400 and logged[3]["error"] == "empty_array"

    # A dead backend: the cause (connection refused) is in the line.
    with router(_config(tmp_path, dead, format="logfmt", level="errors")) as proc:
        for _ in range(2):
            ok = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                            json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
            assert ok.status_code == 502
        line = wait_for_value(lambda: [x for x in proc.lines if x.startswith("time=")][1:2], "two logfmt lines")[0]
    assert "status=502" in line and "error=upstream_failed" in line and "ConnectError" in line


def test_logfmt_quotes_what_needs_it():
    assert logfmt({"a": "x y", "b": 3, "c": None, "d": 'q"', "e": 0.25}) == 'a="x y" b=3 d="q\\"" e=0.25'


def test_each_line_names_the_caller_by_key_id_never_by_key(tmp_path, mock):
    team_key, bare_key = "vsk-team-" + "t" * 32, "vsk-bare-" + "b" * 32
    keys = [{"id": "alice-key", "sha256": hashlib.sha256(team_key.encode()).hexdigest(), "user": "alice",
             "team": "web", "tenant": "tenA"},
            {"id": "bare", "sha256": hashlib.sha256(bare_key.encode()).hexdigest()}]
    log = tmp_path / "access.log"
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1", "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "path": str(log)},
                                "auth": {"enabled": True, "keys": keys}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        for key in (team_key, bare_key):
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=key, max_retries=0)
            client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "hi"}])
        wait_until(lambda: len(log.read_text().splitlines()) == 2, "two access log lines in the file")
    text = log.read_text()
    first, second = (json.loads(line) for line in text.splitlines())
    assert (first["key_id"], first["user"], first["team"], first["tenant"]) == ("alice-key", "alice", "web", "tenA")
    # A key naming no user is its own user; no team or tenant: left out of the line.
    assert (second["key_id"], second["user"]) == ("bare", "bare") and "team" not in second and "tenant" not in second
    for secret in (team_key, bare_key):
        assert secret not in text and hashlib.sha256(secret.encode()).hexdigest() not in text
