"""A configuration loaded for serving: checked (``vsr_fast.config``), its plugin blocks checked, then compiled.

Routing compiles a checked configuration; the configuration knows nothing of
routing. Every error of every step is one line with its path and code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import Checked, RouterConfig, check_bytes, check_file, check_raw
from ..errors import ConfigError
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


def compile_checked(checked: Checked) -> Loaded:
    """Check the plugin blocks and compile the routing table; ConfigError lists every problem."""
    errors = check_plugins(checked.config)
    if errors:
        raise ConfigError(errors)
    warnings = list(checked.warnings)
    compile_errors = CompileErrors()
    table = RoutingTable(checked.config, compile_errors, warnings)
    if not compile_errors.lines:
        plugin_checks.check(checked.config, table, compile_errors)
    if compile_errors.lines:
        raise ConfigError(compile_errors.lines)
    return Loaded(config=checked.config, version_hash=checked.version_hash, table=table, warnings=warnings)


def load_file(path: str | Path) -> Loaded:
    """Read, check and compile ``path``."""
    return compile_checked(check_file(path))


def load_bytes(data: bytes, *, source: str = "<config>") -> Loaded:
    """Parse, check and compile YAML (or JSON) bytes."""
    return compile_checked(check_bytes(data, source=source))


def load_raw(raw: object, *, version_hash: str = "") -> Loaded:
    """Check and compile an already-decoded document."""
    return compile_checked(check_raw(raw, version_hash=version_hash))
