"""py3langid's model, read once per process: from an unpacked copy when ``make build`` wrote one, else from
py3langid's own xz file.

Decompressing the xz file costs ~0.45 s of CPU in every process that detects a language (the routers of a
language rule or of vsr-static-11's English gate: a test suite starts hundreds); reading the same tables
unpacked costs ~0.07 s, and mapping them for the C kernel (``mapped_identifier``) ~0.02 s. The copy is the xz
file's inner npz, stamped with the xz file's SHA-256: a copy of any other model (py3langid upgraded, a stale
checkout) is ignored, never read.

    python -m vsr_fast.signals.langid_model      # writes vsr_fast/_ext/langid-model.npz (~68 MB, untracked)
"""
from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import struct
import sys
import tempfile
import zipfile
from array import array
from pathlib import Path

import numpy as np
from py3langid import langid

SOURCE = langid.MODEL_DIR / langid.MODEL_FILE
UNPACKED = Path(__file__).resolve().parent.parent / "_ext" / "langid-model.npz"


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _uint_array(values: np.ndarray) -> array:
    """py3langid's DFA tables as it keeps them: stdlib arrays, which its pure-Python walk indexes fast."""
    out = array({2: "H", 4: "I", 8: "L"}[values.dtype.itemsize])
    out.frombytes(np.ascontiguousarray(values).tobytes())
    return out


def _from_npz(npz) -> langid.LanguageIdentifier:
    with np.load(npz, allow_pickle=False) as data:
        return langid.LanguageIdentifier(
            data["ptc"], data["pc"], data["classes"].tolist(), _uint_array(data["nextmove"]),
            data["out_feat"].tolist(), norm_probs=True, tk_row=_uint_array(data["nextmove_row"]))


def _mapped(path: Path) -> dict[str, np.ndarray]:
    """The npz's arrays mapped read-only where they lie in it: np.savez stores its members uncompressed, so the
    pages are shared by every process and read as the kernel walks them, where np.load copies all ~68 MB (and
    checks their CRC). One that lies misaligned for its type (the weights, at an odd offset) is copied: the
    kernel's C loops may be compiled to aligned vector loads."""
    tables: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as f:
        for member in archive.infolist():
            if member.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"{path}: {member.filename} is compressed")
            f.seek(member.header_offset + 26)      # the local header's name and extra field lengths
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            f.seek(member.header_offset + 30 + name_len + extra_len)
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            table = np.memmap(f, dtype=dtype, mode="r", offset=f.tell(), shape=shape, order="F" if fortran else "C")
            tables[member.filename.removesuffix(".npy")] = table if table.flags.aligned else np.array(table)
    return tables


def mapped_identifier(unpacked: Path = UNPACKED, source: Path = SOURCE) -> langid.LanguageIdentifier:
    """``identifier()``'s model for the C kernel (``_ext.langid.LangId``): its tables mapped from the unpacked copy
    rather than read, the DFA's transitions (~39 MB) an ndarray rather than py3langid's stdlib array.
    py3langid's own walk over it answers the same, slower; without a matching copy, ``identifier()``."""
    if not unpacked_matches(unpacked, source):
        return identifier(unpacked, source)
    data = _mapped(unpacked)
    return langid.LanguageIdentifier(
        data["ptc"], data["pc"], data["classes"].tolist(), data["nextmove"], data["out_feat"],
        norm_probs=True, tk_row=_uint_array(data["nextmove_row"]))


def unpacked_matches(unpacked: Path = UNPACKED, source: Path = SOURCE) -> bool:
    """Whether ``unpacked`` was written from ``source`` (its stamp names the source's SHA-256)."""
    try:
        return _stamp(unpacked).read_text().strip() == _sha256(source) and unpacked.is_file()
    except OSError:
        return False


def identifier(unpacked: Path = UNPACKED, source: Path = SOURCE) -> langid.LanguageIdentifier:
    """py3langid's ``LanguageIdentifier(norm_probs=True)`` over ``source``'s tables, read from ``unpacked`` when
    that is a copy of it."""
    if unpacked_matches(unpacked, source):
        return _from_npz(unpacked)
    # As py3langid reads it (its load_model): the npz streamed to a temporary file, never whole in memory.
    with tempfile.TemporaryFile(suffix=".npz") as tmp:
        with lzma.open(source) as src:
            shutil.copyfileobj(src, tmp, length=1 << 20)
        tmp.seek(0)
        return _from_npz(tmp)


def unpack(unpacked: Path = UNPACKED, source: Path = SOURCE) -> None:
    """Write ``source``'s inner npz to ``unpacked`` and its stamp; a reader sees the old pair or the new one whole."""
    if unpacked_matches(unpacked, source):
        return
    digest = _sha256(source)
    _stamp(unpacked).unlink(missing_ok=True)      # no stamp while the copy changes: the copy is ignored
    fd, part = tempfile.mkstemp(dir=unpacked.parent, prefix=unpacked.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, lzma.open(source) as src:
            shutil.copyfileobj(src, out, length=1 << 20)
        os.chmod(part, 0o644)     # mkstemp makes it 0600: a router run by another user reads it too
        os.replace(part, unpacked)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise
    _stamp(unpacked).write_text(digest + "\n")


if __name__ == "__main__":
    unpack(Path(sys.argv[1]) if len(sys.argv) > 1 else UNPACKED)
