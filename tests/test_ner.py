"""The named-entity stage of the embedded models: PERSON, LOCATION, ORGANIZATION, DATE_TIME and
STREET_ADDRESS as spans from gazetteers and rules, its common-word traps, and the gazetteer read at
configuration load only when a rule keeps one of those labels."""
from __future__ import annotations

import pytest

from vsr_fast.models.vsr_static import ArtifactError, SPAN_LABELS, VsrStatic, load_3
from vsr_fast.models.vsr_static import _ner
from vsr_fast.models.vsr_static._artifacts import ARTIFACTS_3, FILES_3, read
from vsr_fast.protocol.systemone import Entry, QuestionError, SpanAnswer, State
from vsr_fast.routing import load_raw
from vsr_fast.systemone.presets import PRESETS

from .test_ner_rules import _pii_doc, _question

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


def test_the_card_marks_the_named_labels(model):
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


@pytest.mark.parametrize("text,expected", [
    # PERSON: a known first name and a capitalised word, a title, a cue; not the words that are also names.
    ("Please ask Maria Gonzalez to call me back.", [("PERSON", "Maria Gonzalez")]),
    ("Please call Dr. Patel tomorrow.", [("PERSON", "Dr. Patel")]),
    ("Dear Margaret, your refund is on its way.", [("PERSON", "Margaret")]),
    ("Hi, my name is Oluwaseun Adeyemi.", [("PERSON", "Oluwaseun Adeyemi")]),
    ("You help the customer Jane Doe of Acme Corporation.", [("PERSON", "Jane Doe"), ("ORGANIZATION", "Acme Corporation")]),
    ("I met Will Smith at the University of Michigan.", [("PERSON", "Will Smith"),
                                                         ("ORGANIZATION", "University of Michigan")]),
    ("April Griffin is asking for a refund.", [("PERSON", "April Griffin")]),
    ("Margaret's new address is 12 Elm Street.", [("PERSON", "Margaret"), ("STREET_ADDRESS", "12 Elm Street")]),
    ("Will you help me?", []),
    ("May I ask a question?", []),
    ("Grace is a virtue and hope is not a plan.", []),
    ("Bill me later, please.", []),
    ("Mark my words, it will rain.", []),
    # A short or Spanish word that the gazetteer lists as a first name, at a sentence's start with no cue.
    ("Mi pedido no ha llegado a Miami.", [("LOCATION", "Miami")]),
    ("Eres un agente de soporte. Su cuenta está bien.", []),
    ("Hi, I'm Ann. Any announcement?", [("PERSON", "Ann")]),          # a cue: a name still
    ("Mario llamó ayer.", [("PERSON", "Mario")]),                      # a longer name alone: still one
    # LOCATION: a known place, or a capitalised run after a place cue.
    ("I love Texas weather.", [("LOCATION", "Texas")]),
    ("We moved to Brookhaven last year.", [("LOCATION", "Brookhaven")]),
    ("The office is in Lyon, France.", [("LOCATION", "Lyon"), ("LOCATION", "France")]),
    ("Ship it to Springfield, IL please.", [("LOCATION", "Springfield"), ("LOCATION", "IL")]),
    ("We have offices in Lyon and Paris.", [("LOCATION", "Lyon"), ("LOCATION", "Paris")]),
    ("Account holder: Ann Lee; city: Marlowfield", [("PERSON", "Ann Lee"), ("LOCATION", "Marlowfield")]),
    # ORGANIZATION: a company word at the end, a law-firm list, an employer cue.
    ("Our supplier is Siemens AG.", [("ORGANIZATION", "Siemens AG")]),
    ("The contract is with Parker, Lewis and Young.", [("ORGANIZATION", "Parker, Lewis and Young")]),
    ("She works at Initech and likes it.", [("ORGANIZATION", "Initech")]),
    ("I work for the Bank of Montreal.", [("ORGANIZATION", "Bank of Montreal")]),
    # DATE_TIME: absolute dates and times; not relative ones, not "May I".
    ("She was born on 12 May 1985.", [("DATE_TIME", "12 May 1985")]),
    ("The meeting is on Friday at 5:30 pm.", [("DATE_TIME", "Friday"), ("DATE_TIME", "5:30 pm")]),
    ("Renewal date: 2024-02-29", [("DATE_TIME", "2024-02-29")]),
    ("Can we talk about it tomorrow or next week?", []),
    ("It took 20 years and 3 months.", []),
    # Shouting and acronyms are not names.
    ("OMG I HAVE LIKE 10 DAYS OF SCHOOL LEFT", []),
])
def test_each_label_and_its_common_word_traps(model, text, expected):
    assert spans(model, text, NAMED) == expected


# Ordinary chat turns with no personal data, written for this test (not drawn from any benchmark set).
ORDINARY = [
    "Will you help me with my homework tonight?", "May I ask what time the store closes?",
    "Thanks so much, that fixed it!", "Can you explain how recursion works?", "What should I cook for dinner?",
    "I think the second option is better.", "Grace under pressure is hard to learn.", "Sure, sounds good to me.",
    "How do I reset my password?", "Mark the task as done when you finish.", "Is it going to rain later?",
    "Bill me at the end of the month, please.", "Hope you have a great weekend!", "Why is the sky blue?",
    "Could you summarise this article in three bullet points?", "I love pizza with extra cheese.",
    "Please rewrite this paragraph to sound more formal.", "The build failed again after the last commit.",
    "Lol that is hilarious", "OK, I will try that and let you know.", "What is the difference between a list and a tuple?",
    "My cat keeps knocking things off the table.", "Good morning! How are you today?", "Do you like jazz or rock better?",
    "Write a haiku about autumn leaves.", "The meeting ran long, so I missed lunch.", "Honestly, I have no idea.",
    "Can you translate this sentence into Spanish?", "I need a recipe that uses leftover rice.",
    "How many cups are in a gallon?", "That movie was way better than I expected.", "Let me know when you are free.",
    "Is coffee bad for you?", "Sorry, I meant the other file.", "Give me five ideas for a birthday party.",
    "What does this error message mean?", "We should probably start over.", "Which laptop is best for coding?",
    "I just finished my first marathon!", "Do I need a visa for a short trip?", "Who won the game last night?",
    "Please check my grammar in this email.", "Art class was fun today.", "The printer is out of paper again.",
    "Rose petals make a nice tea, apparently.", "Happy birthday to you!", "Do dogs dream?",
    "Explain the rules of chess simply.", "My phone battery dies so fast.", "Faith and patience, that is all it takes.",
]


def test_no_span_on_ordinary_chat_turns(model):
    assert len(ORDINARY) == 50
    hits = {text: got for text in ORDINARY if (got := spans(model, text, NAMED))}
    assert hits == {}


def test_a_gazetteer_that_differs_from_its_pin_refuses_to_load(tmp_path):
    copy = tmp_path / "gazetteer.tsv.gz"
    copy.write_bytes(_ner.GAZETTEER.read_bytes())
    _ner.Ner(copy).load()                                          # an intact copy loads
    blob = bytearray(copy.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    copy.write_bytes(bytes(blob))
    with pytest.raises(ArtifactError, match="gazetteer"):
        _ner.Ner(copy).load()


def test_a_rule_that_keeps_a_named_label_asks_it_and_the_gazetteer_is_read_at_configuration_load():
    loaded = load_raw(_pii_doc({"name": "p", "ignore_labels": ["DATE_TIME"]}, {"provider": "model_runtime",
                                                                              "artifact": "vsr-static-3"}))
    question = _question(loaded)
    assert set(question.criteria) == set(PRESETS["pii"].options) - {"DATE_TIME"}
    assert loaded.table.decision_models["local"].ner._gazetteer is not None


def test_the_gazetteer_is_read_only_when_a_question_asks_a_named_label():
    fresh = VsrStatic(read(ARTIFACTS_3, FILES_3))
    fresh.prepare([PRESETS["pii"].question(SPAN_LABELS)])
    assert fresh.ner._gazetteer is None                           # structured labels alone: nothing read
    fresh.prepare([PRESETS["pii"].question(("PERSON",))])
    assert fresh.ner._gazetteer is not None


def test_a_damaged_gazetteer_fails_the_named_question_in_place(tmp_path):
    copy = tmp_path / "gazetteer.tsv.gz"
    copy.write_bytes(b"not the pinned gazetteer")
    fresh = VsrStatic(read(ARTIFACTS_3, FILES_3))
    fresh.ner = _ner.Ner(copy)
    got = fresh.answer([Entry(State(request=TEXT), {"named": PRESETS["pii"].question(("PERSON",)),
                                                     "mail": PRESETS["pii"].question(("EMAIL_ADDRESS",))})])[0]
    assert isinstance(got["named"], QuestionError) and got["named"].code == "question_failed"
    assert [s.text for s in got["mail"].spans] == ["jane.doe@example.com"]
