"""Build vsr-static-5's heads on vsr-static-1's committed embedding; run through ``build --model vsr-static-5``.

vsr-static-5 is vsr-static-4 plus one training source for the domain head: natural questions
per subject area written for this build by an LLM session (``corpus/natural_questions.tsv``,
source "natural-written"; not traffic). -4's domain head had seen exam items, WordNet
templates, dialog turns and templated code requests, never how people ask a chat assistant.

1. jailbreak: -4's head (-2's recipe), trained again by ``_build2.train_jailbreak`` on exactly
   -4's rows: the written questions are not added to them, so the threshold and every
   jailbreak figure stay -4's.
2. domain: -4's head (embedding plus hashed token unigrams and bigrams, MMLU x3, dense L2
   0.01, 400 steps) on -4's rows plus the written questions. Their split is stratified by
   area (a fifth of each area by hash is validation). The written questions' loss weight and
   the n-gram L2 are chosen together on validation data only: the lowest mean of two
   per-source validation NLLs, the written questions' and MMLU's (unweighted), so neither the
   new style nor the exam items are given up for the other.
3. Zero-shot calibration as -1 to -4 (the embedding is the same).
4. Write artifacts-5/: heads.npz (with domain_ngrams, float16), model.json, NOTICE and
   SHA256SUMS, which also pins the shared embedding and tokenizer.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...systemone.presets import DOMAINS
from . import _build2, _build4, _corpus
from ._artifacts import FILES_5
from ._embedding import StaticEmbedding
from ._fit import fit_logistic_ngrams, softmax

NAME = "vsr-static-5"
NATURAL = "natural-written"
# (loss weight of a written question, n-gram L2); MMLU rows keep -4's weight (3), every other row 1.
GRID = ((3.0, 1e-4), (10.0, 1e-4), (30.0, 1e-4))


def _weights(rows: list[_corpus.Row], natural_weight: float) -> np.ndarray:
    return np.array([_build4.MMLU_WEIGHT if r.source == "mmlu" else natural_weight if r.source == NATURAL else 1.0
                     for r in rows])


def train_domain(emb: StaticEmbedding, rows: list[_corpus.Row], log) -> tuple[dict[str, np.ndarray], dict]:
    labels = list(DOMAINS)
    train = [r for r in rows if r.split == "train"]
    val = [r for r in rows if r.split == "validation"]
    yt = np.array([labels.index(r.label) for r in train])
    yv = np.array([labels.index(r.label) for r in val])
    (xt, gt), (xv, gv) = _build4._read(emb, train), _build4._read(emb, val)
    sources = np.array([r.source for r in val], dtype=object)   # plain str keys in the logs and model.json
    best = None
    for natural_weight, l2_ngrams in GRID:
        w, b, table = fit_logistic_ngrams(xt, gt, yt, len(labels), _build4.DOMAIN_L2, l2_ngrams,
                                          steps=_build4.DOMAIN_STEPS, weights=_weights(train, natural_weight))
        table = table.astype(np.float16)            # as shipped: the choice is made on what runs
        p = softmax(xv @ w + b + gv.dot(table.astype(np.float32)))
        nll = -np.log(p[np.arange(len(p)), yv] + 1e-12)
        hit = p.argmax(1) == yv
        by_source = {s: round(float(hit[sources == s].mean()), 4) for s in sorted(set(sources))}
        nll_by_source = {s: round(float(nll[sources == s].mean()), 4) for s in sorted(set(sources))}
        score = (nll_by_source[NATURAL] + nll_by_source["mmlu"]) / 2
        log(f"domain: natural weight {natural_weight:g}, ngram l2={l2_ngrams:g}: validation score {score:.4f}, "
            f"nll by source {nll_by_source}, accuracy by source {by_source}")
        if best is None or score < best[0]:
            natural = sources == NATURAL
            by_area = {a: round(float(hit[natural & (yv == k)].mean()), 4) for k, a in enumerate(labels)}
            best = (score, natural_weight, l2_ngrams, w, b, table, by_source, nll_by_source, by_area)
    score, natural_weight, l2_ngrams, w, b, table, by_source, nll_by_source, by_area = best
    log(f"domain: chose natural weight {natural_weight:g}, ngram l2={l2_ngrams:g}")
    heads = {"domain_w": w, "domain_b": b, "domain_ngrams": table}
    return heads, {"labels": labels, "l2": _build4.DOMAIN_L2, "ngram_l2": l2_ngrams,
                   "features": _build4.DOMAIN_FEATURES,
                   "ngrams": {"buckets": _build4.DOMAIN_NGRAM_BUCKETS, "of": "token-id unigrams and bigrams",
                              "weights": "float16, summed over the text's distinct buckets / sqrt(count)"},
                   "steps": _build4.DOMAIN_STEPS, "mmlu_weight": _build4.MMLU_WEIGHT,
                   "natural_written_weight": natural_weight,
                   "grid": [{"natural_written_weight": nw, "ngram_l2": l2} for nw, l2 in GRID],
                   "choice": "lowest mean of the written questions' and MMLU's validation NLL",
                   "validation_score": round(score, 4), "validation_nll_by_source": nll_by_source,
                   "validation_accuracy_by_source": by_source,
                   "validation_natural_written_accuracy_by_area": by_area,
                   "train": len(train), "validation": len(val)}


def with_natural_questions(notice: str) -> str:
    """``notice`` with the LLM-written natural questions listed among its sources (the domain head's rows)."""
    return notice.replace(
        "- templated texts written for this build (vsr_fast/models/vsr_static/_synthetic.py).\n",
        "- templated texts written for this build (vsr_fast/models/vsr_static/_synthetic.py);\n"
        "- natural questions per subject area written for this build by an LLM session\n"
        "  (vsr_fast/models/vsr_static/corpus/natural_questions.tsv, Apache-2.0; not traffic),\n"
        "  domain head only.\n")


NOTICE = with_natural_questions(_build2.notice(NAME, "artifacts-5", "domain"))


def build(work: Path, out: Path, log) -> None:
    s = _build2.start(work, log, natural=True)
    jailbreak_sources = {r.source for r in s.jailbreak}
    assert NATURAL not in jailbreak_sources, "the written questions are the domain head's only"
    jw, jb, jmeta = _build2.train_jailbreak(s.emb, s.jailbreak, log)
    dheads, dmeta = train_domain(s.emb, s.domain, log)
    meta = _build2.model_meta(NAME, s, {"domain": dmeta, "jailbreak": {"labels": list(_build2.LABELS), **jmeta}})
    meta["synthetic"] = (meta["synthetic"] + "; rows from 'natural-written' are questions written for this build "
                         "by an LLM session (corpus/natural_questions.tsv), not traffic; the benchmark's natural "
                         "questions were also written by an LLM session, so the two may share a style")
    _build2.write(out, {"jailbreak_w": jw, "jailbreak_b": jb, **dheads}, meta, log, notice=NOTICE, files=FILES_5)
