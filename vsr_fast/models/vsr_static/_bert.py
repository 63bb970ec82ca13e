"""A numpy BERT encoder forward over safetensors weights: the teacher, at build time only.

all-MiniLM-L6-v2 is a 6-layer, 384-wide, 12-head BERT. The forward is the
Hugging Face ``BertModel`` one (post-LayerNorm, exact GELU) without dropout;
sentence-transformers then mean-pools the last hidden states over the
attention mask and L2-normalises. float32 throughout, like the reference.
"""
from __future__ import annotations

import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    """Tensors of a safetensors file: an 8-byte header length, a JSON header, then raw little-endian data."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(blob, dtype=_DTYPES[info["dtype"]], count=(end - start) // np.dtype(
            _DTYPES[info["dtype"]]).itemsize, offset=base + start)
        out[name] = arr.reshape(info["shape"]).astype(np.float32 if info["dtype"] != "I64" else np.int64)
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, far below float32 noise after a LayerNorm.
    # numpy has no erf, and the tanh GELU differs from BERT's by up to 1e-3.
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = (((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592
    y = 1.0 - poly * t * np.exp(-a * a)
    return (s * y).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class Bert:
    """The encoder; ``forward`` maps token ids and an attention mask to the last hidden states."""

    def __init__(self, weights: dict[str, np.ndarray], *, heads: int = 12) -> None:
        self.w = weights
        self.heads = heads
        self.layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, (batch, seq) = self.w, ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:seq]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        width = x.shape[-1]
        hd = width // self.heads
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            flat = x.reshape(batch * seq, width)

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, seq, self.heads, hd).transpose(0, 2, 1, 3)

            q = split(self._dense(flat, f"{p}.attention.self.query"))
            k = split(self._dense(flat, f"{p}.attention.self.key"))
            v = split(self._dense(flat, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)) + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * seq, width)
            h = self._dense(ctx, f"{p}.attention.output.dense") + flat
            h = _layer_norm(h, w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"])
            f = self._dense(_gelu(self._dense(h, f"{p}.intermediate.dense")), f"{p}.output.dense") + h
            x = _layer_norm(f, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"]).reshape(
                batch, seq, width)
        return x

    def mean_pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """sentence-transformers' pooling: the mean of the hidden states the mask keeps."""
        h = self.forward(ids, mask)
        m = mask[..., None].astype(np.float32)
        return (h * m).sum(1) / np.maximum(m.sum(1), 1.0)
