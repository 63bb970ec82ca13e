"""Load a configuration file: YAML to Structs, every error as one line with its path and code."""
from __future__ import annotations

import hashlib
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import yaml

from ..errors import ConfigError
from . import _paths
from .checks import check
from .schema import RouterConfig, convert

if typing.TYPE_CHECKING:
    from ..routing.plan import RoutingTable

SCHEMA_VERSION = "v0.5"

# Top-level sections of earlier schemas: refused with what replaced them (spec 5.11).
REMOVED_SECTIONS = {
    "routing": "the top-level routing block; its signals and decisions live in recipes[] in v0.5",
}

# Signal types of earlier schemas and what replaces each (spec 5.2, "Removed signal types").
REMOVED_SIGNAL_TYPES = {
    "classifiers": "a systemone choice question over the classifier's labels",
    "preferences": "one systemone choice question among the preferences",
    "embeddings": "a systemone yes/no question that quotes the rule's examples",
    "kb": "a systemone set question over the knowledge base's labels",
    "reasks": "turn_relation with labels: [reask]",
    "topic_continuity": "turn_relation with labels: [continue, shift]",
    "events": "keywords rules with operator: OR",
    "structure": "keywords rules with a count or density predicate",
    "actions": "one systemone choice question, action",
}


@dataclass(frozen=True)
class Loaded:
    """A configuration that loaded, compiled for routing, with its warnings and version hash."""

    config: RouterConfig
    version_hash: str
    table: "RoutingTable"
    warnings: list[str] = field(default_factory=list)


def load_file(path: str | Path) -> Loaded:
    """Read and check ``path``; raises ConfigError listing every problem found."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError([f"{p}: unreadable: {exc.strerror or exc}"]) from exc
    return load_bytes(data, source=str(p))


def load_bytes(data: bytes, *, source: str = "<config>") -> Loaded:
    """Parse YAML (or JSON) bytes and check them as a v0.5 configuration."""
    try:
        raw = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: yaml_error: {problem}"]) from exc
    return load_raw(raw, version_hash=hashlib.sha256(data).hexdigest()[:16])


def load_raw(raw: object, *, version_hash: str = "") -> Loaded:
    """Check an already-decoded document."""
    if not isinstance(raw, dict):
        raise ConfigError([f"(document): invalid_type: expected a mapping, got {type(raw).__name__}"])
    errors = _precheck(raw)
    if errors:
        raise ConfigError(errors)
    warnings_early = _rename_aliases(raw)
    errors = collect_shape_errors(raw, RouterConfig, [], raw)
    if errors:
        raise ConfigError(errors)
    config = typing.cast(RouterConfig, convert(raw, RouterConfig))
    errors, warnings = check(config)
    warnings = warnings_early + warnings
    from .plugins import check_plugins

    errors += check_plugins(config)
    if errors:
        raise ConfigError(errors)
    # Compiling the routing table runs the checks that need compiled signals.
    from ..routing.plan import RoutingTable
    from ..signals.base import CompileErrors

    compile_errors = CompileErrors()
    table = RoutingTable(config, compile_errors, warnings)
    if compile_errors.lines:
        raise ConfigError(compile_errors.lines)
    return Loaded(config=config, version_hash=version_hash, table=table, warnings=warnings)


def _precheck(raw: dict) -> list[str]:
    version = raw.get("version")
    if version is None:
        return ["version: missing_field: a v0.5 configuration starts with `version: v0.5`"]
    errors = []
    if version != SCHEMA_VERSION:
        errors.append(
            f"version: invalid_value: {version!r} is not a schema this router reads; "
            f"it reads `version: {SCHEMA_VERSION}`"
        )
    for key, what in REMOVED_SECTIONS.items():
        if key in raw:
            errors.append(f"{key}: removed_section: {what}")
    for i, recipe in enumerate(raw.get("recipes") or []):
        signals = recipe.get("signals") if isinstance(recipe, dict) else None
        if not isinstance(signals, dict):
            continue
        name = recipe.get("name", i)
        for key, what in REMOVED_SIGNAL_TYPES.items():
            if key in signals:
                errors.append(f"recipes[{name}].signals.{key}: removed_signal_type: {key} was removed; write {what}")
    return errors


def _rename_aliases(raw: dict) -> list[str]:
    """``decision`` loads as ``systemone``, in signals and conditions, with a warning (spec 5.2, 6.9)."""
    warnings: list[str] = []
    for i, recipe in enumerate(raw.get("recipes") or []):
        if not isinstance(recipe, dict):
            continue
        where = f"recipes[{recipe.get('name', i)}]"
        signals = recipe.get("signals")
        if isinstance(signals, dict) and "decision" in signals:
            signals.setdefault("systemone", [])
            if isinstance(signals["systemone"], list) and isinstance(signals["decision"], list):
                signals["systemone"].extend(signals.pop("decision"))
                warnings.append(f"{where}.signals.decision: renamed_signal_type: decision loads as systemone; write systemone")
        for j, decision in enumerate(recipe.get("decisions") or []):
            if isinstance(decision, dict) and isinstance(decision.get("rules"), dict):
                _rename_conditions(decision["rules"], f"{where}.decisions[{j}].rules", warnings)
    return warnings


def _rename_conditions(node: dict, path: str, warnings: list[str]) -> None:
    if node.get("type") == "decision":
        node["type"] = "systemone"
        warnings.append(f"{path}.type: renamed_signal_type: decision loads as systemone; write systemone")
    for k, child in enumerate(node.get("conditions") or []):
        if isinstance(child, dict):
            _rename_conditions(child, f"{path}.conditions[{k}]", warnings)


_MSG = [
    (re.compile(r"Object contains unknown field `([^`]*)`"), "unknown_field", "{0}", "not a field of this block"),
    (re.compile(r"Object missing required field `([^`]*)`"), "missing_field", "{0}", "required"),
    (re.compile(r"Expected `([^`]*)`, got `([^`]*)`"), "invalid_type", "", "expected {0}, got {1}"),
]


def render_validation_error(exc: msgspec.ValidationError, base: list[str | int], raw: object) -> str:
    """One line ``<path>: <code>: <message>`` for a msgspec validation error."""
    text = str(exc)
    message, _, where = text.partition(" - at `")
    steps = base + _paths.steps_of(where.rstrip("`")) if where else list(base)
    code, detail = "invalid_value", message
    for pattern, c, extra_step, template in _MSG:
        m = pattern.search(message)
        if m:
            code, detail = c, template.format(*m.groups())
            if extra_step:
                steps.append(extra_step.format(*m.groups()))
            break
    return f"{_paths.render(steps, raw)}: {code}: {detail}"


def collect_shape_errors(value: object, typ: object, steps: list[str | int], raw: object) -> list[str]:
    """Every shape error in ``value``, descending so that sibling errors are all reported.

    msgspec stops at the first error; we re-check each child on its own so one
    load lists every bad block. An error that no child explains is this level's.
    """
    try:
        convert(value, typ)  # type: ignore[arg-type]
        return []
    except msgspec.ValidationError as exc:
        here = render_validation_error(exc, steps, raw)
    errors: list[str] = []
    for child_value, child_type, child_steps in _children(value, typ, steps):
        errors.extend(collect_shape_errors(child_value, child_type, child_steps, raw))
    return errors or [here]


def _children(value: object, typ: object, steps: list[str | int]):
    typ = _unwrap(typ)
    origin = typing.get_origin(typ)
    if origin is list and isinstance(value, list):
        (item_type,) = typing.get_args(typ)
        for i, item in enumerate(value):
            yield item, item_type, steps + [i]
    elif isinstance(typ, type) and issubclass(typ, msgspec.Struct) and isinstance(value, dict):
        for f in msgspec.structs.fields(typ):
            if f.encode_name in value:
                yield value[f.encode_name], f.type, steps + [f.encode_name]


def _unwrap(typ: object) -> object:
    """Strip Annotated and Optional so the descent sees the container or Struct."""
    while True:
        origin = typing.get_origin(typ)
        if origin is typing.Annotated:
            typ = typing.get_args(typ)[0]
        elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            args = [a for a in typing.get_args(typ) if a is not type(None)]
            if len(args) != 1:
                return typ
            typ = args[0]
        else:
            return typ
