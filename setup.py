"""Builds the Cython kernels in _ext/ as vsr_fast._ext.<name> (and nothing else)."""
import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
LIBRARIES = {"framing": ["z"]}     # zlib's crc32, the one Python's zlib module links
extensions = [
    Extension(
        f"vsr_fast._ext.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        extra_compile_args=["-O3"],
        libraries=LIBRARIES.get(pyx.stem, []),
    )
    for pyx in sorted((HERE / "_ext").glob("*.pyx"))
    # `make` installs the project editable with VSR_FAST_SKIP_EXT=1 and then builds the kernels once, in place:
    # pip's editable build would compile them (minutes of -O3) into a directory nothing imports from.
    if os.environ.get("VSR_FAST_SKIP_EXT") != "1"
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
        quiet=True,
    )
)
