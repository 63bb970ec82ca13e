r"""The named-entity stage's rules for text that is not English prose (trial 22, fix123).

    STREET_ADDRESS  German streets ("Hauptstraße 5", "Berliner Straße 12a", "Goethestr. 7", "...weg/gasse/
                    platz/allee/ring/damm"), French ("10 Rue de Rivoli", "25 avenue des Champs-Élysées") and
                    Spanish ones ("Calle Mayor 12", "Avenida de la Constitución 3"), with ", 10115 Berlin"
                    (a postcode and a city) or ", Madrid" (a city) after them as part of the span
    DATE_TIME       German ("3. März 1985"), French ("3 mars 1985") and Spanish ("3 de marzo de 1985") dates
    PERSON          1-4 name-like words after a self-introduction in lower case ("my name is maria gonzalez",
                    "me llamo", "je m'appelle", "ich heiße", "mi chiamo"): the first a known first name, none a
                    common word; a name in a non-Latin script after a cue in its own language (我叫, 我是,
                    我的名字是, 私は…です, 名前は, اسمي, меня зовут) or in English ("My name is 王小明",
                    "my colleague محمد الأحمد"), and one in brackets right after a person or before an email
                    ("Aleksandr Ivanov (Александр Иванов)", "山田太郎 (yamada@example.jp)")

The lists (Faker 40.63.0, MIT: zh_CN's 399 surnames, ja_JP's 50, ar_AA's 758 first names and 296 surnames,
ru_RU's 401 first names) carry precision risks: some Chinese surnames are common characters (高, 方, 马, 金,
so "我是高手" reads as a name), some Arabic first names are adjectives (سعيد "happy", كريم "generous", جميل
"beautiful": a second listed name or an "ال" word must follow أنا), some Russian ones are nouns (Вера, Надежда,
Любовь: capitalised after "я" only). Japanese: 50 surnames cover the commonest; a rarer one is missed.
"""
from __future__ import annotations

import gzip
import re
from collections.abc import Iterator, Sequence

Found = tuple[str, int, int, float]
CUE_P, RULE_P = 0.85, 0.9

# --- street addresses ---------------------------------------------------------------------------

_UP = r"A-ZÄÖÜÀÂÇÉÈÊËÎÏÔÛÙÁÍÓÚÑ"
_WORD = rf"[{_UP}][^\W\d_]*(?:[-'][^\W\d_]+)*"
_GERMAN = re.compile(
    rf"(?:(?:{_WORD}[ \t]+)?(?:Straße|Strasse|Str\.|Weg|Gasse|Platz|Allee)"
    rf"|[{_UP}][^\W\d_]{{2,}}(?:straße|strasse|str\.|weg|gasse|platz|allee))"
    rf"[ \t]+\d{{1,3}}(?:[ \t]?[a-zA-Z](?![\w]))?(?![\d.:/])(?:,[ \t]*(?:D-)?\d{{5}}[ \t]+{_WORD}(?:[ \t]+(?:am|an der)[ \t]+{_WORD})?)?")
_FRENCH = re.compile(
    rf"\d{{1,4}}(?:[ \t]?(?:bis|ter))?,?[ \t]+(?:[Rr]ue|[Aa]venue|[Bb]oulevard|[Bb]d|[Pp]lace|[Aa]llée|"
    rf"[Cc]hemin|[Ii]mpasse|[Qq]uai|[Cc]ours)[ \t]+(?:(?:de[ \t]+la|de[ \t]+l'|du|des|de|d')[ \t]*)?{_WORD}"
    rf"(?:[ \t]+{_WORD}){{0,2}}(?:,[ \t]*\d{{5}}[ \t]+{_WORD}(?:[ \t-]+{_WORD})?)?")
_SPANISH = re.compile(
    rf"(?:Calle|C/|Avenida|Avda\.|Av\.|Plaza|Paseo|Camino|Carrera|Ronda|Travesía|Carretera)[ \t]*"
    rf"(?:(?:de[ \t]+la|de[ \t]+los|de[ \t]+las|del|de)[ \t]+)?{_WORD}(?:[ \t]+(?:de[ \t]+)?{_WORD}){{0,2}},?[ \t]+"
    rf"(?:n[º°o]\.?[ \t]*)?\d{{1,4}}(?![\w])(?:,[ \t]*(?:\d{{5}}[ \t]+)?{_WORD}(?:[ \t]+{_WORD})?)?")

def inside_word(text: str, start: int, joins: str) -> bool:
    """Whether ``start`` continues a word (a letter, digit or one of ``joins`` before it): the rules' left edge,
    checked here since a lookbehind leading a pattern costs re its first-character scan (3x slower)."""
    return start > 0 and (text[start - 1].isalnum() or text[start - 1] in joins)


_STREET_KEYS = ((_GERMAN, ("tr.", "traße", "trasse", "Weg", "weg ", "asse", "latz", "llee")),
                (_FRENCH, ("ue ", "venue", "oulevard", "Bd ", "lace", "llée", "hemin", "mpasse", "uai ", "ours ")),
                (_SPANISH, ("Calle", "C/", "Av", "Plaza", "Paseo", "Camino", "Carrer", "Ronda", "Traves")))
_CAPITALISED_BEFORE = re.compile(r"[A-Z][\w'.-]*[ \t]+$")


def streets(text: str) -> Iterator[Found]:
    """German, French and Spanish street addresses, the postcode and city after them included. A German
    house number has at most three digits: "Spring 2019" or "Weg 1985" is a year."""
    for pattern, keys in _STREET_KEYS:
        if not any(k in text for k in keys):
            continue                          # a substring test costs a regex scan's tenth
        for m in pattern.finditer(text):
            if inside_word(text, m.start(), "_-") or (
                    pattern is not _FRENCH and _CAPITALISED_BEFORE.search(text, max(0, m.start() - 30), m.start())):
                continue                      # "8175 Kim Plaza Suite 219": an English street's suffix
            end = m.end()
            if text[end - 1] == "." and (end == len(text) or text[end:end + 1].isspace()) \
                    and not text[m.start():end].endswith("str."):
                end -= 1
            yield "STREET_ADDRESS", m.start(), end, RULE_P


# --- dates --------------------------------------------------------------------------------------

_DE_MONTH = r"(?:Januar|Jänner|Februar|März|Maerz|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember)"
_FR_MONTH = r"(?:janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre)"
_ES_MONTH = r"(?:enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre)"
_DATES = re.compile(
    rf"(?:[12]\d|3[01]|0?[1-9])(?:\.[ \t]*{_DE_MONTH}(?:[ \t]+(?:1[89]|20)\d\d)?"
    rf"|(?:er)?[ \t]+(?i:{_FR_MONTH})(?:[ \t]+(?:1[89]|20)\d\d)?"
    rf"|[ \t]+de[ \t]+(?i:{_ES_MONTH})(?:[ \t]+de[ \t]+(?:1[89]|20)\d\d)?)(?!\w)")

_DATE_KEY = re.compile(r"\d(?:\.[ \t]*[A-Z]|[ \t]+(?:[a-zé]|de[ \t]))")    # what every form above writes after the day


def dates(text: str) -> Iterator[Found]:
    """Dates written the German, French or Spanish way, a day's number before the month."""
    if not _DATE_KEY.search(text):
        return
    for m in _DATES.finditer(text):
        if not inside_word(text, m.start(), "_."):
            yield "DATE_TIME", m.start(), m.end(), RULE_P


# --- names: lower-case self-introductions, non-Latin scripts -------------------------------------

_INTRO = re.compile(r"(?:^|(?<=[^\w']))(?:my name is|my name's|i am|i'm|im|this is|call me|ich heiße|ich heisse|"
                    r"je m'appelle|je m’appelle|me llamo|mi chiamo|mein name ist|je suis|soy)[ \t]+", re.IGNORECASE)
_INTRO_KEYS = ("name", "i am", "i'm", "im ", "this is", "call me", "ich hei", "appelle", "llamo", "chiamo", "je suis",
               "soy ")
_LOWER_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
# Han, kana, Hangul, Arabic, Hebrew, Cyrillic, Greek, Thai, Devanagari letters: a script whose names _CAP cannot see.
_FOREIGN = r"\u0370-\u03ff\u0400-\u04ff\u0590-\u05ff\u0600-\u06ff\u0900-\u097f\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af"
_FOREIGN_RUN = re.compile(rf"[{_FOREIGN}]+(?:[ \t][{_FOREIGN}]+){{0,3}}")
_HAN = r"\u3400-\u9fff"
# English cues before a name in another script: a self-introduction, a salutation, kin or a role, a field.
_LATIN_CUE = re.compile(r"(?:\bmy name is|\bmy name's|\bname is|\bi am|\bi'm|\bthis is|\bcall me|\bdear|\bhi|\bhello|"
                        r"\bwife|\bhusband|\bson|\bdaughter|\bfather|\bmother|\bbrother|\bsister|\bfriend|"
                        r"\bcolleague|\bboss|\bmanager|\bcustomer|\bclient|\bpatient|\bcontact|\bname:|\bopened by|"
                        r"\bsigned by|\bassigned to|\bapproved by|\bask|\bmeet|\bmet)[ \t]*$", re.IGNORECASE)
_ZH_CUE = re.compile(rf"(?:我叫|我是|我的名字是|我的名字叫|本人)([{_HAN}]{{2,4}})")
_JA_CUE = re.compile(rf"(?:私は|わたしは|僕は|名前は)([{_HAN}]{{2,5}})(?:です|と申します|といいます|[。、．,.!！]|$)")
_AR_CUE = re.compile(r"(?:اسمي|إسمي)[ \t]+([\u0600-\u06ff]+(?:[ \t][\u0600-\u06ff]+){0,2})")
_AR_I = re.compile(r"(?:^|(?<=[^\u0600-\u06ff]))أنا[ \t]+([\u0600-\u06ff]+)[ \t]+([\u0600-\u06ff]+)")
_RU_I = re.compile(r"(?:^|(?<=[^\w]))[Яя][ \t]+[—–-]?[ \t]*([А-ЯЁ][а-яё]+)(?:[ \t]+([А-ЯЁ][а-яё]+))?")
_NOT_ZH_SURNAMES = frozenset("那")          # Faker lists it; "我是那个人" is no name
_RU_CUE = re.compile(r"(?:меня зовут|Меня зовут|моё имя|мое имя)[ \t]+([А-ЯЁ][а-яё]+(?:[ \t][А-ЯЁ][а-яё]+){0,2})")
_BRACKET = re.compile(rf"[ \t]*\(([{_FOREIGN}]+(?:[ \t][{_FOREIGN}]+){{0,3}})\)")
_EMAIL_AFTER = re.compile(r"[ \t]*[(<][ \t]*[\w.+-]+@[\w-]+(?:\.[\w-]+)+[ \t]*[)>]")
_FOREIGN_BEFORE = re.compile(rf"([{_FOREIGN}]+(?:[ \t][{_FOREIGN}]+){{0,3}})$")


def lower_case_intros(text: str, first: frozenset[str], last: frozenset[str], common: frozenset[str],
                      lexicon: frozenset[str]) -> Iterator[Found]:
    """"my name is maria gonzalez": 1-4 words after the cue, the first a known first name; each a listed name
    that is no common or English word ("i am tired", "this is mark's fault" mark nothing)."""
    low = text.lower()
    if not any(cue in low for cue in _INTRO_KEYS):
        return
    for cue in _INTRO.finditer(text):
        at, end, n = cue.end(), 0, 0
        while n < 4 and (m := _LOWER_WORD.match(text, at)) is not None and m.group().islower():
            word = m.group().lower()
            if word in common or word in lexicon or (n == 0 and word not in first) \
                    or (n and word not in first and word not in last) or text.startswith(("'s", "\u2019s"), m.end()):
                break
            end, n, at = m.end(), n + 1, m.end()
            if not text.startswith(" ", at):
                break
            at += 1
        if n:
            yield "PERSON", cue.end(), end, CUE_P


def read_kinds(blob: bytes, kinds: str) -> dict[str, set[str]]:
    """A gzipped ``kind<TAB>name`` list (the gazetteer, scripts.tsv.gz) as kind -> names."""
    out: dict[str, set[str]] = {k: set() for k in kinds}
    for line in gzip.decompress(blob).decode().splitlines():
        kind, _, name = line.partition("\t")
        out[kind].add(name)
    return out


class Scripts:
    """Faker's names in non-Latin scripts (``ner/scripts.tsv.gz``, built by ``build_ner --scripts``)."""

    def __init__(self, blob: bytes) -> None:
        kinds = read_kinds(blob, "ZJRrY")
        self.zh_last = frozenset(kinds["Z"]) - _NOT_ZH_SURNAMES
        self.ja_last = frozenset(kinds["J"])
        self.ar_first, self.ar_last, self.ru_first = frozenset(kinds["R"]), frozenset(kinds["r"]), frozenset(kinds["Y"])


def foreign_names(text: str, persons: Sequence[tuple[int, int]], lists: Scripts) -> Iterator[Found]:
    """Names in a non-Latin script: after a cue in their language or in English, in brackets after a person, or
    before an email in brackets. After 我是/我叫 the name starts with a listed Chinese surname ("我是学生" is
    none), after 私は with a listed Japanese one; after أنا ("I") a listed Arabic first name and a listed name
    ("أنا سعيد جدا", "I am very happy", is none); after я a listed Russian first name, capitalised."""
    for m in _ZH_CUE.finditer(text):
        name = m.group(1)
        if name[:2] in lists.zh_last or name[0] in lists.zh_last:
            size = 3 if len(name) > 3 else len(name)      # a given name of one or two characters after the surname
            yield "PERSON", m.start(1), m.start(1) + size, CUE_P
    for m in _JA_CUE.finditer(text):
        name = m.group(1)
        if any(name.startswith(name[:k]) and name[:k] in lists.ja_last for k in (1, 2, 3) if len(name) > k):
            yield "PERSON", m.start(1), m.end(1), CUE_P
    for m in _AR_I.finditer(text):
        if m.group(1) in lists.ar_first and (m.group(2) in lists.ar_first or m.group(2) in lists.ar_last
                                             or m.group(2).startswith("ال")):
            yield "PERSON", m.start(1), m.end(2), CUE_P
    for m in _RU_I.finditer(text):
        if m.group(1) in lists.ru_first:
            yield "PERSON", m.start(1), m.end(2 if m.group(2) else 1), CUE_P
    for pattern in (_AR_CUE, _RU_CUE):
        for m in pattern.finditer(text):
            yield "PERSON", m.start(1), m.end(1), CUE_P
    for m in _FOREIGN_RUN.finditer(text):
        if _LATIN_CUE.search(text, max(0, m.start() - 30), m.start()) and re.search("[A-Za-z]", text[:m.start()]):
            yield "PERSON", m.start(), m.end(), CUE_P
    for _, end in persons:
        if (m := _BRACKET.match(text, end)) is not None:
            yield "PERSON", m.start(1), m.end(1), CUE_P
    for m in _EMAIL_AFTER.finditer(text):
        if (name := _FOREIGN_BEFORE.search(text, max(0, m.start() - 40), m.start())) is not None:
            yield "PERSON", name.start(1), name.end(1), CUE_P
