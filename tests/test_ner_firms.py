"""ORGANIZATION from the gazetteer's firm list (pytickersymbols' index companies, built by build_ner): firms
found without a company word or a cue, firms that are common words, names or places found only with a cue,
and the short forms the build derives. Every firm named here is in the list; the sentences are written for
this test (no benchmark set's)."""
from __future__ import annotations

import pytest

from vsr_fast.models.vsr_static import _ner
from vsr_fast.models.vsr_static import build_ner


@pytest.fixture(scope="module")
def ner():
    stage = _ner.Ner()
    stage.load()
    return stage


def found(ner, text: str) -> list[tuple[str, str]]:
    return sorted((label, text[s:e]) for label, s, e, _ in ner.find(text))


def orgs(ner, text: str) -> list[str]:
    return [span for label, span in found(ner, text) if label == "ORGANIZATION"]


@pytest.mark.parametrize("text,expected", [
    # No company word, no cue: the list alone.
    ("I sold my Siemens shares and bought Novartis.", ["Novartis", "Siemens"]),
    ("Accenture and Unilever both sent me offers.", ["Accenture", "Unilever"]),
    ("Siemens cut 5,000 jobs this year.", ["Siemens"]),                      # at a sentence's start too
    ("My Heineken order never came, and Vodafone keeps calling.", ["Heineken", "Vodafone"]),
    ("I called IBM and then BNP Paribas about the loan.", ["BNP Paribas", "IBM"]),   # capitals kept in a run
    ("Airbus delayed the delivery, Boeing did not.", ["Airbus", "Boeing"]),
    ("Is L’Oréal still testing on animals?", ["L’Oréal"]),
    # The longest firm wins over a shorter one and over a place inside it.
    ("The Siemens Healthineers scanner broke.", ["Siemens Healthineers"]),
    ("Deutsche Telekom raised my bill.", ["Deutsche Telekom"]),
    # A firm that reads as a person's first name and surname: the whole run is the firm's name.
    ("Morgan Stanley cut 2,000 jobs.", ["Morgan Stanley"]),
    ("My account at Wells Fargo was closed.", ["Wells Fargo"]),
    ("Johnson & Johnson recalled the powder.", ["Johnson & Johnson"]),
    # The legal form after a comma or in lower case, and a capitalised "The" inside a sentence, are the name's.
    ("Thank you for contacting Netflix, Inc. support.", ["Netflix, Inc."]),
    ("The parcel came from Halma plc yesterday.", ["Halma plc"]),
    ("She moved here from The Hertz Corporation last year.", ["The Hertz Corporation"]),
])
def test_a_listed_firm_is_an_organisation_without_a_company_word(ner, text, expected):
    assert orgs(ner, text) == expected


@pytest.mark.parametrize("text", [
    "I hit the target.", "Next week I fly to see my sister.", "Apple pie is my favourite.",
    "Shell out the money, then.", "Target practice starts at noon.", "Orange is the new black.",
    "Home Depot was closed.",                    # several common words at a sentence's start
    "Nat Geo has great photos.",                 # "GEO" is a firm only in capitals
    "Please send the PDF again.",                # a firm's capitals ("PDF Solutions") alone are no firm
])
def test_a_firm_that_is_a_common_word_needs_a_cue(ner, text):
    assert orgs(ner, text) == []


@pytest.mark.parametrize("text,expected", [
    ("I work at Target.", ["Target"]),
    ("I bought it at Target yesterday.", ["Target"]),
    ("Target support never answered my email.", ["Target"]),
    ("She has worked for Apple since 2019.", ["Apple"]),
    ("I went to Home Depot for screws.", ["Home Depot"]),
])
def test_a_firm_that_is_a_common_word_with_a_cue(ner, text, expected):
    assert orgs(ner, text) == expected


@pytest.mark.parametrize("text,expected", [
    ("I met Ross yesterday.", [("PERSON", "Ross")]),              # Ross Stores: a first name first
    ("Mr. Siemens called about the invoice.", [("PERSON", "Mr. Siemens")]),
    ("Jane Siemens called about the invoice.", [("PERSON", "Jane Siemens")]),
])
def test_a_person_stays_a_person(ner, text, expected):
    assert found(ner, text) == expected


def test_the_build_derives_short_forms_and_marks_the_ones_that_need_a_cue():
    def plain(key: str) -> bool:                 # as build() decides, for a handful of words
        return key in {"target", "apple", "baxter", "bt"} or len(key) <= 2
    keys, caps = build_ner.firms(["Target Corporation", "Apple Inc.", "KSB SE & Co. KGaA", "Lufthansa Group",
                                  "BT Group", "Baxter International", "Enova International, Inc.",
                                  "American International Group", "The Coca-Cola Company"], plain)
    assert {"target", "apple", "ksb", "lufthansa", "bt group", "baxter international", "enova international",
            "enova", "american international", "coca-cola"} <= set(keys)
    assert not {"bt", "baxter", "american"} & set(keys)    # a describing word stays when what is left is plain
    assert {"ksb", "bt"} <= set(caps)


def test_the_gazetteer_holds_the_firm_list(ner):
    g = ner._gazetteer
    assert len(g.firms) > 2000 and {"siemens", "novartis", "morgan stanley", "target"} <= g.firms
    assert {"target", "apple", "next", "shell"} <= g.plain_firms and "siemens" not in g.plain_firms
    assert "pytickersymbols" in " ".join(_ner.SOURCES)
