"""ORGANIZATION and PERSON by shape when no list holds the name (issue 21, fix95): a firm's name ending in an
industry word ("Northwind Shipping"), capitals leading a firm's name ("UTS Star Resorts Inc."), two capitalised
words that are no English word, place or firm ("Adaeze Nwachukwu"), a known first name before such a word
("Mark Oyekan"), such a word alone after a kin or role word ("my sister Umair"); and what stays unread. The
sentences are written for this test, in the third development set's style (no benchmark set's)."""
from __future__ import annotations

import pytest

from vsr_fast.models.vsr_static import _ner


@pytest.fixture(scope="module")
def ner():
    stage = _ner.Ner()
    stage.load()
    return stage


def found(ner, text: str, label: str) -> list[str]:
    return sorted(text[s:e] for lab, s, e, _ in ner.find(text) if lab == label)


@pytest.mark.parametrize("text,expected", [
    ("Please call Northwind Shipping about the container.", ["Northwind Shipping"]),
    ("We get our flour from Riverside Foods.", ["Riverside Foods"]),
    ("I was a customer of Bluepeak Equities until March.", ["Bluepeak Equities"]),
    ("I spoke to Tolulope Adeyinka at Greenfield Logistics yesterday.", ["Greenfield Logistics"]),
    ("Invoice for Kwabena Asante, Harbourline Shipping.", ["Harbourline Shipping"]),
    # Capitals right before a company or industry word's run are the firm's own.
    ("The loan came from UTS Star Resorts Inc. last year.", ["UTS Star Resorts Inc."]),
    ("I ordered it through VUA Bank and KQW Resorts.", ["KQW Resorts", "VUA Bank"]),     # capitals and one word
    # "of (the) <place>" after a company or industry word is the firm's, not a place of its own.
    ("The bill came from National Coconut Corporation of the Philippines today.",
     ["National Coconut Corporation of the Philippines"]),
    ("I wrote to Acme Corporation of Spain twice.", ["Acme Corporation of Spain"]),
])
def test_a_firm_ending_in_an_industry_word_is_an_organisation(ner, text, expected):
    assert found(ner, text, "ORGANIZATION") == expected


@pytest.mark.parametrize("text", [
    "OMG Foods are the best",            # chat's capitals lead no firm; a run of one industry word is no firm
    "Mental Health matters.",            # "Health" ends too many other names to be an industry word
    "We love the Great Lakes.",
    "OH MY GOSH I HAVE LIKE 10 DAYS OF SCHOOL LEFT",   # shouting: capitals before a company word in capitals
])
def test_no_organisation_without_a_firm_shape(ner, text):
    assert found(ner, text, "ORGANIZATION") == []


@pytest.mark.parametrize("text,expected", [
    ("Adaeze Nwachukwu called about her refund.", ["Adaeze Nwachukwu"]),     # at a sentence's start too
    ("The form was signed by Zahi Zafrul on Monday.", ["Zahi Zafrul"]),
    ("Yesterday Mark Oyekan sent the form.", ["Mark Oyekan"]),              # a first name that is a word
    ("I spoke to Tolulope Adeyinka at Greenfield Logistics yesterday.", ["Tolulope Adeyinka"]),
    ("My sister Umair lives with us.", ["Umair"]),                          # one such word after kin
    ("I asked Faizan to check the meter.", ["Faizan"]),
])
def test_a_name_no_list_holds_is_a_person_by_its_shape(ner, text, expected):
    assert found(ner, text, "PERSON") == expected


@pytest.mark.parametrize("text,location", [
    ("I am Korean and live in Seoul.", ["Seoul"]),                          # a nationality after "I am"
    ("We moved from Vanessaside to Spain.", ["Spain", "Vanessaside"]),      # one unknown word after "from"
    ("Offices in Paris and Libyan Arab Jamahiriya.", ["Libyan Arab Jamahiriya", "Paris"]),   # after a place
    ("We ate at a pizza place in Provo called Midici.", ["Provo"]),      # "called": a place's name as often
])
def test_unknown_words_after_a_place_or_nationality_cue_are_no_person(ner, text, location):
    assert found(ner, text, "PERSON") == []
    assert found(ner, text, "LOCATION") == location


def test_a_place_after_a_firm_without_of_stays_a_place(ner):
    text = "National Coconut Corporation opened in the Philippines."
    assert found(ner, text, "ORGANIZATION") == ["National Coconut Corporation"]
    assert found(ner, text, "LOCATION") == ["Philippines"]


def test_the_lexicon_is_read_with_the_gazetteer(ner):
    g = ner._gazetteer
    assert {"liberty", "nail", "shipping"} <= g.lexicon
    assert not {"oyekan", "xiuying", "nwachukwu"} & g.lexicon
