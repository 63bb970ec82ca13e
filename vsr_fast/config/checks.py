"""Load checks across blocks: names unique, references declared, entrypoints well formed.

Each check appends ``<path>: <code>: <message>`` lines; nothing here raises, so
one load reports every problem at once.
"""
from __future__ import annotations

import ipaddress
import os
import re
import ssl
from collections import Counter
from urllib.parse import urlsplit

import msgspec

from .algorithm import algorithm_errors
from .auth_checks import check_auth
from .bindings import check_bindings
from .embedding_checks import check_embeddings
from .ineffective import check_ineffective
from .candidates import check_candidates
from .decision_order import check_decision_order
from .credentials import KeySource, key_source_problems, placement_problems, placeholder_problem
from .output import ModelFacts, output_capability_missing, output_not_executable
from .schema import Decision, ModelRef, Recipe, RouterConfig, RuleNode
from .stores import DEFAULT_REDIS_URL

SERVED_API_FORMATS = {"openai", "anthropic", "responses", "images", "systemone"}
# Fields the v0.5 schema declares and the load refuses wherever they are set (unsupported_field), by (struct, field):
# why. The reference (cli.reference) marks their rows, so no one copies an example the load refuses.
REFUSED_FIELDS: dict[tuple[str, str], str] = {}


def check(config: RouterConfig) -> tuple[list[str], list[str]]:
    """Return (errors, warnings) for a configuration whose shape already decoded."""
    errors: list[str] = []
    warnings: list[str] = []
    models = _check_providers(config, errors, warnings)
    for recipe in config.recipes:
        _check_recipe(recipe, models, errors)
    _check_entrypoints(config, models, errors)
    _check_native_routes(config, errors)
    _check_outputs(config, errors)
    _check_algorithms(config, errors, warnings)
    check_candidates(config, errors, warnings)
    _check_deployments(config, errors)
    check_bindings(config, errors)
    check_auth(config, models, errors, warnings)
    check_embeddings(config.global_.model_catalog, config.global_.stores, errors)
    _check_store_files(config, errors)
    _check_store_urls(config, errors)
    _check_written_paths(config, errors)
    _check_trusted_proxies(config, errors)
    check_ineffective(config, warnings)
    check_decision_order(config, warnings)
    return errors, warnings


def _check_store_urls(config: RouterConfig, errors: list[str]) -> None:
    """Every store's ``url`` as redis-py reads it: without this a bad one passed validation and ``serve`` died
    opening the store."""
    stores = config.global_.stores
    found = [(f"global.stores.{f.name}.url", getattr(stores, f.name).url) for f in msgspec.structs.fields(stores)]
    found.append(("global.router.auth.store.url", config.global_.router.auth.store.url))
    for where, url in found:
        problem = store_url_problem(url)
        if problem:
            errors.append(f"{where}: invalid_value: {problem}")
    blocks = [(f"global.stores.{f.name}", getattr(stores, f.name)) for f in msgspec.structs.fields(stores)]
    for where, store in [*blocks, ("global.router.auth.store", config.global_.router.auth.store)]:
        # The password's source is read as a key's is: one source, a readable file, a value a URL can carry.
        source = KeySource(api_key_env=store.password_env, api_key_file=store.password_file)
        errors += key_source_problems(source, where, "password")


def store_url_problem(url: str) -> str | None:
    """Why redis-py cannot open ``url``, or None: redis://, rediss:// (a host) or unix:// (a socket's path)."""
    if url == DEFAULT_REDIS_URL:
        return None             # every store's default, which parses: redis-py is not loaded for it
    from redis.connection import parse_url as parse_redis_url

    try:
        parts = urlsplit(url)
        parse_redis_url(url)    # the scheme, the port, the values of the query's known arguments
    except ValueError as exc:
        return f"{url!r} is not a Redis URL: {exc}"
    if parts.scheme == "unix":
        return None if parts.path else f"{url!r} names no socket path (expected unix:///path/to/redis.sock)"
    if not parts.hostname or any(c.isspace() for c in url) or not _HOST.fullmatch(parts.hostname):
        return f"{url!r} names no host (expected redis[s]://host[:port][/db])"
    return None


def _check_trusted_proxies(config: RouterConfig, errors: list[str]) -> None:
    """Each of ``access_log.trusted_proxies`` is an address or a CIDR."""
    for i, cidr in enumerate(config.global_.router.access_log.trusted_proxies):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errors.append(f"global.router.access_log.trusted_proxies[{i}]: invalid_value: {cidr!r} is no address "
                          "or CIDR (10.0.0.0/8, 2001:db8::/32)")


def _check_written_paths(config: RouterConfig, errors: list[str]) -> None:
    """The files the router writes from its start must be writable there: the access log (appended to, its
    directory as it is) and an event stream's journal directory (created with its parents)."""
    log = config.global_.router.access_log
    if log.enabled and log.path:
        problem = unwritable(log.path, create_parents=False)
        if problem:
            errors.append(f"global.router.access_log.path: file_unwritable: {log.path}: {problem}")
    stream = config.global_.stores.event_stream
    if stream.backend != "none" and stream.path:
        problem = unwritable(stream.path, create_parents=True)
        if problem:
            errors.append(f"global.stores.event_stream.path: file_unwritable: {stream.path}: {problem}")


def unwritable(path: str, *, create_parents: bool) -> str | None:
    """Why the router could not write ``path`` (a file appended to, or a directory made with its parents when
    ``create_parents``), or None."""
    target = os.path.abspath(path)
    if os.path.exists(target):
        if os.path.isdir(target) != create_parents:
            return "is a directory" if not create_parents else "is not a directory"
        return None if os.access(target, os.W_OK) else "not writable"
    parent = os.path.dirname(target)
    while create_parents and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"directory {parent} does not exist" if not os.path.exists(parent) else f"{parent} is not a directory"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"directory {parent} is not writable"


def _check_store_files(config: RouterConfig, errors: list[str]) -> None:
    """The vector store's files are ingested at start: each must be readable UTF-8 text where the router runs."""
    for i, path in enumerate(config.global_.stores.vector_store.files):
        try:
            with open(path, encoding="utf-8") as f:
                f.read()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            errors.append(f"global.stores.vector_store.files[{i}]: file_unreadable: {path}: {why}")


def _check_deployments(config: RouterConfig, errors: list[str]) -> None:
    """A deployment's endpoint must be a URL, and its CA file and key file readable where the router starts:
    without this a missing CA file was a traceback at start, and an unreadable key file sent every call
    without a key."""
    for name, dep in config.global_.model_catalog.deployments.items():
        base = f"global.model_catalog.deployments.{name}"
        problem = endpoint_problem(dep.endpoint) if dep.endpoint is not None else None
        if problem:
            errors.append(f"{base}.endpoint: invalid_value: {problem}")
        if dep.tls.ca_file:
            try:
                ssl.create_default_context(cafile=dep.tls.ca_file)
            except OSError as exc:      # ssl.SSLError included: a file that holds no certificate
                why = f"holds no CA certificate ({exc.reason})" if isinstance(exc, ssl.SSLError) else exc.strerror
                errors.append(f"{base}.tls.ca_file: file_unreadable: {dep.tls.ca_file}: {why}")
        if dep.auth is not None:
            errors += key_source_problems(dep.auth, f"{base}.auth")
            errors += placement_problems(dep.auth.header, dep.auth.prefix, f"{base}.auth")


def _check_outputs(config: RouterConfig, errors: list[str]) -> None:
    """Every decision's output contract against what its models declare (spec 5.8)."""
    facts = {m.name: ModelFacts.of(m.name, m.api_format, m.capabilities, m.modalities) for m in config.providers.models}
    for recipe in config.recipes:
        for i, d in enumerate(recipe.decisions):
            path = f"recipes[{recipe.name}].decisions[{i}]"
            refs = [r.model for r in d.modelRefs if r.model in facts]
            errors += output_capability_missing(path, d.output, refs, facts)
            errors += output_not_executable(path, d.output, d.algorithm.type, refs, facts)


def _check_algorithms(config: RouterConfig, errors: list[str], warnings: list[str]) -> None:
    """Every decision's algorithm: its type (removed and renamed ones named), its settings' block, its budget."""
    priced = {m.name for m in config.providers.models if m.pricing is not None}
    for recipe in config.recipes:
        for i, d in enumerate(recipe.decisions):
            path = f"recipes[{recipe.name}].decisions[{i}].algorithm"
            refs = [r.model for r in d.modelRefs]
            errs, warns = algorithm_errors(path, d.algorithm, refs)
            errors += errs
            warnings += warns
            currencies = {m.pricing.currency for m in config.providers.models if m.pricing and m.name in refs}
            if len(currencies) > 1:
                errors.append(f"recipes[{recipe.name}].decisions[{i}].modelRefs: invalid_value: a decision's priced "
                              f"models share one currency (found {', '.join(sorted(currencies))})")
            esc = d.algorithm.escalate
            formats = {m.name: m.api_format for m in config.providers.models}
            conf = esc.accept.confidence if esc is not None and esc.accept is not None else None
            if d.algorithm.type == "escalate" and conf is not None and conf.method != "self_verify":
                other = sorted({r for r in refs if formats.get(r, "openai") != "openai"})
                if other:
                    errors.append(f"{path}.escalate.accept.confidence: invalid_value: logprobs come from Chat "
                                  f"(api_format: openai) models only, not {', '.join(other)}")
            cost_order = d.algorithm.type == "escalate" and esc is not None and esc.order == "cost"
            mf = d.algorithm.multi_factor
            cost_weighed = d.algorithm.type == "multi_factor" and (mf is None or mf.weights.cost > 0)
            if (cost_order or cost_weighed) and not set(refs) <= priced:
                missing = ", ".join(sorted(set(refs) - priced))
                errors.append(f"{path}: missing_field: ordering by cost needs providers.models[].pricing of "
                              f"every candidate (missing: {missing})")


def _check_native_routes(config: RouterConfig, errors: list[str]) -> None:
    """A System One entrypoint's recipe routes only to native aliases; a chat recipe never does."""
    formats = {m.name: m.api_format for m in config.providers.models}
    systemone_recipes = {ep.recipe for ep in config.entrypoints if ep.api == "systemone"}
    for recipe in config.recipes:
        native = recipe.name in systemone_recipes
        refs = [(f"recipes[{recipe.name}].decisions[{i}]", d.modelRefs) for i, d in enumerate(recipe.decisions)]
        if recipe.fallback:
            refs.append((f"recipes[{recipe.name}].fallback", recipe.fallback.modelRefs))
        judges = [_stage_routes(f"recipes[{recipe.name}].decisions[{i}].algorithm.escalate", d, native, formats,
                                errors) for i, d in enumerate(recipe.decisions)]
        for k, (base, model_refs) in enumerate(refs):
            for j, ref in enumerate(model_refs):
                fmt = formats.get(ref.model)
                if fmt is None:
                    continue
                if native and fmt != "systemone" and (k >= len(judges) or ref.model not in judges[k]):
                    errors.append(f"{base}.modelRefs[{j}].model: invalid_value: a System One entrypoint's decisions "
                                  f"route to native aliases (api_format: systemone); {ref.model!r} is {fmt}")
                elif not native and fmt == "systemone":
                    errors.append(f"{base}.modelRefs[{j}].model: invalid_value: {ref.model!r} is a native alias; "
                                  "only a System One entrypoint routes to it")


def _stage_routes(path: str, d, native: bool, formats: dict[str, str], errors: list[str]) -> set[str]:
    """escalate.stages run on System One entrypoints only: native stages ask native aliases, a judge stage a Chat
    model (the one Chat model such a decision may name). Returns the decision's judge models."""
    esc = d.algorithm.escalate if d.algorithm.type == "escalate" else None
    if esc is None or not esc.stages:
        if native and esc is not None:
            errors.append(f"{path}.stages: missing_field: on a System One entrypoint escalate runs stages "
                          "(escalate.accept is Chat's)")
        return set()
    if not native:
        errors.append(f"{path}.stages: invalid_value: stages run on a System One entrypoint's recipe; on Chat "
                      "write escalate.accept")
        return set()
    judges = set()
    for i, stage in enumerate(esc.stages):
        fmt = formats.get(stage.model)
        if fmt is None:
            continue
        if stage.type == "native" and fmt != "systemone":
            errors.append(f"{path}.stages[{i}].model: invalid_value: a native stage asks a native alias "
                          f"(api_format: systemone); {stage.model!r} is {fmt}")
        elif stage.type == "judge" and fmt == "systemone":
            errors.append(f"{path}.stages[{i}].model: invalid_value: a judge stage asks a Chat model; "
                          f"{stage.model!r} is a native alias")
        elif stage.type == "judge":
            judges.add(stage.model)
    return judges


def _dupes(names: list[str]) -> list[str]:
    return [n for n, c in Counter(names).items() if c > 1]


def _positions(names: list[str], list_path: str) -> dict[str, str]:
    """Each name declared more than once, with where: ``list_path[0], list_path[3]``: a list addressed by
    name elsewhere cannot tell its items apart by it, so its error points at each by index."""
    at: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        at.setdefault(name, []).append(i)
    return {name: " and ".join(f"{list_path}[{i}]" for i in where) for name, where in at.items() if len(where) > 1}


def _check_providers(config: RouterConfig, errors: list[str], warnings: list[str]) -> set[str]:
    names = [m.name for m in config.providers.models]
    for name, where in _positions(names, "providers.models").items():
        errors.append(f"providers.models[{name}].name: duplicate_name: model {name!r} is declared more than once, "
                      f"at {where}; give each model its own name")
    for model in config.providers.models:
        base = f"providers.models[{model.name}]"
        if model.api_format not in SERVED_API_FORMATS:
            errors.append(
                f"{base}.api_format: invalid_value: {model.api_format!r} is not served yet "
                f"(served: {', '.join(sorted(SERVED_API_FORMATS))})"
            )
        if model.api_format == "systemone":
            if (model.deployment is None) == (not model.backend_refs):
                errors.append(f"{base}: invalid_value: a native alias (api_format: systemone) names exactly one of "
                              "deployment or backend_refs")
        elif model.deployment is not None:
            errors.append(f"{base}.deployment: invalid_value: only a native alias (api_format: systemone) names a deployment")
        elif not model.backend_refs:
            errors.append(f"{base}.backend_refs: missing_field: a provider model needs at least one backend_ref")
        labels: dict[str, int] = {}
        for i, ref in enumerate(model.backend_refs):
            where = f"{base}.backend_refs[{i}]"
            label = ref.name or f"{model.name}[{i}]"     # how metrics, health checks and logs name it
            if label in labels:
                errors.append(f"{where}.name: duplicate_name: backend {label!r} is already backend_refs"
                              f"[{labels[label]}]'s name; its metrics, health state and log lines would read "
                              "as one backend's: name each backend of a model once")
            labels.setdefault(label, i)
            problem = endpoint_problem(ref.endpoint) or pasted_route(ref.endpoint)
            if problem:
                errors.append(f"{where}.endpoint: invalid_value: {problem}")
            auth = ref.auth
            if auth:
                errors += key_source_problems(auth, f"{where}.auth")
                errors += placement_problems(auth.header, auth.prefix, f"{where}.auth")
            if auth and auth.api_key_env and auth.api_key_env not in os.environ:
                warnings.append(
                    f"{where}.auth.api_key_env: missing_credential: ${auth.api_key_env} is not set; "
                    "calls to this backend carry no key"
                )
    return set(names)


def endpoint_problem(endpoint: str) -> str | None:
    """Why an endpoint cannot be called, or None. Bare ``host:port`` means plain http."""
    if placeholder_problem(endpoint):
        return (f"{endpoint!r} holds an environment placeholder, which is not expanded: the configuration reads no "
                "environment variables in URLs; write the URL itself (render the file with envsubst, Helm or "
                "Kustomize before start)")
    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return f"{endpoint!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return f"{endpoint!r}: scheme must be http or https"
    if not parts.hostname:
        return f"{endpoint!r} names no host"
    if not _HOST.fullmatch(parts.hostname) or any(c.isspace() for c in endpoint):
        return f"{endpoint!r} is not a URL (expected http[s]://host[:port][/path] or host:port)"
    if "#" in endpoint:
        return (f"{endpoint!r} has a fragment ({parts.fragment!r}), which no HTTP request carries: it would be "
                "dropped; remove it (a query, such as Azure's ?api-version=, is kept)")
    return None


# The routes the router appends to a backend's base. A base ending in one (a pasted full URL) is refused, not
# warned about: every call would go to .../chat/completions/chat/completions, a 404 that moves each request to
# the next candidate without counting against the backend's health, so the backend would be skipped silently.
_API_ROUTES = ("/chat/completions", "/completions", "/messages", "/responses", "/images/generations",
               "/embeddings")


def pasted_route(endpoint: str) -> str | None:
    """Why a backend endpoint that already ends in an API route cannot be called, or None."""
    path = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}").path.rstrip("/")
    route = next((r for r in _API_ROUTES if path.endswith(r)), None)
    if route is None:
        return None
    return (f"{endpoint!r} already ends in the API route {route!r}, which the router appends itself: name the "
            f"base ({path[:-len(route)] or '/v1'!r} here) and keep any query")


# A DNS name, an IPv4 address or a bracketed IPv6 address (urlsplit strips the brackets).
_HOST = re.compile(r"[A-Za-z0-9_.\-]+|[0-9A-Fa-f:.]+(%[\w.\-]+)?")


def _check_recipe(recipe: Recipe, models: set[str], errors: list[str]) -> None:
    base = f"recipes[{recipe.name}]"
    weighs = any(d.algorithm.type == "multi_factor" for d in recipe.decisions)
    for rule in recipe.signals.domains:
        if rule.model_scores is None:
            continue
        where = f"{base}.signals.domains[{rule.name}].model_scores"
        if not weighs:
            errors.append(f"{where}: unsupported_field: read only by a multi_factor decision (its domain factor), "
                          "and this recipe has none; order the modelRefs of a static decision and remove it")
        for name in rule.model_scores:
            if name not in models:
                errors.append(f"{where}.{name}: unknown_model: {name!r} is not in providers.models")
    for name, where in _positions([d.name for d in recipe.decisions], f"{base}.decisions").items():
        errors.append(f"{base}.decisions: duplicate_name: decision {name!r} is declared more than once, at {where}")
    for i, decision in enumerate(recipe.decisions):
        _check_decision(decision, f"{base}.decisions[{i}]", models, errors)
    if recipe.fallback:
        _check_refs(recipe.fallback.modelRefs, f"{base}.fallback", models, errors)


def _check_decision(decision: Decision, base: str, models: set[str], errors: list[str]) -> None:
    if not decision.modelRefs and not any(p.type == "fast_response" for p in decision.plugins):
        errors.append(f"{base}.modelRefs: missing_field: a decision names modelRefs or answers with a "
                      "fast_response plugin")
    _check_refs(decision.modelRefs, base, models, errors)
    _check_rule(decision.rules, f"{base}.rules", errors)


def _check_refs(refs: list[ModelRef], base: str, models: set[str], errors: list[str]) -> None:
    for j, ref in enumerate(refs):
        if ref.model not in models:
            errors.append(
                f"{base}.modelRefs[{j}].model: unknown_model: {ref.model!r} is not declared in providers.models"
            )


def _check_rule(node: RuleNode, path: str, errors: list[str]) -> None:
    is_leaf = node.type is not None or node.name is not None
    if node.operator and is_leaf:
        errors.append(f"{path}: invalid_value: a node is either an operator over conditions or a leaf, not both")
        return
    if not node.operator:
        if not (node.type and node.name):
            errors.append(f"{path}: invalid_value: a leaf condition needs both type and name")
        elif node.conditions:
            errors.append(f"{path}.conditions: invalid_value: a leaf condition has no conditions")
        return
    if node.operator == "NOT" and len(node.conditions) != 1:
        errors.append(f"{path}.conditions: invalid_value: NOT takes exactly one condition")
    for i, child in enumerate(node.conditions):
        if child.on_unknown is not None:
            errors.append(f"{path}.conditions[{i}].on_unknown: invalid_value: on_unknown belongs to the rules root")
        _check_rule(child, f"{path}.conditions[{i}]", errors)


def _check_entrypoints(config: RouterConfig, models: set[str], errors: list[str]) -> None:
    recipes = {r.name for r in config.recipes}
    if not recipes and not models:
        # What a truncated or half-saved file looks like: loaded, it would answer every request 404.
        errors.append("recipes: missing_field: the configuration routes nothing: it declares no recipe (or "
                      "top-level decisions) and no providers.models")
    for name, where in _positions([r.name for r in config.recipes], "recipes").items():
        errors.append(f"recipes[{name}].name: duplicate_name: recipe {name!r} is declared more than once, at {where}")
    claimed: list[str] = []
    for i, ep in enumerate(config.entrypoints):
        base = f"entrypoints[{i}]"
        if ep.recipe is None:
            errors.append(f"{base}.recipe: missing_field: an entrypoint names the recipe it serves")
        elif ep.recipe not in recipes:
            errors.append(f"{base}.recipe: unknown_recipe: {ep.recipe!r} is not declared in recipes")
        for name in ep.model_names:
            if name in models:
                errors.append(
                    f"{base}.model_names: invalid_value: {name!r} is a provider model; "
                    "a request naming it goes to that model directly"
                )
        claimed.extend(ep.model_names)
        if ep.api == "systemone" and ep.default:
            errors.append(f"{base}.default: invalid_value: only a chat entrypoint can be the default")
    for name in _dupes(claimed):
        errors.append(f"entrypoints: duplicate_name: model name {name!r} is claimed by more than one entrypoint")
    defaults = [ep for ep in config.entrypoints if ep.default and ep.api == "chat"]
    native = {ep.recipe for ep in config.entrypoints if ep.api == "systemone"}
    chat_recipes = [r for r in config.recipes if r.name not in native]
    if len(chat_recipes) > 1 and len(defaults) != 1:
        errors.append(
            f"entrypoints: invalid_value: {len(chat_recipes)} recipes need exactly one chat entrypoint "
            f"with default: true (found {len(defaults)})"
        )
    elif len(defaults) > 1:
        errors.append(f"entrypoints: invalid_value: {len(defaults)} chat entrypoints say default: true; one may")
