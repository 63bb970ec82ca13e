"""The structured PII detectors (vsr_fast/models/vsr_static/_pii.py) on what outside users wrote: phone numbers in
their countries' national formats, addresses written against CJK text, and the role mailboxes (noreply@...) that
name no person. The embedded model answers with these spans (``model.answer``), so they are asked through it."""
from __future__ import annotations


import pytest

from vsr_fast.models.vsr_static import load_5
from vsr_fast.models.vsr_static import _pii
from vsr_fast.protocol.systemone import Entry, SpanQuestion, State
from vsr_fast.systemone.presets import PRESETS

STRUCTURED = _pii.LABELS


@pytest.fixture(scope="module")
def model():
    return load_5()


def spans(model, text: str) -> list[tuple[str, str]]:
    qid = "preset:pii"
    got = model.answer([Entry(State(request=text), {qid: PRESETS["pii"].question(STRUCTURED)})])[0][qid]
    return [(s.label, text[s.start:s.end]) for s in got.spans]


# A number as a person writes it at home, per country (no +country code), then in a sentence of that language.
NATIONAL = [
    ("DE", "0151 2345678"), ("DE", "0171 2345678"), ("DE", "030 901820"), ("DE", "(030) 901820"),
    ("DE", "089 12345678"), ("FR", "06 12 34 56 78"), ("FR", "01 23 45 67 89"), ("FR", "06.12.34.56.78"),
    ("FR", "0612345678"), ("GB", "020 7946 0958"), ("GB", "07700 900123"), ("GB", "0161 496 0000"),
    ("ES", "612 345 678"), ("ES", "91 123 45 67"), ("IT", "06 1234 5678"), ("IT", "312 345 6789"),
    ("IT", "02 1234 5678"), ("NL", "06 12345678"), ("NL", "06-12345678"), ("NL", "020 123 4567"),
    ("JP", "090-1234-5678"), ("JP", "03-1234-5678"), ("JP", "06-1234-5678"), ("CN", "138 0013 8000"),
    ("CN", "13800138000"), ("CN", "010-12345678"), ("CN", "021 1234 5678"), ("IN", "98765 43210"),
    ("IN", "098765 43210"), ("IN", "011 2345 6789"), ("BR", "(11) 91234-5678"), ("BR", "(21) 3456-7890"),
    ("MX", "55 1234 5678"), ("MX", "(33) 1234 5678"), ("AU", "0412 345 678"), ("AU", "(02) 9876 5432"),
    ("AU", "04 1234 5678"), ("US", "(415) 555-2671"),
]
INTERNATIONAL = ["+49 151 2345678", "+49 30 901820", "+81 90-1234-5678", "+33 6 12 34 56 78", "+44 20 7946 0958",
                 "+34 612 345 678", "+39 312 345 6789", "+86 138 0013 8000", "+91 98765 43210",
                 "+55 11 91234-5678", "+52 55 1234 5678", "+61 412 345 678", "+31 6 12345678"]
SENTENCES = [
    "Ruf mich an unter 0151 2345678, ich bin bis 18 Uhr da.",
    "Mein Festnetz ist 030 901820.",
    "Appelez-moi au 06 12 34 56 78 demain.",
    "Llámame al 612 345 678 cuando puedas.",
    "Chiamami al 312 345 6789.",
    "Bel me op 06-12345678.",
    "電話は090-1234-5678です。",
    "我的手机号是13800138000，谢谢。",
    "Meu celular é (11) 91234-5678.",
    "Call me on 0412 345 678 mate.",
]


@pytest.mark.parametrize(("region", "number"), NATIONAL, ids=[f"{r}:{n}" for r, n in NATIONAL])
def test_a_national_format_number_is_a_phone(model, region, number):
    assert spans(model, f"My number is {number}.") == [("PHONE_NUMBER", number)]


@pytest.mark.parametrize("number", INTERNATIONAL)
def test_an_international_number_is_a_phone(model, number):
    assert spans(model, f"My number is {number}.") == [("PHONE_NUMBER", number)]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_a_number_in_a_sentence_of_its_language_is_a_phone(model, sentence):
    got = spans(model, sentence)
    assert [label for label, _ in got] == ["PHONE_NUMBER"], got
    assert got[0][1] in sentence and got[0][1][-1].isdigit()


# What holds digits and is no phone: order and invoice numbers, dates, prices and counts, versions, addresses,
# card numbers that fail their checksum, ids and timestamps. None of them may become a PHONE_NUMBER.
NOT_PHONES = [
    "Order #12345678 shipped.", "Order 2024-0001234 is late.", "Invoice INV-2024-000123 attached.",
    "Ticket 123456789 was closed.", "Your order number is 40512345.", "Reference 0001234567 is paid.",
    "It happened on 2024-03-18.", "Termin am 18.03.2024 um 10 Uhr.", "Le 18/03/2024.", "Due 03-18-2024.",
    "Shipped 18 03 2024.", "Build 20240318 passed.", "Built at 2024.03.18 12:30:45.",
    "It cost $1,234.56.", "Le total est de 1 234 567 euros.", "Es kostet 1.234.567 Euro.",
    "Population 12 345 678.", "The budget was 123 456 789 dollars.", "Preis: 1.234,56 €.",
    "We upgraded to version 3.11.4.2 last week.", "Release 10.15.7.1234 is out.", "pip install foo==2.31.0.1",
    "The server at 192.168.100.200 answered.", "Bad address 999.1.1.1 in the config.",
    "Test card 4111 1111 1111 1112 was rejected.", "Card 4111-1111-1111-1112 failed Luhn.",
    "ISBN 978-3-16-148410-0 is the book.", "The timestamp was 1700000000 seconds.", "ts=1700000000123 ms.",
    "Room 2.14 at 10:45.", "Tracking 1Z999AA10123456784 in transit.", "Coordinates 48.858844, 2.294351.",
    "UUID 123e4567-e89b-12d3-a456-426614174000.", "Score was 3-1 and then 2-2.", "Zip code 94103-1234.",
    "Chapter 12.3.4.5 covers it.", "Product code 5901234123457 (EAN).", "Page 123 456 of the log.",
    "Order #07408993 is ready.", "Guarulhos, Brazil 07122-130", "Card 3530 0298 3006 was cut short.",
    "Invalid SSN 666-12-3456 on file.", "Voided SSN 078-05-1120.",
]


@pytest.mark.parametrize("text", NOT_PHONES)
def test_digits_that_are_no_phone_stay_unmarked(model, text):
    assert [s for s in spans(model, text) if s[0] == "PHONE_NUMBER"] == []


# --- emails next to CJK text -----------------------------------------------------------------


@pytest.mark.parametrize("text, address", [
    ("メールはyamada@example.jp", "yamada@example.jp"),
    ("メールは yamada@example.jp", "yamada@example.jp"),
    ("メールはyamada@example.jpです。", "yamada@example.jp"),
    ("邮箱是zhang.wei@example.cn，谢谢", "zhang.wei@example.cn"),
    ("이메일은kim@example.kr입니다", "kim@example.kr"),
])
def test_an_email_written_against_cjk_text_is_found(model, text, address):
    assert spans(model, text) == [("EMAIL_ADDRESS", address)]


def test_an_email_is_never_cut_inside_a_latin_word(model):
    # The local part starts where a word of a spaced script starts: "über" is not cut to "ber" (RFC 6531 lets a
    # local part hold "ü": the whole address is found, test_an_internationalised_address_is_found_whole).
    assert spans(model, "Schreib an über@example.de") == [("EMAIL_ADDRESS", "über@example.de")]


@pytest.mark.parametrize("text, found", [
    ("カード4111 1111 1111 1111です", ("CREDIT_CARD", "4111 1111 1111 1111")),
    ("サーバー192.168.1.10が落ちた", ("IP_ADDRESS", "192.168.1.10")),
    ("口座はDE89 3704 0044 0532 0130 00です", ("IBAN_CODE", "DE89 3704 0044 0532 0130 00")),
])
def test_other_labels_written_against_cjk_text_are_found(model, text, found):
    assert spans(model, text) == [found]


# --- role mailboxes ------------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["noreply@anthropic.com", "no-reply@accounts.google.com", "NoReply@example.com",
                                     "donotreply@example.org", "do-not-reply@example.org", "do_not_reply@bank.example",
                                     "no_reply@example.com", "mailer-daemon@example.com", "postmaster@example.com",
                                     "noreply+ci@github.example"])
def test_a_role_mailbox_is_no_personal_data(model, address):
    assert spans(model, f"Co-Authored-By: Claude <{address}>") == []


@pytest.mark.parametrize("address", ["noreply.jane@example.com", "jane.noreply@example.com", "postmasters@example.com",
                                     "replyto.jane@example.com"])
def test_a_person_whose_address_names_a_role_word_is_still_found(model, address):
    assert spans(model, f"Write to {address} today") == [("EMAIL_ADDRESS", address)]


@pytest.mark.parametrize("address", ["noreply+jane.doe=example.com@bounces.example.org",
                                     "postmaster+jdoe=mail.example@lists.example.net"])
def test_a_role_mailbox_whose_tag_carries_an_address_is_personal_data(model, address):
    """VERP: a bounce address's +tag is the recipient's address, "@" written as "=" (RFC 3834's automated
    senders use it): the mailbox is a service's, the tag a person's."""
    assert spans(model, f"Return-Path: <{address}>") == [("EMAIL_ADDRESS", address)]


def test_a_role_mailbox_beside_a_person_leaves_the_person(model):
    text = "Co-Authored-By: Claude <noreply@anthropic.com>; reviewed by jane.doe@example.com"
    assert spans(model, text) == [("EMAIL_ADDRESS", "jane.doe@example.com")]


def test_prepare_reads_the_number_plans_before_the_first_request(model):
    _pii._locales.cache_clear()
    model.prepare([SpanQuestion(criteria={"EMAIL_ADDRESS": "An email."})])
    assert _pii._locales.cache_info().currsize == 1


# --- what a support desk's trial found (fix97) -----------------------------------------------------

# National numbers written with the separators phonenumbers itself reads: a slash after the area code (German,
# Austrian, Swiss habit), dashes other than "-", no-break spaces (French typography).
SEPARATED = [
    ("DE", "0151/2345678"), ("DE", "030/12345678"), ("DE", "089/1234567"), ("DE", "030 / 12345678"),
    ("DE", "0221/123456"), ("DE", "(030) 1234567"), ("FR", "06.12.34.56.78"), ("DE", "0151\u20132345678"),
    ("FR", "06\u00a012\u00a034\u00a056\u00a078"), ("FR", "06\u202f12\u202f34\u202f56\u202f78"),
    ("JP", "090\u20101234\u20105678"), ("US", "415\u2212555\u22122671"),
]


@pytest.mark.parametrize(("region", "number"), SEPARATED, ids=[f"{r}:{n!r}" for r, n in SEPARATED])
def test_a_number_with_another_separator_phonenumbers_reads_is_a_phone(model, region, number):
    assert spans(model, f"Tel. {number}, bitte.") == [("PHONE_NUMBER", number)]


@pytest.mark.parametrize("number", ["+49 151/2345678", "+49 30/12345678", "+49 (0)151 2345678"])
def test_an_international_number_with_a_slash_is_a_phone(model, number):
    assert spans(model, f"My number is {number}.") == [("PHONE_NUMBER", number)]


# A slash, a dash or a dot between digits that is no phone: dates, fractions, ratios, seasons, versions, times,
# order and case numbers.
NOT_PHONES_SEPARATED = [
    "Le 12/05/2024.", "Due 05/12/24, then 2024/05/12.", "Add 3/4 cup and 1/2 tsp.", "Screen 1920/1080 pixels.",
    "The 2023/2024 season.", "Invoice 2024/000123 is paid.", "Case 12345/678901 is open.", "Aktenzeichen 3 O 123/24.",
    "Upgrade 1.2.3/4.5.6 now.", "Open 10:30/11:45 daily.", "Order 4711/0815/12 shipped.", "Pages 123\u2013145678.",
    "Ratio 16/9 or 21/9.", "Score 1990\u20132024 of 12/05/2024 10:00.", "Period 01/2023\u201312/2024.",
    # A card's groups that fail Luhn, then more digits: no tail of them is a phone.
    "Test card 3530 0298 3006 8973 was rejected.", "Test card 5153 0784 7885 0901 was rejected.",
    "Card 6011 5209 0310 7142 failed.", "Population 12 612 345 678 in 2024.",
]


@pytest.mark.parametrize("text", NOT_PHONES_SEPARATED)
def test_separated_digits_that_are_no_phone_stay_unmarked(model, text):
    assert [s for s in spans(model, text) if s[0] == "PHONE_NUMBER"] == []


# Two numbers with only a space or a comma between them: each is its own span.
ADJACENT = [
    ("call 0151 2345678 or 0170 9876543", ["0151 2345678", "0170 9876543"]),
    ("+49 151 2345678, +49 170 9876543", ["+49 151 2345678", "+49 170 9876543"]),
    ("+49 151 2345678 +49 170 9876543", ["+49 151 2345678", "+49 170 9876543"]),
    ("0151 2345678 0170 9876543", ["0151 2345678", "0170 9876543"]),
    ("0151 2345678, 0170 9876543", ["0151 2345678", "0170 9876543"]),
    ("0151/2345678 030/12345678", ["0151/2345678", "030/12345678"]),
    ("(415) 555-2671 (415) 555-2672", ["(415) 555-2671", "(415) 555-2672"]),
    ("06 12 34 56 78 06 98 76 54 32", ["06 12 34 56 78", "06 98 76 54 32"]),
    ("Tel 030 901820 Fax 030 901821", ["030 901820", "030 901821"]),
    ("030 901820 0151 2345678", ["030 901820", "0151 2345678"]),
    # After one group that is no phone, a number with its trunk "0": a date, an order number.
    ("Am 12.05.2024 0151 2345678 angerufen", ["0151 2345678"]),
    ("Date 2024/05/12 0151 2345678", ["0151 2345678"]),
    ("Order 123 0151 2345678", ["0151 2345678"]),
]


@pytest.mark.parametrize(("text", "numbers"), ADJACENT, ids=[t for t, _ in ADJACENT])
def test_adjacent_numbers_are_each_a_span(model, text, numbers):
    assert spans(model, text) == [("PHONE_NUMBER", n) for n in numbers]


# RFC 6531: a local part (and a domain label) may hold letters beyond ASCII; the address is found whole.
@pytest.mark.parametrize("address", ["élodie.martin@example.fr", "Øyvind@example.no", "jürgen@beispiel.de",
                                     "über@example.de", "josé.garcía@correo.es", "иван.петров@example.ru",
                                     "e\u0301lodie@example.fr", "jürgen@müller.de", "søren@eksempel.dk"])
def test_an_internationalised_address_is_found_whole(model, address):
    assert spans(model, f"Schreib an {address}, danke") == [("EMAIL_ADDRESS", address)]


def test_an_internationalised_address_against_cjk_text_starts_after_it(model):
    assert spans(model, "メールはjürgen@example.deまで") == [("EMAIL_ADDRESS", "jürgen@example.de")]


# More numbers side by side than one window of pieces (_CUTS): every one is found, not only the last few (seven
# left the first two unmarked, a privacy leak when the request is masked).
@pytest.mark.parametrize("numbers", [["0151 2345678"] * 7, ["0151 2345678", "030 901820", "06 12 34 56 78"] * 4,
                                     ["0151/2345678", "030/12345678"] * 8])
def test_a_long_row_of_numbers_side_by_side_is_each_a_span(model, numbers):
    assert spans(model, "Nummern " + " ".join(numbers) + " bitte") == [("PHONE_NUMBER", n) for n in numbers]


class _Counting:
    """A compiled pattern that adds up the characters its matches read (deterministic, unlike CPU time)."""

    def __init__(self, pattern):
        self.pattern, self.read = pattern, 0

    def match(self, text, pos=0, endpos=None):
        m = self.pattern.match(text, pos, len(text) if endpos is None else endpos)
        self.read += m.end() - pos if m else 0
        return m


def _work(monkeypatch, text: str) -> int:
    """Characters the run reader took plus characters handed to the phone check, for one pass over ``text``."""
    run, checked = _Counting(_pii._RUN), [0]
    check = _pii._phone_ok

    def counted(cand: str) -> bool:
        checked[0] += len(cand)
        return check(cand)

    with monkeypatch.context() as m:
        m.setattr(_pii, "_RUN", run)
        m.setattr(_pii, "_phone_ok", counted)
        list(_pii._phones(text))
    return run.read + checked[0]


# Digits and separators with no phone in them, as a client may send 100 KB of: each candidate read the whole run
# after it (and cut it at every space), so 100 KB of "12 " cost 29 s of CPU on the loop's thread. Four times the
# text is about four times the work (a quadratic reader does sixteen times): counted in characters read, not
# timed.
@pytest.mark.parametrize("unit", ["12 ", "0 ", "030/1 ", "0151 2345678 ", "0151\u00a02345678\u2009", "1-2 3.4 ",
                                  "0151 2345678-1-2-3-4-5-6-7-8-9-0-1-2-3-4-5-6-7-8 ",
                                  "+49 151\n2345678 ", "+4\n1\n2\n"])
def test_phone_detection_reads_linearly_in_digits_and_separators(monkeypatch, unit):
    small, large = unit * (12_000 // len(unit)), unit * (48_000 // len(unit))
    ratio = _work(monkeypatch, large) / max(_work(monkeypatch, small), 1)
    assert ratio < 6, (unit, ratio)


def test_a_candidate_before_a_long_run_of_groups_without_spaces_is_read():
    # More groups after a candidate than one read holds, none parted by a space: no window of numbers (this raised
    # IndexError, failing the pii question).
    text = "Ref 05212.2/3-0.4.1/9.9-0-1.4.4/7/2.7/5-9/3/3 end"
    assert [s for s in spans_of(text) if s[0] == "PHONE_NUMBER"] == []


def spans_of(text: str) -> list[tuple[str, str]]:
    return [(label, text[a:b]) for label, a, b, _ in _pii.find(text)]


# --- what coding agents' tool definitions and outputs hold (fix133) ----------------------------------------------

# Codex's exec tool reads "empty polls wait 5000-300000 ms": a range of numbers (durations, sizes, ports, tokens),
# a list of ports, a version. Two bounds, the lower first, the first of four digits or more and the second longer,
# or both round, or a dash set apart by spaces, are a range: no country writes a number so.
RANGES = [
    "empty polls wait 5000-300000 ms", "tokens 4096-128000", "values 200-3000000", "timeout: 5000\u2013300000 ms",
    "between 5000 - 300000 ms", "sizes 1500-250000 bytes", "retry after 2500-120000 ms", "ports 8080 8081 8082 8083",
    "port range 30000-32767", "node 18.17.1 and python 3.12.4", "build 1.0.0-20240101123456",
    "row 2345678901 of the table", "order #4155552671 shipped", "id: 4155552671", "Account 8005551234 is closed.",
    "pid 3471234567 exited", "timestamp 2125551234",
]


@pytest.mark.parametrize("text", RANGES)
def test_ranges_lists_versions_and_bare_ids_are_no_phones(model, text):
    assert [s for s in spans(model, text) if s[0] == "PHONE_NUMBER"] == []


# A number a person gives: with its separators as written at home, or bare after (or before) a word that says it
# is a phone.
GIVEN = [
    ("Call me at 4155552671 tonight.", "4155552671"), ("My number is 2125551234.", "2125551234"),
    ("4155552671 is my cell.", "4155552671"), ("Chiamami al 347-1234567.", "347-1234567"),
    ("Tel. 91234-95678 please", "91234-95678"), ("Handy: 01512345678", "01512345678"),
    ("电话 13800138000", "13800138000"), ("Reach me on 415-555-2671.", "415-555-2671"),
]


@pytest.mark.parametrize(("text", "number"), GIVEN)
def test_a_number_given_as_a_phone_is_one(model, text, number):
    assert spans(model, text) == [("PHONE_NUMBER", number)]
