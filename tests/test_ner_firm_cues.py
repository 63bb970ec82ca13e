"""ORGANIZATION by what a sentence says of a firm no list holds (issue 21, fix116): a firm's predicate after it
("X charged me", "X is based in", "X has offices in", "X's app"), a firm's address line (", attention"), a person
"from" it, and a firm's capitals ("DHL", "ANWB") with such a cue; and what stays a place or a person. The
sentences are written for this test (no benchmark set's); the rules were read off the fourth development set
(Faker's lists of real Dutch, Turkish and Azerbaijani firms)."""
from __future__ import annotations

import pytest

from .test_ner_shapes import found, ner  # noqa: F401  (the stage, loaded once; the spans of one label)


@pytest.mark.parametrize("text,expected", [
    ("Could you check why Brightwave charged me twice?", ["Brightwave"]),
    ("Is Korvanta still based in Denver?", ["Korvanta"]),
    ("Our partner Velmora has offices in Oslo and Bergen.", ["Velmora"]),
    ("Last month Trindle closed its branch in Leeds.", ["Trindle"]),
    ("Quillsoft's app logged me out again.", ["Quillsoft"]),
    ("Could you check why Canon charged me twice?", ["Canon"]),            # a common word, not at the start
])
def test_a_firms_predicate_makes_an_organisation(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected


@pytest.mark.parametrize("text,expected", [
    ("Send the invoice to Brightwave, attention Mary Poole.", ["Brightwave"]),
    ("The meeting with Vernon Rivera from Korvanta is on Friday.", ["Korvanta"]),
    ("Halvorsen from Trindle never returned my call.", ["Trindle"]),
])
def test_an_address_line_or_a_person_from_it_makes_an_organisation(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected
    assert found(ner, text, "LOCATION") == []


@pytest.mark.parametrize("text,expected", [
    ("She worked at ANWB until 2019.", ["ANWB"]),
    ("Dear Ann, thank you for contacting DHL support.", ["DHL"]),
    ("The meeting with Vernon Rivera from MSD is on Friday.", ["MSD"]),
    ("Could you check why ZVM charged me twice?", ["ZVM"]),
    ("Can you send the contract to Nicole at DHL before Friday?", ["DHL"]),
])
def test_a_firms_capitals_with_a_cue_are_an_organisation(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected


@pytest.mark.parametrize("text,label,expected", [
    ("Hello, this is Vernon Rivera from Huntsville. My account changed.", "LOCATION", ["Huntsville"]),
    ("Hi, I'm Ann from East Jeremy.", "LOCATION", ["East Jeremy"]),       # a self-introduction: a place
    ("We moved from Boston to Denver.", "LOCATION", ["Boston", "Denver"]),
    ("Could you check why Zara charged me twice?", "PERSON", ["Zara"]),     # a first name stays a person
])
def test_places_and_people_stay(ner, text, label, expected):
    assert found(ner, text, label) == expected
    assert found(ner, text, "ORGANIZATION") == []


@pytest.mark.parametrize("text", [
    "I am working with AI on my project.",
    "lol I got it from TV",
    "Do you watch anything on TV or HBO?",
    "Nobody charged me for it.",
    "OK so I talked to my mom about it",
    "I love the USA and the UK.",
])
def test_no_organisation_without_a_firm_cue(ner, text):
    assert found(ner, text, "ORGANIZATION") == []


@pytest.mark.parametrize("text,expected", [
    ("Our contact at SBM Offshore is Peter Benitez.", ["SBM Offshore"]),
    ("Dear Ann, thank you for contacting USG People support.", ["USG People"]),
])
def test_capitals_take_the_capitalised_words_after_them(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected


@pytest.mark.parametrize("text,expected", [
    ("The quote from Korvanta was much lower than the last one.", ["Korvanta"]),
    ("Last week Ann told me the order from Brightwave would arrive soon.", ["Brightwave"]),
    ("Is Velmora the parent company of Trindle?", ["Trindle", "Velmora"]),
    ("Return the device to Quillsoft, 12 Elm Street, Dover, DE 19901.", ["Quillsoft"]),
    ("Please add Mary Poole (Korvanta) to the cc list.", ["Korvanta"]),
])
def test_what_a_firm_sends_or_is_makes_an_organisation(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected


@pytest.mark.parametrize("text,label,expected", [
    ("Please update the billing contact to Mary Poole, 12 Elm Street.", "PERSON", ["Mary Poole"]),
    ("A postcard from Paris arrived today.", "LOCATION", ["Paris"]),
])
def test_a_person_or_a_known_place_there_stays(ner, text, label, expected):
    assert found(ner, text, label) == expected
    assert found(ner, text, "ORGANIZATION") == []


@pytest.mark.parametrize("text,expected", [
    ("The quote from YCOQ Morning Banking Corporation was lower.", ["YCOQ Morning Banking Corporation"]),
    ("Could you check why Bush and Sons charged me twice?", ["Bush and Sons"]),     # one span, no part of it
    ("Send the invoice to Ray, Spencer and Townsend, attention Jane Poole.", ["Ray, Spencer and Townsend"]),
])
def test_a_firms_parts_are_no_firm_of_their_own(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected
