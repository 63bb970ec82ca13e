"""py3langid's model from the unpacked copy ``make build`` writes: the same tables as py3langid's own xz file, and
ignored when it is a copy of another file."""
from pathlib import Path

import numpy as np
import pytest
from py3langid import langid

from vsr_fast.signals import langid_model


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("langid") / "langid-model.npz"
    langid_model.unpack(path)
    return path


def tables(identifier: langid.LanguageIdentifier) -> list:
    return [identifier.nb_classes, identifier.tk_output, identifier.tk_nextmove.tobytes(), identifier.tk_row.tobytes(),
            identifier.tk_nextmove.typecode, identifier.tk_row.typecode]


def test_the_unpacked_copy_is_py3langids_model(unpacked):
    assert langid_model.unpacked_matches(unpacked)
    own = langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE, norm_probs=True)
    copy = langid_model.identifier(unpacked)
    assert tables(copy) == tables(own)
    assert np.array_equal(copy.nb_ptc, own.nb_ptc) and np.array_equal(copy.nb_pc, own.nb_pc)
    text = "The weather was lovely this morning, so we walked to the market."
    assert copy.classify(text) == own.classify(text) and copy._norm_probs


def test_a_copy_of_another_model_is_ignored(unpacked, tmp_path):
    other = tmp_path / "other.npz.xz"
    other.write_bytes(langid_model.SOURCE.read_bytes() + b"\0")     # not the model the copy came from
    assert not langid_model.unpacked_matches(unpacked, other)
    unstamped = tmp_path / "unstamped.npz"
    unstamped.write_bytes(unpacked.read_bytes())
    assert not langid_model.unpacked_matches(unstamped)
    # Read from the xz file instead (a truncated xz file, read, fails: proof the copy was not used).
    broken = tmp_path / "broken.npz.xz"
    broken.write_bytes(langid_model.SOURCE.read_bytes()[:1000])
    (tmp_path / "wrong.npz.sha256").write_text(langid_model._sha256(langid_model.SOURCE))
    (tmp_path / "wrong.npz").write_bytes(unpacked.read_bytes())
    with pytest.raises(EOFError):
        langid_model.identifier(tmp_path / "wrong.npz", broken)
    assert langid_model.identifier(tmp_path / "wrong.npz").nb_classes == langid_model.identifier(unpacked).nb_classes


def test_unpacking_again_keeps_a_matching_copy(unpacked):
    before = unpacked.stat().st_mtime_ns
    langid_model.unpack(unpacked)
    assert unpacked.stat().st_mtime_ns == before


def test_make_build_writes_the_copy_the_router_reads():
    """Without the copy every router with a language rule or vsr-static-11 decompresses py3langid's xz file at
    start (~0.45 s of CPU); ``make build`` (the step ``make test`` and ``make run`` begin with) writes it."""
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    target = makefile.split("\nbuild-runtime:", 1)[1].split("\n\n", 1)[0]
    assert f"$(PY) -m {langid_model.__name__}\n" in target + "\n"
    assert langid_model.UNPACKED.parent == Path(langid_model.__file__).resolve().parent.parent / "_ext"
