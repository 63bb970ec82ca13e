"""The secrets a configuration names outside its own bytes: keys and passwords read from an environment variable
or a file (``api_key_env``, ``api_key_file``, ``password_env``, ``password_file``).

The configuration version covers them, by the SHA-256 of each value (never the value), so a reload after a rotated
Kubernetes Secret is a change that takes effect instead of "unchanged", while the version, the log and the
answers reveal nothing of the key. The files are what the config watch also watches.
"""
from __future__ import annotations

import hashlib
import os

import msgspec

from .credentials import KeySource, read_file_key


def key_sources(node: object, path: str = "") -> list[tuple[str, KeySource]]:
    """Every key source under ``node`` (a configuration), with its path, in document order."""
    found: list[tuple[str, KeySource]] = []
    if isinstance(node, KeySource):
        found.append((path, node))
    elif isinstance(node, msgspec.Struct):
        # A store's password: the same two sources under other names (stores.RedisAt).
        env, file = getattr(node, "password_env", None), getattr(node, "password_file", None)
        if env or file:
            found.append((path, KeySource(api_key_env=env, api_key_file=file)))
    if isinstance(node, msgspec.Struct):
        for f in msgspec.structs.fields(node):
            found += key_sources(getattr(node, f.name), f"{path}.{f.encode_name}" if path else f.encode_name)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            name = getattr(item, "name", None)
            found += key_sources(item, f"{path}[{name if isinstance(name, str) else i}]")
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, (msgspec.Struct, list, dict)):
                found += key_sources(value, f"{path}.{key}")
    return found


def fingerprints(config: object) -> dict[str, str]:
    """Each env or file source's path and the SHA-256 of the value it holds now ("unset", "unreadable")."""
    out: dict[str, str] = {}
    for path, source in key_sources(config):
        if source.api_key_env:
            value = os.environ.get(source.api_key_env)
            out[f"{path}.env"] = _digest(value.strip()) if value is not None else "unset"
        if source.api_key_file:
            try:
                out[f"{path}.file"] = _digest(read_file_key(source.api_key_file))
            except (OSError, UnicodeDecodeError):
                out[f"{path}.file"] = "unreadable"
    return out


def secret_files(config: object) -> list[str]:
    """The files the configuration reads a secret from."""
    return sorted({s.api_key_file for _, s in key_sources(config) if s.api_key_file})


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def covered(data: bytes, prints: dict[str, str]) -> bytes:
    """The bytes the version hashes: the file's, then each secret's path and digest."""
    if not prints:
        return data     # a configuration naming no secret keeps the version it always had: its bytes'
    return data + b"".join(b"\0%s=%s" % (k.encode(), v.encode()) for k, v in sorted(prints.items()))


__all__ = ["covered", "fingerprints", "key_sources", "secret_files"]
