"""The YAML layer of a load: a key written twice in one mapping is an error with its path and both lines (YAML
alone keeps the last one silently); a ``<<`` merge's keys may still be overridden."""
from __future__ import annotations

import pytest

from vsr_fast.config.load import parse_bytes
from vsr_fast.errors import ConfigError

from .procs import cli_process
from .test_config_load import run_cli

DECISION_TWICE = b"""version: v0.5
recipes:
  - name: default
    decisions:
      - name: d
        priority: 100
        priority: 5
"""


def _errors(data: bytes) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_bytes(data, source="c.yaml")
    return info.value.lines


def test_a_key_written_twice_names_its_path_and_lines():
    assert _errors(DECISION_TWICE) == [
        "recipes[default].decisions[0].priority: duplicate_key: 'priority' is written twice in one mapping, "
        "at lines 6 and 7 of c.yaml; write it once"]
    assert _errors(b"version: v0.5\nproviders: {}\nversion: v0.5\n") == [
        "version: duplicate_key: 'version' is written twice in one mapping, at lines 1 and 3 of c.yaml; write it once"]


def test_a_merge_key_may_be_overridden_and_the_same_key_in_two_mappings_is_no_duplicate():
    doc = parse_bytes(b"a: &x {k: 1, j: 2}\nb: {<<: *x, k: 3}\nc: [{k: 1}, {k: 2}]\n")
    assert doc == {"a": {"k": 1, "j": 2}, "b": {"k": 3, "j": 2}, "c": [{"k": 1}, {"k": 2}]}


def test_validate_refuses_the_duplicate(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(DECISION_TWICE)
    done = run_cli("config", "validate", str(path))
    assert done.returncode == 1
    assert done.stdout.startswith("error: recipes[default].decisions[0].priority: duplicate_key: "), done.stdout


def test_a_string_where_a_number_belongs_is_quoted_and_an_unknown_field_names_the_closest(tmp_path):
    """YAML 1.1 reads 1e4 as a string: the error shows it; a misspelt field suggests the field it resembles."""
    path = tmp_path / "c.yaml"
    path.write_text("version: v0.5\nglobal:\n  router: {limits: {request_timeout_ms: 1e4}}\n"
                    "  stores: {response_cache: {backend: redis}}\n")
    lines = run_cli("config", "validate", str(path)).stdout.splitlines()
    assert "error: global.router.limits.request_timeout_ms: invalid_type: expected int, got str '1e4'" in lines
    assert ("error: global.stores.response_cache.backend: unknown_field: not a field of this block; "
            "did you mean backend_type?") in lines


def _alias_bomb() -> bytes:
    """Nine levels, each a list of nine aliases of the level before: 9**9 strings once expanded."""
    lines = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return ("\n".join(lines) + "\n").encode()


def test_an_alias_bomb_is_refused_with_its_line():
    """Aliases expanding past the bound are refused before anything walks the document (yaml-cpp and
    Kubernetes bound alias expansion likewise); the line is the alias that passed it."""
    lines = _errors(_alias_bomb())
    assert len(lines) == 1 and lines[0].startswith("c.yaml:"), lines
    where, code, _ = lines[0].split(": ", 2)
    assert code == "yaml_aliases", lines
    assert 2 <= int(where.split(":")[1]) <= 9, lines


def test_a_recursive_alias_is_refused():
    lines = _errors(b"a: &a [1, *a]\n")
    assert len(lines) == 1 and ": yaml_aliases: " in lines[0], lines


def test_aliases_within_the_bound_still_load():
    doc = parse_bytes(b"a: &a [1, 2]\nb: [*a, *a]\n")
    assert doc == {"a": [1, 2], "b": [[1, 2], [1, 2]]}


def test_a_file_past_the_size_limit_is_refused(tmp_path):
    from vsr_fast.config.load import MAX_FILE_BYTES, check_file
    path = tmp_path / "big.yaml"
    path.write_bytes(b"version: v0.5\n" + b"#" * MAX_FILE_BYTES)
    with pytest.raises(ConfigError) as info:
        check_file(path)
    assert info.value.lines == [f"{path}: too_large: the file is {MAX_FILE_BYTES + 14} bytes; a configuration "
                                f"is at most {MAX_FILE_BYTES} bytes"]


def test_validate_refuses_an_alias_bomb(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_bytes(_alias_bomb())
    done = cli_process("config", "validate", str(path))     # a process: a hang fails by its timeout
    assert done.returncode == 1
    assert done.stdout.startswith(f"error: {path}:"), done.stdout
    assert ": yaml_aliases: " in done.stdout, done.stdout
