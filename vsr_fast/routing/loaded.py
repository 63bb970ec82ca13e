"""A configuration loaded for serving: checked (``vsr_fast.config``), its plugin blocks checked, then compiled.

Routing compiles a checked configuration; the configuration knows nothing of
routing. Every error of every step is one line with its path and code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import Checked, RouterConfig, check_bytes, check_file, check_raw
from ..config import _paths
from ..config.load import collect, follows_from, reindex, parse_bytes, version_hash
from ..config.schema import PluginEntry
from ..config.secrets import fingerprints
from ..errors import ConfigError, redact
from ..plugins.layers import check_plugins
from ..signals.base import CompileErrors
from . import plugin_checks
from .plan import RoutingTable


@dataclass(frozen=True)
class Loaded:
    """A configuration that loaded, compiled for routing, with its warnings and version hash."""

    config: RouterConfig
    version_hash: str
    table: RoutingTable
    warnings: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)   # each secret's path and digest, read at load


def compile_checked(checked: Checked) -> Loaded:
    """Check the plugin blocks and compile the routing table; ConfigError lists every problem."""
    warnings = list(checked.warnings)
    errors, table = _compile(checked.config, warnings)
    if errors or table is None:
        raise ConfigError(errors, shown=_paths.name_decisions(errors, _paths.decision_names(checked.config.recipes)))
    return Loaded(config=checked.config, version_hash=checked.version_hash, table=table, warnings=warnings,
                  secrets=checked.secrets)


def _compile(config: RouterConfig, warnings: list[str], *, routes: bool = True) -> tuple[list[str], RoutingTable | None]:
    """Plugin blocks, then (``routes``) the routing table over the entries that passed: every error of both."""
    bad: list[PluginEntry] = []
    errors = check_plugins(config, bad)
    if bad:
        # The rest is checked without the entries that failed on their own, so its errors are reported too.
        for entries in _plugin_lists(config):
            entries[:] = [e for e in entries if not any(e is b for b in bad)]
        errors += [line for line in check_plugins(config) if line not in errors]
    if not routes:
        return errors, None
    compile_errors = CompileErrors()
    table = RoutingTable(config, compile_errors, warnings)
    if not compile_errors.lines:
        plugin_checks.check(config, table, compile_errors)
    else:
        plugin_checks.check_document(config, compile_errors)
    errors += compile_errors.lines
    return errors, table


def _plugin_lists(config: RouterConfig) -> list[list[PluginEntry]]:
    lists = [config.global_.plugins]
    for recipe in config.recipes:
        lists.append(recipe.plugins)
        lists.extend(d.plugins for d in recipe.decisions)
    return lists


@dataclass(frozen=True)
class Report:
    """``config validate``: every error and warning of a document, of every kind, in one run."""

    errors: list[str]
    warnings: list[str]
    version_hash: str = ""
    # Each recipe's decision names, in file order: what ``shown`` names a decision's line by.
    decisions: dict[str, list[object]] = field(default_factory=dict)

    def shown(self, lines: list[str]) -> list[str]:
        """``lines`` (its errors or warnings) as a person reads them: a line about a decision names it."""
        return _paths.name_decisions(lines, self.decisions)

    def __post_init__(self) -> None:
        self.errors[:] = [redact(line) for line in self.errors]         # a URL's password, as ConfigError does
        self.warnings[:] = [redact(line) for line in self.warnings]


def validate_bytes(data: bytes, *, source: str = "<config>") -> Report:
    """Parse and check a document without stopping at the first kind of error."""
    try:
        raw = parse_bytes(data, source=source)
    except ConfigError as exc:
        return Report(exc.lines, [])
    found = collect(raw)
    errors, warnings = list(found.errors), list(found.warnings)
    if found.config is not None:
        # The routing table compiles only over references that resolve; the plugin blocks are checked anyway.
        compiled: list[str] = []
        more, _ = _compile(found.config, compiled, routes=found.references_ok)
        # Its lines index what converted: put back to the file's indexes, as collect's are.
        errors += [reindex(line, found.moved) for line in more if not follows_from(line, found.set_aside)]
        warnings += [reindex(line, found.moved) for line in compiled]
    prints = fingerprints(found.config) if found.config is not None else {}
    names = _paths.decision_names(raw.get("recipes") if isinstance(raw, dict) else None)
    return Report(errors, warnings, version_hash(data, prints), names)


def load_file(path: str | Path) -> Loaded:
    """Read, check and compile ``path``."""
    return compile_checked(check_file(path))


def load_bytes(data: bytes, *, source: str = "<config>") -> Loaded:
    """Parse, check and compile YAML (or JSON) bytes."""
    return compile_checked(check_bytes(data, source=source))


def load_raw(raw: object, *, version_hash: str = "") -> Loaded:
    """Check and compile an already-decoded document."""
    return compile_checked(check_raw(raw, version_hash=version_hash))
