"""Client keys: made, hashed, and looked up without ever keeping one.

A key is ``vsk-`` and 43 url-safe characters (256 random bits). The router and
Redis hold only its SHA-256: the lookup hashes what the caller presented and
finds the digest in a dict, then confirms with ``hmac.compare_digest``. How
long the lookup takes depends on the presented key's hash, never on how many
leading characters it shares with a real key.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Annotated

import msgspec

from ..config.auth import ClientKey, Limits
from ..protocol.canonical import Identity

PREFIX = "vsk-"


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(key: str | bytes) -> str:
    """The SHA-256 a configuration declares and Redis keeps, as lowercase hex."""
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).hexdigest()


class KeyFields(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What a new key is made with (``vsr-fast keys create``, ``POST /api/v1/keys``): a declared key's fields."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    user: str | None = None
    team: str | None = None
    tenant: str | None = None
    groups: list[str] = []
    entrypoints: list[str] = []
    models: list[str] = []
    admin: bool = False
    limits: Limits = Limits()


class StoredKey(KeyFields, frozen=True, kw_only=True):
    """A key kept in Redis: its fields, its SHA-256 and when it was made."""

    sha256: str
    created_ms: int = 0


def may_name_entrypoint(identity: Identity, name: str) -> bool:
    """Whether the key behind ``identity`` may put entrypoint ``name`` in ``model``."""
    return identity.entrypoints is None or name in identity.entrypoints


def may_name_model(identity: Identity, name: str) -> bool:
    """Whether it may name provider model ``name`` directly: one of its ``models``, or any when it lists
    neither models nor entrypoints (a key listing only entrypoints names only them)."""
    if identity.models is not None:
        return name in identity.models
    return identity.entrypoints is None


def identity_of(key: ClientKey | StoredKey) -> Identity:
    return Identity(
        user=key.user or key.id, groups=frozenset(key.groups), team=key.team, tenant=key.tenant, key_id=key.id,
        entrypoints=frozenset(key.entrypoints) if key.entrypoints else None,
        models=frozenset(key.models) if key.models else None, admin=key.admin,
        limits=None if key.limits.empty() else key.limits,
    )


class Keyring:
    """Digest -> identity, for declared and stored keys; replaced whole when the stored keys change."""

    __slots__ = ("_by_digest",)

    def __init__(self, keys: Iterable[ClientKey | StoredKey] = ()) -> None:
        self._by_digest: dict[bytes, tuple[bytes, Identity]] = {}
        for k in keys:
            raw = bytes.fromhex(k.sha256)
            self._by_digest[raw] = (raw, identity_of(k))

    def __len__(self) -> int:
        return len(self._by_digest)

    def digests(self) -> frozenset[bytes]:
        return frozenset(self._by_digest)

    def lookup(self, presented: bytes) -> Identity | None:
        """The identity of ``presented``, or None. Only its digest is compared, in constant time."""
        d = hashlib.sha256(presented).digest()
        found = self._by_digest.get(d)
        if found is None:
            return None
        stored, identity = found
        return identity if hmac.compare_digest(stored, d) else None
