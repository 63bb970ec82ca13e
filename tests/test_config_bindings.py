"""Type bindings (spec 6.5): a key of ``model_bindings`` / ``model_catalog.bindings`` that is no application
signal's condition type is refused as an unknown field is, the closest key suggested; ``systemone`` is refused with
why (type bindings choose only application signals). The outside trial: ``{jailbrake: bad}``, ``{domains: bad}`` and
``{systemone: bad}`` all loaded with no word."""
from __future__ import annotations

import pytest

from vsr_fast.routing import load_raw

from .test_config_load import base, errors_of, run_cli
from .test_config_validate_trial import _write

TYPES = "(domain, fact_check, user_feedback, jailbreak, safety, pii, hallucination, refusal, turn_relation, " \
        "complexity, modality)"


def _bound(where: str, bindings: dict) -> dict:
    doc = base()
    if where == "recipe":
        doc["recipes"][0]["model_bindings"] = bindings
    else:
        doc["global"] = {"model_catalog": {"bindings": bindings}}
    return doc


PATHS = {"recipe": "recipes[default].model_bindings", "global": "global.model_catalog.bindings"}


@pytest.mark.parametrize("where", ["recipe", "global"])
@pytest.mark.parametrize("key, near", [("jailbrake", "jailbreak"), ("domains", "domain"),
                                       ("user_feedbacks", "user_feedback"), ("halucination", "hallucination")])
def test_a_misspelt_binding_key_is_an_unknown_field_with_the_closest_key(where, key, near):
    assert errors_of(_bound(where, {key: "primary"})) == [
        f"{PATHS[where]}.{key}: unknown_field: not an application signal's condition type {TYPES}; "
        f"did you mean {near}?"]


@pytest.mark.parametrize("where", ["recipe", "global"])
def test_a_systemone_binding_is_refused_with_why(where):
    (line,) = errors_of(_bound(where, {"systemone": "primary"}))
    assert line.startswith(f"{PATHS[where]}.systemone: unknown_field: type bindings choose only application signals")
    assert "names its own deployment" in line


def test_every_application_condition_type_binds():
    every = {t: "primary" for t in TYPES.strip("()").split(", ")}
    loaded = load_raw(_bound("recipe", every))
    assert loaded.config.recipes[0].model_bindings == every


def test_validate_says_it_in_one_line_and_fails(tmp_path):
    done = run_cli("config", "validate", _write(tmp_path, _bound("recipe", {"jailbrake": "bad", "pii": "primary"})))
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: recipes[default].model_bindings.jailbrake: unknown_field: not an application signal's "
                      f"condition type {TYPES}; did you mean jailbreak?"]
