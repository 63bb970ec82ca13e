"""Load checks of who may call: identity sources, client keys, listeners, delegated credentials (spec 6.7, 8).

A policy that reads the caller's identity (role_bindings, ``debug:
authenticated``, limits per team or tenant) fails to load where nothing could
give one, instead of failing closed on every request. The credential checks of
6.7 name the upstream, without a code of their own.
"""
from __future__ import annotations

import ipaddress
from collections import Counter

from ..headers import registry as h
from .schema import RouterConfig

_SOURCE_HINT = ("set global.router.auth.enabled with client keys, or identity.trust_headers: true on a serving "
                "listener behind an authenticator")
# Never where the delegated credential travels: a provider's key headers and the identity headers.
_NOT_CREDENTIAL_HEADERS = frozenset({n for n in h.ROUTER_WRITES if "auth" in n or "key" in n}
                                    | {h.AUTHZ_USER, h.AUTHZ_GROUPS, h.AUTHZ_TEAM, h.AUTHZ_TENANT})


def has_identity_source(config: RouterConfig) -> bool:
    return config.global_.router.auth.enabled or any(
        listener.identity.trust_headers for listener in config.listeners if listener.role == "serving")


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_auth(config: RouterConfig, models: set[str], errors: list[str], warnings: list[str]) -> None:
    _check_identity_sources(config, errors)
    _check_keys(config, models, errors)
    _check_listeners(config, errors, warnings)
    _check_delegated(config, errors)


def _check_identity_sources(config: RouterConfig, errors: list[str]) -> None:
    if has_identity_source(config):
        return
    for recipe in config.recipes:
        if recipe.signals.role_bindings:
            errors.append(f"recipes[{recipe.name}].signals.role_bindings: missing_identity_source: role bindings "
                          f"read the caller's identity and nothing gives one; {_SOURCE_HINT}")
    router = config.global_.router
    if router.headers.debug == "authenticated":
        errors.append(f"global.router.headers.debug: missing_identity_source: 'authenticated' needs to know the "
                      f"caller; {_SOURCE_HINT}")
    for kind, table in (("teams", router.rate_limits.teams), ("tenants", router.rate_limits.tenants)):
        if table:
            errors.append(f"global.router.rate_limits.{kind}: missing_identity_source: limits per {kind[:-1]} need "
                          f"to know the caller's {kind[:-1]}; {_SOURCE_HINT}")


def _check_keys(config: RouterConfig, models: set[str], errors: list[str]) -> None:
    auth = config.global_.router.auth
    base = "global.router.auth"
    if auth.enabled and not auth.keys and auth.store.backend == "none":
        errors.append(f"{base}.keys: missing_field: client keys are on and no key is declared or stored; declare "
                      f"keys (by sha256) or set store.backend: redis")
    if auth.keys and not auth.enabled:
        errors.append(f"{base}.enabled: invalid_value: keys are declared but auth is off; set enabled: true")
    for kind, values in (("id", [k.id for k in auth.keys]), ("sha256", [k.sha256 for k in auth.keys])):
        for value, n in Counter(values).items():
            if n > 1:
                errors.append(f"{base}.keys: duplicate_name: {kind} {value!r} is declared {n} times")
    for key in auth.keys:
        errors += key_name_errors(config, key.entrypoints, key.models, f"{base}.keys[{key.id}]", models)


def key_name_errors(config: RouterConfig, entrypoints: list[str], models: list[str], base: str,
                    declared: set[str] | None = None) -> list[str]:
    """A key's names the configuration does not declare, one ``<path>: <code>: ...`` line each: the file's
    keys at load, and a stored key when it is made (``vsr-fast keys create --config``, ``POST /api/v1/keys``)."""
    entrypoint_names = {name for ep in config.entrypoints for name in ep.model_names}
    if declared is None:
        declared = {m.name for m in config.providers.models}
    base = f"{base}." if base else ""
    out = [f"{base}entrypoints[{i}]: unknown_entrypoint: {name!r} is no entrypoint's model name"
           for i, name in enumerate(entrypoints) if name not in entrypoint_names]
    out += [f"{base}models[{i}]: unknown_model: {name!r} is not declared in providers.models"
            for i, name in enumerate(models) if name not in declared]
    return out


def _check_listeners(config: RouterConfig, errors: list[str], warnings: list[str]) -> None:
    for role in ("serving", "admin"):
        named = [listener.name for listener in config.listeners if listener.role == role]
        if len(named) > 1:
            errors.append(f"listeners: invalid_value: {len(named)} listeners have role {role} ({', '.join(named)}); "
                          f"one may")
    admin = next((listener for listener in config.listeners if listener.role == "admin"), None)
    serving = next((listener for listener in config.listeners if listener.role == "serving"), None)
    if admin is not None and admin.identity.trust_headers:
        errors.append(f"listeners[{admin.name}].identity.trust_headers: invalid_value: the admin listener serves no "
                      f"client API, so it reads no identity")
    if admin is not None and serving is not None and (admin.address, admin.port) == (serving.address, serving.port) \
            and admin.port != 0:
        errors.append(f"listeners[{admin.name}].port: invalid_value: the admin listener shares "
                      f"{admin.address}:{admin.port} with the serving listener")
    if admin is not None and not _is_loopback(admin.address):
        warnings.append(f"listeners[{admin.name}].address: the admin listener (replay bodies, metrics, keys) "
                        f"listens on {admin.address}, beyond this host")
    if admin is None and serving is not None and not _is_loopback(serving.address) \
            and not config.global_.router.auth.enabled:
        warnings.append(f"listeners[{serving.name}].address: replay, preview and metrics are served to anyone on "
                        f"{serving.address}; add a listener with role: admin or turn on global.router.auth")


def _check_delegated(config: RouterConfig, errors: list[str]) -> None:
    delegated = config.global_.services.authz.delegated_credential
    path = "global.services.authz.delegated_credential"
    if delegated.header.lower() in _NOT_CREDENTIAL_HEADERS:
        errors.append(f"{path}.header: invalid_value: {delegated.header!r} is an API-key, Authorization or identity "
                      f"header; the delegated credential needs a header of its own ({h.DELEGATED_CREDENTIAL})")
    upstreams: set[str] = set()
    for model in config.providers.models:
        for j, ref in enumerate(model.backend_refs):
            auth = ref.auth
            if auth is None or auth.credential != "delegated":
                continue
            where = f"providers.models[{model.name}].backend_refs[{ref.name or j}].auth"
            upstreams.add(model.name)
            if auth.api_key or auth.api_key_env or auth.api_key_file:
                errors.append(f"{where}: invalid_value: a delegated upstream sends the user's credential; it takes "
                              f"no api_key, api_key_env or api_key_file")
            if not delegated.enabled:
                errors.append(f"{where}: upstream {model.name!r} is delegated and {path}.enabled is false; enable "
                              f"{path} (the header the authenticator writes)")
    for name, dep in config.global_.model_catalog.deployments.items():
        auth = dep.auth
        if auth is None or auth.credential != "delegated":
            continue
        where = f"global.model_catalog.deployments.{name}.auth"
        upstreams.add(name)
        if auth.api_key or auth.api_key_env or auth.api_key_file:
            errors.append(f"{where}: invalid_value: a delegated deployment sends the user's credential; it takes "
                          f"no api_key, api_key_env or api_key_file")
        if dep.provider == "model_runtime":
            errors.append(f"{where}.credential: invalid_value: deployment {name!r} is a model_runtime, which the "
                          f"router checks and prepares on its own behalf; only a systemone deployment can be delegated")
        if not delegated.enabled:
            errors.append(f"{where}: deployment {name!r} is delegated and {path}.enabled is false; enable "
                          f"{path} (the header the authenticator writes)")
    if not upstreams:
        return
    _check_delegated_cache(config, upstreams, errors)
    for where, entry in config.plugin_entries():
        conf = entry.configuration
        shadow = conf.get("shadow") if entry.type == "router_replay" else None
        if isinstance(shadow, dict) and shadow.get("model") in upstreams:
            errors.append(f"{where}.configuration.shadow.model: invalid_value: upstream {shadow['model']!r} is "
                          f"delegated and a shadow copy never carries a user's credential")


def _cache_layer(entries, where: str) -> tuple[str, dict] | None:
    """A layer's response_cache entry (the first, as ``plugins.layers.layer_of`` reads it) and its path."""
    return next(((f"{where}[{i}]", e.configuration) for i, e in enumerate(entries) if e.type == "response_cache"),
                None)


def _check_delegated_cache(config: RouterConfig, upstreams: set[str], errors: list[str]) -> None:
    """response_cache scope user on every route whose answer may come from a delegated upstream: a decision or
    fallback whose modelRefs name a delegated model, a delegated model named directly (the global layer alone);
    every route when a delegated deployment exists (the rules may ask it for any request). The layer that set
    the route's scope is named. Routes that reach none keep any scope: their answers obtained no one's
    credential."""
    delegated_models = {m.name for m in config.providers.models if m.name in upstreams}
    deployments = upstreams - delegated_models
    glob = _cache_layer(config.global_.plugins, "global.plugins")
    # Route -> delegated upstreams it reaches; (None, None): the models a client names directly.
    nameable = {m.name for m in config.providers.models if m.name in delegated_models and m.api_format != "systemone"}
    routes: list[tuple[list, set[str]]] = [([glob], nameable | deployments)]
    for recipe in config.recipes:
        layer = _cache_layer(recipe.plugins, f"recipes[{recipe.name}].plugins")
        for decision in recipe.decisions:
            reached = {ref.model for ref in decision.modelRefs} & delegated_models
            routes.append(([glob, layer, _cache_layer(decision.plugins, f"recipes[{recipe.name}].decisions["
                                                                         f"{decision.name}].plugins")],
                           reached | deployments))
        if recipe.fallback is not None:
            routes.append(([glob, layer], ({ref.model for ref in recipe.fallback.modelRefs} & delegated_models)
                           | deployments))
    named: dict[str, set[str]] = {}
    for layers, reached in routes:
        present = [found for found in layers if found is not None]
        if not reached or not present:
            continue
        enabled, scope_at, scope = True, None, "user"
        for where, conf in present:
            enabled = conf.get("enabled", enabled)
            if "scope" in conf:
                scope_at, scope = where, conf["scope"]
        if enabled is not False and scope != "user" and scope_at is not None:
            named.setdefault(scope_at, set()).update(reached)
    for where, reached in named.items():
        errors.append(f"{where}.configuration.scope: invalid_value: with delegated upstreams "
                      f"({', '.join(sorted(reached))}) an answer is served only to the user whose credential "
                      f"obtained it; scope must be user")
