"""``config migrate``: every vLLM-SR anchor to a v0.5 file that ``config validate`` accepts, held as golden files;
migrating the output again changes nothing; the spec's worked examples (6.6, 8.1) migrate as the spec shows.

The goldens live in tests/fixtures/migrate (``<anchor>.migrated.yaml`` and ``<anchor>.notes.txt``: the notes,
then the validation's warnings, each explained). ``VSR_UPDATE_GOLDENS=1`` rewrites them from the code.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

from vsr_fast.config.migrate import dump, migrate
from vsr_fast.routing.migrate_target import router_target
from vsr_fast.routing.loaded import validate_bytes

from .procs import ROOT

ANCHOR_DIR = ROOT.parent / "shared" / "anchors" / "vllm-sr"
# Probes are evaluation suites and runtime-* a store's own settings: neither is a router configuration.
ANCHORS = sorted(p for p in ANCHOR_DIR.glob("*.yaml") if ".probes." not in p.name and not p.name.startswith("runtime-"))
GOLDEN = Path(__file__).parent / "fixtures" / "migrate"
UPDATE = os.environ.get("VSR_UPDATE_GOLDENS") == "1"
# The hallucination plugin has no rewrite that loads here (no built-in decision model answers its preset): migrate
# drops it with a note that says how to restore it, so every migrated file loads (spec 5.11).
UNANSWERED: dict[str, list[str]] = {}


def run(path: Path):
    return migrate(yaml.safe_load(path.read_text()), router_target())


def test_the_anchors_are_there():
    assert len(ANCHORS) == 15, [p.name for p in ANCHORS]


@pytest.fixture
def in_tool_catalog_dir(tmp_path, monkeypatch):
    """The reference file's tool catalog is read at load, relative to where the router starts (a review note
    says so); validation runs where an empty one exists."""
    catalog = tmp_path / "config" / "runtime" / "tools" / "tools_db.json"
    catalog.parent.mkdir(parents=True)
    catalog.write_text("[]")
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("path", ANCHORS, ids=[p.name for p in ANCHORS])
def test_anchor_migrates_to_its_golden_file_which_validates(path: Path, in_tool_catalog_dir):
    result = run(path)
    text = dump(result.document)
    report = validate_bytes(text.encode())
    # missing_credential warnings depend on the environment the test runs in, so the goldens leave them out.
    warnings = [w for w in report.warnings if ": missing_credential: " not in w]
    notes = "".join(f"{n.line()}\n" for n in result.notes) + "".join(f"warning: {w}\n" for w in warnings)
    golden_yaml, golden_notes = GOLDEN / f"{path.stem}.migrated.yaml", GOLDEN / f"{path.stem}.notes.txt"
    if UPDATE:
        golden_yaml.write_text(text)
        golden_notes.write_text(notes)
    assert text == golden_yaml.read_text()
    assert notes == golden_notes.read_text()
    # A fragment is a part of a file: one that holds no route is refused as routing nothing, and only that.
    partial = path.stem.startswith("fragment-")
    assert [e for e in report.errors if not (partial and "the configuration routes nothing" in e)] == \
        UNANSWERED.get(path.name, [])
    assert result.document["version"] == "v0.5"


@pytest.mark.parametrize("path", ANCHORS, ids=[p.name for p in ANCHORS])
def test_migrating_the_output_again_changes_nothing(path: Path):
    first = run(path)
    text = dump(first.document)
    again = migrate(yaml.safe_load(text), router_target())
    assert dump(again.document) == text
    assert again.notes == []


def test_every_note_has_a_path_a_kind_and_a_reason():
    for path in ANCHORS:
        for note in run(path).notes:
            assert note.path and note.kind in ("rewrite", "review", "drop") and len(note.text) > 10, note


SPEC_6_6 = """
version: v0.3
providers:
  models:
  - {name: reasoner, backend_refs: [{endpoint: http://reasoner.example.com/v1}]}
  - {name: fast, backend_refs: [{endpoint: http://fast.example.com/v1}]}
routing:
  modelCards:
  - {name: reasoner, capabilities: [chat]}
  signals:
    keywords: [{name: urgent, operator: OR, keywords: [urgent, asap]}]
    domains: [{name: stem, mmlu_categories: [math, physics]}]
    jailbreak: [{name: attack, threshold: 0.88, include_history: true}]
    pii: [{name: restricted_pii, threshold: 0.18, pii_types_allowed: [DATE_TIME, LOCATION]}]
    reasks: [{name: repeated, threshold: 0.8, lookback_turns: 2}]
    decision: [{name: needs_tools, question: {type: noul, instructions: "Does this need a tool call?"}}]
  decisions:
  - name: hard-stem
    priority: 200
    rules: {operator: AND, conditions: [{type: domain, name: stem}, {type: decision, name: needs_tools}]}
    modelRefs: [{model: fast}, {model: reasoner}]
    algorithm: {type: confidence, confidence: {confidence_method: avg_logprob, threshold: 0.7}}
    emits: [{kind: retention, retention: {ttl_turns: 3}}]
"""


def test_the_spec_6_6_example_migrates_as_the_spec_shows():
    result = migrate(yaml.safe_load(SPEC_6_6), router_target())
    doc = result.document
    assert doc["providers"]["models"][0] == {"name": "reasoner", "capabilities": ["chat"],
                                             "backend_refs": [{"endpoint": "http://reasoner.example.com/v1"}]}
    (recipe,) = doc["recipes"]
    assert recipe["name"] == "default"
    signals = recipe["signals"]
    assert signals["domains"] == [{"name": "stem", "labels": ["math", "physics"]}]
    assert signals["jailbreak"] == [{"name": "attack", "predicate": {"gte": 0.88}, "input": {"history": True}}]
    assert signals["pii"] == [{"name": "restricted_pii", "predicate": {"gte": 0.18},
                               "ignore_labels": ["DATE_TIME", "LOCATION"]}]
    assert signals["systemone"] == [{"name": "needs_tools",
                                     "question": {"type": "noul", "instructions": "Does this need a tool call?"}}]
    assert signals["turn_relation"] == [{"name": "repeated", "labels": ["reask"], "input": {"previous_turns": 4}}]
    (decision,) = recipe["decisions"]
    assert decision["rules"] == {"operator": "AND", "conditions": [{"type": "domain", "name": "stem"},
                                                                   {"type": "systemone", "name": "needs_tools"}]}
    # emits became retention (spec 5.7), kept as the spec writes it, with no note that drops it.
    assert decision["retention"] == {"ttl_turns": 3}
    assert [n.line() for n in result.notes if "retention" in n.path + n.text] == [
        "recipes[default].decisions[0].emits: rewrite: emits became retention (retention was its only kind)"]
    # The spec writes order: size, and order: size reads every candidate's param_size: the example's cards give
    # none, so the Looper tried them as listed, which the modelRefs order keeps (the file must load), and the
    # note says how to escalate by size (the sized variant below writes order: size).
    assert decision["algorithm"] == {"type": "escalate", "escalate": {
        "accept": {"confidence": {"method": "avg_logprob", "gte": 0.7}}}}
    (esc,) = [n for n in result.notes if n.path == "recipes[default].decisions[0].algorithm"]
    assert esc.kind == "review" and "none of fast, reasoner has one, so it tried them as listed; write " \
        "providers.models[].param_size of each and order: size" in esc.text, esc.text
    assert any(n.path.endswith("reasks[repeated].threshold") and n.kind == "review" for n in result.notes)
    assert validate_bytes(dump(doc).encode()).errors == []


def test_the_spec_6_6_example_with_sized_cards_writes_order_size_as_the_spec_shows():
    raw = yaml.safe_load(SPEC_6_6)
    raw["routing"]["modelCards"] = [{"name": "reasoner", "capabilities": ["chat"], "param_size": "32B"},
                                    {"name": "fast", "param_size": "8B"}]
    result = migrate(raw, router_target())
    doc = result.document
    assert [m.get("param_size") for m in doc["providers"]["models"]] == ["32B", "8B"]
    (decision,) = doc["recipes"][0]["decisions"]
    assert decision["algorithm"] == {"type": "escalate", "escalate": {
        "order": "size", "accept": {"confidence": {"method": "avg_logprob", "gte": 0.7}}}}
    assert decision["retention"] == {"ttl_turns": 3}
    assert validate_bytes(dump(doc).encode()).errors == []
    # escalation_order: declared kept the modelRefs order.
    raw["routing"]["decisions"][0]["algorithm"]["confidence"]["escalation_order"] = "declared"
    again = migrate(raw, router_target()).document["recipes"][0]["decisions"][0]["algorithm"]
    assert "order" not in again["escalate"]


def test_the_decision_alias_with_its_settings_under_decision_migrates_to_systemone():
    raw = yaml.safe_load(SPEC_6_6)
    raw["routing"]["decisions"][0]["algorithm"] = {"type": "decision", "decision": {"instructions": "which?"}}
    doc = migrate(raw, router_target()).document
    assert doc["recipes"][0]["decisions"][0]["algorithm"] == {"type": "systemone",
                                                              "systemone": {"instructions": "which?"}}
    assert validate_bytes(dump(doc).encode()).errors == []


SPEC_8_1 = """
version: v0.3
providers:
  models:
  - {name: qwen3-8b, backend_refs: [{endpoint: http://qwen3-8b.example.com/v1}]}
  - {name: qwen3-32b, backend_refs: [{endpoint: http://qwen3-32b.example.com/v1}]}
global:
  integrations:
    looper:
      remom:
        model_names: [vllm-sr/remom]
  router:
    auto_model_names: [vllm-sr/auto]
routing:
  signals:
    keywords: [{name: proof, operator: OR, keywords: [prove, derive]}]
  decisions:
  - name: proofs
    priority: 100
    rules: {operator: AND, conditions: [{type: keyword, name: proof}]}
    modelRefs: [{model: qwen3-8b}, {model: qwen3-32b}]
    algorithm: {type: remom, remom: {breadth_schedule: [3, 2]}}
  - name: chat
    priority: 10
    rules: {operator: AND, conditions: []}
    modelRefs: [{model: qwen3-8b}]
"""


def test_looper_model_names_become_a_default_algorithm_recipe():
    doc = migrate(yaml.safe_load(SPEC_8_1), router_target()).document
    names = [r["name"] for r in doc["recipes"]]
    assert names == ["default", "default-remom"]
    assert [d["name"] for d in doc["recipes"][1]["decisions"]] == ["proofs"]
    assert doc["recipes"][1]["signals"] == doc["recipes"][0]["signals"]
    assert doc["entrypoints"] == [{"model_names": ["vllm-sr/auto"], "recipe": "default", "default": True},
                                  {"model_names": ["vllm-sr/remom"], "recipe": "default-remom"}]
    errors = validate_bytes(dump(doc).encode()).errors
    assert errors == []


def test_kb_conditions_fold_and_a_decision_that_can_never_match_is_dropped():
    doc = yaml.safe_load(SPEC_8_1)
    doc["routing"]["signals"]["kb"] = [{"name": "law", "kb": "mmlu", "target": {"kind": "label", "value": "law"}}]
    doc["routing"]["decisions"][0]["rules"] = {"operator": "AND", "conditions": [{"type": "kb", "name": "law"}]}
    doc["routing"]["decisions"][1]["rules"] = {"operator": "OR", "conditions": [
        {"type": "kb", "name": "law"}, {"type": "keyword", "name": "proof"}]}
    result = migrate(doc, router_target())
    decisions = result.document["recipes"][0]["decisions"]
    assert [d["name"] for d in decisions] == ["chat"]
    assert decisions[0]["rules"] == {"operator": "OR", "conditions": [{"type": "keyword", "name": "proof"}]}
    assert any(n.path == "recipes[default].decisions[0]" and n.kind == "drop" for n in result.notes)


def test_cli_migrate_writes_next_to_the_file_and_refuses_to_overwrite(tmp_path):
    from .procs import cli as run_cli
    from .procs import cli_process

    source = tmp_path / "config.yaml"
    source.write_text(SPEC_6_6)
    result = cli_process("config", "migrate", str(source))       # the command a user runs; main() in-process after
    assert result.returncode == 0, result.stderr
    out = tmp_path / "config.migrated.yaml"
    assert yaml.safe_load(out.read_text())["version"] == "v0.5"
    assert "note: version: rewrite: version 'v0.3' became v0.5" in result.stderr
    assert result.stderr.strip().endswith("it loads")
    again = run_cli("config", "migrate", str(source))
    assert again.returncode == 2 and "--force" in again.stderr
    assert run_cli("config", "migrate", str(source), "--force").returncode == 0
    assert run_cli("config", "validate", str(out)).returncode == 0


def test_model_resource_forms_and_module_thresholds():
    doc = yaml.safe_load(SPEC_8_1)
    doc["routing"]["signals"]["jailbreak"] = [{"name": "attack"}]
    doc["routing"]["data_policy"] = {"replay": True, "replay_personal_data": False}
    doc["global"]["model_catalog"] = {
        "modules": {"prompt_guard": {"enabled": True, "threshold": 0.7, "on_error": "block"}},
        "deployments": {"fast-onnx": {"provider": "ort", "artifact": "vsr-static-2", "operating_point": "f1"},
                        "reranker": {"provider": "rerank", "artifact": "x"}},
        "bindings": {"domain": "reranker", "jailbreak": "fast-onnx"},
        "external": [{"name": "judge", "model_role": "preference", "llm_provider": "openai"}]}
    result = migrate(doc, router_target())
    out = result.document
    recipe = out["recipes"][0]
    assert recipe["signals"]["jailbreak"] == [{"name": "attack", "predicate": {"gte": 0.7}, "on_unknown": "match"}]
    assert recipe["plugins"] == [{"type": "router_replay", "configuration": {"capture_personal_data": False}}]
    catalog = out["global"]["model_catalog"]
    assert catalog["deployments"] == {"fast-onnx": {"provider": "model_runtime", "artifact": "vsr-static-2"}}
    assert catalog["bindings"] == {"jailbreak": "fast-onnx"}
    assert "external" not in catalog and "modules" not in catalog
    kinds = {n.path: n.kind for n in result.notes}
    assert kinds["global.model_catalog.deployments.reranker"] == "drop"
    assert kinds["global.model_catalog.deployments.fast-onnx.operating_point"] == "drop"
    assert kinds["global.model_catalog.external[0]"] == "drop"
    assert kinds["recipes[default].signals.jailbreak[attack]"] == "rewrite"        # inherits the module's threshold
    errors = validate_bytes(dump(out).encode()).errors
    assert errors == []


@pytest.mark.parametrize("path", sorted((ROOT / "config").rglob("*.yaml")), ids=lambda p: p.name)
def test_a_v05_file_migrates_to_itself_without_notes(path: Path):
    raw = yaml.safe_load(path.read_text())
    result = migrate(copy.deepcopy(raw), router_target())
    assert result.document == raw
    assert result.notes == []


FLAT = """
semantic_cache: {enabled: true, similarity_threshold: 0.8, max_entries: 1000}
prompt_guard: {enabled: true, threshold: 0.7}
bert_model: {model_id: sentence-transformers/all-MiniLM-L12-v2, threshold: 0.6}
vllm_endpoints:
- {name: endpoint1, address: 127.0.0.1, port: 11434, models: [small, large], weight: 1}
- {name: endpoint2, address: 127.0.0.2, port: 11435, models: [large], weight: 2}
model_config:
  large: {preferred_endpoints: [endpoint2]}
categories:
- name: math
  model_scores: [{model: small, score: 0.4}, {model: large, score: 0.9, use_reasoning: true}]
- name: other
  model_scores: [{model: small, score: 0.8}]
default_model: small
"""


def test_the_flat_layout_before_v03_migrates_in_one_run():
    result = migrate(yaml.safe_load(FLAT), router_target())
    doc = result.document
    assert doc["providers"]["models"] == [
        {"name": "small", "backend_refs": [{"name": "endpoint1", "endpoint": "127.0.0.1:11434", "weight": 1}]},
        {"name": "large", "backend_refs": [{"name": "endpoint2", "endpoint": "127.0.0.2:11435", "weight": 2},
                                           {"name": "endpoint1", "endpoint": "127.0.0.1:11434", "weight": 1}]}]
    (recipe,) = doc["recipes"]
    assert recipe["signals"] == {"domains": [{"name": "math"}, {"name": "other"}]}
    assert [d["modelRefs"] for d in recipe["decisions"]] == [[{"model": "large", "use_reasoning": True},
                                                              {"model": "small"}], [{"model": "small"}]]
    assert recipe["fallback"] == {"modelRefs": [{"model": "small"}]}
    assert doc["global"]["plugins"][0]["type"] == "response_cache"
    kinds = {n.path: n.kind for n in result.notes}
    assert kinds["prompt_guard"] == "review" and kinds["bert_model"] == "drop"
    assert validate_bytes(dump(doc).encode()).errors == []
    assert migrate(copy.deepcopy(doc), router_target()).notes == []


LITELLM = """
model_list:
  - model_name: gpt-4o
    litellm_params: {model: openai/gpt-4o, api_key: os.environ/OPENAI_API_KEY}
router_settings:
  routing_strategy: simple-shuffle
litellm_settings:
  drop_params: true
"""


@pytest.mark.parametrize("text", [LITELLM, "version: v9.1\nproviders: {}\n", "foo: 1\n"],
                         ids=["litellm", "unknown-version", "unknown-keys"])
def test_a_document_of_no_known_layout_is_refused_not_migrated(tmp_path, text):
    from .test_config_load import run_cli

    with pytest.raises(ValueError, match="not a vLLM-SR configuration"):
        migrate(yaml.safe_load(text), router_target())
    source = tmp_path / "litellm.yaml"
    source.write_text(text)
    result = run_cli("config", "migrate", str(source))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "litellm.migrated.yaml").exists()
    [line] = result.stderr.splitlines()
    assert line.startswith(f"vsr-fast: {source}: not a vLLM-SR configuration"), line
    if text == LITELLM:
        assert "model_list" in line and "LiteLLM" in line, line


def test_a_hallucination_plugin_is_a_guard_where_its_preset_is_answered_and_dropped_with_how_where_not():
    doc = {"version": "v0.3", "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://h/v1"}]}]},
           "routing": {"decisions": [{"name": "d", "rules": {"operator": "AND", "conditions": []},
                                      "modelRefs": [{"model": "m"}],
                                      "plugins": [{"type": "hallucination", "configuration": {"action": "block"}}]}]}}
    answered = migrate(doc)       # a Target that answers every preset: the spec's rewrite
    plugins = answered.document["recipes"][0]["decisions"][0]["plugins"]
    assert plugins[0]["type"] == "response_guard"
    assert plugins[0]["configuration"]["rules"][0]["when"] == {"type": "hallucination", "name": "hallucination"}
    here = migrate(doc, router_target())      # this router: no built-in model answers it
    assert not here.document["recipes"][0]["decisions"][0].get("plugins")
    dropped = [n.line() for n in here.notes if "hallucination plugin" in n.line()]
    assert len(dropped) == 1 and "drop:" in dropped[0] and "global.model_catalog.bindings.hallucination" in dropped[0]
    assert validate_bytes(dump(here.document).encode()).errors == []


# vLLM-SR's cookbook shape: the endpoints name no models; model_config declares each model and the endpoints
# that serve it (preferred_endpoints).
FLAT_MODEL_CONFIG = """
vllm_endpoints:
- {name: endpoint1, address: 127.0.0.1, port: 28401, weight: 1}
model_config:
  qwen3: {preferred_endpoints: [endpoint1]}
categories:
- name: math
  model_scores: [{model: qwen3, score: 0.9, use_reasoning: true}]
- name: other
  model_scores: [{model: qwen3, score: 0.7}]
default_model: qwen3
"""


def test_a_flat_file_whose_models_only_model_config_declares_migrates_to_a_file_that_loads(tmp_path):
    """``vsr-fast config migrate`` as a user runs it: qwen3 becomes a provider model on its preferred endpoint (its
    weight kept), the file loads, and the notes match the golden (``VSR_UPDATE_GOLDENS=1`` rewrites it)."""
    from .procs import cli_process

    source = tmp_path / "flat-model-config.yaml"
    source.write_text(FLAT_MODEL_CONFIG)
    result = cli_process("config", "migrate", str(source))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "flat-model-config.migrated.yaml").read_text()
    assert yaml.safe_load(text)["providers"]["models"] == [
        {"name": "qwen3", "backend_refs": [{"name": "endpoint1", "endpoint": "127.0.0.1:28401", "weight": 1}]}]
    notes = "".join(line.replace(str(tmp_path), "TMP") + "\n" for line in result.stderr.splitlines())
    golden_yaml, golden_notes = GOLDEN / "flat-model-config.migrated.yaml", GOLDEN / "flat-model-config.notes.txt"
    if UPDATE:
        golden_yaml.write_text(text)
        golden_notes.write_text(notes)
    assert text == golden_yaml.read_text()
    assert notes == golden_notes.read_text()


def test_a_model_config_model_on_no_known_endpoint_is_a_review_note_not_a_rewrite():
    doc = yaml.safe_load(FLAT_MODEL_CONFIG)
    doc["model_config"]["qwen3"]["preferred_endpoints"] = ["endpoint9"]
    result = migrate(doc, router_target())
    assert result.document["providers"]["models"] == []
    kinds = {n.path: n.kind for n in result.notes}
    assert kinds["model_config.qwen3"] == "review"
    assert "vllm_endpoints" not in kinds
