"""Migrate notes: one per rewrite, saying what changed, why, and what needs a human (spec 5.11, 8.1)."""
from __future__ import annotations

from typing import Literal

import msgspec

# rewrite: the meaning is kept mechanically; review: rewritten, but a value needs a human (a threshold to
# re-fit, dropped weights or examples); drop: v0.5 (or this router) cannot execute or no longer reads it.
Kind = Literal["rewrite", "review", "drop"]


class Note(msgspec.Struct, frozen=True):
    """One rewrite at one path of the original document."""

    path: str
    kind: Kind
    text: str

    def line(self) -> str:
        return f"{self.path}: {self.kind}: {self.text}"


class Notes:
    """The notes of one migration, in the order the rewrites ran."""

    def __init__(self) -> None:
        self.items: list[Note] = []

    def rewrite(self, path: str, text: str) -> None:
        self.items.append(Note(path, "rewrite", text))

    def review(self, path: str, text: str) -> None:
        self.items.append(Note(path, "review", text))

    def drop(self, path: str, text: str) -> None:
        self.items.append(Note(path, "drop", text))
