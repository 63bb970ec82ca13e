"""Build vsr-static-3's heads on vsr-static-1's committed embedding; run through ``build --model vsr-static-3``.

The training rows are vsr-static-2's (``_corpus``, the same seed), so the two models
differ only in how the heads read a text:

1. jailbreak: the embedding, the log-length feature and their product (as -2), plus a
   second, sparse input: the hashed unigrams and bigrams of the text's token ids
   (``_artifacts.ngram_buckets``, ``NGRAM_BUCKETS`` buckets), one weight per bucket and
   label, fitted together with the dense part. A mean of token rows forgets word order
   and lets a few attack words drown in a long persona prompt; the n-grams keep both.
   For each n-gram L2 strength of the grid, the threshold is the 99th percentile of
   P(jailbreak) over the validation split's benign texts of at most 200 characters
   (at most 1 % false alarms on short benign turns), and the strength whose threshold
   catches the most validation attacks is kept, as for -2.
2. domain: -2's logistic head on the embedding, with MMLU rows weighted three times
   instead of twice: at twice, -2's MMLU validation accuracy sat under the 0.75 the
   issue holds MMLU to (0.747 held out); three keeps it above on validation.
3. Zero-shot calibration as -1 and -2 (the embedding is the same).
4. Write artifacts-3/: heads.npz (with jailbreak_ngrams, float16), model.json, NOTICE and
   SHA256SUMS, which also pins the shared embedding and tokenizer.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import _build2, _corpus
from ._artifacts import FILES_3, features, ngram_buckets
from ._embedding import StaticEmbedding
from ._fit import Ngrams, auc, fit_logistic_ngrams, softmax

NAME = "vsr-static-3"
JAILBREAK_FEATURES = "embedding+length"
NGRAM_BUCKETS = 1 << 18
L2 = 0.01                        # the dense part's strength: -2's choice on the same rows
NGRAM_L2_GRID = (1e-3, 3e-4)     # strongest first; see RESULTS: 1e-4 learnt the training sources
MMLU_WEIGHT = 3.0
FALSE_ALARMS = _build2.FALSE_ALARMS
LABELS = _build2.LABELS


def read_with_ngrams(emb: StaticEmbedding, rows: list[_corpus.Row], kind: str, buckets: int
                     ) -> tuple[np.ndarray, Ngrams]:
    """The rows' dense features of ``kind`` and their hashed token n-grams in ``buckets`` buckets."""
    vectors, counts, ids = emb.encode_read([r.text for r in rows])
    return features(kind, vectors, counts), Ngrams([ngram_buckets(i, buckets) for i in ids], buckets)


def _read(emb: StaticEmbedding, rows: list[_corpus.Row]) -> tuple[np.ndarray, Ngrams]:
    return read_with_ngrams(emb, rows, JAILBREAK_FEATURES, NGRAM_BUCKETS)


def train_jailbreak(emb: StaticEmbedding, rows: list[_corpus.Row], log) -> tuple[dict[str, np.ndarray], dict]:
    train = [r for r in rows if r.split == "train"]
    val = [r for r in rows if r.split == "validation"]
    (xt, gt), (xv, gv) = _read(emb, train), _read(emb, val)
    yt = np.array([r.label == "jailbreak" for r in train], dtype=int)
    yv = np.array([r.label == "jailbreak" for r in val])
    short = ~yv & np.array([len(r.text) <= _corpus.SHORT_CHARS for r in val])
    slabs = np.array([r.source == "s-labs" for r in val])
    sources = np.array([r.source for r in val])
    best = None
    for l2_ngrams in NGRAM_L2_GRID:
        w, b, table = fit_logistic_ngrams(xt, gt, yt, 2, L2, l2_ngrams)
        table = table.astype(np.float16)            # as shipped: the threshold is set on what runs
        p = softmax(xv @ w + b + gv.dot(table.astype(np.float32)))[:, 1]
        threshold = float(np.quantile(p[short], 1 - FALSE_ALARMS))
        tpr = float((p[yv] >= threshold).mean())
        log(f"jailbreak: ngram l2={l2_ngrams:g} threshold {threshold:.3f}: validation attacks caught {tpr:.4f}, "
            f"S-Labs validation AUC {auc(p[slabs], yv[slabs]):.4f}")
        if best is None or tpr > best[0]:
            by_source = {s: round(float((p[yv & (sources == s)] >= threshold).mean()), 4)
                         for s in sorted({r.source for r in val if r.label == "jailbreak"})}
            best = (tpr, l2_ngrams, w, b, table, threshold, by_source, auc(p[slabs], yv[slabs]),
                    float((p[short] >= threshold).mean()))
    tpr, l2_ngrams, w, b, table, threshold, by_source, slabs_auc, fpr = best
    log(f"jailbreak: chose ngram l2={l2_ngrams:g}, threshold {threshold:.3f}")
    heads = {"jailbreak_w": w, "jailbreak_b": b, "jailbreak_ngrams": table}
    return heads, {"labels": list(LABELS), "l2": L2, "ngram_l2": l2_ngrams, "features": JAILBREAK_FEATURES,
                   "ngrams": {"buckets": NGRAM_BUCKETS, "of": "token-id unigrams and bigrams",
                              "weights": "float16, summed over the text's distinct buckets / sqrt(count)"},
                   "threshold": round(threshold, 3),
                   "operating_point": f"at most {FALSE_ALARMS:.0%} false alarms on benign validation texts "
                                      f"of at most {_corpus.SHORT_CHARS} characters",
                   "validation_short_benign_false_alarms": round(fpr, 4),
                   "validation_attacks_caught": round(tpr, 4), "validation_attacks_caught_by_source": by_source,
                   "validation_slabs_auc": round(slabs_auc, 4), "train": len(train), "validation": len(val)}


NOTICE = _build2.notice(NAME, "artifacts-3", "jailbreak")


def build(work: Path, out: Path, log) -> None:
    s = _build2.start(work, log)
    jheads, jmeta = train_jailbreak(s.emb, s.jailbreak, log)
    dw, db, dmeta = _build2.train_domain(s.emb, s.domain, log, mmlu_weight=MMLU_WEIGHT)
    meta = _build2.model_meta(NAME, s, {"domain": dmeta, "jailbreak": jmeta})
    _build2.write(out, {"domain_w": dw, "domain_b": db, **jheads}, meta, log, notice=NOTICE, files=FILES_3)
