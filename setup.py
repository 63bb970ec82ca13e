"""Builds the Cython kernels in _ext/ as vsr_fast._ext.<name> (and nothing else)."""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
extensions = [
    Extension(
        f"vsr_fast._ext.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        extra_compile_args=["-O3"],
    )
    for pyx in sorted((HERE / "_ext").glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
        quiet=True,
    )
)
