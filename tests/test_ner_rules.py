"""The named-entity labels' rules: the street-address rule, a rule that ignores the named labels never asks
them, and the load warning of a deployment whose card does not mark a label a rule keeps. The stage
itself: tests/test_ner.py."""
from __future__ import annotations

import pytest

from vsr_fast.models.vsr_static import SPAN_LABELS
from vsr_fast.models.vsr_static import _ner
from vsr_fast.protocol.systemone import SpanQuestion
from vsr_fast.routing import load_raw
from vsr_fast.systemone.presets import PRESETS

from .test_systemone_client import doc


@pytest.mark.parametrize("text,address", [
    ("Send it to 1600 Pennsylvania Avenue NW, Washington, DC 20500 today.", "1600 Pennsylvania Avenue NW, Washington, DC 20500"),
    ("I moved to 221B Baker St. Apt 4 last year.", "221B Baker St. Apt 4"),
    ("Deliver to 742 Evergreen Terrace, Springfield 49007 please", "742 Evergreen Terrace, Springfield 49007"),
    ("Our office is at 55 W 46th Street, Suite 300.", "55 W 46th Street, Suite 300"),
    ("My address: 764 Howard Forge Apt. 421, Vanessaside, VT 79393", "764 Howard Forge Apt. 421, Vanessaside, VT 79393"),
    ("It went to 14 Oak Lane. Then it came back.", "14 Oak Lane"),
])
def test_the_street_rule_takes_number_street_type_unit_and_postcode(text, address):
    assert [text[s:e] for _, s, e, _ in _ner.streets(text)] == [address]


@pytest.mark.parametrize("text", ["Version 2 Street Fighter is fun", "We sold 40 Main St shares",
                                  "It costs 12 dollars", "Read chapter 3 of the book", "the top 10 Key Points",
                                  "We saw 3 Great Lakes"])
def test_the_street_rule_needs_a_street_type_and_no_word_that_leads_elsewhere(text):
    assert [text[s:e] for _, s, e, _ in _ner.streets(text)] == []


def _pii_doc(rule: dict, deployment: dict) -> dict:
    d = doc({"pii": [rule]}, [{"type": "pii", "name": rule["name"]}], deployments={"local": deployment})
    d["global"]["model_catalog"]["system"] = {"decision_model": {"deployment": "local"}}
    return d


def _question(loaded):
    (question,) = loaded.table.recipes["default"].learned.questions.values()
    return question


def test_a_rule_that_ignores_the_named_labels_does_not_ask_them():
    ignored = ["DATE_TIME", "PERSON", "LOCATION", "ORGANIZATION", "STREET_ADDRESS"]
    loaded = load_raw(_pii_doc({"name": "p", "ignore_labels": ignored}, {"provider": "model_runtime",
                                                                          "artifact": "vsr-static-3"}))
    question = _question(loaded)
    assert isinstance(question, SpanQuestion) and list(question.criteria) == list(SPAN_LABELS)
    assert not [w for w in loaded.warnings if "span_labels_unanswered" in w]


def test_a_card_that_does_not_mark_a_kept_label_warns_naming_the_labels():
    scripted = {"provider": "model_runtime", "artifact": "tests.scripted_model:make_emails_only"}
    loaded = load_raw(_pii_doc({"name": "p", "ignore_labels": ["PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IP_ADDRESS",
                                                               "IBAN_CODE", "DATE_TIME"]}, scripted))
    warned = [w for w in loaded.warnings if "span_labels_unanswered" in w]
    assert warned == ["recipes[default].signals.pii[p]: span_labels_unanswered: deployment 'local' (scripted-emails) "
                      "does not mark PERSON, LOCATION, STREET_ADDRESS, ORGANIZATION, as its card says; add them to "
                      "ignore_labels or expect them never found"]
    every = [label for label in PRESETS["pii"].options if label != "EMAIL_ADDRESS"]
    quiet = load_raw(_pii_doc({"name": "p", "ignore_labels": every}, scripted))
    assert not [w for w in quiet.warnings if "span_labels_unanswered" in w]
