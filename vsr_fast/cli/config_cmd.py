"""``vsr-fast config validate`` and ``vsr-fast config migrate``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..config.load import parse_bytes, read_file
from ..config.migrate import dump, migrate
from ..routing.migrate_target import router_target
from ..errors import ConfigError
from ..config._paths import decision_of
from ..routing.loaded import Report, validate_bytes


def run_config(args: argparse.Namespace) -> int:
    """Dispatch ``vsr-fast config <command>``."""
    if args.config_command == "migrate":
        return _migrate(args)
    return _validate(args.file, args.format)


def split_line(line: str, decisions: dict[str, list[object]] | None = None) -> dict:
    """``<path>: <code>: <message>`` as its three parts, for tools; a line about a decision carries its name as
    ``decision`` too (``decisions``: each recipe's decision names, ``Report.decisions``)."""
    path, _, rest = line.partition(": ")
    code, _, message = rest.partition(": ")
    out = {"path": path, "code": code, "message": message}
    name = decision_of(line, decisions or {})
    if name is not None:
        out["decision"] = name
    return out


def _validate(path: str, fmt: str) -> int:
    try:
        data = read_file(Path(path))
    except ConfigError as exc:
        report = Report(exc.lines, [])
    else:
        report = validate_bytes(data, source=path)
    report_errors, report_warnings, version = report.errors, report.warnings, report.version_hash
    if fmt == "json":
        print(json.dumps({"file": path, "ok": not report_errors, "config_version": version or None,
                          "errors": [split_line(x, report.decisions) for x in report_errors],
                          "warnings": [split_line(x, report.decisions) for x in report_warnings]}, indent=2))
        return 1 if report_errors else 0
    # A person reads these: a line about a decision names it (an index alone is hard to find in a long file).
    for line in report.shown(report_errors):
        print(f"error: {line}")
    for line in report.shown(report_warnings):
        print(f"warning: {line}")
    if report_errors:
        return 1
    print(f"ok: {path} loads (config version {version})")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    source = Path(args.file)
    out = Path(args.output) if args.output else source.with_name(f"{source.stem}.migrated.yaml")
    if out.exists() and not args.force:
        print(f"vsr-fast: {out} exists; pass --force to overwrite it (or -o another path)", file=sys.stderr)
        return 2
    try:
        # The loader's guards (size, alias expansion, duplicate keys) hold for the file migrated too.
        raw = parse_bytes(read_file(source), source=str(source))
    except ConfigError as exc:
        print(f"vsr-fast: cannot read {source}: {'; '.join(exc.lines)}", file=sys.stderr)
        return 2
    try:
        result = migrate(raw, router_target())
    except ValueError as exc:
        print(f"vsr-fast: {source}: {exc}", file=sys.stderr)
        return 2
    text = dump(result.document)
    try:
        out.write_text(text)
    except OSError as exc:
        print(f"vsr-fast: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.notes == "json":
        print(json.dumps([{"path": n.path, "kind": n.kind, "text": n.text} for n in result.notes], indent=2),
              file=sys.stderr)
    else:
        for note in result.notes:
            print(f"note: {note.line()}", file=sys.stderr)
    report = validate_bytes(text.encode(), source=str(out))
    for line in report.shown(report.errors):
        print(f"error: {line}", file=sys.stderr)
    for line in report.shown(report.warnings):
        print(f"warning: {line}", file=sys.stderr)
    state = "loads" if not report.errors else f"does not load yet ({len(report.errors)} errors above)"
    print(f"wrote {out}: {len(result.notes)} notes; it {state}", file=sys.stderr)
    return 1 if report.errors else 0


__all__ = ["run_config", "split_line"]
