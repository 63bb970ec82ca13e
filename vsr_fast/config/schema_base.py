"""The base of every configuration block."""
from msgspec import Struct


class Block(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Strict, frozen, keyword-only: an unknown field fails the load with its path."""
