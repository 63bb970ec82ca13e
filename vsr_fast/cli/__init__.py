"""The ``vsr-fast`` command line: ``serve`` and ``config validate``."""
from ._main import main as main

__all__ = ["main"]
