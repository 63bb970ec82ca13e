"""A number, boolean or string where the schema wants a list or a mapping is a config error with its path,
never a traceback: ``config validate`` says where, and the loader raises ConfigError only."""
from __future__ import annotations

import copy

import pytest
import yaml

from vsr_fast.errors import ConfigError
from vsr_fast.routing import load_raw
from vsr_fast.routing.loaded import validate_bytes

from .procs import ROOT
from .test_config_load import run_cli

SHAPES = [
    ("recipes: [{name: r, decisions: [{name: d, rules: {operator: AND, conditions: 5}}]}]",
     "recipes[r].decisions[0].rules.conditions: invalid_type: decision 'd': expected array, got int"),
    ("recipes: 5", "recipes: invalid_type: expected array, got int"),
    ("recipes: [{name: r, decisions: true}]", "recipes[r].decisions: invalid_type: expected array, got bool"),
    ("recipes: [{name: r, signals: 5, decisions: []}]", "recipes[r].signals: invalid_type: expected object, got int"),
    ("providers: {models: 7}", "providers.models: invalid_type: expected array, got int"),
]


@pytest.mark.parametrize(("body", "expected"), SHAPES)
def test_validate_names_the_wrong_type_without_a_traceback(tmp_path, body, expected):
    path = tmp_path / "c.yaml"
    path.write_text(f"version: v0.5\n{body}\n")
    done = run_cli("config", "validate", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"error: {expected}" in done.stdout.splitlines(), done.stdout


# libyaml's emitter when built (the same document, several times faster than the pure-Python one: the sweep
# dumps each broken copy).
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _nodes(node, steps):
    yield steps
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _nodes(value, steps + [key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _nodes(value, steps + [i])


@pytest.mark.parametrize("name", ["examples/production.yaml", "cookbook/escalation.yaml"])
def test_any_node_of_a_real_file_replaced_by_a_wrong_type_is_a_config_error(name):
    doc = yaml.safe_load((ROOT / "config" / name).read_text())
    # Each node takes one scalar and one container of the wrong kind, the pairs rotating over the nodes: every kind
    # still lands on every part of the file, at a third of the six-per-node sweep's time (21 s on the slow host).
    pairs = ((5, [1]), (True, {"a": 1}), ("x", None))
    for i, steps in enumerate(list(_nodes(doc, []))[1:]):
        for bad in pairs[i % 3]:
            broken = copy.deepcopy(doc)
            node = broken
            for step in steps[:-1]:
                node = node[step]
            node[steps[-1]] = bad
            try:
                load_raw(broken)
            except ConfigError:
                pass
            validate_bytes(yaml.dump(broken, Dumper=DUMPER).encode())
