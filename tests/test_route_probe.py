"""``vsr-fast route probe``: prompts and probes files through a configuration's routing, in process and
against a running router's preview, through the CLI's main() (one test runs the command itself)."""
from __future__ import annotations

import base64
import hashlib
import json
import subprocess

import pytest
import yaml

from vsr_fast.cli.probes_file import read_probes
from vsr_fast.server.route import decode_chat

from .procs import ROOT, cli, cli_process, router, write_config

ANCHOR_PROBES = sorted((ROOT.parent / "shared" / "anchors" / "vllm-sr").glob("*.probes.yaml"))

# A 1x1 PNG, as a probes file's fixtures.images carries one.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")).decode()


def probe(*args: str) -> subprocess.CompletedProcess:
    """The command's main() in this process; the first test runs it as the process a user starts as well."""
    return cli("route", "probe", *args)


def keyword_config(tmp_path) -> str:
    """Keywords, an image condition and three algorithms: routes decided without a decision model."""
    models = ["code-model", "vision-model", "general-model", "small", "large"]
    doc = {
        "version": "v0.5",
        "providers": {"models": [{"name": m, "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}
                                 for m in models]},
        "recipes": [{
            "name": "default",
            "signals": {"keywords": [{"name": "code", "keywords": ["python", "rust"]},
                                     {"name": "long", "keywords": ["filler"]}],
                        "input_modality": [{"name": "has_image", "modality": "image"}]},
            "decisions": [
                {"name": "vision", "priority": 30, "modelRefs": [{"model": "vision-model"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "input_modality", "name": "has_image"}]}},
                {"name": "code", "priority": 20, "modelRefs": [{"model": "code-model"}],
                 "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "code"}]}},
                {"name": "padded", "priority": 10, "modelRefs": [{"model": "small"}, {"model": "large"}],
                 "algorithm": {"type": "random"},
                 "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "long"}]}},
                {"name": "general", "priority": 0, "modelRefs": [{"model": "general-model"}]},
            ],
        }],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {"router": {"headers": {"debug": "any"}}},
    }
    return write_config(doc, str(tmp_path))


def probes_file(tmp_path, *, wrong_general: bool = False) -> str:
    doc = {
        "schema_version": "v1", "name": "test",
        "fixtures": {"images": {"dot": {"media_type": "image/png", "data_base64": PNG}}},
        "decisions": [
            {"id": "code", "expected_decision": "code", "expected_algorithm": "static", "expected_plugins": ["x"],
             "variants": [{"id": "python", "query": "a python list comprehension", "tags": ["baseline"]},
                          {"id": "rust_history", "messages": [
                              {"role": "user", "content": "hello"},
                              {"role": "assistant", "content": "hi"},
                              {"role": "user", "content": "how do rust lifetimes work"}]}]},
            {"id": "vision", "expected_decision": "vision", "model": "vsr/auto",
             "variants": [{"id": "image", "messages": [{"role": "user", "content": [
                 {"type": "text", "text": "what is this"}, {"type": "image_fixture", "fixture": "dot"}]}]}]},
            {"id": "padded", "expected_decision": "padded", "expected_algorithm": "random",
             "variants": [{"id": "padding", "query": "summarize",
                           "padding": {"text": "filler words ", "repeat": 50, "placement": "around"}},
                          {"id": "generated", "messages": [{"role": "user", "content": [
                              {"type": "text", "text": "count these"}]}],
                           "generated_text": {"message_index": 0, "content_index": 1, "target_text_bytes": 3000}}]},
            {"id": "general", "expected_decision": "code" if wrong_general else "general",
             "variants": [{"id": "weather", "query": "how is the weather", "repeat": 3},
                          {"id": "greeting", "query": "hello there"}]},
        ],
    }
    path = tmp_path / "test.probes.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def test_a_prompt_in_process_prints_its_route_and_checks_it(tmp_path):
    config = keyword_config(tmp_path)
    ok = cli_process("route", "probe", "--config", config, "--prompt", "a python question", "--expect-decision",
                     "code", "--expect-algorithm", "static", "--expect-recipe", "default")
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "decision: code" in ok.stdout and "model: code-model" in ok.stdout
    assert "signals: keyword:code" in ok.stdout
    row = next(line for line in ok.stdout.splitlines() if line.startswith("code "))
    assert row.split()[:4] == ["code", "1", "1", "100.0%"]
    miss = probe("--config", config, "--prompt", "a python question", "--expect-decision", "general")
    assert miss.returncode == 1
    assert "MISS (prompt)/prompt: decision: expected general, got code" in miss.stdout


def test_a_probe_the_request_would_fail_is_no_pass_and_shows_its_signals(tmp_path):
    """Trial 8b: an unresolved fail_request decision's error printed, then counted as passed with exit 0 and
    "signals: (none matched)" though keyword k matched."""
    doc = yaml.safe_load(open(keyword_config(tmp_path)))
    recipe = doc["recipes"][0]
    recipe["signals"]["systemone"] = [{"name": "dead", "deployment": "remote", "timeout_ms": 300,
                                       "question": {"type": "noul", "instructions": "Is this urgent?"}}]
    recipe["decisions"].insert(0, {"name": "fail", "priority": 100, "modelRefs": [{"model": "large"}], "rules": {
        "operator": "AND", "on_unknown": "fail_request",
        "conditions": [{"type": "keyword", "name": "code"}, {"type": "systemone", "name": "dead"}]}})
    doc["global"]["model_catalog"] = {"deployments": {"remote": {
        "provider": "systemone", "endpoint": "http://127.0.0.1:9/v1/systemone", "model": "d3", "timeout_ms": 300}}}
    config = write_config(doc, str(tmp_path))
    run = probe("--config", config, "--prompt", "a python question")
    assert run.returncode == 1, run.stderr + run.stdout
    assert "signals: keyword:code" in run.stdout
    assert "error: 503 decision_unresolved: decision 'fail'" in run.stdout and "systemone:dead" in run.stdout
    total = next(line for line in run.stdout.splitlines() if line.startswith("total "))
    assert total.split() == ["total", "1", "0", "0.0%"]
    out = json.loads(probe("--config", config, "--prompt", "a python question", "--json").stdout)
    assert out["probes"][0]["ok"] is False and out["probes"][0]["error"]["code"] == "decision_unresolved"


def test_a_selector_probes_to_the_model_it_picks(tmp_path):
    """Trial 8b: multi_factor's cheaper, better model was reported as the first modelRef."""
    doc = yaml.safe_load(open(keyword_config(tmp_path)))
    for m in doc["providers"]["models"]:
        m["pricing"] = {"input": 10, "output": 10} if m["name"] == "small" else {"input": 1, "output": 1}
    padded = next(d for d in doc["recipes"][0]["decisions"] if d["name"] == "padded")
    padded["algorithm"] = {"type": "multi_factor", "multi_factor": {
        "weights": {"cost": 1, "latency": 0, "error_rate": 0, "quality": 1, "domain": 0},
        "quality": {"small": 0.1, "large": 0.9}}}
    run = probe("--config", write_config(doc, str(tmp_path)), "--prompt", "filler", "--json")
    assert run.returncode == 0, run.stderr + run.stdout
    got = json.loads(run.stdout)["probes"][0]
    assert got["model"] == "large" and got["trace"]["ranking"] == ["large=0.800", "small=-0.900"]


def test_a_probes_file_in_process_reports_each_decision(tmp_path):
    run = probe("--config", keyword_config(tmp_path), "--probes", probes_file(tmp_path), "--json")
    assert run.returncode == 0, run.stderr + run.stdout
    out = json.loads(run.stdout)
    got = {(p["group"], p["id"]): p for p in out["probes"]}
    assert len(got) == 7 and all(p["ok"] for p in out["probes"])
    assert got[("padded", "padding")]["algorithm"] == "random"
    assert got[("vision", "image")]["model"] == "vision-model"
    assert got[("code", "rust_history")]["trace"]["decision"] == "code"
    assert got[("code", "python")]["trace"]["signals"] == ["keyword:code"]
    assert got[("code", "python")]["public"]["x-vsr-selected-decision"] == "code"
    assert out["decisions"]["padded"] == {"probes": 2, "passed": 2, "pass_rate": 100.0, "got_instead": {}}


def test_a_mismatch_fails_and_the_table_says_what_came_instead(tmp_path):
    run = probe("--config", keyword_config(tmp_path), "--probes", probes_file(tmp_path, wrong_general=True))
    assert run.returncode == 1
    assert "MISS general/weather: decision: expected code, got general" in run.stdout
    row = next(line for line in run.stdout.splitlines() if line.startswith("general "))
    assert row.split() == ["general", "2", "0", "0.0%", "general", "x2"]
    total = next(line for line in run.stdout.splitlines() if line.startswith("total "))
    assert total.split() == ["total", "7", "5", "71.4%"]
    # The command line's expectation is over the file's, for every probe.
    run = probe("--config", keyword_config(tmp_path), "--probes", probes_file(tmp_path), "--expect-recipe", "other")
    assert run.returncode == 1 and run.stdout.count("recipe: expected other, got default") == 7


def test_against_a_running_router_the_receipts_match_the_in_process_ones(tmp_path):
    config = keyword_config(tmp_path)
    probes = probes_file(tmp_path)
    local = json.loads(probe("--config", config, "--probes", probes, "--json").stdout)
    with router(config) as proc:
        remote_run = probe("--endpoint", proc.url, "--probes", probes, "--json")
        assert remote_run.returncode == 0, remote_run.stderr + remote_run.stdout
        remote = json.loads(remote_run.stdout)
        untraced = json.loads(probe("--endpoint", proc.url, "--prompt", "rust", "--no-debug", "--json").stdout)
        miss = probe("--endpoint", proc.url, "--prompt", "a rust question", "--expect-algorithm", "random")
    facts = ("group", "id", "recipe", "decision", "algorithm", "signals", "ok")
    assert [{k: p[k] for k in facts} for p in remote["probes"]] == [{k: p[k] for k in facts} for p in local["probes"]]
    assert [p["trace"] for p in remote["probes"]] == [p["trace"] for p in local["probes"]]
    assert remote["probes"][0]["public"]["x-vsr-selected-model"] == "code-model"
    assert untraced["probes"][0]["trace"] is None and untraced["probes"][0]["decision"] == "code"
    assert miss.returncode == 1 and "algorithm: expected random, got static" in miss.stdout


def test_the_embedded_decision_model_routes_in_process():
    run = probe("--config", str(ROOT / "config" / "quickstart.yaml"), "--prompt",
                "What is the integral of x squared from 0 to 3?", "--expect-decision", "math", "--json")
    assert run.returncode == 0, run.stderr + run.stdout
    (receipt,) = json.loads(run.stdout)["probes"]
    assert "domain:math" in receipt["signals"] and receipt["model"] == "reasoning-model"


@pytest.mark.parametrize(("change", "line"), [
    (lambda d: d["decisions"][0].update(variants="x"), "decisions[0].variants: "),
    (lambda d: d["decisions"][1]["variants"][0]["messages"][0]["content"][1].update(fixture="nope"),
     "decisions[1].variants[0].messages[0].content[1].fixture: no image 'nope'"),
    (lambda d: d["decisions"][0]["variants"][0].update(messages=[]), "exactly one of query and messages"),
    (lambda d: d.pop("decisions"), "decisions"),
])
def test_a_bad_probes_file_is_refused_with_the_path(tmp_path, change, line):
    path = probes_file(tmp_path)
    doc = yaml.safe_load(open(path))
    change(doc)
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    run = probe("--config", keyword_config(tmp_path), "--probes", path)
    assert run.returncode == 2
    assert line in run.stderr and run.stderr.startswith("error: ")


def test_a_configuration_that_does_not_load_or_a_router_that_does_not_answer_exits_2(tmp_path):
    bad = write_config({"version": "v0.5", "recipes": [{"name": "default", "strategy": "sometimes"}]},
                       str(tmp_path))
    run = probe("--config", bad, "--prompt", "hi")
    assert run.returncode == 2 and "recipes[default].strategy: invalid_value" in run.stderr
    with router(keyword_config(tmp_path)) as proc:
        url = proc.url
    gone = probe("--endpoint", url, "--prompt", "hi")
    assert gone.returncode == 2 and url in gone.stderr


@pytest.mark.parametrize("path", ANCHOR_PROBES, ids=lambda p: p.name)
def test_the_anchors_probes_files_read_as_requests_the_router_takes(path):
    """vLLM-SR's maintained probes: every variant a Chat Completions body, images inline, lengths as asked."""
    raw = yaml.safe_load(path.read_text())
    variants = [(group, variant) for group in raw["decisions"] for variant in group["variants"]]
    probes = read_probes(str(path), "auto")
    assert len(probes) == len(variants) and len(ANCHOR_PROBES) == 3
    for probe_, (group, variant) in zip(probes, variants):
        assert (probe_.group, probe_.id) == (group["id"], variant["id"])
        assert probe_.expect.decision == group["expected_decision"]
        assert probe_.body["model"] == group.get("model", "auto")
        encoded = json.dumps(probe_.body)
        assert "image_fixture" not in encoded
        request = decode_chat(encoded.encode())
        generated = variant.get("generated_text")
        if generated:
            parts = request.messages[generated["message_index"]].content
            text = sum(len(p.text.encode()) for p in parts if hasattr(p, "text"))
            assert text == generated["target_text_bytes"]


def test_a_router_with_keys_is_probed_with_an_admin_key(tmp_path):
    """The preview is an admin route: without a key nothing is probed (exit 2, the router's reason said)."""
    doc = yaml.safe_load(open(keyword_config(tmp_path)))
    doc["global"]["router"]["auth"] = {"enabled": True, "keys": [
        {"id": "ops", "sha256": hashlib.sha256(b"vsk-ops").hexdigest(), "admin": True},
        {"id": "app", "sha256": hashlib.sha256(b"vsk-app").hexdigest()}]}
    with router(write_config(doc, str(tmp_path))) as proc:
        admin = probe("--endpoint", proc.url, "--prompt", "rust", "--api-key", "vsk-ops", "--expect-decision", "code")
        anonymous = probe("--endpoint", proc.url, "--prompt", "rust")
        client = probe("--endpoint", proc.url, "--prompt", "rust", "--api-key", "vsk-app")
    assert admin.returncode == 0, admin.stderr + admin.stdout
    assert anonymous.returncode == 2 and "401 missing_api_key" in anonymous.stderr
    assert client.returncode == 2 and "403 admin_only" in client.stderr
