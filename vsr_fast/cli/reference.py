"""The configuration reference (docs/config.md), generated from the schema's msgspec Structs.

    python -m vsr_fast.cli.reference > docs/config.md

Every block reachable from ``RouterConfig``, then every plugin type's
``configuration`` block, each field with its type, default, allowed values,
an example and the comments the schema's source gives it. The document is
never edited by hand: tests/test_config_reference.py fails when it and the
schema disagree.
"""
from __future__ import annotations

import ast
import inspect
import io
import json
import sys
import textwrap
import tokenize
from collections import Counter
from dataclasses import MISSING, dataclass, field
from dataclasses import fields as dataclass_fields
from functools import lru_cache

import msgspec
from msgspec import inspect as mi

from ..config import application as app
from ..config.algorithm import EXECUTORS, SELECTORS
from ..config.catalog import Deployment
from ..config.checks import REFUSED_FIELDS
from ..config.load import MAX_EXPANDED_NODES, MAX_FILE_BYTES
from ..config.schema import (AccessLogConfig, Algorithm, CandidateRequirements, PluginEntry, ProviderModel, RouterConfig,
                             RuleNode)
from ..config.signals import CONDITION_TYPES
from ..config.stores import RedisAt
from ..decisions.projections import TYPE as PROJECTION
from ..plugins.response_cache import CachePolicy, ResponseCacheConfig
from ..plugins.router_replay import ReplayPolicy, RouterReplayConfig, ShadowConfig, ShadowPolicy
from ..plugins.table import CONFIGURATIONS
from ..plugins import context as context_plugin
from ..routing.plan import LEARNED_TYPES
from ..systemone.capabilities import BUILTIN_ARTIFACTS
from ..systemone.presets import APPLICATION_SIGNALS, PRESETS

# Fields whose values a load check (not the type) restricts: the values it takes. A dict gives them per signal.
_PRESET_OPTIONS = {name: list(p.options) for name, p in PRESETS.items()}
KNOWN_VALUES: dict[tuple[type, str], list[str] | dict[str, list[str]]] = {
    (RouterConfig, "version"): ["v0.5"],
    (Algorithm, "type"): sorted(SELECTORS | EXECUTORS),
    (RuleNode, "type"): sorted({*CONDITION_TYPES, *LEARNED_TYPES, PROJECTION}),
    (PluginEntry, "type"): sorted(CONFIGURATIONS),
    (app.DomainRule, "labels"): _PRESET_OPTIONS["domain"],
    (app.PiiRule, "ignore_labels"): _PRESET_OPTIONS["pii"],
    (app.SafetyRule, "labels"): _PRESET_OPTIONS["harm_categories"],
    (app.TurnRelationRule, "labels"): _PRESET_OPTIONS["turn_relation"],
    (app.ComplexityRule, "labels"): _PRESET_OPTIONS["complexity"],
    (context_plugin.SignalsCompression, "skip_signals"): sorted(context_plugin.SIGNAL_TYPES),
    (app.LabelledRule, "labels"): {signal: _PRESET_OPTIONS[APPLICATION_SIGNALS[signal][1]]
                                   for signal in ("fact_check", "user_feedbacks", "modality")},
}
# Examples a type cannot suggest.
EXAMPLES = {
    (PluginEntry, "configuration"): "see [Plugin configurations](#plugin-configurations)",
    (Deployment, "artifact"): "`artifact: vsr-static-2`",
    (ProviderModel, "param_size"): "`param_size: 8B`",
    (CandidateRequirements, "capabilities"): "`capabilities: [tools]`",
    (AccessLogConfig, "trusted_proxies"): "`trusted_proxies: [10.0.0.0/8]`",
}

# Where a block connects to Redis (every RedisAt): its URL and its password's variable.
REDIS_EXAMPLES = {"url": "`url: redis://redis.internal:6379/0`", "password_env": "`password_env: REDIS_PASSWORD`"}


def _signal_notes() -> dict[str, str]:
    """Each ``signals`` list's condition type: a decision's condition names the rule as ``{type, name}``."""
    notes = {field: f"conditions read these rules as `type: {ctype}`" for ctype, field in CONDITION_TYPES.items()}
    for field, (ctype, preset) in APPLICATION_SIGNALS.items():
        notes[field] = f"conditions read these rules as `type: {ctype}`; asks preset `{preset}`"
    notes["refusal"] += ("; an answer that opens with a refusal text (\"I'm sorry, but I can't help with that\", "
                         "English) matches without asking it")
    notes["systemone"] = "conditions read these rules as `type: systemone`"
    return notes


NOTES = {(app.Signals, field): note for field, note in _signal_notes().items()}
NOTES[(Deployment, "artifact")] = "built in: " + ", ".join(f"`{name}`" for name in BUILTIN_ARTIFACTS) + (
    " (`vsr-minilm-1`, a contextual encoder, needs the `contextual` extra: `pip install 'vsr-fast[contextual]'`)")

HEADER = """# Configuration reference (v0.5)

Generated from the schema by `python -m vsr_fast.cli.reference > docs/config.md`;
do not edit by hand (tests/test_config_reference.py fails when this file and
the schema disagree). Worked configurations: [cookbook.md](cookbook.md).

Every block refuses fields it does not list (`unknown_field`, with the path).
A field without a default is required. "Allowed" gives the values the load
takes; a type or range error names the path of the bad field.

The file is at most {max_bytes} bytes (`too_large`), and its YAML aliases may
expand it to at most {max_nodes} nodes (`yaml_aliases`, with the line and
column; a recursive alias is refused too): nested aliases (an "alias bomb")
are refused at once, by a load, a reload or `config validate`. A `name`
holds no control character and no space at either end (`invalid_value`):
names reach response headers.
""".format(max_bytes=MAX_FILE_BYTES, max_nodes=MAX_EXPANDED_NODES)


_LABELS: dict[type, str] = {}     # each block's heading: its class name, with its module when two share it


def _label(cls: type) -> str:
    return _LABELS.get(cls, cls.__name__)


def _anchor(cls: type) -> str:
    return "".join(c if c.isalnum() else "-" for c in _label(cls).lower()).strip("-").replace("--", "-")


@dataclass
class Block:
    cls: type
    paths: list[str] = field(default_factory=list)


def _blocks() -> tuple[list[Block], list[Block]]:
    """The configuration's blocks (document order, first path first) and the plugin configurations'."""
    seen: dict[type, Block] = {}

    def walk(cls: type, path: str, order: list[Block], above: tuple[type, ...] = ()) -> None:
        # A block met again is documented once, but its blocks are reached at its new path too (a team's
        # limits' budget is at rate_limits.teams.<key>.budget as well); a block inside itself ends the walk.
        if cls in seen:
            seen[cls].paths.append(path)
            if cls in above:
                return
        else:
            order.append(seen.setdefault(cls, Block(cls, [path])))
        info = mi.type_info(cls)
        for f in info.fields:
            for sub, suffix in _structs(f.type):
                walk(sub, f"{path}.{f.encode_name}{suffix}" if path else f"{f.encode_name}{suffix}", order,
                     (*above, cls))

    config: list[Block] = []
    walk(RouterConfig, "", config)
    plugins: list[Block] = []
    for name, cls in sorted(CONFIGURATIONS.items()):
        walk(cls, f"plugins[type: {name}].configuration", plugins)
    return config, plugins


def _structs(t, suffix: str = "") -> list[tuple[type, str]]:
    """The Struct classes a field's type holds, each with the path suffix that reaches it."""
    if isinstance(t, mi.StructType):
        return [(t.cls, suffix)]
    if isinstance(t, mi.Metadata):
        return _structs(t.type, suffix)
    if isinstance(t, mi.UnionType):
        return [s for u in t.types for s in _structs(u, suffix)]
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return _structs(t.item_type, suffix + "[]")
    if isinstance(t, mi.DictType):
        return _structs(t.value_type, suffix + ".<key>")
    return []


def _type_name(t) -> str:
    if isinstance(t, mi.Metadata):
        return _type_name(t.type)
    if isinstance(t, mi.StructType):
        return f"[{_label(t.cls)}](#{_anchor(t.cls)})"
    if isinstance(t, mi.UnionType):
        names = [_type_name(u) for u in t.types if not isinstance(u, mi.NoneType)]
        return " or ".join(names) + (" or null" if len(names) < len(t.types) else "")
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return f"list of {_type_name(t.item_type)}"
    if isinstance(t, mi.DictType):
        return f"map of {_type_name(t.key_type)} to {_type_name(t.value_type)}"
    if isinstance(t, mi.LiteralType):
        return "string" if all(isinstance(v, str) for v in t.values) else "literal"
    names = {mi.StrType: "string", mi.IntType: "integer", mi.FloatType: "number", mi.BoolType: "boolean",
             mi.AnyType: "any", mi.NoneType: "null"}
    return names.get(type(t), type(t).__name__.removesuffix("Type").lower())


def _allowed(t, known) -> str:
    """The values a field's type (or a load check, ``known``) takes, when narrower than its type."""
    items = "items: " if _is_list(t) else ""
    if isinstance(known, dict):
        return "; ".join(f"{items}for `{k}`: one of: " + ", ".join(f"`{v}`" for v in vs) for k, vs in known.items())
    if known:
        return items + "one of: " + ", ".join(f"`{v}`" for v in known)
    parts: list[str] = []

    def visit(u, where: str = "") -> None:
        if isinstance(u, mi.Metadata):
            visit(u.type, where)
        elif isinstance(u, mi.UnionType):
            for v in u.types:
                visit(v, where)
        elif isinstance(u, mi.LiteralType):
            parts.append(where + "one of: " + ", ".join(f"`{v}`" for v in u.values))
        elif isinstance(u, (mi.IntType, mi.FloatType)):
            bounds = [f"{op} {getattr(u, a)}" for a, op in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
                      if getattr(u, a, None) is not None]
            if bounds:
                parts.append(where + ", ".join(bounds))
        elif isinstance(u, mi.StrType):
            if u.pattern:
                parts.append(f"{where}matches `{u.pattern}`")
            if u.min_length:
                parts.append(f"{where}at least {u.min_length} character{'s' if u.min_length > 1 else ''}")
            if u.max_length is not None:
                parts.append(f"{where}at most {u.max_length} character{'s' if u.max_length != 1 else ''}")
        elif isinstance(u, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
            # Both bounds: the load refuses past either (remom's breadth_schedule takes at most 8 rounds).
            if getattr(u, "min_length", None):
                parts.append(f"{where}at least {u.min_length} item{'s' if u.min_length > 1 else ''}")
            if getattr(u, "max_length", None) is not None:
                parts.append(f"{where}at most {u.max_length} item{'s' if u.max_length != 1 else ''}")
            visit(u.item_type, "items: ")
        elif isinstance(u, mi.DictType):
            visit(u.key_type, "keys: ")
            visit(u.value_type, "values: ")

    visit(t)
    return "; ".join(parts)


def _is_list(t) -> bool:
    if isinstance(t, mi.Metadata):
        return _is_list(t.type)
    if isinstance(t, mi.UnionType):
        return any(_is_list(u) for u in t.types)
    return isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType))


# A plugin block whose fields every layer may leave unset, and the policy its layers merge into: the value a field
# takes when no layer sets it (the bottom layer's) is that policy's default.
BOTTOM_LAYERS: dict[type, type] = {RouterReplayConfig: ReplayPolicy, ShadowConfig: ShadowPolicy,
                                   ResponseCacheConfig: CachePolicy}


def _bottom(cls: type, name: str) -> str | None:
    policy = BOTTOM_LAYERS.get(cls)
    found = next((f for f in dataclass_fields(policy) if f.name == name), None) if policy is not None else None
    if found is None or found.default is MISSING:
        return None
    return f"`{_flow(found.default)}`"


def _default(f: mi.Field, cls: type | None = None) -> str:
    if f.required:
        return "required"
    if f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT:
        # A plugin's field, merged over global, recipe, decision; at the bottom, the policy's own default.
        bottom = _bottom(cls, f.name) if cls is not None else None
        return "unset: the layer below's" + (f"; no layer: {bottom}" if bottom else "")
    value = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
    if isinstance(value, msgspec.Struct):
        return "its defaults"
    return f"`{_flow(msgspec.to_builtins(value))}`"


def _flow(value) -> str:
    """A value as flow YAML (JSON is flow YAML; strings bare where YAML reads them back as strings)."""
    if isinstance(value, str) and value and value.replace("_", "").replace("-", "").replace("/", "").isalnum() \
            and value not in ("null", "true", "false", "yes", "no", "on", "off") and not value[0].isdigit():
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def _example(cls: type, f: mi.Field, known) -> str:
    """One line of YAML that sets the field: a value it takes, or the block that describes it."""
    if (cls, f.name) in EXAMPLES:
        return EXAMPLES[(cls, f.name)]
    if issubclass(cls, RedisAt) and f.name in REDIS_EXAMPLES:
        return REDIS_EXAMPLES[f.name]     # a Redis block's, not the backend's URL and key the names would give
    first = next(iter(known.values()))[0] if isinstance(known, dict) else (known[0] if known else None)
    value = _sample(f.type, f.encode_name, first)
    if value is _BLOCK:
        (sub, _), *_ = _structs(f.type)
        return f"see [{_label(sub)}](#{_anchor(sub)})"
    return f"`{f.encode_name}: {_flow(value)}`"


_BLOCK = object()


def _sample(t, name: str, known: str | None):
    if isinstance(t, mi.Metadata):
        return _sample(t.type, name, None)
    if isinstance(t, mi.StructType):
        return _BLOCK
    if isinstance(t, mi.UnionType):
        options = [u for u in t.types if not isinstance(u, mi.NoneType)]
        return _sample(options[0], name, known)
    if isinstance(t, mi.LiteralType):
        return t.values[-1] if len(t.values) > 1 else t.values[0]
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        singular = name[:-3] + "y" if name.endswith("ies") else name.removesuffix("s")
        item = _sample(t.item_type, singular, known)
        return _BLOCK if item is _BLOCK else [item]
    if isinstance(t, mi.DictType):
        value = _sample(t.value_type, "value", None)
        return _BLOCK if value is _BLOCK else {_sample(t.key_type, "key", None): value}
    if isinstance(t, mi.BoolType):
        return True
    if isinstance(t, mi.IntType):
        low = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else 0)
        return max(low, min(t.le if t.le is not None else 10, 10))
    if isinstance(t, mi.FloatType):
        low = t.ge if t.ge is not None else (t.gt if t.gt is not None else 0.0)
        high = t.le if t.le is not None else (t.lt if t.lt is not None else low + 1.0)
        return round((low + high) / 2, 3)
    if isinstance(t, mi.StrType):
        return known if known is not None else _string_sample(name, t.pattern)
    if isinstance(t, mi.AnyType):
        return {}
    return None


def _string_sample(name: str, pattern: str | None) -> str:
    if pattern == "^[A-Z]{3}$":
        return "EUR"
    if "endpoint" in name or "url" in name:
        return "http://127.0.0.1:8000/v1"
    if "env" in name:
        return "MY_API_KEY"
    if "header" in name:
        return "x-my-header"
    if "path" in name or "dir" in name or "file" in name:
        return "/var/lib/vsr/file"
    return f"my-{name.replace('_', '-')}"


@lru_cache(maxsize=None)
def _comments(cls: type) -> dict[str, str]:
    """Each field's comments in the schema's source: the lines just above it and the one after it."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    by_line: dict[int, str] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            by_line[tok.start[0]] = tok.string.lstrip("#").strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.add(tok.start[0])
    out: dict[str, str] = {}
    (node,) = ast.parse(source).body
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        lines = []
        line = stmt.lineno - 1
        while line in by_line and line not in code_lines:
            lines.insert(0, by_line[line])
            line -= 1
        if stmt.end_lineno in by_line:
            lines.append(by_line[stmt.end_lineno])
        if lines:
            out[stmt.target.id] = " ".join(lines)
    return out


def _doc(cls: type) -> str:
    doc = cls.__doc__
    if not doc or doc == msgspec.Struct.__doc__ or cls.__doc__ is getattr(cls.__base__, "__doc__", None):
        return ""
    return " ".join(inspect.cleandoc(doc).split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _render_block(block: Block) -> list[str]:
    cls = block.cls
    out = [f'<a id="{_anchor(cls)}"></a>', "", f"### {_label(cls)}", ""]
    where = ", ".join(f"`{p}`" for p in block.paths[:6]) or "the document's top level"
    more = f" and {len(block.paths) - 6} more" if len(block.paths) > 6 else ""
    out.append(f"At: {where}{more}." if block.paths != [""] else "At: the document's top level.")
    doc = _doc(cls)
    if doc:
        out += ["", doc]
    out += ["", "| Field | Type | Default | Allowed | Example | Notes |", "|---|---|---|---|---|---|"]
    comments = _comments(cls)
    for f in mi.type_info(cls).fields:
        known = KNOWN_VALUES.get((cls, f.name))
        notes = "; ".join(n for n in (comments.get(f.name, ""), NOTES.get((cls, f.name), "")) if n)
        example = _example(cls, f, known)
        refused = REFUSED_FIELDS.get((cls.__name__, f.name))
        if refused is not None:   # declared by the schema, refused by the load: no example to copy
            example, notes = "—", f"**Refused at load** (`unsupported_field`): {refused}. {notes}".strip()
        out.append("| " + " | ".join(_cell(c) for c in (
            f"`{f.encode_name}`", _type_name(f.type), _default(f, cls), _allowed(f.type, known), example,
            notes)) + " |")
    out.append("")
    return out


def render() -> str:
    """The whole reference as Markdown."""
    config, plugins = _blocks()
    names = Counter(b.cls.__name__ for b in (*config, *plugins))
    _LABELS.clear()
    _LABELS.update({b.cls: f"{b.cls.__name__} ({b.cls.__module__.rsplit('.', 1)[-1]})"
                    for b in (*config, *plugins) if names[b.cls.__name__] > 1})
    lines = [HEADER, "## Contents", ""]
    for title, blocks in (("The document", config), ("Plugin configurations", plugins)):
        lines.append(f"- {title}: " + ", ".join(f"[{_label(b.cls)}](#{_anchor(b.cls)})" for b in blocks))
    lines += ["", "## The document", ""]
    for block in config:
        lines += _render_block(block)
    lines += ["## Plugin configurations", "",
              "Each plugin entry is `{type, configuration}` in `global.plugins`, a recipe's `plugins` or a "
              "decision's `plugins`; its `configuration` is the block of its type below.", ""]
    for block in plugins:
        lines += _render_block(block)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
