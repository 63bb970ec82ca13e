"""``header_mutation``: add, update or remove provider-bound headers the router does not own (spec 5.7).

``add`` sets a header the request does not carry yet, ``update`` sets it
whatever it carried, ``delete`` removes it. A header the router owns (its own
``x-vsr-*``, identity, credentials, framing: ``headers.registry.router_owned``)
fails the load with ``reserved_header``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from msgspec import UNSET, Meta, UnsetType, field

from ..config.schema_base import Block
from ..headers.registry import router_owned
from ._merge import merged_fields

TYPE = "header_mutation"
# RFC 9110 token characters: a name outside them cannot be sent.
HeaderName = Annotated[str, Meta(min_length=1, max_length=256, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
HeaderValue = Annotated[str, Meta(max_length=8192, pattern=r"^[\t\x20-\x7e]*$")]


class HeaderValuePair(Block):
    name: HeaderName
    value: HeaderValue


class HeaderMutationConfig(Block):
    """``{type: header_mutation, configuration: {enabled, add, update, delete}}`` at one layer."""

    enabled: bool | UnsetType = UNSET
    add: list[HeaderValuePair] | UnsetType = UNSET
    update: list[HeaderValuePair] | UnsetType = UNSET
    delete: list[HeaderName] | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class HeaderMutation:
    add: tuple[tuple[str, str], ...] = ()
    update: tuple[tuple[str, str], ...] = ()
    delete: frozenset[str] = field(default_factory=frozenset)

    def apply(self, headers: list[tuple[str, str]]) -> str | None:
        """Mutate the provider-bound ``headers`` in place; what changed, for the replay record."""
        removed = sum(1 for k, _ in headers if k.lower() in self.delete)
        gone = self.delete | {name for name, _ in self.update}
        headers[:] = [(k, v) for k, v in headers if k.lower() not in gone]
        present = {k.lower() for k, _ in headers}
        added = [(k, v) for k, v in self.add if k not in present]
        headers.extend(added)
        headers.extend(self.update)
        parts = [f"add {len(added)}"] if added else []
        parts += [f"update {len(self.update)}"] if self.update else []
        parts += [f"delete {removed}"] if removed > 0 else []
        return ", ".join(parts) or None


def resolve(*layers: HeaderMutationConfig | None) -> HeaderMutation | None:
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False:
        return None
    mutation = HeaderMutation(
        add=tuple((p.name.lower(), p.value) for p in values.get("add", ())),
        update=tuple((p.name.lower(), p.value) for p in values.get("update", ())),
        delete=frozenset(n.lower() for n in values.get("delete", ())),
    )
    return mutation if (mutation.add or mutation.update or mutation.delete) else None


def check(raw: dict, path: str) -> list[str]:
    """``reserved_header`` for every name the router owns."""
    errors = []
    for key in ("add", "update"):
        for i, pair in enumerate(raw.get(key) or []):
            name = pair.get("name") if isinstance(pair, dict) else None
            if isinstance(name, str) and router_owned(name):
                errors.append(f"{path}.{key}[{i}].name: reserved_header: {name!r} is written by the router "
                              "(its own x-vsr-* and identity headers, credentials, framing); header_mutation "
                              "may not change it")
    for i, name in enumerate(raw.get("delete") or []):
        if isinstance(name, str) and router_owned(name):
            errors.append(f"{path}.delete[{i}]: reserved_header: {name!r} is written by the router; "
                          "header_mutation may not remove it")
    return errors
