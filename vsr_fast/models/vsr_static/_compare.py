"""A rebuilt model's folder against its committed one: byte for byte, then what differs and by how much.

Training is float arithmetic, and numpy's BLAS sums in a thread-dependent order: two builds on
the same machine have given jailbreak weights 1.7e-6 and 2.9e-6 apart (see the cards of -5 and
-7), and every hash after them differs. So the verdict has three values:

- ``identical``: every file the build wrote equals the committed one byte for byte;
- ``within float tolerance``: model.json (every chosen strength, threshold and validation figure,
  rounded as published) and NOTICE are identical, and every array differs by at most ``RTOL`` times
  its largest committed value plus ``ULPS`` units in the last place of its dtype (float16 tables move
  by whole float16 steps when a float32 weight crosses a rounding edge); SHA256SUMS then differs only
  in those arrays' lines. A head's last axis is its labels and softmax reads logits up to a constant:
  a rebuild of -3 moved all 14 domain biases by the same 1.03e-3, the same model, so heads.npz's
  arrays are compared with their mean over labels taken out (the raw difference is reported too);
- ``different``: anything else.

Each file that is not byte-identical is described: the arrays whose values moved (largest absolute
difference), the model.json fields that changed (both values), the lines that differ.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._artifacts import SUMS

RTOL = 1e-5       # of the array's largest value: above the threaded-BLAS drift measured between builds (2e-6)
ULPS = 2
MAX_LINES = 12    # per file: enough to see what moved without drowning the build log
MAX_CHARS = 200   # per line: tokenizer.json is one line of 466 kB
IDENTICAL, TOLERANCE, DIFFERENT = "identical", "within float tolerance", "different"


class Comparison(NamedTuple):
    verdict: str          # IDENTICAL, TOLERANCE or DIFFERENT
    lines: list[str]      # one or more per file


def compare(built: Path, committed: Path, files: tuple[str, ...]) -> Comparison:
    """``built``'s files (those of ``files`` inside the folder, and SHA256SUMS) against ``committed``'s. Names
    that leave the folder (the shared embedding) are pinned by SHA256SUMS, so they are compared through it."""
    lines, tolerated, other = [], [], False
    for name in [n for n in files if "/" not in n]:
        a, b = built / name, committed / name
        if not b.exists():
            other = True
            lines.append(f"{name}: not committed in {committed}")
        elif a.read_bytes() == b.read_bytes():
            lines.append(f"{name}: identical")
        else:
            details, close = _details(name, a, b)
            if close:
                tolerated.append(name)
            else:
                other = True
            lines.append(f"{name}: differs{' within float tolerance' if close else ''}")
            lines += [f"  {line[:MAX_CHARS]}" for line in details[:MAX_LINES]]
    sums = _lines(built / SUMS, committed / SUMS)
    if sums:
        # A tolerated array changes its own checksum line, and only that line.
        other = other or any(not line.endswith(tuple(f"  {n}" for n in tolerated)) for line in sums[0])
        lines.append(f"{SUMS}: differs")
        lines += [f"  built {line}" for line in sums[0][:MAX_LINES]]
    else:
        lines.append(f"{SUMS}: identical")
    verdict = DIFFERENT if other else TOLERANCE if tolerated else IDENTICAL
    return Comparison(verdict, lines)


def _details(name: str, built: Path, committed: Path) -> tuple[list[str], bool]:
    """What differs between two versions of ``name``, and whether it is only float noise in arrays."""
    if name.endswith(".npz"):
        return _arrays(built, committed, labels_last=name == "heads.npz")
    if name.endswith(".json") and name != "tokenizer.json":
        return _fields(json.loads(built.read_text()), json.loads(committed.read_text())) or [
            "the same fields and values: only the formatting differs"], False
    new, old = _lines(built, committed)
    return [f"built {line!r}" for line in new] + [f"committed {line!r}" for line in old], False


def _lines(built: Path, committed: Path) -> tuple[list[str], list[str]] | None:
    """The lines only ``built`` has and those only ``committed`` has, in order; None when the files are equal."""
    new, old = built.read_text().splitlines(), committed.read_text().splitlines()
    if new == old:
        return None
    return [line for line in new if line not in old], [line for line in old if line not in new]


def _centred(x: np.ndarray, labels_last: bool) -> np.ndarray:
    x = x.astype(np.float64)
    return x - x.mean(-1, keepdims=True) if labels_last and x.ndim else x


def _arrays(built: Path, committed: Path, labels_last: bool) -> tuple[list[str], bool]:
    with np.load(built, allow_pickle=False) as a, np.load(committed, allow_pickle=False) as b:
        out = [f"{k}: only in the {'built' if k in a.files else 'committed'} file"
               for k in sorted(set(a.files) ^ set(b.files))]
        close = not out and a.files == b.files
        for k in [k for k in b.files if k in a.files]:
            x, y = a[k], b[k]
            if x.shape != y.shape or x.dtype != y.dtype:
                out.append(f"{k}: built {x.dtype}{list(x.shape)}, committed {y.dtype}{list(y.shape)}")
                close = False
            elif not np.array_equal(x, y):
                d = np.abs(x.astype(np.float64) - y.astype(np.float64))
                top = np.abs(y.astype(np.float64)).max()
                limit = RTOL * top + ULPS * np.spacing(np.abs(y)).astype(np.float64) if y.dtype.kind == "f" else 0
                c = np.abs(_centred(x, labels_last) - _centred(y, labels_last))
                within = bool((c <= limit).all())
                close = close and within
                centred = f" ({c.max():.3g} over labels)" if labels_last else ""
                out.append(f"{k}: max |difference| {d.max():.3g}{centred} (committed max |value| {top:.3g}), {int((d > 0).sum())} of {d.size} values"
                           f"{'' if within else ', beyond the tolerance'}")
        return out or ["the same arrays and values: only the container bytes differ"], close


def _fields(built, committed, path: str = "") -> list[str]:
    if isinstance(built, dict) and isinstance(committed, dict):
        return [line for k in sorted(set(built) | set(committed))
                for line in _fields(built.get(k), committed.get(k), f"{path}.{k}" if path else k)]
    if built == committed:
        return []
    return [f"{path or '(top)'}: built {json.dumps(built)}, committed {json.dumps(committed)}"]
