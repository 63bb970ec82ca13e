"""Build vsr-static-7's heads on vsr-static-1's committed embedding; run through ``build --model vsr-static-7``.

vsr-static-7 is vsr-static-5 with a jailbreak head retrained on one more source: attacks and
look-alike benign texts written for this build by an LLM session (``corpus/jailbreak_written.tsv``,
source "jailbreak-written"; LLM-written, synthetic, not traffic). -5's head missed two of issue 11's
goals (in-the-wild jailbreaks caught, S-Labs test AUC) and the previous round found that no weight or
L2 moved both the in-the-wild and the chit-chat figure the right way: the head needed more short benign
text and more attacks in the forum style, not more tuning. Measured, the written rows barely moved
either goal and raised false alarms on eld's 60-language sentences, so -7 stays opt-in
(artifacts-7/CARD.md).

1. jailbreak: the recipe (head kind, the written rows' loss weight, L2) was chosen in memory with this
   code on validation data only, by a rule fixed before any fit (``GRID``, ``RULE``): the threshold is
   the 99th percentile of P(jailbreak) over the validation split's benign texts of at most 200
   characters (as -2 to -6; the written chit-chat's validation rows are among them); a recipe is
   eligible when at most 1 % of the written short benign validation texts cross it and its S-Labs
   validation AUC is at least -5's 0.974; the eligible recipe that catches the most validation attacks
   wins. The build fits the chosen recipe only.
2. domain: -5's head, read from artifacts-5 (checked against its SHA256SUMS) and written unchanged,
   with its model.json entry.
3. Zero-shot calibration as -1 to -6 (the embedding is the same).
4. Write artifacts-7/: heads.npz, model.json, NOTICE and SHA256SUMS, which also pins the shared
   embedding and tokenizer.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import _build2, _build3, _build6, _corpus
from ._artifacts import FILES_7
from ._embedding import StaticEmbedding
from ._fit import auc, fit_logistic, fit_logistic_ngrams, softmax

NAME = "vsr-static-7"
WRITTEN = "jailbreak-written"
FALSE_ALARMS = _build2.FALSE_ALARMS
# (head kind, loss weight of a written row, dense L2, n-gram L2): every other row weighs 1.
GRID = tuple(("dense", w, l2, None) for w in (1.0, 3.0, 10.0, 30.0) for l2 in _build2.L2_GRID) + tuple(
    ("ngrams", w, _build3.L2, 1e-3) for w in (3.0, 10.0))
RULE = ("threshold: the 99th percentile of P(jailbreak) over benign validation texts of at most "
        f"{_corpus.SHORT_CHARS} characters; eligible: at most 1 % of the written short benign validation texts "
        "flagged and S-Labs validation AUC >= 0.974 (-5's); chosen: the eligible recipe that catches the most "
        "validation attacks (ties within 0.001: dense before n-grams, then the higher S-Labs AUC)")
KIND, WRITTEN_WEIGHT, L2, NGRAM_L2 = "dense", 3.0, 0.003, None      # the choice (CARD.md has the grid's figures)


def train_jailbreak(emb: StaticEmbedding, rows: list[_corpus.Row], log) -> tuple[dict[str, np.ndarray], dict]:
    train = [r for r in rows if r.split == "train"]
    val = [r for r in rows if r.split == "validation"]
    yt = np.array([r.label == "jailbreak" for r in train], dtype=int)
    yv = np.array([r.label == "jailbreak" for r in val])
    sources = np.array([r.source for r in val], dtype=object)
    short = ~yv & np.array([len(r.text) <= _corpus.SHORT_CHARS for r in val])
    written_short = short & (sources == WRITTEN)
    slabs = sources == "s-labs"
    weights = np.array([WRITTEN_WEIGHT if r.source == WRITTEN else 1.0 for r in train])
    if KIND == "ngrams":
        (xt, gt), (xv, gv) = _build3._read(emb, train), _build3._read(emb, val)
        w, b, table = fit_logistic_ngrams(xt, gt, yt, 2, L2, NGRAM_L2, weights=weights)
        table = table.astype(np.float16)            # as shipped: the threshold is set on what runs
        heads = {"jailbreak_w": w, "jailbreak_b": b, "jailbreak_ngrams": table}
        p = softmax(xv @ w + b + gv.dot(table.astype(np.float32)))[:, 1]
    else:
        xt, xv = (_build2._encode(emb, part, _build2.JAILBREAK_FEATURES) for part in (train, val))
        init = None   # as the grid fitted it: -2's L2 grid, strongest first, each fit warm-starting the next
        for l2 in _build2.L2_GRID[:_build2.L2_GRID.index(L2) + 1]:
            (w, b), init = fit_logistic(xt, yt, 2, l2, steps=500, init=init, weights=weights)
        heads = {"jailbreak_w": w, "jailbreak_b": b}
        p = softmax(xv @ w + b)[:, 1]
    threshold = float(np.quantile(p[short], 1 - FALSE_ALARMS))
    tpr = float((p[yv] >= threshold).mean())
    by_source = {s: round(float((p[yv & (sources == s)] >= threshold).mean()), 4) for s in sorted(set(sources[yv]))}
    written_fa = float((p[written_short] >= threshold).mean())
    slabs_auc, fpr = auc(p[slabs], yv[slabs]), float((p[short] >= threshold).mean())
    log(f"jailbreak: {KIND}, written weight {WRITTEN_WEIGHT:g}, l2 {L2:g}, threshold {threshold:.3f}: validation "
        f"attacks caught {tpr:.4f} {by_source}, written short benign flagged {written_fa:.4f}, "
        f"S-Labs validation AUC {slabs_auc:.4f}")
    meta = {"labels": list(_build2.LABELS), "l2": L2, "features": _build2.JAILBREAK_FEATURES,
            "jailbreak_written_weight": WRITTEN_WEIGHT,
            "grid": [{"kind": k, "jailbreak_written_weight": wt, "l2": l2, "ngram_l2": ng} for k, wt, l2, ng in GRID],
            "choice": RULE, "threshold": round(threshold, 3),
            "operating_point": f"at most {FALSE_ALARMS:.0%} false alarms on benign validation texts "
                               f"of at most {_corpus.SHORT_CHARS} characters",
            "validation_short_benign_false_alarms": round(fpr, 4),
            "validation_written_short_benign_false_alarms": round(written_fa, 4),
            "validation_attacks_caught": round(tpr, 4), "validation_attacks_caught_by_source": by_source,
            "validation_slabs_auc": round(slabs_auc, 4), "train": len(train), "validation": len(val)}
    if KIND == "ngrams":
        meta.update({"ngram_l2": NGRAM_L2, "ngrams": {
            "buckets": _build3.NGRAM_BUCKETS, "of": "token-id unigrams and bigrams",
            "weights": "float16, summed over the text's distinct buckets / sqrt(count)"}})
    return heads, meta


NOTICE = _build6.notice_on_5(NAME, "artifacts-7", (
    "- attacks (persona, DAN-style, framed, injected, smuggled, multilingual, prompt extraction) and\n"
    "  look-alike benign texts (chit-chat in many languages, role-play, system prompts, style guides,\n"
    "  security questions), LLM-written and synthetic, for this build by an LLM session\n"
    "  (vsr_fast/models/vsr_static/corpus/jailbreak_written.tsv, Apache-2.0; not traffic),\n"
    "  jailbreak head only.\n"))


def build(work: Path, out: Path, log) -> None:
    _build6.build_on_5(work, out, log, name=NAME, source=WRITTEN, written={"written": True},
                       train_jailbreak=train_jailbreak,
                       synthetic="; rows from 'jailbreak-written' are attacks and look-alike benign texts written for "
                                 "this build by an LLM session (corpus/jailbreak_written.tsv; LLM-written, synthetic, "
                                 "partly composed by a seeded script from written pieces), not traffic; jailbreak "
                                 "head only",
                       notice=NOTICE, files=FILES_7)
