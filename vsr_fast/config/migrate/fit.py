"""Fit a rewritten document to the schema this router loads: what it does not read is dropped, with a note.

The spec's rewrites run first (the other modules); this pass is the last, and
it is driven by the Structs of ``config.schema`` (and the plugin blocks the
caller passes), so a field this router learns to read is kept by the next
migration without a change here.
"""
from __future__ import annotations

import re
import types
import typing
from typing import Any

import msgspec

from .notes import Notes


def fit(value: Any, typ: Any, path: str, notes: Notes, plugin_blocks: dict[str, type] | None) -> Any:
    """``value`` with every field ``typ`` does not declare dropped (and noted); values are never invented."""
    typ = _strip(typ)
    if isinstance(value, dict) and _is_struct(typ):
        return _fit_struct(value, typ, path, notes, plugin_blocks)
    origin = typing.get_origin(typ)
    if _is_union(typ):
        for member in typing.get_args(typ):
            m = _strip(member)
            if (isinstance(value, dict) and (_is_struct(m) or typing.get_origin(m) is dict)) or (
                    isinstance(value, list) and typing.get_origin(m) is list):
                return fit(value, m, path, notes, plugin_blocks)
        return value
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(typ)
        items = [fit(v, item, f"{path}[{_label(v, i, path)}]", notes, plugin_blocks) for i, v in enumerate(value)]
        return [v for v in items if v is not _DROP]
    if origin is dict and isinstance(value, dict):
        _, item = typing.get_args(typ)
        return {k: fit(v, item, f"{path}.{k}", notes, plugin_blocks) for k, v in value.items()}
    return value


# Fields the schema declares but this router's load refuses where a migrated recipe has them (config/checks.py):
# model_scores is read only by a multi_factor decision, which no earlier version had.
NOT_READ_HERE = {
    ("DomainRule", "model_scores"): "only a multi_factor decision's domain factor reads it here; the static "
                                    "selector tries a decision's modelRefs in order: order them",
}


_DROP = object()   # a list item this router cannot load at all


def _fit_struct(value: dict, typ: type, path: str, notes: Notes, plugin_blocks) -> Any:
    if typ.__name__ == "PluginEntry" and plugin_blocks is not None and value.get("type") not in plugin_blocks:
        notes.drop(path, f"the {value.get('type')} plugin is v0.5 but this router does not serve it yet "
                         f"(it serves {', '.join(sorted(plugin_blocks))}); dropped, with its configuration")
        return _DROP
    fields = {f.encode_name: f for f in msgspec.structs.fields(typ)}
    out: dict = {}
    for key, v in value.items():
        where = f"{path}.{key}" if path else key
        why = NOT_READ_HERE.get((typ.__name__, key))
        if why is not None:
            notes.drop(where, f"{key} is v0.5 but this router does not read it here ({why}); dropped")
            continue
        f = fields.get(key)
        if f is None:
            notes.drop(where, f"{key} is not a field of {_block_name(path)} in v0.5 as this router reads it; "
                              "dropped (restore it by hand if a later release reads it)")
            continue
        if typ.__name__ == "PluginEntry" and key == "configuration" and plugin_blocks is not None:
            block = plugin_blocks.get(value.get("type", ""))
            out[key] = fit(v, block, where, notes, plugin_blocks) if block is not None else v
            continue
        literal = _literal(f.type)
        if literal is not None and v is not None and not isinstance(v, (dict, list)) and v not in literal:
            notes.drop(where, f"{v!r} is not one of {', '.join(map(str, literal))}; dropped, so the default applies")
            continue
        out[key] = fit(v, f.type, where, notes, plugin_blocks)
    return out


_NAMED = re.compile(r"(^|\.)(recipes|providers\.models|signals\.\w+)$")


def _label(item: Any, i: int, path: str) -> Any:
    """An item as load errors address it (config/_paths.py): named lists by name, every other list by index."""
    named = _NAMED.search(path) and isinstance(item, dict) and isinstance(item.get("name"), str)
    return item["name"] if named else i


def _block_name(path: str) -> str:
    return path or "the document"


def _strip(typ: Any) -> Any:
    while typing.get_origin(typ) is typing.Annotated:
        typ = typing.get_args(typ)[0]
    return typ


def _is_struct(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, msgspec.Struct)


def _is_union(typ: Any) -> bool:
    return typing.get_origin(typ) in (typing.Union, types.UnionType)


def _literal(typ: Any) -> tuple | None:
    """The values of a Literal field (through Optional/Unset unions), or None when it takes anything else."""
    typ = _strip(typ)
    if typing.get_origin(typ) is typing.Literal:
        return typing.get_args(typ)
    if _is_union(typ):
        values: list = []
        for member in typing.get_args(typ):
            m = _strip(member)
            if m is type(None) or getattr(m, "__name__", "") == "UnsetType":
                continue
            if typing.get_origin(m) is not typing.Literal:
                return None
            values.extend(typing.get_args(m))
        return tuple(values) or None
    return None
