"""Translation losses and their rendering for ``x-vsr-warnings`` (spec 5.10).

A loss is what the target protocol could not carry: ``action`` says what
happened to it (dropped, converted, defaulted, moved), ``reason`` why
(unsupported, required, position, out_of_range, interleaved), and ``field``
where, as a path into the document it came from: the client's request for
request losses, the backend's answer for answer losses.

The header is an RFC 8941 list: the response guard's codes first (tokens),
then one ``translation_loss`` token per loss with its three parameters as
sf-strings. Past ``limit_bytes`` the remaining members are replaced by
``truncated;count=N``, N being how many were left out.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from msgspec import Struct

DROPPED, CONVERTED, DEFAULTED, MOVED = "dropped", "converted", "defaulted", "moved"
WARNINGS_LIMIT_BYTES = 4096

# sf-string holds printable ASCII only; anything else in a path becomes "?".
_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e]")


class Loss(Struct, frozen=True):
    action: str
    reason: str
    field: str

    def member(self) -> str:
        """This loss as one RFC 8941 list member."""
        return (f'translation_loss;action={sf_string(self.action)};reason={sf_string(self.reason)}'
                f';field={sf_string(self.field)}')


def dropped(field: str, reason: str = "unsupported") -> Loss:
    return Loss(DROPPED, reason, field)


def sf_string(value: str) -> str:
    value = _NOT_PRINTABLE.sub("?", value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{value}"'


def render_warnings(losses: Iterable[Loss], codes: Iterable[str] = (),
                    limit_bytes: int = WARNINGS_LIMIT_BYTES) -> str:
    """The ``x-vsr-warnings`` value: guard codes, then losses; "" when there is nothing to say."""
    members = [*codes, *(loss.member() for loss in losses)]
    whole = ", ".join(members)
    if len(whole) <= limit_bytes:
        return whole
    # Keep the longest prefix that still leaves room for the marker.
    kept, size = 0, 0
    for member in members:
        grown = size + len(member) + (2 if kept else 0)
        marker = len(f", truncated;count={len(members) - kept - 1}")
        if grown + marker > limit_bytes:
            break
        kept, size = kept + 1, grown
    return ", ".join([*members[:kept], f"truncated;count={len(members) - kept}"])
