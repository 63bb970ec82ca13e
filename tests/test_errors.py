"""The one error tree: every error the router raises on purpose is a class in ``vsr_fast.errors``."""
from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import vsr_fast
from vsr_fast import errors

ROOT = Path(vsr_fast.__file__).parent


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _import_everything() -> None:
    for info in pkgutil.walk_packages(vsr_fast.__path__, "vsr_fast."):
        if info.name.endswith("__main__") or ".build" in info.name:
            continue
        importlib.import_module(info.name)


def test_every_error_class_lives_in_the_tree():
    _import_everything()
    outside = [f"{c.__module__}.{c.__qualname__}" for c in _all_subclasses(errors.VsrError)
               if c.__module__ != "vsr_fast.errors"]
    assert not outside, f"errors defined outside vsr_fast/errors.py: {outside}"


@pytest.mark.parametrize("cls", sorted(_all_subclasses(errors.VsrError), key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_each_error_knows_its_status_code_and_stage(cls):
    assert 100 <= cls.status <= 599 or issubclass(cls, errors.ConfigError)  # load time: no HTTP answer
    assert cls.code and cls.stage and cls.type
    assert cls.__name__ in errors.__doc__, f"{cls.__name__} is missing from the tree drawn in the docstring"


def test_a_store_outage_is_never_the_clients_fault():
    assert errors.StoreUnavailable.status == 503


def test_no_error_is_changed_after_it_is_made():
    """No ``err.status = ...``: a different answer is a different class."""
    changed = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if (isinstance(t, ast.Attribute) and t.attr in {"status", "code", "type", "message", "recipe"}
                            and isinstance(t.value, ast.Name) and t.value.id in {"err", "exc", "error", "failure"}):
                        changed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not changed, f"errors mutated after construction: {changed}"


def test_chained_errors_keep_their_cause():
    try:
        try:
            raise ConnectionError("redis down")
        except ConnectionError as exc:
            raise errors.StoreUnavailable("the responses store did not answer") from exc
    except errors.StoreUnavailable as err:
        assert isinstance(err.__cause__, ConnectionError) and err.status == 503 and err.stage == "store"
