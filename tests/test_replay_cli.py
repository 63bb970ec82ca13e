"""``vsr-replay``: a recorded stream re-routed under a changed keyword rule moves what the change moves, only."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import yaml

from vsr_fast.routing import load_file
from vsr_fast.config.stores import EventStreamStore
from vsr_fast.events.redis_stream import RedisTransport
from vsr_fast.events.request import RequestEvents
from vsr_fast.events.service import open_event_stream
from vsr_fast.events.writer import EventSink
from vsr_fast.plugins.router_replay import ReplayPolicy
from vsr_fast.server.route import decode_chat, route_chat
from vsr_fast.signals.base import ANONYMOUS
from vsr_fast.upstream import Attempt

from replay.cli import main as replay_main

from .procs import ROOT, refused_port, run_main
from .test_events_fixtures import REDIS_URL, r, stream_name, wait_for  # noqa: F401

VSR_REPLAY = Path(sys.executable).with_name("vsr-replay")


def config(code_keywords: list[str]) -> dict:
    models = ["code-model", "billing-model", "general-model"]
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": m, "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]} for m in models]},
        "recipes": [{
            "name": "default",
            "signals": {"keywords": [{"name": "code", "keywords": code_keywords},
                                     {"name": "billing", "keywords": ["invoice", "refund"]}]},
            "decisions": [
                {"name": "code", "priority": 20, "modelRefs": [{"model": "code-model"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "code"}]}},
                {"name": "billing", "priority": 10, "modelRefs": [{"model": "billing-model"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "billing"}]}},
                {"name": "general", "priority": 0, "modelRefs": [{"model": "general-model"}]},
            ],
        }],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
    }


TRAFFIC = {
    "rust": "how do I write rust macros",          # code under the old rule, general under the new
    "golang": "golang channels explained",         # general under the old rule, code under the new
    "refund": "please refund my last invoice",
    "python": "a python list comprehension",
    "hello": "hello there",
}


@pytest.fixture
def configs(tmp_path: Path) -> tuple[str, str]:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(config(["python", "rust"])))
    new.write_text(yaml.safe_dump(config(["python", "golang"])))
    return str(old), str(new)


async def record_traffic(sink, config_path: str, repeat: int = 1) -> dict[str, list[str]]:
    """Route TRAFFIC for real under ``config_path`` and record each request as the server would."""
    loaded = load_file(config_path)
    policy = ReplayPolicy(capture_request_body=True)
    ids: dict[str, list[str]] = {}
    for _ in range(repeat):
        for name, text in TRAFFIC.items():
            raw = msgspec.json.encode({"model": "vsr/auto", "messages": [{"role": "user", "content": text}]})
            request = decode_chat(raw)
            route = await route_chat(loaded.table, request, lambda: ANONYMOUS)
            ev = RequestEvents(sink, config_version=loaded.version_hash, policy=policy)
            ev.routed(raw, request, route)
            ev.attempt(Attempt(route.candidates[0].name, "mock", 200, None, 0.01))
            ev.answer(status=200, response_path="upstream", model=route.candidates[0].name, streamed=False)
            ids.setdefault(name, []).append(ev.replay_id)
    return ids


def vsr_replay_process(*args: str) -> subprocess.CompletedProcess:
    """The installed command a user runs, in a process of its own."""
    # PYTHONPATH: configurations may name the scripted test model (tests.scripted_model).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(VSR_REPLAY), *args], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)


def vsr_replay(*args: str) -> subprocess.CompletedProcess:
    """Its main() in this process, in a thread (it calls trio.run; the async tests call it); the export/run/diff
    test runs the installed command as well."""
    return run_main(replay_main, args, "vsr-replay", thread=True)


def moves(result: dict) -> list[tuple[str, str, str, str, int]]:
    return sorted((m["from"]["decision"], m["to"]["decision"], m["from"]["model"], m["to"]["model"], m["count"])
                  for m in result["moves"])


@pytest.fixture
async def recorded(r, stream_name, configs, tmp_path) -> dict[str, list[str]]:
    sink = EventSink(RedisTransport(REDIS_URL, stream_name), tmp_path / "spill").start()
    ids = await record_traffic(sink, configs[0], repeat=2)
    assert sink.wait_drained(10)
    sink.close()
    return ids


async def test_run_shows_the_decisions_a_changed_keyword_rule_moves_and_nothing_else(recorded, stream_name, configs):
    done = vsr_replay("run", "--config", configs[1], "--redis", REDIS_URL, "--stream", stream_name, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["compared"], result["changed"], result["unchanged"], result["approximate"]) == (10, 4, 6, 0)
    assert moves(result) == [("code", "general", "code-model", "general-model", 2),
                             ("general", "code", "general-model", "code-model", 2)]
    examples = {m["from"]["decision"]: set(m["examples"]) for m in result["moves"]}
    assert examples == {"code": set(recorded["rust"]), "general": set(recorded["golang"])}
    assert result["decisions"]["billing"] == {"before": 2, "after": 2}

    same = json.loads(vsr_replay("run", "--config", configs[0], "--redis", REDIS_URL, "--stream", stream_name,
                                 "--json").stdout)
    assert (same["changed"], same["unchanged"], same["moves"]) == (0, 10, [])

    text = vsr_replay("run", "--config", configs[1], "--redis", REDIS_URL, "--stream", stream_name, "--progress",
                      "--fail-on-change")
    assert text.returncode == 1
    assert "changed    4" in text.stdout and "code -> general" in text.stdout and "general -> code" in text.stdout
    assert "re-route [" in text.stderr and "100.0%" in text.stderr


# Trial 88: export took --output and run --out; each takes both spellings (and -o) now.
@pytest.mark.parametrize(("export_flag", "run_flag"), [("-o", "--out"), ("--out", "--output"), ("--output", "-o")])
async def test_export_then_run_then_diff_agree(recorded, stream_name, configs, tmp_path, export_flag, run_flag):
    export, rerouted = tmp_path / "recorded.jsonl", tmp_path / "rerouted.jsonl"
    done = vsr_replay_process("export", "--redis", REDIS_URL, "--stream", stream_name, export_flag, str(export))
    assert done.returncode == 0 and "exported 50 events" in done.stderr, done.stderr
    assert len(export.read_text().splitlines()) == 50
    run = json.loads(vsr_replay("run", "--config", configs[1], "--input", str(export), run_flag, str(rerouted),
                                "--json").stdout)
    diff = json.loads(vsr_replay("diff", str(export), str(rerouted), "--json").stdout)
    assert moves(diff) == moves(run) and (diff["compared"], diff["changed"]) == (10, 4)
    assert "only_in_a" not in diff["skipped"]


async def test_run_reads_the_embedded_journal_and_counts_requests_without_a_copy(configs, tmp_path):
    store = EventStreamStore(backend="embedded", path=str(tmp_path / "events"))
    async with open_event_stream(store) as stream:
        ids = await record_traffic(stream.sink, configs[0])
        RequestEvents(stream.sink, config_version="x", policy=ReplayPolicy()).received(b"{}", None)
        await wait_for(stream.sink.drained)
    done = vsr_replay("run", "--config", configs[1], "--journal", store.path, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["compared"], result["changed"]) == (5, 2)
    assert result["skipped"] == {"no_request_copy": 1}
    assert {e for m in result["moves"] for e in m["examples"]} == {ids["rust"][0], ids["golang"][0]}


def test_a_bad_configuration_is_reported_not_raised(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v0.3\n")
    done = vsr_replay("run", "--config", str(bad), "--input", str(tmp_path / "none.jsonl"))
    assert done.returncode == 2 and "version" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("text", "why"), [
    ("version: v0.5\nglobal:\n\tstores: {}\n", ":3:1: yaml_error: "),
    ("", "invalid_type: expected a mapping"),
])
@pytest.mark.parametrize("command", ["run", "export"])
def test_a_from_config_file_that_does_not_load_is_one_line_and_exit_2_as_config_is(tmp_path, text, why, command):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    config_args = ["--config", "config/quickstart.yaml"] if command == "run" else []
    as_config = vsr_replay("run", "--config", str(bad), "--input", str(tmp_path / "none.jsonl"))
    done = vsr_replay(command, *config_args, "--from-config", str(bad))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 == as_config.returncode
    assert done.stderr == as_config.stderr and len(done.stderr.splitlines()) == 1 and why in done.stderr


def learned_config(domain_labels: list[str]) -> dict:
    """A recipe routing on a domain rule answered by the scripted in-process decision model."""
    doc = config(["python"])
    doc["global"] = {"model_catalog": {"deployments": {"local": {"provider": "model_runtime",
                                                                  "artifact": "tests.scripted_model:make"}},
                                       "system": {"decision_model": {"deployment": "local"}}}}
    recipe = doc["recipes"][0]
    recipe["signals"]["domains"] = [{"name": "topic", "labels": domain_labels, "predicate": {"gte": 0.5}}]
    recipe["decisions"][1]["rules"] = {"operator": "AND", "conditions": [{"type": "domain", "name": "topic"}]}
    return doc


async def test_run_asks_the_new_configurations_decision_model(stream_name, tmp_path):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(learned_config(["law"])))
    new.write_text(yaml.safe_dump(learned_config(["history"])))
    # The scripted model picks the option its text names: "law" and "history" requests.
    sink = EventSink(RedisTransport(REDIS_URL, stream_name), tmp_path / "spill").start()
    loaded = load_file(str(old))
    from vsr_fast.routing.open_systemone import open_systemone
    async with open_systemone(loaded) as client:
        asker = loaded.table.asker(client)
        for text in ("a question about law", "a question about history"):
            raw = msgspec.json.encode({"model": "vsr/auto", "messages": [{"role": "user", "content": text}]})
            request = decode_chat(raw)
            route = await route_chat(loaded.table, request, lambda: ANONYMOUS, asker)
            ev = RequestEvents(sink, config_version=loaded.version_hash, policy=ReplayPolicy(capture_request_body=True))
            ev.routed(raw, request, route)
            ev.answer(status=200, response_path="upstream", model=route.candidates[0].name, streamed=False)
    assert sink.wait_drained(10)
    sink.close()
    done = vsr_replay("run", "--config", str(new), "--redis", REDIS_URL, "--stream", stream_name, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert moves(result) == [("billing", "general", "billing-model", "general-model", 1),
                             ("general", "billing", "general-model", "billing-model", 1)]
    assert result["approximate"] == 0
    offline = json.loads(vsr_replay("run", "--config", str(new), "--redis", REDIS_URL, "--stream", stream_name,
                                    "--json", "--offline").stdout)
    assert offline["approximate"] == 2, "offline, the domain rule reads unknown"


async def test_reroute_reads_every_client_apis_copy(configs):
    """A recorded copy is read by its own API's adapter; a continued Responses request is stateful."""
    from replay import rerun
    from vsr_fast.events.types import RequestReceived

    loaded = load_file(configs[0])
    cases = [
        ("messages", {"model": "vsr/auto", "max_tokens": 8, "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "rust"}]}]},
         "code", None),
        ("responses", {"model": "vsr/auto", "input": [{"type": "additional_tools", "tools": []},
                                                      {"role": "user", "content": "a refund please"}]},
         "billing", None),
        ("responses", {"model": "vsr/auto", "input": "rust", "previous_response_id": "resp_1"}, "code",
         "previous_response_id"),
        ("images", {"model": "vsr/auto", "prompt": "a rust logo"}, "code", None),
        ("chat", {"model": "vsr/auto", "messages": [{"role": "user", "content": "hello"}]}, "general", None),
    ]
    for api, body, decision, approximate in cases:
        received = RequestReceived(replay_id="r", api=api, request=msgspec.json.encode(body))
        outcome, approx = await rerun.reroute(loaded, received)
        assert (outcome.decision, approx) == (decision, approximate), api
    bad = RequestReceived(replay_id="r", api="messages", request=b'{"model": "vsr/auto", "messages": []}')
    outcome, _ = await rerun.reroute(loaded, bad)
    assert outcome.error == "empty_array"


@pytest.mark.parametrize("command", ["export", "run"])
def test_an_unreachable_redis_is_one_line_and_exit_2_not_a_traceback(tmp_path, command):
    # Exit 1 is --fail-on-change's "a route moved": a CI gate must tell "Redis is down" (2, cannot run) from it.
    dead = f"redis://127.0.0.1:{refused_port()}/0"
    config_args = ["--config", "config/quickstart.yaml"] if command == "run" else ["-o", str(tmp_path / "out")]
    done = vsr_replay(command, *config_args, "--redis", dead, "--stream", "vsr-test:none")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("vsr-replay: ") and "store_unavailable" not in done.stderr


def test_a_corrupt_stretch_of_a_closed_segment_is_reported_and_read_past(tmp_path):
    """40 bytes overwritten in the middle of a closed segment: the frames they hit are lost, counted on stderr;
    every frame after them, in that segment and the next, is exported."""
    from vsr_fast.events.embedded import EmbeddedLog
    from vsr_fast.events.segments import segment_paths
    from vsr_fast.events.types import RequestReceived, encode_event

    directory = tmp_path / "stream"
    log = EmbeddedLog(directory, maxlen=80)     # ten events a segment
    for i in range(1, 31):
        log.send([(b"s" * 16, i, encode_event(RequestReceived(replay_id=f"r{i:02d}", seq=0, body_bytes=i)))])
    log.close()
    (_, first), *rest = segment_paths(directory)
    assert len(rest) >= 2
    data = bytearray(first.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 40] = b"\xff" * 40
    first.write_bytes(bytes(data))
    out = tmp_path / "export.jsonl"
    done = vsr_replay("export", "--journal", str(directory), "-o", str(out))
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["event"]["replay_id"] for line in out.read_text().splitlines()]
    lost = [f"r{i:02d}" for i in range(1, 31) if f"r{i:02d}" not in ids]
    assert 1 <= len(lost) <= 2 and ids == sorted(ids), lost
    assert "r10" in ids and "r30" in ids, "the rest of the damaged segment and the segments after it"
    assert "unreadable journal bytes read past" in done.stderr and first.name in done.stderr, done.stderr
