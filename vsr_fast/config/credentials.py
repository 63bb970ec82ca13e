"""A static key as the configuration names it (inline, an environment variable, a file), read one way for every
auth block, and the load checks that keep a key or header a backend could never be sent from failing every request.

A key read from a variable or a file loses its surrounding whitespace: a Kubernetes Secret made from a file keeps
the file's trailing newline, which no HTTP header may carry (kubectl users expect it dropped, as curl's
``-H @file`` and most SDKs do). A control character inside a value, a header name that is not an HTTP token, or a
``${VAR}`` placeholder that no layer expands is refused with its path; the value itself is never echoed.
"""
from __future__ import annotations

import os
import re

from .schema_base import Block

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# What other tools expand and this configuration does not: docker compose's and envsubst's ${VAR} and $VAR,
# LiteLLM's os.environ/VAR. A key that really holds "${" is not a key any provider issues.
_PLACEHOLDER = re.compile(r"\$\{[^}]*\}|^\$[A-Za-z_][A-Za-z0-9_]*$|^os\.environ/")
ENV_HINT = "the configuration expands no environment variables: name the variable in api_key_env (or a mounted " \
           "file in api_key_file)"


class KeySource(Block):
    """Where a static key comes from: at most one of an inline ``api_key``, ``api_key_env`` (an environment
    variable) or ``api_key_file`` (a file, as a mounted Secret); a variable's or file's surrounding whitespace
    (a trailing newline) is dropped. Every reload reads the variable and the file again: a rotated key is a new
    configuration version (which covers the key's SHA-256, never the key), in effect from the reload on."""

    api_key: str | None = None
    api_key_env: str | None = None
    api_key_file: str | None = None


def read_file_key(path: str) -> str:
    """The key in ``path``, whitespace around it dropped; OSError or UnicodeDecodeError when unreadable."""
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def static_key(auth: KeySource | None) -> str | None:
    """The key ``auth`` names, or None; an unreadable file raises (OSError, UnicodeDecodeError)."""
    if auth is None:
        return None
    if auth.api_key_env:
        return (os.environ.get(auth.api_key_env) or "").strip() or None
    if auth.api_key_file:
        return read_file_key(auth.api_key_file) or None
    return auth.api_key or None


def value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header's value, or None (the value is not quoted: it may be a key)."""
    if _CONTROL.search(value):
        return "holds a control character (a newline, a tab) that no HTTP header may carry"
    if value != value.strip():
        return "starts or ends with whitespace, which an HTTP header's value cannot keep"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "holds a character outside Latin-1, which an HTTP header cannot carry"
    return None


def placeholder_problem(value: str) -> str | None:
    if _PLACEHOLDER.search(value):
        return f"holds an environment placeholder that is sent as written; {ENV_HINT}"
    return None


def key_source_problems(auth: KeySource, where: str, name: str = "api_key") -> list[str]:
    """Load errors of a key source at ``where`` (``...auth``): more than one source, a placeholder, a value that
    cannot be sent, a variable that holds one, a file that cannot be read or is empty. ``name``: what its fields
    are called there (``password`` for a store's ``password_env`` and ``password_file``)."""
    errors: list[str] = []
    named = [f for f, v in ((name, auth.api_key), (f"{name}_env", auth.api_key_env),
                            (f"{name}_file", auth.api_key_file)) if v]
    if len(named) > 1:
        errors.append(f"{where}: invalid_value: set one of {', '.join(named[:-1])} or {named[-1]}, not both")
    if auth.api_key:
        problem = placeholder_problem(auth.api_key) or value_problem(auth.api_key)
        if problem:
            errors.append(f"{where}.{name}: invalid_value: the key {problem}")
    if auth.api_key_env and auth.api_key_env in os.environ:
        problem = value_problem(os.environ[auth.api_key_env].strip())
        if problem:
            errors.append(f"{where}.{name}_env: invalid_value: ${auth.api_key_env}'s value {problem}")
    if auth.api_key_file:
        try:
            key = read_file_key(auth.api_key_file)
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            errors.append(f"{where}.{name}_file: file_unreadable: {auth.api_key_file}: {why}")
        else:
            problem = value_problem(key) if key else None
            if not key:
                errors.append(f"{where}.{name}_file: file_unreadable: {auth.api_key_file}: empty")
            elif problem:
                errors.append(f"{where}.{name}_file: invalid_value: the value in {auth.api_key_file} {problem}")
    return errors


def placement_problems(header: str | None, prefix: str | None, where: str) -> list[str]:
    """Load errors of the header name and prefix a key travels under."""
    errors: list[str] = []
    if header is not None:
        problem = placeholder_problem(header)
        if problem is None and not _TOKEN.fullmatch(header):
            problem = f"{header!r} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
        if problem:
            errors.append(f"{where}.header: invalid_value: {problem}")
    if prefix:
        problem = placeholder_problem(prefix) or value_problem(prefix)
        if problem:
            errors.append(f"{where}.prefix: invalid_value: the prefix {problem}")
    return errors


__all__ = ["ENV_HINT", "KeySource", "key_source_problems", "placement_problems", "placeholder_problem",
           "read_file_key", "static_key", "value_problem"]
