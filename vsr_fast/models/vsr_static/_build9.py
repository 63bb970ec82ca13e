"""Build vsr-static-9: vsr-static-5's heads, byte for byte, plus a sentence-window rule on the jailbreak head.

vsr-static-5 reads a text as the mean of its token rows, so an attack sentence behind a paragraph of
benign padding is averaged away. -9 also scores windows of consecutive sentences and keeps the worst
(``_windows``). The heads are not refitted: ``heads.npz`` is artifacts-5's file, copied (so -5's answers,
and replay of its records, do not move; git stores the copy once). What the build chooses, on -5's
jailbreak validation split only (the rows ``_build2.start`` gives, split ``validation``: 12,402 texts no
head trained on; no benchmark text is read):

1. For each window rule of ``GRID`` (sentences per window, fewest tokens a window holds; a window must
   hold an instruction-override form, ``_windows.FORMS``), the offset: the smallest in ``OFFSETS`` at
   which the rule flags, at -5's threshold, at most ``LONG_MARGIN`` more of the benign validation texts
   over ``_corpus.SHORT_CHARS`` characters, and at most ``SHORT_MARGIN`` more of the shorter ones, than
   the whole-text score alone.
2. Of those, the rule that catches the most validation attacks, padded ones included (``padded``: each
   validation attack of at most ``_corpus.SHORT_CHARS`` characters behind a long benign validation text,
   the one the validation split was built to test and had too few of); within ``TIE`` of the best: the
   smallest offset, then the most windows scored (more sentences per window, then fewer tokens needed).

The first rule (fix95: windows holding one of the words ``_windows.CUES``) flagged a benign sentence that
names a rule ("The rules of evidence exclude hearsay.") and missed its long-benign margin on held-out data
(artifacts-9/CARD.md); the forms ask for the act itself (a verb of overriding and its object, "you are now",
"developer mode", ...), and are the only cue kind in this grid: the words' held-out figures are known, so
choosing between the two would not be a choice on validation data alone.

The threshold stays -5's 0.383 (a window's margin less the offset is compared with it), so the card's
cut and the quickstart's predicates do not change. model.json is -5's with the name, the window rule
and the choice's validation figures; NOTICE is -5's with the name.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from . import _build2, _corpus
from ._artifacts import ARTIFACTS_5, FILES_5, FILES_9, SUMS, features, read, sha256_lines
from ._embedding import StaticEmbedding
from ._fit import auc
from ._windows import Vocabulary, WindowRule, window_reads, worst

NAME = "vsr-static-9"
GRID = tuple((span, tokens, "forms") for span in (1, 2, 3) for tokens in (4, 8, 16))
MIN_SENTENCES = 2
OFFSETS = tuple(round(0.05 * i, 2) for i in range(81))      # 0 to 4 in logit units
LONG_MARGIN = 0.005      # half a point more false alarms on long benign validation texts, at most
SHORT_MARGIN = 0.001     # a tenth of a point on the short ones (the 1 % operating point's own set)
TIE = 0.001
RULE = (f"windows holding an instruction-override form (_windows.FORMS); offset: the smallest of 0..4 (step 0.05) "
        f"at which the rule flags at most {LONG_MARGIN:.1%} more of the benign validation texts over "
        f"{_corpus.SHORT_CHARS} characters and {SHORT_MARGIN:.1%} more of the shorter ones than the whole text at "
        "-5's threshold; chosen: the most validation attacks caught, padded ones included (each validation attack "
        f"of at most {_corpus.SHORT_CHARS} characters after a long benign validation text), within {TIE} of the "
        "best the smallest offset, then the most sentences per window, then the fewest tokens")


def padded(val: list[_corpus.Row]) -> list[str]:
    """Each short validation attack behind a long benign validation text (in sha256 order, round robin): the
    attack hidden by padding that the window rule is for, built from validation rows only."""
    def key(r: _corpus.Row) -> bytes:
        return hashlib.sha256(r.text.encode()).digest()

    attacks = sorted((r for r in val if r.label == "jailbreak" and len(r.text) <= _corpus.SHORT_CHARS), key=key)
    pads = sorted((r for r in val if r.label != "jailbreak" and len(r.text) > _corpus.SHORT_CHARS), key=key)
    return [f"{pads[i % len(pads)].text.rstrip()} {a.text}" for i, a in enumerate(attacks)]


def _margins(head: dict, x: np.ndarray) -> np.ndarray:
    z = x @ head["w"] + head["b"]
    return (z[:, 1] - z[:, 0]).astype(np.float64)


def choose(emb: StaticEmbedding, head: dict, threshold: float, rows: list[_corpus.Row], log) -> dict:
    """The window rule and its validation figures (see the module's docstring)."""
    val = [r for r in rows if r.split == "validation"]
    pad = padded(val)
    vectors, counts, ids = emb.encode_read([r.text for r in val] + pad)
    whole = _margins(head, features(head["features"], vectors, counts))
    cut = float(np.log(threshold / (1 - threshold)))
    y = np.array([r.label == "jailbreak" for r in val] + [True] * len(pad))
    hidden = np.arange(len(y)) >= len(val)      # the padded attacks
    long_ = ~y & (np.array([len(r.text) for r in val] + [0] * len(pad)) > _corpus.SHORT_CHARS)
    short = ~y & ~long_
    slabs = np.array([r.source == "s-labs" for r in val] + [False] * len(pad))
    base = whole >= cut
    log(f"whole text at {threshold}: validation attacks caught {base[y & ~hidden].mean():.4f}, padded "
        f"{base[hidden].mean():.4f} of {hidden.sum()}, false alarms: long benign {base[long_].mean():.4f} of "
        f"{long_.sum()}, short {base[short].mean():.4f} of {short.sum()}")
    vocab = Vocabulary.of(emb.tokenizer)
    tried = []
    for span, tokens, cues in GRID:
        rule = WindowRule(span, tokens, MIN_SENTENCES, 0.0, cues)
        wv, wc, owners = window_reads(emb.table, ids, vocab, rule)
        windows = worst(_margins(head, features(head["features"], wv, wc)), owners, len(y))
        for offset in OFFSETS:
            flagged = np.maximum(whole, windows - offset) >= cut
            if (flagged[long_].mean() <= base[long_].mean() + LONG_MARGIN
                    and flagged[short].mean() <= base[short].mean() + SHORT_MARGIN):
                break
        score = np.maximum(whole, windows - offset)
        f = {"span": span, "min_tokens": tokens, "cues": cues, "offset": offset, "windows": len(owners),
             "attacks_caught": round(float(flagged[y].mean()), 4),
             "unpadded_attacks_caught": round(float(flagged[y & ~hidden].mean()), 4),
             "padded_attacks_caught": round(float(flagged[hidden].mean()), 4),
             "long_benign_false_alarms": round(float(flagged[long_].mean()), 4),
             "short_benign_false_alarms": round(float(flagged[short].mean()), 4),
             "slabs_auc": round(auc(score[slabs], y[slabs]), 4)}
        log(f"windows {json.dumps(f)}")
        tried.append(f)
    best = max(f["attacks_caught"] for f in tried)
    chosen = min((f for f in tried if f["attacks_caught"] >= best - TIE),
                 key=lambda f: (f["offset"], -f["span"], f["min_tokens"]))
    return {"rule": {"span": chosen["span"], "min_tokens": chosen["min_tokens"], "min_sentences": MIN_SENTENCES,
                     "offset": chosen["offset"], "cues": chosen["cues"]},
            "choice": RULE, "validation": {"whole_text": {
                "attacks_caught": round(float(base[y].mean()), 4),
                "unpadded_attacks_caught": round(float(base[y & ~hidden].mean()), 4),
                "padded_attacks_caught": round(float(base[hidden].mean()), 4), "padded_attacks": int(hidden.sum()),
                "long_benign_false_alarms": round(float(base[long_].mean()), 4),
                "short_benign_false_alarms": round(float(base[short].mean()), 4),
                "long_benign": int(long_.sum()), "short_benign": int(short.sum()),
                "attacks": int((y & ~hidden).sum())},
                "grid": tried, "chosen": chosen}}


def build(work: Path, out: Path, log) -> None:
    s = _build2.start(work, log, natural=True)
    five = read(ARTIFACTS_5, FILES_5)
    jmeta = five.meta["heads"]["jailbreak"]
    head = {"w": five.heads["jailbreak_w"], "b": five.heads["jailbreak_b"], "features": jmeta["features"]}
    choice = choose(s.emb, head, float(jmeta["threshold"]), s.jailbreak, log)
    log(f"chosen: {json.dumps(choice['rule'])}")
    meta = json.loads(json.dumps(five.meta))
    meta["name"] = NAME
    meta["heads"]["jailbreak"]["windows"] = choice["rule"]
    meta["heads"]["jailbreak"]["windows_choice"] = {k: v for k, v in choice.items() if k != "rule"}
    meta["built_on"] = "vsr-static-5's heads.npz, unchanged; the jailbreak head's sentence-window rule added"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ARTIFACTS_5 / "heads.npz", out / "heads.npz")
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (out / "NOTICE").write_text((ARTIFACTS_5 / "NOTICE").read_text().replace(
        "vsr-static-5 (vsr_fast/models/vsr_static/artifacts-5)",
        f"{NAME} (vsr_fast/models/vsr_static/artifacts-9; vsr-static-5's heads and data)"))
    (out / SUMS).write_text(sha256_lines(out, FILES_9))
    for name in ("heads.npz", "model.json", "NOTICE", SUMS):
        log(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
