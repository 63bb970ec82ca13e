"""The committed artifacts of vsr-static-1: their names, their checksums and how they load.

    artifacts/
      embedding.npz    q: int8 (30522, 256) token table; scale: float32 (30522,) per-row scale
      heads.npz        domain_w (256, 14), domain_b (14,), jailbreak_w (256, 2), jailbreak_b (2,)
      model.json       labels, the zero-shot temperature and cosine calibration, measured thresholds,
                       the wheels it was built from and what the build measured on validation data
      tokenizer.json   all-MiniLM-L6-v2's WordPiece tokenizer, padding and truncation removed
      NOTICE           the Apache-2.0 attribution of the teacher and the data's licences
      SHA256SUMS       `sha256sum` lines for every file above; checked before anything is read
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ARTIFACTS = Path(__file__).parent / "artifacts"
FILES = ("embedding.npz", "heads.npz", "model.json", "tokenizer.json", "NOTICE")
SUMS = "SHA256SUMS"


class ArtifactError(Exception):
    """The artifacts are missing, or differ from their SHA256SUMS: the model must not load."""


def sha256_lines(directory: Path) -> str:
    return "".join(f"{hashlib.sha256((directory / n).read_bytes()).hexdigest()}  {n}\n" for n in FILES)


def verify(directory: Path) -> None:
    """Raise ArtifactError unless every file listed in SHA256SUMS is present and matches it."""
    try:
        listed = (directory / SUMS).read_text().splitlines()
    except OSError as exc:
        raise ArtifactError(f"{directory / SUMS}: {exc}") from exc
    pairs = [line.split() for line in listed if line.strip()]
    if any(len(p) != 2 for p in pairs):
        raise ArtifactError(f"{directory / SUMS}: lines must be '<sha256>  <name>'")
    expected = {name: digest for digest, name in pairs}
    if set(expected) != set(FILES):
        raise ArtifactError(f"{SUMS} lists {sorted(expected)}, expected {sorted(FILES)}")
    for name, digest in expected.items():
        try:
            actual = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        except OSError as exc:
            raise ArtifactError(f"{directory / name}: {exc}") from exc
        if actual != digest:
            raise ArtifactError(f"{directory / name}: sha256 {actual}, {SUMS} says {digest}")


@dataclass(frozen=True)
class Artifacts:
    table: np.ndarray            # (vocab, dim) float32, dequantised
    heads: dict[str, np.ndarray]
    meta: dict[str, Any]
    tokenizer_json: str


def dequantise(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) * scale[:, None]


def read(directory: Path = ARTIFACTS) -> Artifacts:
    """Verified artifacts from ``directory``; the checksums are read before any array is."""
    verify(directory)
    with np.load(directory / "embedding.npz", allow_pickle=False) as emb:
        table = dequantise(emb["q"], emb["scale"])
    with np.load(directory / "heads.npz", allow_pickle=False) as h:
        heads = {k: h[k] for k in h.files}
    meta = json.loads((directory / "model.json").read_text())
    return Artifacts(table, heads, meta, (directory / "tokenizer.json").read_text())
