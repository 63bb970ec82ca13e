"""ORGANIZATION from the gazetteer's firm lists (pytickersymbols' index companies and the SEC's list of companies
with a ticker, as edgartools ships it; built by build_ner): firms
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
    keys, caps, _ = build_ner.firms(["Target Corporation", "Apple Inc.", "KSB SE & Co. KGaA", "Lufthansa Group",
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
    assert "pytickersymbols" in " ".join(_ner.SOURCES) and "edgartools" in " ".join(_ner.SOURCES)


# --- the SEC's list, and names the reader forms only because they are listed -------------------------------

@pytest.mark.parametrize("text,expected", [
    ("I cancelled my AT&T plan yesterday.", ["AT&T"]),                 # capitals joined by "&"
    ("S&P Global downgraded the bonds.", ["S&P Global"]),
    ("E.ON raised my electricity bill.", ["E.ON"]),                      # dotted capitals
    ("The freight went through C.H. Robinson last week.", ["C.H. Robinson"]),
    ("I drive for J.B. Hunt.", ["J.B. Hunt"]),
    ("3M recalled the earplugs.", ["3M"]),                               # a leading digit, listed
    ("BP raised prices again.", ["BP"]),                                 # two letters, in capitals
    ("GE shares fell after the call.", ["GE"]),                          # the family of GE Aerospace, GE Vernova...
    ("My HP printer broke and HP support never answered.", ["HP"]),    # "hp" is a common word: a cue
    ("Datadog and Rockwool are hiring.", ["Datadog", "Rockwool"]),       # the SEC's list alone
    ("Chevron and Nike reported earnings.", ["Chevron", "Nike"]),
])
def test_names_the_reader_forms_when_listed(ner, text, expected):
    assert orgs(ner, text) == expected


@pytest.mark.parametrize("text,expected", [
    ("The U.S. economy grew.", []),                  # dotted capitals that no firm list writes
    ("R&D spending rose.", []),
    ("I printed it in 3D yesterday.", []),           # "3D" only begins "3D Systems"
    ("We met on the 1ST floor.", []),                # an ordinal is never a firm's word
    ("I bought an HP laptop.", []),                  # a common word without a cue
    ("SOS, help me!", []),                           # the SEC's acronyms of three letters need a cue
    ("I haven't seen Schindler's List in a while.", []),   # the SEC's firms that are surnames need a cue
    ("Nat Geo has great photos.", []),
])
def test_listed_words_without_a_firm(ner, text, expected):
    assert orgs(ner, text) == expected


@pytest.mark.parametrize("text,expected", [
    ("Mr. J.B. Smith called.", [("PERSON", "Mr. J.B. Smith")]),
    ("J.R.R. Tolkien wrote it.", []),                 # as before: no listed word, nothing formed
])
def test_dotted_initials_of_a_person(ner, text, expected):
    assert found(ner, text) == expected


def test_the_build_reads_the_secs_names_and_their_special_words():
    keys, caps, special = build_ner.firms(["AT&T INC.", "3M CO", "E.ON SE", "HP INC", "CHEVRON CORP"],
                                          lambda k: len(k) <= 2, build_ner.LEGAL | build_ner.SEC_LEGAL,
                                          upper_caps=False)
    assert {"at&t", "3m", "e.on", "hp", "chevron"} <= set(keys)
    assert caps == [] and special == ["at&t", "3m", "e.on"]    # a name all in capitals gives no capital words
    assert build_ner._SEC_NOTE.sub("", "BANK OF AMERICA CORP /DE/") == "BANK OF AMERICA CORP"
    assert build_ner._SEC_NOTE.sub("", "Rockwool A/S/ADR") == "Rockwool A/S"
    assert build_ner.families(["GE Aerospace", "GE Vernova", "GE HealthCare", "BT Group"]) == ["ge"]


def test_the_parquet_reader_reads_a_column_it_wrote_itself():
    from vsr_fast.models.vsr_static import _parquet
    assert _parquet.snappy(bytes([11, 8]) + b"abc" + bytes([0x11, 3])) == b"abcabcabcab"   # a literal, an overlapping copy
    assert _parquet.hybrid(bytes([6, 1]), 1, 3) == [1, 1, 1]                              # a run of three ones
    assert _parquet.hybrid(bytes([3, 0b10110101]), 1, 8) == [1, 0, 1, 0, 1, 1, 0, 1]      # one bit-packed group
