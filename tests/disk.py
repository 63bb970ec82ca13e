"""A small disk that fills up, for tests of what the router does when a write fails with ENOSPC."""
from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(size: str = "1m", *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a fresh directory (``read_only``: as a container's read-only root file
    system is, EROFS on any write), unmounted and removed after. Where mounting is not allowed (not root, a
    container without the capability) the test fails, as a missing Redis does: a skip would read as green."""
    where = Path(tempfile.mkdtemp(prefix="vsr-disk-"))
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                             capture_output=True).returncode == 0
    if not mounted:
        where.rmdir()
        pytest.fail("cannot mount a tmpfs here (needs root, as make test runs on these machines)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until the disk has no room left; returns it (remove it to free the room)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
    with contextlib.suppress(OSError):     # the last few bytes a block write could not take
        with open(filler, "ab", buffering=0) as f:
            while True:
                f.write(b"\0")
    return filler


__all__ = ["fill", "small_disk"]
