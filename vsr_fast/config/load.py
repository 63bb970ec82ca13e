"""Load a configuration file: YAML to Structs, every error as one line with its path and code."""
from __future__ import annotations

import hashlib
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigError
from .checks import check
from .shape import collect_shape_errors
from .schema import RouterConfig, convert

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
class Checked:
    """A configuration whose shape and cross-references passed, with its warnings and version hash.

    Routing compiles it (``vsr_fast.routing.load_*``): the checks that need
    compiled signals or plugin blocks run there.
    """

    config: RouterConfig
    version_hash: str
    warnings: list[str] = field(default_factory=list)


def check_file(path: str | Path) -> Checked:
    """Read and check ``path``; raises ConfigError listing every problem found."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError([f"{p}: unreadable: {exc.strerror or exc}"]) from exc
    return check_bytes(data, source=str(p))


def check_bytes(data: bytes, *, source: str = "<config>") -> Checked:
    """Parse YAML (or JSON) bytes and check them as a v0.5 configuration."""
    try:
        raw = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: yaml_error: {problem}"]) from exc
    return check_raw(raw, version_hash=hashlib.sha256(data).hexdigest()[:16])


def check_raw(raw: object, *, version_hash: str = "") -> Checked:
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
    if errors:
        raise ConfigError(errors)
    return Checked(config=config, version_hash=version_hash, warnings=warnings_early + warnings)


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
