"""The layering rule, walked over every import in the package (lazy and TYPE_CHECKING imports included).

Packages sit on layers, lowest first; a module may import its own package or a
package on a lower layer, never one beside it or above it, and no modules import
each other in a loop.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "vsr_fast"

LAYERS = [
    {"errors", "metrics", "headers", "_ext", "locks", "sockets", "offloop", "scopes"},
    {"tracing"},
    {"config"},
    {"protocol"},
    {"signals", "upstream", "selection", "plugins"},
    {"decisions"},
    {"systemone"},
    {"models"},
    {"embeddings"},
    {"routing"},
    {"events"},
    {"auth"},
    {"pipeline"},
    {"server"},
    {"cli"},
    {"__main__"},
]
LAYER = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(root: Path = ROOT) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        module = _module_name(path, root)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        targets = found.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                    names = [] if node.module else [a.name for a in node.names]
                else:
                    target, names = node.module or "", []
                if target.startswith("vsr_fast"):
                    targets.add(target)
                    targets.update(f"{target}.{n}" for n in names)   # `from . import x` imports module x
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("vsr_fast"))
    return {m: {t for t in ts if t in found} for m, ts in found.items()}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer():
    packages = {_top(m) for m in _imports()} - {""}
    assert packages <= set(LAYER), f"packages without a layer: {sorted(packages - set(LAYER))}"


def test_imports_point_down():
    wrong = []
    for module, targets in _imports().items():
        here = _top(module)
        for target in targets:
            there = _top(target)
            if there and there != here and LAYER[there] >= LAYER.get(here, len(LAYERS)):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports sideways or up a layer:\n" + "\n".join(sorted(wrong))


def test_no_module_imports_itself_through_a_loop():
    graph = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:   # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            # A package face re-exporting its own modules is not a loop of layers.
            if len(component) > 1 and not _only_package_face(component):
                loops.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not loops, f"modules that import each other in a loop: {loops}"


def _only_package_face(component: list[str]) -> bool:
    packages = [m for m in component if (ROOT.parent / m.replace(".", "/") / "__init__.py").exists()]
    return len(packages) == 1 and all(m.startswith(packages[0] + ".") or m == packages[0] for m in component)


def test_the_walker_sees_a_lazy_import_inside_a_function(tmp_path):
    """The form that used to hide cycles: an import inside a function body."""
    fake = tmp_path / "vsr_fast"
    (fake / "config").mkdir(parents=True)
    (fake / "routing").mkdir()
    for init in (fake, fake / "config", fake / "routing"):
        (init / "__init__.py").write_text("")
    (fake / "routing" / "plan.py").write_text("X = 1\n")
    (fake / "config" / "load.py").write_text("def f():\n    from ..routing.plan import X\n    return X\n")
    assert _imports(fake)["vsr_fast.config.load"] == {"vsr_fast.routing.plan"}
