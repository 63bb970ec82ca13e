"""A worker that dies under ``--workers`` is started again (trial 27: one ``kill -9`` stopped the whole router):
the other worker's streams and new connections go on, the dead worker's counters are kept once, a crash loop
still stops everything with a non-zero exit, and a drain restarts nothing."""
from __future__ import annotations

import os
import re
import signal
import threading

import httpx
import pytest
import yaml

from bench._procs import children
from .procs import Proc, config, mock_upstream, model, router, wait_for_value, wait_until, write_config
from .test_metrics_workers import _requests_total

CHAT = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def slow():
    """A stream of 100 chunks, one each 100 ms: long enough to kill a worker and see it restarted meanwhile."""
    with mock_upstream("--chunks", "100", "--chunk-interval-ms", "100") as proc:
        yield proc


def _doc(upstream: Proc, name: str = "m") -> dict:
    return config([model(name, f"{upstream.url}/v1")], [{"name": "d", "modelRefs": [{"model": name}]}])


def _serving(proc: Proc) -> int:
    return sum("vsr-fast: serving on" in x for x in proc.lines)


def _workers(proc: Proc) -> dict[int, int]:
    """The supervisor's live workers, by index (their ``--worker-index``)."""
    found = {}
    for pid in children(proc.popen.pid):
        argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
        found[int(argv[argv.index("--worker-index") + 1])] = pid
    return found


def _holder(port: int, client_port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the router's end of the connection from ``client_port`` (/proc/net/tcp's inode)."""
    inode = None
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and int(fields[2].split(":")[1], 16) == client_port:
            inode = fields[9]
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


class Stream(threading.Thread):
    """One streamed chat request on a connection of its own; keeps its client port, body and how it ended."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.client_port, self.body, self.error = url, 0, b"", None
        self.started = threading.Event()

    def run(self) -> None:
        try:
            with httpx.stream("POST", f"{self.url}/v1/chat/completions", timeout=60,
                              json={"model": "m", "messages": CHAT, "stream": True}) as r:
                self.client_port = r.extensions["network_stream"].get_extra_info("client_addr")[1]
                for chunk in r.iter_bytes():
                    self.body += chunk
                    self.started.set()
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.started.set()

    @property
    def whole(self) -> bool:
        return self.error is None and b"data: [DONE]" in self.body


def _streams_on_both(proc: Proc) -> tuple[dict[int, list[Stream]], dict[int, int]]:
    """Streams opened until each worker holds at least one; by worker pid, and the workers by index."""
    workers = _workers(proc)
    held: dict[int, list[Stream]] = {pid: [] for pid in workers.values()}
    for _ in range(24):
        stream = Stream(proc.url)
        stream.start()
        stream.started.wait(30)
        assert stream.error is None, stream.error
        held[_holder(proc.port, stream.client_port, list(held))].append(stream)
        if all(held.values()) and sum(map(len, held.values())) >= 6:
            break
    assert all(held.values()), {pid: len(s) for pid, s in held.items()}
    return held, workers


def _chat(url: str) -> httpx.Response:
    # A new connection each time: the kernel hands it to whichever worker accepts.
    return httpx.post(f"{url}/v1/chat/completions", timeout=30, json={"model": "m", "messages": CHAT})


def _scraped(proc: Proc) -> str:
    """/metrics once every worker answers it (a restarted one included)."""
    return wait_for_value(lambda: (lambda t: t if "\nvsr_workers 2\n" in t and "\nvsr_workers_stale 0\n" in t
                                   else None)(httpx.get(f"{proc.url}/metrics", timeout=30).text),
                          "both workers answering /metrics", 60)


def test_a_killed_worker_is_restarted_on_the_reloaded_config_and_the_other_keeps_serving(tmp_path, slow):
    path = write_config(_doc(slow), str(tmp_path))
    with router(path, "--workers", "2") as proc:
        wait_until(lambda: _serving(proc) == 2, "both workers serving", 120)
        # A reload first: the worker started again serves the configuration the others serve now.
        doc = _doc(slow)
        doc["recipes"][0]["decisions"][0]["name"] = "reloaded"
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        proc.signal(signal.SIGHUP)
        reloaded = wait_for_value(lambda: [x for x in proc.lines if "reload done (SIGHUP)" in x][1:], "two reloads")
        version = re.search(r"config (\S+) loaded", reloaded[0]).group(1)
        for _ in range(6):
            assert _chat(proc.url).status_code == 200
        assert _requests_total(_scraped(proc)) == 6      # each worker's series kept as it answered

        held, workers = _streams_on_both(proc)
        victim = workers[1]
        os.kill(victim, signal.SIGKILL)
        # New connections are served all the while the victim is dead and starting again.
        served = 0
        while _serving(proc) < 3:
            assert proc.popen.poll() is None, proc.lines[-20:]
            r = _chat(proc.url)
            assert r.status_code == 200, r.text
            served += 1
        for streams in held.values():
            for stream in streams:
                stream.join(60)
        survivor = next(pid for index, pid in workers.items() if index != 1)
        assert all(s.whole for s in held[survivor]), [s.error for s in held[survivor]]
        assert not any(s.whole for s in held[victim])         # its streams are lost with it

        assert proc.popen.poll() is None
        assert any("ERROR vsr-fast: worker 1 " in x and "killed by SIGKILL" in x and "restarting it in" in x
                   for x in proc.lines), proc.lines[-20:]
        assert any("worker 1 restarted" in x for x in proc.lines)
        restarted = [x for x in proc.lines if "vsr-fast: serving on" in x][2]
        assert f"(config {version})" in restarted
        assert _workers(proc)[1] != victim

        # The dead worker's counters are kept, once: what it had answered, the survivor's, the restart.
        text = _scraped(proc)
        assert _requests_total(text) == 6 + served + len(held[survivor])
        assert "\nvsr_worker_restarts_total 1\n" in text
        assert "# TYPE vsr_worker_restarts_total counter" in text
        assert _chat(proc.url).status_code == 200
        assert _requests_total(_scraped(proc)) == 7 + served + len(held[survivor])


def test_a_worker_that_keeps_dying_stops_the_router_with_a_non_zero_exit(tmp_path, slow):
    """A crash loop (here: every start refused, the file broken since) is not retried for ever: the process
    manager must see it."""
    path = write_config(_doc(slow), str(tmp_path))
    with router(path, "--workers", "2") as proc:
        wait_until(lambda: _serving(proc) == 2, "both workers serving", 120)
        with open(path, "w") as f:
            f.write("version: v0.5\nproviders: {models: [{name: x, backend_refs: nope}]}\n")
        os.kill(_workers(proc)[0], signal.SIGKILL)
        # Meanwhile the other worker serves.
        assert _chat(proc.url).status_code == 200
        assert proc.popen.wait(120) != 0
    assert sum("worker 0 restarted" in x for x in proc.lines) == 5, proc.lines
    assert any("ERROR vsr-fast: worker 0 " in x and "crash loop; stopping the others" in x for x in proc.lines)
    assert any("supervisor exiting with code 2" in x for x in proc.lines), proc.lines[-5:]


def test_a_worker_killed_while_draining_is_not_restarted(tmp_path, slow):
    with router(write_config(_doc(slow), str(tmp_path)), "--workers", "2") as proc:
        wait_until(lambda: _serving(proc) == 2, "both workers serving", 120)
        held, workers = _streams_on_both(proc)
        proc.signal(signal.SIGTERM)
        wait_until(lambda: any("draining 2 workers" in x for x in proc.lines), "the drain")
        os.kill(workers[0], signal.SIGKILL)
        assert proc.popen.wait(60) == 9
        for stream in held[workers[1]]:
            stream.join(60)
            assert stream.whole
    assert not any("restarting it" in x or "restarted" in x for x in proc.lines), proc.lines


def test_a_reload_of_an_unchanged_file_still_names_what_waits_for_a_restart(tmp_path, slow):
    """Trial 27 #2: SIGHUP after access_log.path changed, then POST /admin/reload: the answer said nothing was
    pending while /ready still listed the field."""
    doc = _doc(slow)
    doc["global"] = {"router": {"access_log": {"enabled": True, "path": str(tmp_path / "a.log")}}}
    path = write_config(doc, str(tmp_path))
    with router(path, "--workers", "2") as proc:
        wait_until(lambda: _serving(proc) == 2, "both workers serving", 120)
        doc["global"]["router"]["access_log"]["path"] = str(tmp_path / "b.log")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        proc.signal(signal.SIGHUP)
        wait_until(lambda: sum("reload done (SIGHUP)" in x for x in proc.lines) == 2, "both workers reloaded")
        pending = ["global.router.access_log.path"]
        assert httpx.get(f"{proc.url}/ready").json()["restart_required"] == pending
        r = httpx.post(f"{proc.url}/admin/reload", timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["restart_required"] == pending, r.json()
        assert "unchanged" in r.json()["message"] and "global.router.access_log.path" in r.json()["message"]
        assert httpx.get(f"{proc.url}/ready").json()["restart_required"] == pending


def test_a_restarted_worker_takes_up_only_what_only_grows():
    from vsr_fast.server.metrics_view import carried_series

    left = (b"# HELP vsr_requests_total Requests.\n# TYPE vsr_requests_total counter\n"
            b'vsr_requests_total{api="chat"} 6\n# HELP vsr_connections_active Open.\n'
            b"# TYPE vsr_connections_active gauge\nvsr_connections_active 3\n"
            b'# TYPE vsr_ttfb_seconds histogram\nvsr_ttfb_seconds_bucket{le="+Inf"} 6\nvsr_ttfb_seconds_sum 0.5\n'
            b"# TYPE vsr_workers gauge\nvsr_workers 1\n")
    assert carried_series(left).decode().splitlines() == [
        "# HELP vsr_requests_total Requests.", "# TYPE vsr_requests_total counter", 'vsr_requests_total{api="chat"} 6',
        "# TYPE vsr_ttfb_seconds histogram", 'vsr_ttfb_seconds_bucket{le="+Inf"} 6', "vsr_ttfb_seconds_sum 0.5"]
