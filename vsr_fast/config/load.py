"""Load a configuration file: YAML to Structs, every error as one line with its path and code."""
from __future__ import annotations

import copy
import hashlib
import os
import re
import typing
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import yaml

from ..errors import ConfigError, redact
from . import _paths
from .checks import check
from .forms import removed_fields
from .shape import collect_shape_problems
from .schema import RouterConfig, convert
from .secrets import covered, fingerprints

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
    secrets: dict[str, str] = field(default_factory=dict)   # each secret's path and digest (secrets.fingerprints)

    def __post_init__(self) -> None:
        self.warnings[:] = [redact(line) for line in self.warnings]     # a URL's password, as ConfigError does


def check_file(path: str | Path) -> Checked:
    """Read and check ``path``; raises ConfigError listing every problem found."""
    p = Path(path)
    return check_bytes(read_file(p), source=str(p))


# The largest configuration file read (a reload reads the file whole, in memory, before any check), and how
# many nodes its aliases may expand it to: PyYAML shares an alias's value, but every check walks the document
# as a tree, so nine lines of nested aliases (an "alias bomb") are 9**9 nodes to them. yaml-cpp and Kubernetes'
# YAML reader bound alias expansion likewise. A document without aliases stays well under both.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_EXPANDED_NODES = 250_000


def read_file(p: Path) -> bytes:
    """``p``'s bytes; unreadable or past MAX_FILE_BYTES: a ConfigError line."""
    try:
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise ConfigError([_too_large(str(p), size)])
            return f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError([f"{p}: unreadable: {exc.strerror or exc}"]) from exc


def _too_large(source: str, size: int) -> str:
    return f"{source}: too_large: the file is {size} bytes; a configuration is at most {MAX_FILE_BYTES} bytes"


def check_bytes(data: bytes, *, source: str = "<config>") -> Checked:
    """Parse YAML (or JSON) bytes and check them as a v0.5 configuration. The secrets it names are read
    after the checks (which read them too), into its version."""
    checked = check_raw(parse_bytes(data, source=source))
    prints = fingerprints(checked.config)
    return Checked(checked.config, version_hash(data, prints), checked.warnings, prints)


def parse_bytes(data: bytes, *, source: str = "<config>") -> object:
    """YAML (or JSON) bytes as a document; a syntax error is one ConfigError line with its line and column, and a
    key written twice in one mapping (YAML would keep the last silently) one line with its path and lines."""
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError([_too_large(source, len(data))])
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(data)
    try:
        node = loader.get_single_node()
        if node is not None:
            _bound_aliases(node, source)
        twice = list(_duplicate_keys(node, [], set())) if node is not None else []
        doc = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: yaml_error: {problem}"]) from exc
    finally:
        loader.dispose()
    if twice:
        raise ConfigError([f"{_paths.render(steps, doc)}: duplicate_key: {steps[-1]!r} is written twice in one "
                           f"mapping, at lines {first} and {again} of {source}; write it once"
                           for steps, first, again in twice])
    return doc


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else []


def _bound_aliases(root: yaml.Node, source: str) -> None:
    """Refuse a document whose aliases expand it past MAX_EXPANDED_NODES nodes, or that an alias makes
    recursive (``&a [*a]``: a tree without end). The composer resolves an alias to its anchor's node, so an
    alias is a node met again: each node's expanded size is counted once, bottom up, without recursion."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()     # nodes entered and not yet counted: the ancestors of the node popped
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted = stack.pop()
        key = id(node)
        if counted:
            open_.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_EXPANDED_NODES:
                raise ConfigError([f"{_at(node, source)}: yaml_aliases: aliases expand the document past "
                                   f"{MAX_EXPANDED_NODES} nodes here; write fewer aliases"])
            sizes[key] = size
        elif key in open_:
            raise ConfigError([f"{_at(node, source)}: yaml_aliases: an alias refers to a node that holds it "
                               "(a recursive document); write the value out"])
        elif key not in sizes:
            open_.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


def _at(node: yaml.Node, source: str) -> str:
    mark = node.start_mark
    return f"{source}:{mark.line + 1}:{mark.column + 1}"


def _duplicate_keys(node: yaml.Node, steps: list, walked: set[int]):
    """``(steps, first line, next line)`` of each key written again in its mapping (a ``<<`` merge's keys are
    meant to be overridden, and are not counted)."""
    if id(node) in walked:      # an alias of a node already walked
        return
    walked.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG else None
            line = key_node.start_mark.line + 1
            if key is not None and key in seen:
                yield steps + [key], seen[key], line
            elif key is not None:
                seen[key] = line
            yield from _duplicate_keys(value_node, steps + [key], walked)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, steps + [i], walked)


def version_hash(data: bytes, secrets: dict[str, str] | None = None) -> str:
    """The configuration version the router reports: the file's bytes and the digests of the secrets it names
    (``secrets.fingerprints``), hashed: a rotated key file is a new version."""
    return hashlib.sha256(covered(data, secrets or {})).hexdigest()[:16]


def check_raw(raw: object, *, version_hash: str = "") -> Checked:
    """Check an already-decoded document; raises ConfigError with every problem of every kind."""
    found = collect(raw)
    if found.errors or found.config is None:
        names = _paths.decision_names(raw.get("recipes") if isinstance(raw, dict) else None)
        raise ConfigError(found.errors, shown=_paths.name_decisions(found.errors, names))
    return Checked(config=found.config, version_hash=version_hash, warnings=found.warnings)


@dataclass
class Collected:
    """Every error and warning of one document. ``config`` is what converted once the nodes with shape errors
    were set aside (None when nothing could), so the checks across blocks still run and report theirs."""

    errors: list[str]
    warnings: list[str]
    config: RouterConfig | None
    set_aside: set[str] = field(default_factory=set)   # names of named items a shape error removed, and the
    # paths of the blocks it changed: a later error about one of them would only repeat it
    references_ok: bool = False     # the checks across blocks passed, so the converted config compiles
    # Of each list items were set aside from (by its path), the file's index of each item left: ``reindex``.
    moved: dict[str, list[int]] = field(default_factory=dict)


def collect(raw: object) -> Collected:
    """Run every check: removed forms, shape, then the checks across blocks over what remains."""
    if not isinstance(raw, dict):
        return Collected([f"(document): invalid_type: expected a mapping, got {type(raw).__name__}"], [], None)
    deep = too_deep(raw)
    if deep:
        return Collected(deep, [], None)    # the checks below walk the document by recursion: none runs
    errors = _precheck(raw) + control_in_names(raw)
    work = _without_removed(raw)
    warnings = _rename_aliases(work)
    set_aside: set[str] = set()
    moved: dict[str, list[int]] = {}
    for _ in range(_MAX_ROUNDS):
        problems = collect_shape_problems(work, RouterConfig, [], work)
        if not problems:
            break
        # A field set aside in an earlier round is missing in this one: its "missing_field" only repeats that; and
        # a list an item was taken from is shorter: its length error only repeats the item's.
        errors += [line for line in (reindex(line, moved) for _, line in problems
                                     if not _under(line, set_aside) and not _shortened(line, set_aside))
                   if line not in errors]
        # Deepest first, and of one list the last item first, so each pop takes out the item its error names.
        for steps, line in sorted(problems, key=lambda p: (len(p[0]), _order_key(p[0])), reverse=True):
            set_aside.add(line.partition(": ")[0])
            _set_aside(work, steps, set_aside, moved)
    else:
        return Collected(errors, warnings, None, set_aside, moved=moved)
    try:
        config = typing.cast(RouterConfig, convert(work, RouterConfig))
    except msgspec.ValidationError:
        return Collected(errors, warnings, None, set_aside, moved=moved)
    more, more_warnings = check(config)
    errors += [reindex(line, moved) for line in more if not follows_from(line, set_aside)]
    return Collected(errors, warnings + [reindex(line, moved) for line in more_warnings], config, set_aside,
                     references_ok=not more, moved=moved)


def _order_key(steps: list) -> tuple:
    return tuple((0, s, "") if isinstance(s, int) else (1, 0, str(s)) for s in steps)


def reindex(line: str, moved: dict[str, list[int]]) -> str:
    """``line`` with the index of an item of a list that items were set aside from put back to the item's index
    in the file: the checks run over what converted, where the items after one set aside moved up."""
    path, sep, rest = line.partition(": ")
    for at in sorted(moved, key=len, reverse=True):     # an inner list's path holds its outer one's
        found = re.match(re.escape(at) + r"\[(\d+)\]", path)
        alive = moved[at]
        if found is None:
            continue
        if int(found.group(1)) < len(alive):
            path = f"{at}[{alive[int(found.group(1))]}]{path[found.end():]}"
        # The message may cite a sibling of the item by its index, "(decisions[0], priority 50)"
        # (``decision_order``): the file's index too, not the converted list's.
        leaf = at.rpartition(".")[2]
        rest = re.sub(rf"(?<=\(){re.escape(leaf)}\[(\d+)\]", lambda m: f"{leaf}[{alive[int(m.group(1))]}]"
                      if int(m.group(1)) < len(alive) else m.group(0), rest)
    return path + sep + rest


_MAX_ROUNDS = 8
# How deep a document nests (Envoy bounds its configuration's depth too): a rule tree's conditions at most
# MAX_RULE_DEPTH levels, any other mapping or list at most MAX_DEPTH, well under Python's recursion limit.
MAX_RULE_DEPTH = 32
MAX_DEPTH = 100


def too_deep(raw: object) -> list[str]:
    """A line for each rule tree nested past MAX_RULE_DEPTH levels of ``conditions`` (at the tree's root), and
    for the first node past MAX_DEPTH anywhere else; walked without recursion, as no deeper check can be."""
    lines: list[str] = []
    # (node, steps to it, its depth, the steps of the rule tree it is in or None, condition levels above it)
    stack: list[tuple[object, list, int, list | None, int]] = [(raw, [], 0, None, 0)]
    while stack:
        node, steps, depth, root, levels = stack.pop()
        if depth > MAX_DEPTH:
            return lines + [f"{_paths.render(steps, raw)}: too_deep: the document nests past {MAX_DEPTH} levels here"]
        if isinstance(node, list):
            stack.extend((value, steps + [i], depth + 1, root, levels) for i, value in enumerate(node)
                         if isinstance(value, (dict, list)))
            continue
        if not isinstance(node, dict):
            continue
        in_tree = isinstance(node.get("conditions"), list)
        if in_tree and levels + 1 > MAX_RULE_DEPTH:
            top = root if root is not None else steps
            lines.append(f"{_paths.render(top, raw)}: too_deep: conditions nest {levels + _levels(node)} levels; "
                         f"a rule tree nests at most {MAX_RULE_DEPTH}")
            stack = [item for item in stack if item[3] is not top]     # one line a tree
            continue
        for key, value in node.items():
            if not isinstance(value, (dict, list)):
                continue
            if in_tree and key == "conditions":
                stack.append((value, steps + [key], depth + 1, root if root is not None else steps, levels + 1))
            else:
                stack.append((value, steps + [key], depth + 1, None, 0))
    return lines


def control_in_names(raw: dict) -> list[str]:
    """A line for each ``name`` holding a control character (a newline, a tab, DEL) or beginning or ending with a
    space: names reach response headers (the decision, recipe, model and backend chosen), which cannot carry
    them; h11 then refused every answer's head. Walked without recursion (too_deep bounds the depth first)."""
    lines: list[str] = []
    stack: list[tuple[object, list]] = [(raw, [])]
    while stack:
        node, steps = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if key == "name" and isinstance(value, str) and any(unicodedata.category(c) == "Cc" for c in value):
                lines.append(f"{_paths.render(steps + [key], raw)}: invalid_value: the name {value!r} holds a "
                             "control character; names reach response headers, which cannot carry one")
            elif key == "name" and isinstance(value, str) and value != value.strip():
                lines.append(f"{_paths.render(steps + [key], raw)}: invalid_value: the name {value!r} begins or "
                             "ends with a space; names reach response headers, which cannot carry one there")
            elif isinstance(value, (dict, list)):
                stack.append((value, steps + [key]))
    return sorted(lines)


def _levels(node: object) -> int:
    """The levels of ``conditions`` from ``node`` down (its deepest branch), without recursion."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        node, levels = stack.pop()
        conditions = node.get("conditions") if isinstance(node, dict) else None
        if isinstance(conditions, list):
            stack.extend((child, levels + 1) for child in conditions)
        deepest = max(deepest, levels)
    return deepest
# Codes that only repeat a shape error when they name a block the shape error set aside.
_REFERENCE_CODES = ("unknown_model", "unknown_recipe", "unknown_signal")


def _under(line: str, set_aside: set[str]) -> bool:
    """Whether ``line`` is about a path already set aside, or a field inside one."""
    path = line.partition(": ")[0]
    return any(path == p or path.startswith(f"{p}.") or path.startswith(f"{p}[") for p in set_aside)


def _shortened(line: str, set_aside: set[str]) -> bool:
    """Whether ``line`` is about a list an item of which was set aside (``subjects`` after ``subjects[0].kind``)."""
    path = line.partition(": ")[0]
    return any(p.startswith(f"{path}[") for p in set_aside)


def follows_from(line: str, set_aside: set[str]) -> bool:
    """Whether ``line`` only repeats a shape error: it is about a block whose field was set aside, or it is a
    reference to a named block that was."""
    path = line.partition(": ")[0]
    if any(p.startswith(f"{path}.") or p.startswith(f"{path}[") for p in set_aside):
        return True
    return any(f": {code}: " in line for code in _REFERENCE_CODES) and any(f"'{n}'" in line for n in set_aside)


def _set_aside(work: dict, steps: list, set_aside: set[str], moved: dict[str, list[int]]) -> None:
    """Remove the node a shape error names (for a missing field, the block missing it), so the rest converts;
    an item taken out of a list is recorded in ``moved``, so later lines keep the file's indexes."""
    if not steps:
        return
    *parents, last = steps
    node: object = work
    for step in parents:
        try:
            node = node[step]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict) and isinstance(last, str) and last not in node:
        _set_aside(work, parents, set_aside, moved)     # a missing field: the block without it goes
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        moved.setdefault(_paths.render(parents, work), list(range(len(node)))).pop(last)
        item = node.pop(last)
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            set_aside.add(item["name"])
    elif isinstance(node, dict):
        del node[last]


def _without_removed(raw: dict) -> dict:
    """A copy without the removed forms ``_precheck`` reported, so each is reported once, as what it was."""
    work = copy.deepcopy(raw)
    work["version"] = SCHEMA_VERSION
    for key in REMOVED_SECTIONS:
        work.pop(key, None)
    for recipe in _items(work.get("recipes")):
        signals = recipe.get("signals") if isinstance(recipe, dict) else None
        if isinstance(signals, dict):
            for key in REMOVED_SIGNAL_TYPES:
                signals.pop(key, None)
    for steps, _, _ in sorted(removed_fields(work), key=lambda f: len(f[0]), reverse=True):
        node: object = work
        for step in steps[:-1]:
            node = node[step]  # type: ignore[index]
        if isinstance(node, dict):
            node.pop(steps[-1], None)
    return work


def _items(value: object) -> list:
    """``value`` if it is a list, else no items: these walks run before the shape check, over any document, and
    leave a wrong type (``recipes: 5``) to it, which reports it with its path."""
    return value if isinstance(value, list) else []


def _precheck(raw: dict) -> list[str]:
    version = raw.get("version")
    errors = []
    if version is None:
        errors.append("version: missing_field: a v0.5 configuration starts with `version: v0.5`")
    elif version != SCHEMA_VERSION:
        errors.append(
            f"version: invalid_value: {version!r} is not a schema this router reads; "
            f"it reads `version: {SCHEMA_VERSION}`"
        )
    for key, what in REMOVED_SECTIONS.items():
        if key in raw:
            errors.append(f"{key}: removed_section: {what}")
    for i, recipe in enumerate(_items(raw.get("recipes"))):
        signals = recipe.get("signals") if isinstance(recipe, dict) else None
        if not isinstance(signals, dict):
            continue
        name = recipe.get("name", i)
        for key, what in REMOVED_SIGNAL_TYPES.items():
            if key in signals:
                errors.append(f"recipes[{name}].signals.{key}: removed_signal_type: {key} was removed; write {what}")
    for i, recipe in enumerate(_items(raw.get("recipes"))):
        for j, d in enumerate(_items(recipe.get("decisions") if isinstance(recipe, dict) else None)):
            alg = d.get("algorithm") if isinstance(d, dict) else None
            if isinstance(alg, dict) and alg.get("type") == "decision" and "decision" in alg and "systemone" in alg:
                errors.append(f"recipes[{recipe.get('name', i)}].decisions[{j}].algorithm.decision: invalid_value: "
                              "the settings are written twice, under decision and systemone; keep systemone")
    for steps, name, becomes in removed_fields(raw):
        errors.append(f"{_paths.render(steps, raw)}: removed_field: {name} was removed; write {becomes} "
                      "(`vsr-fast config migrate` rewrites it)")
    return errors


def _rename_aliases(raw: dict) -> list[str]:
    """``decision`` loads as ``systemone``, in signals and conditions, with a warning (spec 5.2, 6.9)."""
    warnings: list[str] = []
    for i, recipe in enumerate(_items(raw.get("recipes"))):
        if not isinstance(recipe, dict):
            continue
        where = f"recipes[{recipe.get('name', i)}]"
        signals = recipe.get("signals")
        if isinstance(signals, dict) and "decision" in signals:
            signals.setdefault("systemone", [])
            if isinstance(signals["systemone"], list) and isinstance(signals["decision"], list):
                signals["systemone"].extend(signals.pop("decision"))
                warnings.append(f"{where}.signals.decision: renamed_signal_type: decision loads as systemone; write systemone")
        for j, decision in enumerate(_items(recipe.get("decisions"))):
            if isinstance(decision, dict) and isinstance(decision.get("rules"), dict):
                _rename_conditions(decision["rules"], f"{where}.decisions[{j}].rules", warnings)
            if isinstance(decision, dict):
                _rename_algorithm(decision.get("algorithm"), f"{where}.decisions[{j}].algorithm")
    return warnings


def _rename_algorithm(alg: object, path: str) -> None:
    """``type: decision`` keeps its settings under ``decision:``, read as ``systemone:``'s; the type's own
    warning (renamed_algorithm_type) comes from the algorithm's checks. Settings written under both keys are
    refused by ``_precheck``."""
    if isinstance(alg, dict) and alg.get("type") == "decision" and "decision" in alg:
        settings = alg.pop("decision")
        alg.setdefault("systemone", settings)      # written under both: _precheck refuses it


def _rename_conditions(node: dict, path: str, warnings: list[str]) -> None:
    if node.get("type") == "decision":
        node["type"] = "systemone"
        warnings.append(f"{path}.type: renamed_signal_type: decision loads as systemone; write systemone")
    for k, child in enumerate(_items(node.get("conditions"))):
        if isinstance(child, dict):
            _rename_conditions(child, f"{path}.conditions[{k}]", warnings)
