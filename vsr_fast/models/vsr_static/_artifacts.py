"""The committed artifacts of vsr-static-1 to -10: their names, their checksums and how they load.

    artifacts/         vsr-static-1 (kept loadable: replayed records name it)
      embedding.npz    q: int8 (30522, 256) token table; scale: float32 (30522,) per-row scale
      heads.npz        domain_w (256, 14), domain_b (14,), jailbreak_w (256, 2), jailbreak_b (2,)
      model.json       labels, the zero-shot temperature and cosine calibration, measured thresholds,
                       the wheels it was built from and what the build measured on validation data
      tokenizer.json   all-MiniLM-L6-v2's WordPiece tokenizer, padding and truncation removed
      NOTICE           the Apache-2.0 attribution of the teacher and the data's licences
      SHA256SUMS       `sha256sum` lines for every file above; checked before anything is read
    artifacts-2/       vsr-static-2: the same embedding and tokenizer, new heads
      heads.npz        domain_w (256, 14), domain_b; jailbreak_w (513, 2), jailbreak_b: the jailbreak
                       head reads the embedding, a length feature and their product (``features``)
      model.json, NOTICE, SHA256SUMS as above; SHA256SUMS also pins ../artifacts/embedding.npz and
                       ../artifacts/tokenizer.json, which vsr-static-2 shares with vsr-static-1
    artifacts-3/       vsr-static-3: the same embedding and tokenizer; heads that also read hashed token
                       n-grams (``ngram_buckets``): heads.npz adds jailbreak_ngrams (buckets, 2) float16,
                       one logit weight per bucket and label; the layout is artifacts-2's
    artifacts-4/       vsr-static-4: -2's jailbreak head; a domain head that also reads hashed token
                       n-grams: heads.npz adds domain_ngrams (buckets, 14) float16; artifacts-2's layout
    artifacts-5/       vsr-static-5: -4's layout and heads, the domain head also trained on written questions
    artifacts-6/       vsr-static-6: -5's domain head; a jailbreak head that also reads hashed token n-grams
                       (-3's kind), trained also on written coding-agent texts: both heads have n-gram tables
    artifacts-7/       vsr-static-7: -5's domain head; a jailbreak head retrained also on written attacks and
                       look-alike benign texts; artifacts-5's layout
    artifacts-8/       vsr-static-8: -5's domain head; a jailbreak head with one hidden ReLU layer: heads.npz adds
                       jailbreak_w2 (hidden, 2) and jailbreak_b2 (2,), jailbreak_w (513, hidden) is the first layer
    artifacts-9/       vsr-static-9: artifacts-5's heads.npz, copied byte for byte; model.json adds the jailbreak head's
                       sentence-window rule (``heads.jailbreak.windows``, see ``_windows``: ``cues`` "forms", or ``true``
                       for the first rule's words); artifacts-5's layout
    artifacts-10/      vsr-static-10: no array of its own; SHA256SUMS pins model.json, NOTICE, ../artifacts-5/heads.npz
                       (the base heads), ../artifacts-8/heads.npz (the jailbreak head it mixes in on texts of at
                       least the gate's tokens: ``heads.jailbreak.ensemble``) and vsr-static-1's embedding and
                       tokenizer; the other models' files are read where they are committed, never copied
    artifacts-11/      vsr-static-11: artifacts-10's layout (no array of its own; -5's and -8's heads by reference);
                       model.json's ensemble adds ``english`` and ``floor``: where -8's head is not mixed in
    artifacts-minilm-1/  vsr-minilm-1: no table; heads trained on the contextual encoder's outputs (``_contextual``,
                       384 wide), model.json names the encoder's package and model.onnx's sha256; SHA256SUMS pins
                       heads.npz, model.json, NOTICE and ../artifacts/tokenizer.json (the teacher's vocabulary)
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ARTIFACTS = Path(__file__).parent / "artifacts"
ARTIFACTS_2 = Path(__file__).parent / "artifacts-2"
ARTIFACTS_3 = Path(__file__).parent / "artifacts-3"
ARTIFACTS_4 = Path(__file__).parent / "artifacts-4"
ARTIFACTS_5 = Path(__file__).parent / "artifacts-5"
ARTIFACTS_6 = Path(__file__).parent / "artifacts-6"
ARTIFACTS_7 = Path(__file__).parent / "artifacts-7"
ARTIFACTS_8 = Path(__file__).parent / "artifacts-8"
ARTIFACTS_9 = Path(__file__).parent / "artifacts-9"
ARTIFACTS_10 = Path(__file__).parent / "artifacts-10"
ARTIFACTS_11 = Path(__file__).parent / "artifacts-11"
ARTIFACTS_MINILM_1 = Path(__file__).parent / "artifacts-minilm-1"
FILES = ("embedding.npz", "heads.npz", "model.json", "tokenizer.json", "NOTICE")
SHARED = "../artifacts/"   # how a later model's SHA256SUMS names the vsr-static-1 files it shares
FILES_2 = ("heads.npz", "model.json", "NOTICE", SHARED + "embedding.npz", SHARED + "tokenizer.json")
FILES_3 = FILES_2   # the same layout: own heads, the shared embedding pinned by checksum
FILES_4 = FILES_2
FILES_5 = FILES_2
FILES_6 = FILES_2
FILES_7 = FILES_2
FILES_8 = FILES_2
FILES_9 = FILES_2
# Another committed model's file, named relative to the model's folder ("../artifacts-5/heads.npz"): pinned by the
# referring model's SHA256SUMS and read where it is committed (vsr-static-10 reuses -5's and -8's heads).
SIBLING = "../"
FILES_10 = ("model.json", "NOTICE", "../artifacts-5/heads.npz", "../artifacts-8/heads.npz",
            SHARED + "embedding.npz", SHARED + "tokenizer.json")
FILES_11 = FILES_10   # -10's layout: -5's and -8's heads by reference
FILES_MINILM_1 = ("heads.npz", "model.json", "NOTICE", SHARED + "tokenizer.json")
SUMS = "SHA256SUMS"
PARTNER = "jailbreak_partner_"   # heads' keys of the ensemble's second jailbreak head (its file's jailbreak_*)
LENGTH_SCALE = 6.0   # the length feature is log(1 + tokens) / 6: about 1 at 512 tokens


class ArtifactError(Exception):
    """The artifacts are missing, or differ from their SHA256SUMS: the model must not load."""


def sha256_lines(directory: Path, files: tuple[str, ...] = FILES, shared: Path = ARTIFACTS) -> str:
    """`sha256sum` lines for ``files`` of ``directory``. A name under ``SHARED`` is vsr-static-1's file in
    ``shared``, the folder the build read it from; another name under ``SIBLING`` is that committed model's file:
    the lines do not depend on where ``directory`` is."""
    def path(name: str) -> Path:
        if name.startswith(SHARED):
            return shared / name.removeprefix(SHARED)
        return ARTIFACTS.parent / name.removeprefix(SIBLING) if name.startswith(SIBLING) else directory / name

    return "".join(f"{hashlib.sha256(path(n).read_bytes()).hexdigest()}  {n}\n" for n in files)


def verify(directory: Path, files: tuple[str, ...] = FILES) -> None:
    """Raise ArtifactError unless every file listed in SHA256SUMS is present and matches it."""
    try:
        listed = (directory / SUMS).read_text().splitlines()
    except OSError as exc:
        raise ArtifactError(f"{directory / SUMS}: {exc}") from exc
    pairs = [line.split() for line in listed if line.strip()]
    if any(len(p) != 2 for p in pairs):
        raise ArtifactError(f"{directory / SUMS}: lines must be '<sha256>  <name>'")
    expected = {name: digest for digest, name in pairs}
    if set(expected) != set(files):
        raise ArtifactError(f"{SUMS} lists {sorted(expected)}, expected {sorted(files)}")
    check_sums(directory, expected, f"{SUMS} says")


def check_sums(directory: Path, expected: dict[str, str], source: str = "pinned") -> None:
    """Raise ArtifactError unless each file (name -> sha256, relative to ``directory``) is there and matches."""
    for name, digest in expected.items():
        try:
            actual = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        except OSError as exc:
            raise ArtifactError(f"{directory / name}: {exc}") from exc
        if actual != digest:
            raise ArtifactError(f"{directory / name}: sha256 {actual}, {source} {digest}")


@dataclass(frozen=True)
class Artifacts:
    table: np.ndarray            # (vocab, dim) float32, dequantised
    heads: dict[str, np.ndarray]
    meta: dict[str, Any]
    tokenizer_json: str


def dequantise(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) * scale[:, None]


def _named(files: tuple[str, ...], name: str) -> str:
    return next(f for f in files if f.rsplit("/", 1)[-1] == name)


def read(directory: Path = ARTIFACTS, files: tuple[str, ...] = FILES) -> Artifacts:
    """Verified artifacts from ``directory`` laid out as ``files``; the checksums are read before any array is."""
    verify(directory, files)
    with np.load(directory / _named(files, "embedding.npz"), allow_pickle=False) as emb:
        table = dequantise(emb["q"], emb["scale"])
    with np.load(directory / _named(files, "heads.npz"), allow_pickle=False) as h:
        heads = {k: h[k] for k in h.files}
    meta = json.loads((directory / "model.json").read_text())
    ensemble = meta["heads"]["jailbreak"].get("ensemble")
    if ensemble is not None:        # vsr-static-10: a second jailbreak head, from a file SHA256SUMS pinned above
        if ensemble["heads"] not in files:
            raise ArtifactError(f"{directory / 'model.json'}: the ensemble's heads {ensemble['heads']!r} are not "
                                f"among the pinned files {list(files)}")
        with np.load(directory / ensemble["heads"], allow_pickle=False) as h:
            heads.update({PARTNER + k.removeprefix("jailbreak_"): h[k] for k in h.files if k.startswith("jailbreak_")})
    return Artifacts(table, heads, meta, (directory / _named(files, "tokenizer.json")).read_text())


def read_heads(directory: Path, files: tuple[str, ...]) -> Artifacts:
    """Verified artifacts of a model without a token table (vsr-minilm-1): ``table`` is empty."""
    verify(directory, files)
    with np.load(directory / "heads.npz", allow_pickle=False) as h:
        heads = {k: h[k] for k in h.files}
    meta = json.loads((directory / "model.json").read_text())
    return Artifacts(np.zeros((0, 0), np.float32), heads, meta, (directory / _named(files, "tokenizer.json")).read_text())


def features(kind: str, vectors: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """What a head reads: the embedding alone, or with log-length and their product ("embedding+length")."""
    if kind == "embedding":
        return vectors
    if kind == "embedding+length":
        length = (np.log1p(counts) / LENGTH_SCALE).astype(np.float32)[:, None]
        return np.hstack([vectors, length, vectors * length])
    raise ArtifactError(f"unknown head features {kind!r}")


def ngram_buckets(ids: np.ndarray, buckets: int) -> np.ndarray:
    """The distinct hash buckets of a text's token unigrams and bigrams, sorted.

    Token ids are already integers, so the hash is plain arithmetic (no Python hash
    seed): the build and the runtime agree on every machine. Bigrams carry what a mean
    of token rows loses, word order ("ignore previous", "developer mode").
    """
    a = np.asarray(ids, dtype=np.int64)
    grams = [a * 1000003 % buckets]
    if len(a) > 1:
        grams.append((a[:-1] * 30011 + a[1:] * 1000003 + 7) % buckets)
    return np.unique(np.concatenate(grams))


def ngram_logits(weights: np.ndarray, buckets: np.ndarray) -> np.ndarray:
    """What the n-gram table adds to each label's logit: the bucket weights summed, over sqrt(count)."""
    if not len(buckets):
        return np.zeros(weights.shape[1], np.float32)
    return weights[buckets].astype(np.float32).sum(0) / np.float32(np.sqrt(len(buckets)))
