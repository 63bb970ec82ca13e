"""Condition trees: leaves renamed to their v0.5 condition types, and removed leaves folded away.

A leaf the rewrite cannot keep (a ``kb`` condition, which v0.5 never
matches) is the constant false; the tree is then simplified, so an AND over
it is false, an OR forgets it, and a decision whose rules are false is dropped
by the caller with a note (spec 5.2, "Removed signal types").
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A leaf rewrite returns the new leaf, or True/False for a leaf that is now a constant.
LeafRewrite = Callable[[dict, str], "dict | bool"]


def rewrite_tree(node: Any, path: str, leaf: LeafRewrite) -> Any:
    """The tree with every leaf rewritten and constants folded: a dict, or True/False when it folded away."""
    if not isinstance(node, dict):
        return node
    if node.get("operator") is None:
        return leaf(dict(node), path) if node.get("type") is not None else node
    op = node["operator"]
    children = []
    for i, child in enumerate(node.get("conditions") or []):
        children.append(rewrite_tree(child, f"{path}.conditions[{i}]", leaf))
    out = {k: v for k, v in node.items() if k != "conditions"}
    if op == "NOT":
        (only,) = children if len(children) == 1 else (None,)
        if isinstance(only, bool):
            return not only
        out["conditions"] = children
        return out
    kept = []
    for child in children:
        if isinstance(child, bool):
            if op == "AND" and not child:
                return False
            if op == "OR" and child:
                return True
            continue
        kept.append(child)
    if not kept and (node.get("conditions") or []):
        return op == "AND"      # every child was a neutral constant
    out["conditions"] = kept
    return out


def true_tree() -> dict:
    """Rules that always match: an AND over nothing."""
    return {"operator": "AND", "conditions": []}
