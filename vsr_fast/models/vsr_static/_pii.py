r"""Structured personal data as character spans: regexes find candidates, validators decide.

    EMAIL_ADDRESS  RFC 5321-shaped address; domain labels and a letters-only TLD checked
    CREDIT_CARD    13-19 digits, one consistent separator; Luhn and the networks' IIN ranges
    US_SSN         AAA-GG-SSSS (or spaces); area not 000/666/9xx, group not 00, serial not
                   0000, and the SSA's voided examples refused. Nine bare digits count only
                   after an "SSN"/"social security" cue
    IP_ADDRESS     IPv4 and IPv6 (with an embedded IPv4 or a zone), checked by ``ipaddress``
    IBAN_CODE      country code, that country's length, mod-97 == 1; print format or compact
    PHONE_NUMBER   a digit-run candidate parsed and validated by ``phonenumbers`` (US for
                   numbers without a +country code)

PERSON, LOCATION, DATE_TIME, STREET_ADDRESS and ORGANIZATION are ``_ner``'s (the
``ner`` extra): its candidates join these in ``find`` when a question asks for them.

Overlapping candidates are resolved by probability, then length, then position.
``phonenumbers.PhoneNumberMatcher`` is not used: it costs ~4 ms on 2 KB of prose
with no number in it, while the candidate regex below is microseconds.

Speed: each pattern starts with a character class and checks the character before
it with a lookbehind placed after that first character (``\d(?<![\w-]\d)``), so
``re`` can skip ahead in C to the next possible first character; a lookbehind in
front disables that and costs 2-3x on prose. Emails are looked for only around
an "@", IPv6 addresses only around a ":".
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator

import phonenumbers

Found = tuple[str, int, int, float]   # label, start, end (exclusive), probability

LABELS = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IP_ADDRESS", "IBAN_CODE")

# --- email ------------------------------------------------------------------------------------

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOMAIN = re.compile(r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![\w-])")
# The whole address as one regex: what ``_emails`` finds, each address at most 254 characters.
EMAIL_PATTERN = rf"(?<![\w.+-]){_ATOM}(?:\.{_ATOM})*" + _DOMAIN.pattern
# Up to the last character that cannot be in a local part: the part starts after it.
_BEFORE_LOCAL = re.compile(r"(?s:.*[^A-Za-z0-9!#$%&'*+/=?^_`{|}~.-])?")
_LOCAL_START = re.compile(r"(?<![\w.+-])[^.]")


def _emails(text: str) -> Iterator[Found]:
    # One forward pass for the "@domain"s, then each local part read back no further than the
    # "@" before it (an address holds one): linear in the text whatever it holds. A 320-character
    # window scanned around every "@" cost '@'*125000 ~130x the CPU of prose.
    end = 0
    for domain in _DOMAIN.finditer(text):
        at = domain.start()
        if at == 0 or text[at - 1] == ".":
            continue
        lo = max(end, at - 64)
        lo = max(lo, text.rfind("@", lo, at) + 1)
        lo = _BEFORE_LOCAL.match(text, lo, at).end()
        dots = text.rfind("..", lo, at)   # a local part has no empty atom
        start = _LOCAL_START.search(text, lo if dots < 0 else max(lo, dots + 2), at)
        if start is not None:
            end = domain.end()
            if end - start.start() <= 254:
                yield "EMAIL_ADDRESS", start.start(), end, 1.0


# --- payment cards ---------------------------------------------------------------------------

_CARD = re.compile(r"\d(?<![\d.,+-]\d)\d{1,5}(?:[ -]?\d{2,7}){1,5}(?!\d|-\d|[.,]\d)")
# (first digits, low, high, allowed lengths): Visa, Mastercard, Amex, Discover, JCB, Diners,
# UnionPay, Maestro. A Luhn-valid number outside every range is not called a card.
_IIN = [
    (1, 4, 4, (13, 16, 19)),
    (2, 51, 55, (16,)), (4, 2221, 2720, (16,)),
    (2, 34, 34, (15,)), (2, 37, 37, (15,)),
    (4, 6011, 6011, (16, 17, 18, 19)), (3, 644, 649, (16, 17, 18, 19)), (2, 65, 65, (16, 17, 18, 19)),
    (4, 3528, 3589, (16, 17, 18, 19)),
    (3, 300, 305, (14, 16, 17, 18, 19)), (2, 36, 36, (14, 16, 17, 18, 19)), (2, 38, 39, (16, 17, 18, 19)),
    (2, 62, 62, (16, 17, 18, 19)),
    (2, 50, 50, (12, 13, 14, 15, 16, 17, 18, 19)), (2, 56, 58, (12, 13, 14, 15, 16, 17, 18, 19)),
    (4, 6759, 6759, (12, 13, 14, 15, 16, 17, 18, 19)), (2, 67, 67, (12, 13, 14, 15, 16, 17, 18, 19)),
]


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_network_ok(digits: str) -> bool:
    return any(low <= int(digits[:n]) <= high and len(digits) in lengths for n, low, high, lengths in _IIN)


def _cards(text: str) -> Iterator[Found]:
    for m in _CARD.finditer(text):
        raw = m.group()
        seps = set(re.findall(r"[ -]", raw))
        digits = re.sub(r"[ -]", "", raw)
        if len(seps) <= 1 and 13 <= len(digits) <= 19 and luhn(digits) and card_network_ok(digits):
            yield "CREDIT_CARD", m.start(), m.end(), 1.0


# --- US social security numbers ----------------------------------------------------------------

_SSN = re.compile(r"(\d(?<![\w-]\d)\d{2})([- ]?)(\d{2})\2(\d{4})(?!\w|-\d|[.,]\d)")
_SSN_CUE = re.compile(r"\b(?:ssn|ss#|social security)\b", re.IGNORECASE)
_SSN_VOID = {"078051120", "219099999", "123456789"}   # the SSA's advertised and voided examples


def ssn_ok(area: str, group: str, serial: str) -> bool:
    return (area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"
            and area + group + serial not in _SSN_VOID)


def _ssns(text: str) -> Iterator[Found]:
    for m in _SSN.finditer(text):
        area, sep, group, serial = m.groups()
        if not ssn_ok(area, group, serial):
            continue
        if sep:
            yield "US_SSN", m.start(), m.end(), 0.95
        elif _SSN_CUE.search(text, max(0, m.start() - 40), m.start()):
            yield "US_SSN", m.start(), m.end(), 0.9


# --- IP addresses ------------------------------------------------------------------------------

_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?!\w|\.\d)")
_VERSION_CUE = re.compile(r"(?:\bversion|\bv|\brelease)\s*$", re.IGNORECASE)   # "version 1.2.3.4" is no address
_HEX = frozenset("0123456789abcdefABCDEF")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?"
                   r"(?:%[0-9A-Za-z]+)?(?![\w:])")


def _ips(text: str) -> Iterator[Found]:
    for m in _IPV4.finditer(text):
        if _VERSION_CUE.search(text, max(0, m.start() - 12), m.start()):
            continue
        try:
            ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        yield "IP_ADDRESS", m.start(), m.end(), 0.95
    colon, end = text.find(":"), 0
    while colon >= 0:
        # An address has a colon within its first five characters: start at the hex run
        # right before this colon, if that run is where a word starts.
        start = colon
        while start > max(end, colon - 4) and text[start - 1] in _HEX:
            start -= 1
        m = _IPV6.match(text, start) if start >= end else None
        colon = text.find(":", (m.end() if m else colon) + 1)
        if m is None:
            continue
        end = m.end()
        cand = m.group()
        # A trailing single ':' is punctuation ("at fe80::1: then"), not part of the address.
        if cand.endswith(":") and not cand.endswith("::"):
            cand = cand[:-1]
        # Eight groups, or "::", and at least four hex digits: times (12:30:45) and C++
        # scopes (a::b) do not pass.
        if sum(c in "0123456789abcdefABCDEF" for c in cand.split("%")[0]) < 4:
            continue
        try:
            ipaddress.IPv6Address(cand)
        except ValueError:
            continue
        yield "IP_ADDRESS", m.start(), m.start() + len(cand), 0.95


# --- IBAN ---------------------------------------------------------------------------------------

IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
    "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25,
    "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27,
    "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
_IBAN_START = re.compile(r"([A-Z])(?<![A-Za-z0-9][A-Z])([A-Z])\d{2}(?=[ ]?[A-Z0-9])")


def iban_ok(compact: str) -> bool:
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ibans(text: str) -> Iterator[Found]:
    for m in _IBAN_START.finditer(text):
        need = IBAN_LENGTHS.get(m.group(1) + m.group(2))
        if need is None:
            continue
        # Walk forward over the country's exact length, allowing single spaces between
        # 4-character groups, so a following word ("... 00 THEN") is never swallowed.
        i, taken, chars = m.start(), 0, []
        while taken < need and i < len(text):
            c = text[i]
            if c.isascii() and c.isalnum() and (c.isdigit() or c.isupper()):
                chars.append(c)
                taken += 1
                i += 1
            elif c == " " and taken % 4 == 0 and i + 1 < len(text) and text[i + 1].isalnum():
                i += 1
            else:
                break
        if taken == need and not (i < len(text) and text[i].isalnum()) and iban_ok("".join(chars)):
            yield "IBAN_CODE", m.start(), i, 1.0


# --- phone numbers -------------------------------------------------------------------------------

# One first character (+, "(" or a digit), then the branch that character opened.
_PHONE = re.compile(r"[+(\d](?<![\w+][+(\d])(?:(?<=\+)\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d|(?<=\()\d{1,4}\)[ .-]?\d|"
                    r"(?<=\d))[\d .-]{5,15}\d(?!\w|-\d|[.,]\d)")


_DOTTED_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")   # an address or a bad one, never a phone
_GROUPED_CODE = re.compile(r"[A-Z0-9]{4} $")            # the tail of an IBAN-like code: "NL04 VLEN 3329 ..."


def _phones(text: str) -> Iterator[Found]:
    seen: dict[str, bool] = {}
    for m in _PHONE.finditer(text):
        cand = m.group()
        if _DOTTED_QUAD.fullmatch(cand) or _GROUPED_CODE.search(text, max(0, m.start() - 5), m.start()):
            continue
        ok = seen.get(cand)
        if ok is None:
            ok = seen[cand] = _phone_ok(cand)
        if ok:
            yield "PHONE_NUMBER", m.start(), m.end(), 0.9


def _phone_ok(cand: str) -> bool:
    digits = sum(c.isdigit() for c in cand)
    # Without a +country code the number is read as a US one: 10 digits, or 11 after a 1.
    # Checking that first skips phonenumbers' parse (~100 µs) for most digit runs in prose.
    if not cand.startswith("+") and not (digits == 10 or (digits == 11 and cand.lstrip("(")[0] == "1")):
        return False
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(cand, "US"))
    except phonenumbers.NumberParseException:
        return False


DETECTORS: dict[str, Callable[[str], Iterator[Found]]] = {
    "EMAIL_ADDRESS": _emails, "PHONE_NUMBER": _phones, "CREDIT_CARD": _cards, "US_SSN": _ssns,
    "IP_ADDRESS": _ips, "IBAN_CODE": _ibans,
}


def find(text: str, labels: tuple[str, ...] | frozenset[str] = LABELS, extra: Iterable[Found] = ()) -> list[Found]:
    """Non-overlapping spans of the asked labels that have a detector, in text order.

    Every detector runs whatever is asked, so a card number is never given to a
    phone question just because cards were not asked about. ``extra`` are other
    detectors' candidates (the named-entity stage's), resolved with these.
    """
    found = [f for detect in DETECTORS.values() for f in detect(text)]
    found.extend(extra)
    found.sort(key=lambda f: (-f[3], f[1] - f[2], f[1]))
    # A candidate is taken when none of its characters is: one mark per character taken, so the cost is the
    # spans' length (each detector's own spans are disjoint). Checking every span taken before it cost 8000
    # addresses (56 KB) 8.7 s.
    marks = bytearray(max((f[2] for f in found), default=0))
    taken: list[Found] = []
    for f in found:
        if marks.find(1, f[1], f[2]) < 0:
            marks[f[1]:f[2]] = b"\x01" * (f[2] - f[1])
            taken.append(f)
    return sorted((t for t in taken if t[0] in labels), key=lambda f: f[1])
