"""The Cython kernels' public surface is their .pyi stub: one check, shared by each kernel's tests."""
from __future__ import annotations

import ast
from pathlib import Path


def stub_surface(module) -> dict[str, set[str]]:
    """Top-level names of the module's .pyi stub, each with the members it declares."""
    stub = Path(module.__file__).with_name(module.__name__.rsplit(".", 1)[1] + ".pyi")
    surface: dict[str, set[str]] = {}
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ClassDef):
            surface[node.name] = {
                item.name if isinstance(item, ast.FunctionDef) else item.target.id
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AnnAssign))
            }
        elif isinstance(node, ast.FunctionDef):
            surface[node.name] = set()
        elif isinstance(node, ast.AnnAssign):
            surface[node.target.id] = set()
    return surface


def assert_surface_is_the_stub(module) -> None:
    """``__all__`` names exactly the stub's names, and each declared member exists."""
    surface = stub_surface(module)
    assert sorted(module.__all__) == sorted(surface)
    for name, members in surface.items():
        assert all(hasattr(getattr(module, name), member) for member in members), name
