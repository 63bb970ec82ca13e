"""The named-entity stage of the embedded models (the ner extra, `make test-ner`): PERSON, LOCATION,
ORGANIZATION, DATE_TIME and STREET_ADDRESS as spans, and the pipeline loaded when a rule keeps one."""
from __future__ import annotations

import shutil

import pytest

from vsr_fast.models.vsr_static import ArtifactError, SPAN_LABELS, load_3
from vsr_fast.models.vsr_static import _ner
from vsr_fast.protocol.systemone import Entry, SpanAnswer, SpanQuestion, State
from vsr_fast.routing import load_raw
from vsr_fast.systemone.presets import PRESETS

from ..test_ner_rules import _pii_doc, _question

NAMED = _ner.LABELS
TEXT = ("My name is Jane Doe and I live at 12 Elm Street, Springfield. I have worked at Acme Corporation "
        "since March 3, 2019; write to jane.doe@example.com.")


@pytest.fixture(scope="module")
def model():
    return load_3()


def spans(model, text: str, labels=None) -> list[tuple[str, str]]:
    answer = model.answer([Entry(State(request=text), {"q": PRESETS["pii"].question(labels)})])[0]["q"]
    assert isinstance(answer, SpanAnswer)
    for s in answer.spans:
        assert text[s.start:s.end] == s.text
    return [(s.label, s.text) for s in answer.spans]


def test_the_card_marks_the_named_labels_when_the_extra_is_installed(model):
    assert _ner.available() and model.ner is not None and model.ner_problem is None
    assert model.card.span_labels == [*SPAN_LABELS, *NAMED]


def test_names_places_organisations_dates_and_streets_are_spans(model):
    got = spans(model, TEXT)
    assert ("PERSON", "Jane Doe") in got
    assert ("STREET_ADDRESS", "12 Elm Street") in got
    assert ("LOCATION", "Springfield") in got
    assert ("ORGANIZATION", "Acme Corporation") in got
    assert ("DATE_TIME", "March 3, 2019") in got
    assert ("EMAIL_ADDRESS", "jane.doe@example.com") in got      # the structured labels still win their spans


def test_only_the_labels_asked_are_returned_and_structured_ones_alone_skip_the_stage(model):
    assert {label for label, _ in spans(model, TEXT, ("PERSON",))} == {"PERSON"}
    assert spans(model, TEXT, SPAN_LABELS) == [("EMAIL_ADDRESS", "jane.doe@example.com")]


def test_relative_dates_are_not_personal_data(model):
    assert spans(model, "Can we talk about it tomorrow or next week?", ("DATE_TIME",)) == []
    assert spans(model, "The meeting is on Friday at 5pm.", ("DATE_TIME",)) != []


def test_a_pipeline_file_that_differs_from_its_pin_refuses_to_load(tmp_path):
    copy = tmp_path / "pipeline"
    shutil.copytree(_ner.pipeline_dir(), copy)
    _ner.verify(copy)                                            # an intact copy passes
    (copy / "ner" / "model").write_bytes((copy / "ner" / "model").read_bytes()[:-1] + b"\0")
    with pytest.raises(ArtifactError, match="ner/model"):
        _ner.verify(copy)


def test_a_rule_that_keeps_a_named_label_asks_it_and_the_pipeline_is_loaded_at_configuration_load():
    loaded = load_raw(_pii_doc({"name": "p", "ignore_labels": ["DATE_TIME"]}, {"provider": "model_runtime",
                                                                              "artifact": "vsr-static-3"}))
    question = _question(loaded)
    assert set(question.criteria) == set(PRESETS["pii"].options) - {"DATE_TIME"}
    assert loaded.table.decision_models["local"].ner._nlp is not None


