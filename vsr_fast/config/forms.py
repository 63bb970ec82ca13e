"""Removed fields of earlier schemas: where each occurs, and what replaces it (spec 5.11, 6.6, 8).

A removed field fails the load with ``removed_field`` and its replacement, not
a bare ``unknown_field``; ``config migrate`` rewrites each one. A pattern step
``*`` matches any list item or mapping key.
"""
from __future__ import annotations

from collections.abc import Iterator

_SIG = ("recipes", "*", "signals")
_DEC = ("recipes", "*", "decisions", "*")
_BACKEND = ("providers", "models", "*", "backend_refs", "*")
_APPLICATION = ("domains", "fact_check", "user_feedbacks", "safety", "hallucination", "refusal", "modality")

REMOVED_FIELDS: list[tuple[tuple[str, ...], str]] = [
    (("recipes", "*", "routing"), "the recipe's signals, projections and decisions directly in the recipe"),
    (("recipes", "*", "modelCards"), "the card's facts (capabilities, description, modalities) on the "
                                     "providers.models[] entry of the same name"),
    ((*_SIG, "domains", "*", "mmlu_categories"), "labels"),
    ((*_SIG, "jailbreak", "*", "threshold"), "predicate: {gte: <threshold>}"),
    ((*_SIG, "jailbreak", "*", "include_history"), "input.history"),
    ((*_SIG, "jailbreak", "*", "method"), "nothing: the jailbreak preset asks the decision model"),
    ((*_SIG, "pii", "*", "threshold"), "predicate: {gte: <threshold>}"),
    ((*_SIG, "pii", "*", "pii_types_allowed"), "ignore_labels"),
    ((*_SIG, "pii", "*", "include_history"), "input.history"),
    *[((*_SIG, kind, "*", "threshold"), "predicate: {gte: <threshold>}") for kind in _APPLICATION],
    ((*_SIG, "safety", "*", "unsafe_labels"), "labels: the harm categories (no labels: the unsafe check)"),
    ((*_SIG, "language", "*", "threshold"), "min_confidence"),
    ((*_SIG, "complexity", "*", "threshold"), "labels, with conditions naming easy, medium or hard"),
    ((*_SIG, "complexity", "*", "hard"), "labels, with conditions naming easy, medium or hard"),
    ((*_SIG, "complexity", "*", "easy"), "labels, with conditions naming easy, medium or hard"),
    ((*_DEC, "emits"), "retention"),
    ((*_BACKEND, "base_url"), "endpoint"),
    ((*_BACKEND, "api_key_env"), "auth.api_key_env"),
    ((*_BACKEND, "api_key"), "auth.api_key"),
    ((*_BACKEND, "auth_header"), "auth.header"),
    ((*_BACKEND, "auth_prefix"), "auth.prefix"),
    ((*_BACKEND, "trusted_gateway"), "auth: {credential: delegated} and global.services.authz.delegated_credential"),
    (("providers", "defaults"), "recipes[].fallback (the default model) and entrypoints (the auto names)"),
    (("global", "router", "auto_model_names"), "an entrypoint of recipe default with default: true"),
    (("global", "router", "auto_model_name"), "an entrypoint of recipe default with default: true"),
    (("global", "router", "model_selection"), "each decision's algorithm (multi_factor, systemone or static)"),
    (("global", "integrations", "looper"), "entrypoints of default-<algorithm> recipes; the Looper runs in "
                                           "process"),
    (("global", "integrations", "tools"), "a tools plugin with select in global.plugins"),
    (("global", "stores", "semantic_cache"), "global.stores.response_cache and a response_cache plugin"),
    (("global", "model_catalog", "modules"), "nothing: the decision model answers every signal; thresholds are "
                                             "the rules' predicates"),
    (("global", "model_catalog", "external"), "global.model_catalog.deployments"),
    (("global", "model_catalog", "kbs"), "nothing: no v0.5 signal reads a knowledge base"),
    (("global", "services", "authz", "gateway_credential"), "global.services.authz.delegated_credential"),
]


def removed_fields(raw: dict) -> Iterator[tuple[list[str | int], str, str]]:
    """``(steps, field, replacement)`` of every removed field in the raw document."""
    for pattern, becomes in REMOVED_FIELDS:
        for steps in _match(raw, pattern, []):
            yield steps, str(steps[-1]), becomes


def _match(node: object, pattern: tuple[str, ...], steps: list) -> Iterator[list]:
    if not pattern:
        yield steps
        return
    head, rest = pattern[0], pattern[1:]
    if isinstance(node, list) and head == "*":
        for i, item in enumerate(node):
            yield from _match(item, rest, steps + [i])
    elif isinstance(node, dict):
        if head == "*":
            for key, value in node.items():
                yield from _match(value, rest, steps + [key])
        elif head in node:
            yield from _match(node[head], rest, steps + [head])
