"""Secrets a configuration names, across a reload (a real router, a mock upstream that records what it got):

- a key file rewritten (a rotated Kubernetes Secret) takes effect at SIGHUP, ``POST /admin/reload`` and, with
  ``config_watch`` on, by itself; the configuration version changes, and no log line shows the key;
- a reload's load warnings (``missing_credential``) are logged and returned in the POST answer;
- an active health check sends an Anthropic backend the headers its API requires (anthropic-version);
- a listener that serves the admin routes by loopback trust says so at load.
"""
from __future__ import annotations

import os
import signal

import httpx
import yaml

from .procs import config, mock_upstream, model, router, wait_for_value, wait_until, write_config

BODY = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


def _doc(endpoint: str, auth: dict, **router_block) -> dict:
    doc = config([model("m", endpoint, auth=auth)], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    if router_block:
        doc["global"] = {"router": router_block}
    return doc


def _rotate(path: str, key: str) -> None:
    """Write the key as kubelet updates a Secret volume: a new file renamed over the old one."""
    with open(path + ".new", "w") as f:
        f.write(key + "\n")
    os.replace(path + ".new", path)


def _sent_key(proc, mock) -> str | None:
    r = httpx.post(f"{proc.url}/v1/chat/completions", json=BODY, timeout=30)
    assert r.status_code == 200, r.text
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["headers"].get("authorization")


def test_a_reload_applies_a_rotated_key_file(tmp_path):
    key_file = str(tmp_path / "key")
    _rotate(key_file, "sk-v1")
    with mock_upstream() as mock:
        path = write_config(_doc(f"{mock.url}/v1", {"api_key_file": key_file}), str(tmp_path))
        with router(path) as proc:
            assert _sent_key(proc, mock) == "Bearer sk-v1"
            before = httpx.get(f"{proc.url}/ready").json()["config_version"]

            _rotate(key_file, "sk-v2")
            proc.signal(signal.SIGHUP)
            done = wait_for_value(lambda: [x for x in proc.lines if "reload done" in x], "SIGHUP's reload")
            assert "unchanged" not in done[0], done
            assert _sent_key(proc, mock) == "Bearer sk-v2"
            after = httpx.get(f"{proc.url}/ready").json()["config_version"]
            assert after != before, "the version covers the secrets the file names"

            _rotate(key_file, "sk-v3")
            r = httpx.post(f"{proc.url}/admin/reload", timeout=30)
            assert r.status_code == 200 and "unchanged" not in r.json()["message"], r.text
            assert _sent_key(proc, mock) == "Bearer sk-v3"

            # Nothing rotated: unchanged, as before.
            r = httpx.post(f"{proc.url}/admin/reload", timeout=30)
            assert "unchanged" in r.json()["message"], r.text
            assert not [x for x in proc.lines if "sk-v" in x], "no line shows a key"


def test_the_config_watch_notices_a_rotated_key_file(tmp_path):
    key_file = str(tmp_path / "key")
    _rotate(key_file, "sk-v1")
    with mock_upstream() as mock:
        doc = _doc(f"{mock.url}/v1", {"api_key_file": key_file}, config_watch={"enabled": True, "interval_ms": 100})
        path = write_config(doc, str(tmp_path))
        with router(path) as proc:
            assert _sent_key(proc, mock) == "Bearer sk-v1"
            _rotate(key_file, "sk-v2")
            wait_until(lambda: _sent_key(proc, mock) == "Bearer sk-v2", "the rotated key, with no signal")
            assert [x for x in proc.lines if "reload done (a secret file changed)" in x], proc.lines[-5:]


def test_a_reload_says_its_load_warnings(tmp_path):
    unset = "VSR_TEST_SURELY_UNSET_KEY"
    assert unset not in os.environ
    with mock_upstream() as mock:
        path = write_config(_doc(f"{mock.url}/v1", {"api_key": "sk-inline"}), str(tmp_path))
        with router(path) as proc:
            with open(path, "w") as f:
                yaml.safe_dump(_doc(f"{mock.url}/v1", {"api_key_env": unset}), f, sort_keys=False)
            r = httpx.post(f"{proc.url}/admin/reload", timeout=30)
            assert r.status_code == 200, r.text
            warned = [w for w in r.json()["warnings"] if "missing_credential" in w]
            assert warned and unset in warned[0], r.text
            wait_for_value(lambda: [x for x in proc.lines if "missing_credential" in x and "reload" in x],
                           "the warning in the log")

            # SIGHUP says the warnings of the file it loads too.
            with open(path, "w") as f:
                yaml.safe_dump(_doc(f"{mock.url}/v1", {"api_key_env": unset + "_2"}), f, sort_keys=False)
            proc.signal(signal.SIGHUP)
            wait_for_value(lambda: [x for x in proc.lines if f"{unset}_2 is not set" in x], "SIGHUP's warning")


def test_the_health_check_sends_an_anthropic_backend_its_headers(tmp_path):
    with mock_upstream() as mock:
        entry = {**model("m", f"{mock.url}/v1", auth={"api_key": "sk-ant"},
                         health_check={"enabled": True, "interval_ms": 100}), "api_format": "anthropic"}
        doc = config([entry], [{"name": "d", "modelRefs": [{"model": "m"}]}])
        path = write_config(doc, str(tmp_path))
        with router(path) as proc:
            assert proc.popen.poll() is None
            seen = wait_for_value(lambda: httpx.get(f"{mock.url}/_mock/stats").json()["last_models_headers"],
                                  "a health check")
            assert seen.get("x-api-key") == "sk-ant"
            assert seen.get("anthropic-version") == "2023-06-01", seen


def test_admin_routes_by_loopback_trust_are_a_load_warning(tmp_path):
    with mock_upstream() as mock:
        path = write_config(_doc(f"{mock.url}/v1", {"api_key": "sk-inline"}), str(tmp_path))
        with router(path) as proc:
            warned = [x for x in proc.lines if "admin_by_loopback" in x]
            assert warned and "127.0.0.6" in warned[0], proc.lines
        doc = _doc(f"{mock.url}/v1", {"api_key": "sk-inline"})
        doc["listeners"] = [{"name": "main", "role": "serving", "address": "127.0.0.1", "port": 0},
                            {"name": "ops", "role": "admin", "address": "127.0.0.1", "port": 0}]
        path = write_config(doc, str(tmp_path))
        with router(path) as proc:
            assert not [x for x in proc.lines if "admin_by_loopback" in x], proc.lines


def test_a_secret_read_at_start_that_changed_waits_for_a_restart():
    from vsr_fast.config import check_raw
    from vsr_fast.server.reload import restart_required

    cfg = check_raw(config([model("m", "http://127.0.0.1:1/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])).config
    before = {"global.stores.event_stream.file": "a", "providers.models[m].backend_refs[0].auth.file": "a"}
    after = {"global.stores.event_stream.file": "b", "providers.models[m].backend_refs[0].auth.file": "b"}
    assert restart_required(cfg, cfg, before, after) == ["global.stores.event_stream (the secret in its file changed)"]
    assert restart_required(cfg, cfg, before, before) == []
