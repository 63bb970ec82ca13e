"""Turn msgspec's ``$.recipes[0].decisions[2]`` paths into the config's own form.

Lists of named registries (recipes, provider models, signal rules) are addressed by name, so
an error reads ``recipes[default].decisions[2].modelRefs[0].model``; every
other list by index, as the author sees it in the file.
"""
from __future__ import annotations

import re

NAMED_LISTS = {("recipes",), ("providers", "models")}
_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\"?([^\]\"]*)\"?\]")


def steps_of(msgspec_path: str) -> list[str | int]:
    """Parse ``$.a[0].b`` into ``['a', 0, 'b']``."""
    out: list[str | int] = []
    for key, index, quoted in _STEP.findall(msgspec_path.lstrip("$")):
        if key:
            out.append(key)
        elif index:
            out.append(int(index))
        else:
            out.append(quoted)
    return out


def render(steps: list[str | int], raw: object) -> str:
    """Render steps as a config path, naming items of named lists by their ``name``."""
    parts: list[str] = []
    keys: list[str] = []
    node = raw
    for step in steps:
        if isinstance(step, int):
            label: str | int = step
            item = node[step] if isinstance(node, list) and step < len(node) else None
            named = tuple(keys[-2:]) in NAMED_LISTS or tuple(keys[-1:]) in NAMED_LISTS
            if named or (len(keys) >= 2 and keys[-2] == "signals"):
                # A name with a control character (refused: load.control_in_names) would break the error's
                # line: the item goes by its index.
                if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"].isprintable():
                    label = item["name"]
            parts.append(f"[{label}]")
            node = item
        else:
            parts.append(f".{step}" if parts else step)
            keys.append(step)
            node = node.get(step) if isinstance(node, dict) else None
    return "".join(parts) or "(document)"
