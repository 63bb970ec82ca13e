"""Configuration loading: every bad form fails with its one line, path and code."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vsr_fast.routing import load_bytes, load_raw
from vsr_fast.errors import ConfigError

from .procs import ROOT, cli, cli_process

ANCHORS = sorted((ROOT.parent / "shared" / "anchors" / "vllm-sr").glob("*config*.yaml"))


def base() -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "fast", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]},
            {"name": "smart", "backend_refs": [{"endpoint": "127.0.0.1:10"}]},
        ]},
        "recipes": [{"name": "default", "signals": {"keywords": [{"name": "k", "keywords": ["kw"]}]}, "decisions": [
            {"name": "a", "modelRefs": [{"model": "fast"}]},
            {"name": "b", "priority": 5, "modelRefs": [{"model": "smart"}]},
            {"name": "c", "rules": {"operator": "OR", "conditions": [{"type": "keyword", "name": "k"}]},
             "modelRefs": [{"model": "fast"}]},
        ]}],
    }


def errors_of(doc: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(doc)
    return info.value.lines


def test_base_loads():
    loaded = load_raw(base())
    assert [d.name for d in loaded.config.recipes[0].decisions] == ["a", "b", "c"]
    assert loaded.config.global_.router.headers.debug == "none"


def test_quickstart_loads():
    loaded = load_bytes((ROOT / "config" / "quickstart.yaml").read_bytes())
    assert loaded.config.entrypoints[0].model_names == ["vsr/auto"]
    assert len(loaded.version_hash) == 16


def edit(path: str, value, *, delete: bool = False) -> dict:
    doc = base()
    node = doc
    keys = path.split("/")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
    if delete:
        del node[last]
    else:
        node[last] = value
    return doc


REMOTE = {"provider": "systemone", "endpoint": "https://systemone.example", "model": "m"}

CASES = [
    (edit("version", "v0.3"), ["version: invalid_value: 'v0.3' is not a schema this router reads; it reads `version: v0.5`"]),
    (edit("version", None, delete=True), ["version: missing_field: a v0.5 configuration starts with `version: v0.5`"]),
    (edit("routing", {"signals": {}}), ["routing: removed_section: the top-level routing block; its signals and decisions live in recipes[] in v0.5"]),
    (edit("recipes/0/decisions/2/modelRefs/0/model", "ghost"),
     ["recipes[default].decisions[2].modelRefs[0].model: unknown_model: 'ghost' is not declared in providers.models"]),
    (edit("recipes/0/decisions/1/modelRefs/0/weigth", 2),
     ["recipes[default].decisions[1].modelRefs[0].weigth: unknown_field: not a field of this block; did you mean weight?"]),
    (edit("recipes/0/decisions/1/priority", "high"),
     ["recipes[default].decisions[1].priority: invalid_type: expected int, got str 'high'"]),
    (edit("recipes/0/decisions/0/modelRefs", []),
     ["recipes[default].decisions[0].modelRefs: missing_field: a decision names modelRefs or answers with a "
      "fast_response plugin"]),
    (edit("recipes/0/decisions/0/name", None, delete=True),
     ["recipes[default].decisions[0].name: missing_field: required"]),
    (edit("recipes/0/strategy", "random"),
     ["recipes[default].strategy: invalid_value: Invalid enum value 'random' (one of: priority, confidence)"]),
    (edit("recipes/0/decisions/0/algorithm", {"type": "confidence"}),
     ["recipes[default].decisions[0].algorithm.type: removed_algorithm_type: 'confidence' was removed; write "
      "type: escalate with one accept check (escalate.accept.confidence)"]),
    (edit("providers/models/1/backend_refs/0/timeout", 3),
     ["providers.models[smart].backend_refs[0].timeout: unknown_field: not a field of this block; did you mean "
      "read_timeout_ms?"]),
    (edit("providers/models/0/backend_refs/0/endpoint", "ftp://x"),
     ["providers.models[fast].backend_refs[0].endpoint: invalid_value: 'ftp://x': scheme must be http or https"]),
    (edit("providers/models/0/api_format", "grpc"),
     ["providers.models[fast].api_format: invalid_value: Invalid enum value 'grpc' (one of: openai, responses, anthropic, images, systemone)"]),
    (edit("providers/models/1/name", "fast"),
     ["providers.models[fast].name: duplicate_name: model 'fast' is declared more than once, at providers.models[0] "
      "and providers.models[1]; give each model its own name",
      "recipes[default].decisions[1].modelRefs[0].model: unknown_model: 'smart' is not declared in providers.models"]),
    (edit("recipes/0/decisions/1/name", "a"),
     ["recipes[default].decisions: duplicate_name: decision 'a' is declared more than once, at "
      "recipes[default].decisions[0] and recipes[default].decisions[1]"]),
    (edit("recipes/0/decisions/2/rules", {"operator": "NOT", "conditions": []}),
     ["recipes[default].decisions[2].rules.conditions: invalid_value: NOT takes exactly one condition"]),
    (edit("recipes/0/decisions/2/rules", {"operator": "AND", "type": "keyword", "name": "k"}),
     ["recipes[default].decisions[2].rules: invalid_value: a node is either an operator over conditions or a leaf, not both"]),
    (edit("recipes/0/decisions/2/rules", {"operator": "XOR"}),
     ["recipes[default].decisions[2].rules.operator: invalid_value: Invalid enum value 'XOR' (one of: AND, OR, NOT)"]),
    (edit("recipes/0/decisions/2/rules", {"operator": "AND", "conditions": [{"type": "keyword"}]}),
     ["recipes[default].decisions[2].rules.conditions[0]: invalid_value: a leaf condition needs both type and name"]),
    (edit("global", {"router": {"headers": {"debug": "everyone"}}}),
     ["global.router.headers.debug: invalid_value: Invalid enum value 'everyone' (one of: none, any, authenticated)"]),
    (edit("entrypoints", [{"api": "chat", "model_names": ["auto"], "recipe": "nope"}]),
     ["entrypoints[0].recipe: unknown_recipe: 'nope' is not declared in recipes"]),
    (edit("entrypoints", [{"api": "chat", "model_names": ["fast"], "recipe": "default"}]),
     ["entrypoints[0].model_names: invalid_value: 'fast' is a provider model; a request naming it goes to that model directly"]),
    (edit("entrypoints", [{"api": "chat", "model_names": ["x"], "recipe": "default", "default": True},
                          {"api": "chat", "model_names": ["x"], "recipe": "default"}]),
     ["entrypoints: duplicate_name: model name 'x' is claimed by more than one entrypoint"]),
    (edit("global", {"stores": {"event_stream": {"max_age_s": 10}}}),
     ["global.stores.event_stream.max_age_s: invalid_value: Expected `int` >= 60"]),
    (edit("global", {"stores": {"event_stream": {"max_age_s": "a week"}}}),
     ["global.stores.event_stream.max_age_s: invalid_type: expected int | null, got str 'a week'"]),
    (edit("global", {"stores": {"event_stream": {"maxlen": 10}}}),
     ["global.stores.event_stream.maxlen: invalid_value: Expected `int` >= 1000"]),
    (edit("global", {"router": {"limits": {"max_connections": 0}}}),
     ["global.router.limits.max_connections: invalid_value: Expected `int` >= 1"]),
    (edit("global", {"router": {"limits": {"max_connections": "many"}}}),
     ["global.router.limits.max_connections: invalid_type: expected int | null, got str 'many'"]),
    (edit("global", {"router": {"cors": {"allow_origins": ["https://app.example.com/"]}}}),
     [r"global.router.cors.allow_origins[0]: invalid_value: Expected `str` matching regex "
      r"'^(\\*|null|https?://[A-Za-z0-9.\\-\\[\\]:]+)$'"]),
    (edit("global", {"router": {"cors": {"allow_origins": "https://app.example.com"}}}),
     ["global.router.cors.allow_origins: invalid_type: expected array, got str 'https://app.example.com'"]),
    (edit("global", {"model_catalog": {"deployments": {"remote": {**REMOTE, "tls": {"ca_file": "/nonexistent/ca.pem"}}}}}),
     ["global.model_catalog.deployments.remote.tls.ca_file: file_unreadable: /nonexistent/ca.pem: No such file or "
      "directory"]),
    (edit("global", {"model_catalog": {"deployments": {"remote": {**REMOTE, "tls": {"ca_file": str(ROOT / "Makefile")}}}}}),
     [f"global.model_catalog.deployments.remote.tls.ca_file: file_unreadable: {ROOT / 'Makefile'}: holds no CA "
      "certificate (NO_CERTIFICATE_OR_CRL_FOUND)"]),
    (edit("global", {"model_catalog": {"deployments": {"remote": {**REMOTE, "auth": {"api_key_file": "/nonexistent/key"}}}}}),
     ["global.model_catalog.deployments.remote.auth.api_key_file: file_unreadable: /nonexistent/key: No such file or "
      "directory"]),
    (edit("global", {"model_catalog": {"deployments": {"remote": {**REMOTE, "auth": {"api_key_file": "/dev/null"}}}}}),
     ["global.model_catalog.deployments.remote.auth.api_key_file: file_unreadable: /dev/null: empty"]),
    # Accepted by the spec but read by nothing here: refused until they act, never kept silently.
    (edit("recipes/0/signals", {"domains": [{"name": "math", "model_scores": {"fast": 0.9}}]}),
     ["recipes[default].signals.domains[math].model_scores: unsupported_field: read only by a multi_factor "
      "decision (its domain factor), and this recipe has none; order the modelRefs of a static decision and "
      "remove it"]),
]


@pytest.mark.parametrize("doc, lines", CASES, ids=[c[1][0].split(":")[0] + ":" + c[1][0].split(":")[1].strip() for c in CASES])
def test_each_bad_form_fails_with_its_line(doc, lines):
    assert errors_of(doc) == lines


def test_several_recipes_need_one_default_entrypoint():
    doc = base()
    doc["recipes"].append({"name": "other", "decisions": []})
    assert errors_of(doc) == [
        "entrypoints: invalid_value: 2 recipes need exactly one chat entrypoint with default: true (found 0)"
    ]
    doc["entrypoints"] = [{"model_names": ["a"], "recipe": "default", "default": True},
                          {"model_names": ["b"], "recipe": "other", "default": True}]
    assert errors_of(doc) == [
        "entrypoints: invalid_value: 2 recipes need exactly one chat entrypoint with default: true (found 2)"
    ]
    doc["entrypoints"][1]["default"] = False
    assert load_raw(doc).config.entrypoints[0].default


def test_sibling_errors_are_all_reported():
    doc = base()
    doc["recipes"][0]["decisions"][0]["priority"] = "x"
    doc["recipes"][0]["decisions"][2]["modelRefs"][0]["extra"] = 1
    doc["providers"]["models"][0]["backend_refs"][0]["weight"] = -1
    assert errors_of(doc) == [
        "providers.models[fast].backend_refs[0].weight: invalid_value: Expected `int` >= 0",
        "recipes[default].decisions[0].priority: invalid_type: expected int, got str 'x'",
        "recipes[default].decisions[2].modelRefs[0].extra: unknown_field: not a field of this block",
    ]


def test_yaml_syntax_error_names_line():
    with pytest.raises(ConfigError) as info:
        load_bytes(b"version: v0.5\nrecipes: [\n  - name: x\n", source="bad.yaml")
    (line,) = info.value.lines
    assert line.startswith("bad.yaml:") and ": yaml_error: " in line


def test_document_must_be_a_mapping():
    with pytest.raises(ConfigError) as info:
        load_bytes(b"- just\n- a list\n")
    assert info.value.lines == ["(document): invalid_type: expected a mapping, got list"]


def test_missing_credential_env_is_a_warning():
    doc = base()
    doc["providers"]["models"][0]["backend_refs"][0]["auth"] = {"api_key_env": "VSR_SURELY_UNSET_KEY"}
    loaded = load_raw(doc)
    assert [w for w in loaded.warnings if "missing_credential" in w] == [
        "providers.models[fast].backend_refs[0].auth.api_key_env: missing_credential: "
        "$VSR_SURELY_UNSET_KEY is not set; calls to this backend carry no key"
    ]


@pytest.mark.parametrize("path", ANCHORS, ids=[p.name for p in ANCHORS])
def test_v03_anchor_configs_are_refused_with_one_line_each(path: Path):
    raw = yaml.safe_load(path.read_text())
    lines = errors_of(raw)
    assert lines[0].startswith(f"version: invalid_value: {raw['version']!r}")
    if "routing" in raw:
        assert "routing: removed_section: the top-level routing block; its signals and decisions live in recipes[] in v0.5" in lines


run_cli = cli      # main() in this process; test_cli_validate_prints_every_error_and_exits_nonzero runs the command


def test_cli_validate_prints_every_error_and_exits_nonzero(tmp_path):
    doc = base()
    doc["recipes"][0]["decisions"][0]["modelRefs"][0]["model"] = "ghost"
    doc["recipes"][0]["decisions"][1]["modelRefs"][0]["model"] = "phantom"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = cli_process("config", "validate", str(path))
    assert result.returncode == 1
    # Printed for a person: each line names the decision its path indexes.
    assert [x for x in result.stdout.splitlines() if x.startswith("error: ")] == [
        "error: recipes[default].decisions[0].modelRefs[0].model: unknown_model: decision 'a': 'ghost' is not "
        "declared in providers.models",
        "error: recipes[default].decisions[1].modelRefs[0].model: unknown_model: decision 'b': 'phantom' is not "
        "declared in providers.models",
    ]


def test_cli_validate_ok_prints_warnings(tmp_path):
    doc = base()
    doc["providers"]["models"][0]["backend_refs"][0]["auth"] = {"api_key_env": "VSR_SURELY_UNSET_KEY"}
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = run_cli("config", "validate", str(path))
    assert result.returncode == 0
    out = result.stdout.splitlines()
    assert [x for x in out if x.startswith("warning: providers.models[fast].backend_refs[0].auth.api_key_env: "
                                           "missing_credential:")]
    assert out[-1].startswith(f"ok: {path} loads (config version ")


def test_serve_refuses_a_config_that_does_not_load(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("version: v0.3\n")
    result = run_cli("serve", "--config", str(path), "--port", "0")
    assert result.returncode == 2
    assert "refusing to start" in result.stderr
    assert "error: version: invalid_value: 'v0.3'" in result.stderr


def test_serve_refuses_a_missing_file(tmp_path):
    result = run_cli("serve", "--config", str(tmp_path / "absent.yaml"), "--port", "0")
    assert result.returncode == 2
    assert "unreadable" in result.stderr


@pytest.mark.parametrize("field, value", [("tls", {"ca_file": "/nonexistent/ca.pem"}),
                                          ("auth", {"api_key_file": "/nonexistent/key"})])
def test_serve_refuses_a_deployment_file_it_cannot_read_in_one_line(tmp_path, field, value):
    """Was: a traceback at start (ca_file), or every call sent with no key (api_key_file)."""
    doc = base()
    doc["global"] = {"model_catalog": {"deployments": {"remote": {**REMOTE, field: value}}}}
    path = tmp_path / "files.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = run_cli("serve", "--config", str(path), "--port", "0")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    name = next(iter(value))
    assert (f"error: global.model_catalog.deployments.remote.{field}.{name}: file_unreadable: {value[name]}: "
            "No such file or directory") in result.stderr.splitlines()


def _shipped() -> list[tuple[str, bytes]]:
    """The configurations a newcomer starts from: the quickstart, and the one the Kubernetes manifest mounts."""
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()))
    mounted = [(f"deploy/kubernetes.yaml:{name}", text.encode())
               for d in docs if d and d.get("kind") == "ConfigMap"
               for name, text in d["data"].items() if name.endswith(".yaml")]
    return [("config/quickstart.yaml", (ROOT / "config" / "quickstart.yaml").read_bytes()), *mounted]


@pytest.mark.parametrize("name,text", _shipped(), ids=[name for name, _ in _shipped()])
def test_a_shipped_configuration_loads_with_no_warning(name, text):
    from vsr_fast.routing.loaded import validate_bytes

    report = validate_bytes(text, source=name)
    # A key the environment does not set is the environment's, not the file's.
    assert report.errors == [] and [w for w in report.warnings if "missing_credential" not in w] == []


def test_the_readmes_worked_example_shows_the_quickstarts_config_version():
    """The routed request's headers in README.md carry the version the quickstart loads as (the first 16 hex of
    the file's sha256): an edit to the file that leaves the README's hash stale fails here."""
    import re

    from vsr_fast.routing import load_file

    shown = re.findall(r"^x-vsr-config-version: ([0-9a-f]+)$", (ROOT / "README.md").read_text(), re.M)
    assert shown == [load_file(str(ROOT / "config" / "quickstart.yaml")).version_hash]
