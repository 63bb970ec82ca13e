"""Hot reload under load: POST /admin/reload and SIGHUP swap the configuration with no failed request; a file
that does not load leaves the old one serving and says why."""
from __future__ import annotations

import os
import re
import signal
import threading

import httpx
import yaml

from .procs import config, mock_upstream, router, wait_for_value, wait_until, write_config


def _doc(model: str, endpoint: str) -> dict:
    return config([{"name": model, "backend_refs": [{"endpoint": endpoint}]}],
                  [{"name": "d", "modelRefs": [{"model": model}]}])


def _write(path: str, doc) -> None:
    with open(path, "w") as f:
        f.write(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))


def test_reload_under_load_with_zero_failures(tmp_path):
    with mock_upstream() as first, mock_upstream() as second:
        path = write_config(_doc("old-model", f"{first.url}/v1"), str(tmp_path))
        with router(path) as proc:
            seen: list[tuple[int, str | None]] = []
            stop = threading.Event()

            def load() -> None:
                with httpx.Client(timeout=30) as client:
                    while not stop.is_set():
                        r = client.post(f"{proc.url}/v1/chat/completions",
                                        json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
                        seen.append((r.status_code, r.headers.get("x-vsr-selected-model")))

            threads = [threading.Thread(target=load) for _ in range(32)]
            for t in threads:
                t.start()
            try:
                wait_until(lambda: len(seen) >= 64, "traffic on the first configuration")
                _write(path, _doc("new-model", f"{second.url}/v1"))
                r = httpx.post(f"{proc.url}/admin/reload", timeout=30)
                assert r.status_code == 200 and r.json()["status"] == "reloaded", r.text
                mark = len(seen)
                wait_until(lambda: any(m == "new-model" for _, m in seen[mark:]), "the new route")

                # A file that does not load: refused with why, the new-model configuration keeps serving.
                _write(path, "version: v0.5\nproviders: {models: [{name: x, backend_refs: nope}]}\n")
                bad = httpx.post(f"{proc.url}/admin/reload", timeout=30)
                assert bad.status_code == 422 and "backend_refs" in bad.json()["error"]["message"]
                proc.signal(signal.SIGHUP)
                wait_for_value(lambda: [x for x in proc.lines if "reload refused" in x], "SIGHUP's refusal")
                mark = len(seen)
                wait_until(lambda: len(seen) >= mark + 64, "traffic after the refused reloads")

                # SIGHUP with a good file: back to the first backend.
                _write(path, _doc("old-model", f"{first.url}/v1"))
                proc.signal(signal.SIGHUP)
                wait_for_value(lambda: [x for x in proc.lines if "reload done" in x], "SIGHUP's reload")
                mark = len(seen)
                wait_until(lambda: any(m == "old-model" for _, m in seen[mark:]), "the route of the third file")
            finally:
                stop.set()
                for t in threads:
                    t.join()
            assert proc.popen.poll() is None
            statuses = {s for s, _ in seen}
            assert statuses == {200}, [x for x in seen if x[0] != 200][:5]
            metrics = httpx.get(f"{proc.url}/metrics").text
            assert 'vsr_config_reloads_total{outcome="ok"} 2' in metrics
            assert 'vsr_config_reloads_total{outcome="failed"} 2' in metrics


def _replace(path: str, doc) -> None:
    """Write the file whole under another name, then rename it over the old one (as editors and Kubernetes do):
    the watch never reads half a file."""
    _write(path + ".new", doc)
    os.replace(path + ".new", path)


def test_the_file_watch_reloads_an_edit_and_keeps_serving_through_a_broken_one(tmp_path):
    def doc(model: str, endpoint: str) -> dict:
        d = _doc(model, endpoint)
        d["global"] = {"router": {"config_watch": {"enabled": True, "interval_ms": 100}}}
        return d

    def reloads(text: str, outcome: str) -> int:
        found = re.search(rf'^vsr_config_reloads_total\{{outcome="{outcome}"\}} (\d+)$', text, re.M)
        return int(found.group(1)) if found else 0

    with mock_upstream() as first, mock_upstream() as second:
        path = write_config(doc("old-model", f"{first.url}/v1"), str(tmp_path))
        with router(path) as proc, httpx.Client(timeout=30) as client:
            def model() -> str:
                r = client.post(f"{proc.url}/v1/chat/completions",
                                json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200, r.text
                return r.headers["x-vsr-selected-model"]

            def metrics() -> str:
                return client.get(f"{proc.url}/metrics").text

            assert model() == "old-model"
            _replace(path, doc("new-model", f"{second.url}/v1"))
            wait_until(lambda: reloads(metrics(), "ok") == 1, "the watch to reload the edited file")
            assert model() == "new-model"

            _replace(path, "version: v0.5\nproviders: {models: [{name: x, backend_refs: nope}]}\n")
            wait_until(lambda: reloads(metrics(), "failed") == 1, "the watch to refuse the broken file")
            wait_for_value(lambda: [x for x in proc.lines if "reload refused (the file changed)" in x
                                    and "backend_refs" in x], "the refusal's line, with why")
            assert model() == "new-model"

            _replace(path, doc("old-model", f"{first.url}/v1"))
            wait_until(lambda: reloads(metrics(), "ok") == 2, "the watch to reload the repaired file")
            assert model() == "old-model"
            # The broken file was tried once, at its change, not at every poll after it.
            assert reloads(metrics(), "failed") == 1
            assert proc.popen.poll() is None


def test_sighup_to_the_supervisor_reloads_every_worker(tmp_path):
    with mock_upstream() as first, mock_upstream() as second:
        path = write_config(_doc("old-model", f"{first.url}/v1"), str(tmp_path))
        with router(path, "--workers", "2") as proc:
            def metrics() -> str:
                return httpx.get(f"{proc.url}/metrics").text

            def reloaded(n: int, what: str) -> None:
                wait_until(lambda: sum(f"reload {what} (SIGHUP)" in x for x in proc.lines) == n, f"{n} SIGHUPs")

            def reloads(text: str) -> dict[str, int]:
                return {o: int(n) for o, n in re.findall(r'^vsr_config_reloads_total\{outcome="(\w+)"\} (\d+)$',
                                                          text, re.M)}

            wait_until(lambda: "\nvsr_workers 2\n" in metrics(), "both workers' series")
            _write(path, _doc("new-model", f"{second.url}/v1"))
            proc.signal(signal.SIGHUP)
            reloaded(2, "done")
            for _ in range(6):
                # One reload, whichever worker answers; each worker's series are of its current generation.
                text = metrics()
                assert reloads(text) == {"ok": 1}
                assert 'model="new-model"' in text and 'model="old-model"' not in text
            # POST /admin/reload: the worker it reached reloads, then the supervisor sends SIGHUP to both.
            assert httpx.post(f"{proc.url}/admin/reload").status_code == 200
            reloaded(4, "done")
            assert reloads(metrics()) == {"ok": 1, "unchanged": 1}
            _write(path, "version: v0.5\nproviders: {models: [{name: x, backend_refs: nope}]}\n")
            assert httpx.post(f"{proc.url}/admin/reload").status_code == 422
            reloaded(2, "refused")
            assert reloads(metrics()) == {"ok": 1, "unchanged": 1, "failed": 1}
            _write(path, _doc("new-model", f"{second.url}/v1"))
            for _ in range(10):
                # A new connection each time: the kernel hands them to either worker.
                r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=20,
                               json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "new-model"
            assert proc.popen.poll() is None


def _gauge(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, name
    return float(found.group(1))


def test_metrics_say_which_config_serves_and_how_the_last_reload_went(tmp_path):
    """Trial 88: no series said which configuration was in effect or whether the last reload took, and /ready
    did not say which changed fields still run their old value until a restart."""
    with mock_upstream() as up:
        doc = _doc("m", f"{up.url}/v1")
        path = write_config(doc, str(tmp_path))
        with router(path) as proc, httpx.Client(timeout=30) as client:
            first = client.get(f"{proc.url}/ready").json()["config_version"]
            text = client.get(f"{proc.url}/metrics").text
            assert f'vsr_config_info{{version="{first}"}} 1' in text
            assert _gauge(text, "vsr_config_last_reload_success") == 1
            started = _gauge(text, "vsr_config_last_reload_timestamp_seconds")

            doc["global"] = {"router": {"limits": {"max_connections": 77}}}
            _write(path, doc)
            r = client.post(f"{proc.url}/admin/reload")
            assert r.status_code == 200 and r.json()["restart_required"] == ["global.router.limits.max_connections"]
            ready = client.get(f"{proc.url}/ready").json()
            assert ready["config_version"] != first
            assert ready["restart_required"] == ["global.router.limits.max_connections"]
            text = client.get(f"{proc.url}/metrics").text
            assert f'vsr_config_info{{version="{ready["config_version"]}"}} 1' in text and first not in text
            assert _gauge(text, "vsr_config_last_reload_success") == 1
            reloaded = _gauge(text, "vsr_config_last_reload_timestamp_seconds")
            assert reloaded >= started

            _write(path, "listeners: [")
            assert client.post(f"{proc.url}/admin/reload").status_code != 200
            text = client.get(f"{proc.url}/metrics").text
            assert _gauge(text, "vsr_config_last_reload_success") == 0
            assert _gauge(text, "vsr_config_last_reload_timestamp_seconds") >= reloaded
            assert f'vsr_config_info{{version="{ready["config_version"]}"}} 1' in text    # the old one serves on
