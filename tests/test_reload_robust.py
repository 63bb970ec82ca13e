"""A reload of a file that does not load changes nothing, however it fails: the admin route answers 422 with the
bad field's path, SIGHUP and the file watch log the refusal, and the router keeps serving."""
from __future__ import annotations

import os
import re
import signal
from types import SimpleNamespace

import httpx
import yaml
import trio

from vsr_fast.metrics import Metrics
from vsr_fast.server import reload as reload_module
from vsr_fast.server.reload import Generations

from .procs import config, mock_upstream, router, wait_for_value, wait_until, write_config

WRONG_TYPE = ("version: v0.5\n"
              "recipes: [{name: r, decisions: [{name: d, rules: {operator: AND, conditions: 5}}]}]\n")


def _replace(path: str, text: str) -> None:
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


def _failed(text: str) -> int:
    found = re.search(r'^vsr_config_reloads_total\{outcome="failed"\} (\d+)$', text, re.M)
    return int(found.group(1)) if found else 0


def test_a_wrong_type_is_refused_by_every_reload_path_and_the_router_keeps_serving(tmp_path):
    with mock_upstream() as upstream:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"config_watch": {"enabled": True, "interval_ms": 100}}}
        path = write_config(doc, str(tmp_path))
        with router(path) as proc, httpx.Client(timeout=30) as client:
            def answers() -> None:
                r = client.post(f"{proc.url}/v1/chat/completions",
                                json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "m", r.text

            def failed() -> int:
                return _failed(client.get(f"{proc.url}/metrics").text)

            answers()
            # The watch sees the rename and refuses it.
            _replace(path, WRONG_TYPE)
            wait_until(lambda: failed() == 1, "the watch to refuse the file")
            line = wait_for_value(lambda: [x for x in proc.lines if "reload refused (the file changed)" in x],
                                  "the watch's refusal")
            assert "recipes[r].decisions[0].rules.conditions: invalid_type: decision 'd': expected array" in line[0]
            answers()

            bad = client.post(f"{proc.url}/admin/reload")
            assert bad.status_code == 422, bad.text
            assert bad.json()["error"]["code"] == "config_invalid"
            assert "recipes[r].decisions[0].rules.conditions: invalid_type" in bad.json()["error"]["message"]
            answers()

            proc.signal(signal.SIGHUP)
            wait_for_value(lambda: [x for x in proc.lines if "reload refused (SIGHUP)" in x], "SIGHUP's refusal")
            answers()
            assert failed() == 3
            # A truncated file (the version line alone) would route nothing: refused like any bad file.
            _replace(path, "version: v0.5\n")
            empty = client.post(f"{proc.url}/admin/reload")
            assert empty.status_code == 422, empty.text
            assert "recipes: missing_field: the configuration routes nothing" in empty.json()["error"]["message"]
            answers()
            assert proc.popen.poll() is None


def test_an_unexpected_error_while_loading_is_a_refused_reload(tmp_path, monkeypatch):
    """Not a ConfigError (a bug in a check): refused, counted as failed, with the error; nothing raised."""
    metrics = Metrics()
    state = SimpleNamespace(loaded=SimpleNamespace(version_hash="old", config=None, secrets={}), access_log=None,
                            metrics=metrics)

    def broken(path):
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(reload_module, "load_file", broken)

    async def main() -> tuple[bool, str]:
        async with trio.open_nursery() as nursery:
            generations = Generations(state, str(tmp_path / "c.yaml"), lambda s: {}, nursery)
            return await generations.reload()

    ok, why, *_ = trio.run(main)
    assert not ok and "TypeError: 'int' object is not iterable" in why
    assert 'vsr_config_reloads_total{outcome="failed"} 1' in metrics.render().decode()
    assert "vsr_config_last_reload_success 0" in metrics.config_lines("old")     # trial 88's gauge


def test_a_reload_names_each_change_that_waits_for_a_restart(tmp_path):
    """Listeners and the access log are read at start: the reload swaps the rest in and lists those fields in its
    answer and its log line. A newly used context plugin's stores it opens (not listed)."""
    with mock_upstream() as upstream:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["listeners"] = [{"name": "main", "port": 18080}]
        path = write_config(doc, str(tmp_path))
        with router(path) as proc, httpx.Client(timeout=30) as client:
            unchanged = client.post(f"{proc.url}/admin/reload")
            assert unchanged.status_code == 200 and unchanged.json()["restart_required"] == [], unchanged.text

            doc["listeners"][0]["port"] = 18081
            doc["global"] = {"router": {"access_log": {"enabled": True}}}
            doc["recipes"][0]["decisions"].insert(0, {
                "name": "remember", "priority": 10, "modelRefs": [{"model": "m"}],
                "plugins": [{"type": "context", "configuration": {"sources": [{"type": "memory"}]}}]})
            _replace(path, yaml.safe_dump(doc, sort_keys=False))
            r = client.post(f"{proc.url}/admin/reload")
            assert r.status_code == 200 and r.json()["status"] == "reloaded", r.text
            r_later = r.json()["restart_required"]
            assert r_later == ["listeners[0].port", "global.router.access_log.enabled"]
            line = wait_for_value(lambda: [x for x in proc.lines if "in effect after a restart" in x], "the log line")
            assert "listeners[0].port" in line[0]
            # The rest is in effect: the new decision routes.
            r = client.post(f"{proc.url}/v1/chat/completions",
                            json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200 and r.headers["x-vsr-selected-decision"] == "remember", r.headers

            # Compared with what is in effect, not with the last file: a second change leaves them pending, and
            # putting them back as the router started clears them.
            doc["recipes"][0]["decisions"][0]["priority"] = 11
            _replace(path, yaml.safe_dump(doc, sort_keys=False))
            again = client.post(f"{proc.url}/admin/reload")
            assert again.status_code == 200 and again.json()["restart_required"] == r_later, again.text
            doc["listeners"][0]["port"] = 18080
            del doc["global"]
            doc["recipes"][0]["decisions"].pop(0)
            _replace(path, yaml.safe_dump(doc, sort_keys=False))
            back = client.post(f"{proc.url}/admin/reload")
            assert back.status_code == 200 and back.json()["restart_required"] == [], back.text


def test_restart_required_names_where_the_file_adds_what_opens_at_start(tmp_path):
    """A plugin whose store opens at start, added by a reload, is named by its place in the file."""
    from vsr_fast.routing import load_file

    models = [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]},
              {"name": "s", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}]
    doc = config(models, [{"name": "d", "modelRefs": [{"model": "m"}]}])
    before = load_file(write_config(doc, str(tmp_path))).config
    doc["recipes"][0]["decisions"].append({
        "name": "copied", "priority": 5, "modelRefs": [{"model": "m"}],
        "plugins": [{"type": "system_prompt", "configuration": {"system_prompt": "x"}},
                    {"type": "router_replay", "configuration": {"enabled": True, "shadow": {"model": "s"}}}]})
    after = load_file(write_config(doc, str(tmp_path))).config
    where = f"recipes[{doc['recipes'][0]['name']}].decisions[copied].plugins[1]"
    assert reload_module.restart_required(before, after) == [
        f"{where} (router_replay): what it needs opens at start",
        f"{where}.configuration.shadow: the shadow opens at start"]


def test_an_alias_bomb_is_a_refused_reload_and_the_router_keeps_reloading(tmp_path):
    """Nine lines of nested aliases (9**9 nodes once expanded) are refused at once, with their line; the next
    reload of a good file is answered and applied."""
    from .test_config_yaml import _alias_bomb
    with mock_upstream() as upstream:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        path = write_config(doc, str(tmp_path))
        good = open(path).read()
        with router(path) as proc, httpx.Client(timeout=60) as client:
            with open(path, "wb") as f:
                f.write(_alias_bomb())
            bad = client.post(f"{proc.url}/admin/reload")
            assert bad.status_code == 422, bad.text
            assert f"{path}:" in bad.json()["error"]["message"] and ": yaml_aliases: " in bad.json()["error"]["message"]
            _replace(path, good.replace("priority: 100", "priority: 90") if "priority: 100" in good else good + "\n")
            again = client.post(f"{proc.url}/admin/reload")
            assert again.status_code == 200, again.text
            r = client.post(f"{proc.url}/v1/chat/completions",
                            json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200, r.text
