"""Build vsr-static-8's heads on vsr-static-1's committed embedding; run through ``build --model vsr-static-8``.

vsr-static-8 is vsr-static-5 with a nonlinear jailbreak head: one hidden layer of ReLU units over
-5's inputs (the embedding, the log-length feature and their product, 513 wide), softmax over benign
/ jailbreak, fitted by minibatch Adam (``_fit.fit_mlp``, seed 0). Seven rounds of data work moved
-5's linear head no further (in-the-wild 0.880, S-Labs test AUC 0.958); this round changes the head,
not the data. At run time the head is two small matrix products (``_model._Head``). Measured, it meets
the in-the-wild and S-Labs goals and flags 1.80 % of unseen chit-chat (goal <= 1 %) and ~10 % of eld's
sentences, so -8 stays opt-in (artifacts-8/CARD.md).

1. jailbreak: the recipe (hidden width, L2, epochs, whether -7's written rows train it and at what
   loss weight) was chosen with this code on validation data only, by a rule fixed before any fit
   (``GRID``, ``RULE``): the threshold is the 99th percentile of P(jailbreak) over the validation
   split's benign texts of at most 200 characters (as -2 to -7; every recipe is scored on -7's
   validation pool, -5's plus the written rows' validation split); a recipe is eligible when its
   S-Labs validation AUC is at least -5's 0.974; the eligible recipe that catches the most
   validation attacks wins. The build fits the chosen recipe only.
2. domain: -5's head, read from artifacts-5 (checked against its SHA256SUMS) and written unchanged.
3. Zero-shot calibration as -1 to -7 (the embedding is the same).
4. Write artifacts-8/: heads.npz (jailbreak_w, jailbreak_b: the first layer; jailbreak_w2,
   jailbreak_b2: the output layer), model.json, NOTICE and SHA256SUMS, which also pins the shared
   embedding and tokenizer.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from . import _build2, _build6, _build7, _corpus
from ._artifacts import FILES_8
from ._embedding import StaticEmbedding
from ._fit import auc, fit_mlp, mlp_logits, softmax

NAME = "vsr-static-8"
WRITTEN = _build7.WRITTEN
FALSE_ALARMS = _build2.FALSE_ALARMS
SEED = 0
BATCH = 256
EPOCHS = (5, 10, 20)              # checkpoints of one run (the step size decays by epoch, not by run length)
# (hidden width, L2, loss weight of a written row: 0 leaves them out of training); each at every EPOCHS.
GRID = tuple((h, l2, w) for h in (128, 512) for l2 in (1e-4, 1e-3) for w in (0.0, 3.0))
SLABS_AUC_FLOOR = 0.974           # -5's S-Labs validation AUC
RULE = ("threshold: the 99th percentile of P(jailbreak) over benign validation texts of at most "
        f"{_corpus.SHORT_CHARS} characters (-7's validation pool for every recipe); eligible: S-Labs validation "
        f"AUC >= {SLABS_AUC_FLOOR} (-5's); chosen: the eligible recipe that catches the most validation attacks "
        "(ties within 0.001: the narrower, then fewer epochs, then the higher S-Labs AUC)")
HIDDEN, L2, WRITTEN_WEIGHT, EPOCH = 512, 1e-3, 3.0, 20     # the choice (CARD.md has the grid's figures)


def _canonical(row: _corpus.Row) -> tuple[bytes, str, str]:
    return hashlib.sha256(row.text.encode()).digest(), row.source, row.label


def split(emb: StaticEmbedding, rows: list[_corpus.Row]):
    """The train and validation rows' features, labels and sources, each split in one fixed order.

    ``_corpus`` gives some rows in an order that changes with PYTHONHASHSEED (``_synthetic.benign_turns``
    iterates set literals): harmless to a full-batch convex fit, but a minibatch fit assigns rows to batches by
    position, so the same rows in another order make another network. Sorting by the text's sha256 fixes it.
    """
    out = []
    for part in ("train", "validation"):
        chosen = sorted((r for r in rows if r.split == part), key=_canonical)
        out.append((_build2._encode(emb, chosen, _build2.JAILBREAK_FEATURES),
                    np.array([r.label == "jailbreak" for r in chosen]), np.array([r.source for r in chosen], object),
                    np.array([len(r.text) for r in chosen])))
    return out


def fits(xt: np.ndarray, yt: np.ndarray, st: np.ndarray, hidden: int, l2: float, written_weight: float,
         epochs: tuple[int, ...]):
    """``fit_mlp``'s checkpoints for one recipe: the written rows weighted ``written_weight`` (0: left out)."""
    weights = np.where(st == WRITTEN, written_weight, 1.0)
    keep = weights > 0
    yield from fit_mlp(xt[keep], yt[keep].astype(int), 2, hidden, l2, epochs, weights=weights[keep],
                       batch=BATCH, seed=SEED)


def score(p: np.ndarray, yv: np.ndarray, sv: np.ndarray, lv: np.ndarray) -> dict:
    """The rule's figures for validation probabilities ``p``."""
    short = ~yv & (lv <= _corpus.SHORT_CHARS)
    slabs = sv == "s-labs"
    threshold = float(np.quantile(p[short], 1 - FALSE_ALARMS))
    return {"threshold": threshold, "caught": float((p[yv] >= threshold).mean()),
            "by_source": {s: round(float((p[yv & (sv == s)] >= threshold).mean()), 4) for s in sorted(set(sv[yv]))},
            "written_short_flagged": float((p[short & (sv == WRITTEN)] >= threshold).mean()),
            "short_flagged": float((p[short] >= threshold).mean()),
            "slabs_auc": auc(p[slabs], yv[slabs])}


def as_shipped(net: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
    w1, b1, w2, b2 = net
    return {"jailbreak_w": w1, "jailbreak_b": b1, "jailbreak_w2": w2, "jailbreak_b2": b2}


def train_jailbreak(emb: StaticEmbedding, rows: list[_corpus.Row], log) -> tuple[dict[str, np.ndarray], dict]:
    (xt, yt, st, _), (xv, yv, sv, lv) = split(emb, rows)
    (_, net), = fits(xt, yt, st, HIDDEN, L2, WRITTEN_WEIGHT, (EPOCH,))
    heads = as_shipped(net)
    f = score(softmax(mlp_logits(xv, *net))[:, 1], yv, sv, lv)
    log(f"jailbreak: mlp {HIDDEN} wide, l2 {L2:g}, written weight {WRITTEN_WEIGHT:g}, {EPOCH} epochs, threshold "
        f"{f['threshold']:.3f}: validation attacks caught {f['caught']:.4f} {f['by_source']}, written short benign "
        f"flagged {f['written_short_flagged']:.4f}, S-Labs validation AUC {f['slabs_auc']:.4f}")
    trained = int((np.where(st == WRITTEN, WRITTEN_WEIGHT, 1.0) > 0).sum())
    meta = {"labels": list(_build2.LABELS), "features": _build2.JAILBREAK_FEATURES,
            "head": {"kind": "mlp", "hidden": HIDDEN, "activation": "relu",
                     "arrays": "logits = relu(x @ jailbreak_w + jailbreak_b) @ jailbreak_w2 + jailbreak_b2"},
            "l2": L2, "epochs": EPOCH, "batch": BATCH, "seed": SEED, "optimizer": "Adam, lr 1e-3/sqrt(1+(epoch-1)/4)",
            "jailbreak_written_weight": WRITTEN_WEIGHT,
            "grid": [{"hidden": h, "l2": l2, "jailbreak_written_weight": w, "epochs": list(EPOCHS)}
                     for h, l2, w in GRID],
            "choice": RULE, "threshold": round(f["threshold"], 3),
            "operating_point": f"at most {FALSE_ALARMS:.0%} false alarms on benign validation texts "
                               f"of at most {_corpus.SHORT_CHARS} characters",
            "validation_short_benign_false_alarms": round(f["short_flagged"], 4),
            "validation_written_short_benign_false_alarms": round(f["written_short_flagged"], 4),
            "validation_attacks_caught": round(f["caught"], 4), "validation_attacks_caught_by_source": f["by_source"],
            "validation_slabs_auc": round(f["slabs_auc"], 4), "train": trained, "validation": len(yv)}
    return heads, meta


NOTICE = _build6.notice_on_5(NAME, "artifacts-8", (
    "- attacks and look-alike benign texts written for vsr-static-7 by an LLM session\n"
    "  (vsr_fast/models/vsr_static/corpus/jailbreak_written.tsv, Apache-2.0; not traffic):\n"
    "  the jailbreak head's validation split only, unless model.json's\n"
    "  jailbreak_written_weight is above 0.\n")).replace(
    "heads.npz holds logistic-regression weights", "heads.npz holds logistic-regression weights (the jailbreak head:\n"
    "a one-hidden-layer network)")


def build(work: Path, out: Path, log) -> None:
    _build6.build_on_5(work, out, log, name=NAME, source=WRITTEN, written={"written": True},
                       train_jailbreak=train_jailbreak,
                       synthetic="; rows from 'jailbreak-written' are attacks and look-alike benign texts written for "
                                 "vsr-static-7 by an LLM session (corpus/jailbreak_written.tsv; LLM-written, "
                                 "synthetic), not traffic; jailbreak head only",
                       notice=NOTICE, files=FILES_8)
