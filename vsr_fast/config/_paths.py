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


# A line about a decision: its path names the decision by index, as the file holds it (decisions are not a named
# list: their order is meaning, file order settles equal priorities). In a file of forty decisions an index is
# hard to find, so the message names the decision too: ``recipes[default].decisions[3].rules: invalid_value:
# decision 'code': ...``; the path stays what a tool walks.
_DECISION_PATH = re.compile(r"^recipes\[([^\]]*)\]\.decisions\[(\d+)\]")


def decision_names(recipes: object) -> dict[str, list[object]]:
    """Each recipe's label as paths write it (its name, else its index) and its decisions' names, from the
    document's ``recipes`` or the converted ones."""
    out: dict[str, list[object]] = {}
    for i, recipe in enumerate(recipes if isinstance(recipes, list) else []):
        get = recipe.get if isinstance(recipe, dict) else lambda key, r=recipe: getattr(r, key, None)
        name = get("name")
        label = name if isinstance(name, str) and name.isprintable() else str(i)
        decisions = get("decisions")
        out.setdefault(label, [d.get("name") if isinstance(d, dict) else getattr(d, "name", None)
                               for d in (decisions if isinstance(decisions, list) else [])])
    return out


def decision_of(line: str, names: dict[str, list[object]]) -> str | None:
    """The name of the decision a ``<path>: <code>: <message>`` line is about, or None."""
    found = _DECISION_PATH.match(line.partition(": ")[0])
    decisions = names.get(found.group(1), []) if found else []
    index = int(found.group(2)) if found else -1
    name = decisions[index] if 0 <= index < len(decisions) else None
    return name if isinstance(name, str) and name.isprintable() else None


def name_decisions(lines: list[str], names: dict[str, list[object]]) -> list[str]:
    """``lines`` with the decision each is about named after its code, unless the message names it already."""
    out = []
    for line in lines:
        path, _, rest = line.partition(": ")
        code, _, message = rest.partition(": ")
        name = decision_of(line, names)
        if name is not None and message and repr(name) not in message:
            line = f"{path}: {code}: decision {name!r}: {message}"
        out.append(line)
    return out
