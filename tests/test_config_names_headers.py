"""Names reach response headers (x-vsr-selected-decision, -model, the recipe's, a backend's): one with a control
character loaded, and then every answer failed in h11 (500, no body). Refused at load, with the name's path."""
from __future__ import annotations

import yaml

from vsr_fast.routing.loaded import validate_bytes

from .procs import config


def _errors(doc: dict) -> list[str]:
    return validate_bytes(yaml.safe_dump(doc).encode(), source="c.yaml").errors


def _doc(decision: str = "d", backend: str = "b", model: str = "m", recipe: str = "default") -> dict:
    doc = config([{"name": model, "backend_refs": [{"name": backend, "endpoint": "http://127.0.0.1:9/v1"}]}],
                 [{"name": decision, "modelRefs": [{"model": model}]}])
    doc["recipes"][0]["name"] = recipe
    doc["entrypoints"][0]["recipe"] = recipe
    return doc


def test_the_plain_names_load():
    assert _errors(_doc()) == []


def test_a_decision_name_with_a_newline_is_refused_with_its_path():
    lines = [x for x in _errors(_doc(decision='d"x\\y\nz')) if ": invalid_value: " in x and "control" in x]
    assert [x.split(": ")[0] for x in lines] == ["recipes[default].decisions[0].name"], lines


def test_a_backend_model_or_recipe_name_with_a_control_character_is_refused():
    for doc, path in ((_doc(backend="b\nx"), "providers.models[m].backend_refs[0].name"),
                      (_doc(model="m\x7f"), "providers.models[0].name"),
                      (_doc(recipe="r\tx"), "recipes[0].name")):
        lines = [x for x in _errors(doc) if "control character" in x]
        assert lines and all(": invalid_value: " in x for x in lines), (path, _errors(doc))
        assert any(x.startswith(f"{path}: ") for x in lines), (path, lines)


def test_a_name_beginning_or_ending_with_a_space_is_refused():
    """h11 refuses a header value with a space at either end as it refuses a newline."""
    lines = [x for x in _errors(_doc(decision=" d")) if "begins or ends with a space" in x]
    assert [x.split(": ")[0] for x in lines] == ["recipes[default].decisions[0].name"], _errors(_doc(decision=" d"))
