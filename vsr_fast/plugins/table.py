"""Plugin type -> its module's configuration block and load check, for the types this router serves (spec 5.7).

A new plugin type is one module in this package plus one line here. The
request stage runs the shaping plugins in the spec's order (``SHAPING``),
after route selection, on each candidate's provider-bound request.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from . import context, fast_response, header_mutation, prompt_cache, request_params, response_cache, router_replay
from . import masking, response_guard, system_prompt, tools


class PluginType(NamedTuple):
    configuration: type
    check: Callable[[dict, str], list[str]] | None = None   # what the block's types cannot say
    resolve: Callable | None = None                         # layers -> the request's policy (shaping plugins)


PLUGINS: dict[str, PluginType] = {
    "router_replay": PluginType(router_replay.RouterReplayConfig),
    "response_cache": PluginType(response_cache.ResponseCacheConfig, response_cache.check),
    "fast_response": PluginType(fast_response.FastResponseConfig),
    "context": PluginType(context.ContextConfig, context.check),
    "system_prompt": PluginType(system_prompt.SystemPromptConfig, system_prompt.check, system_prompt.resolve),
    "header_mutation": PluginType(header_mutation.HeaderMutationConfig, header_mutation.check,
                                  header_mutation.resolve),
    "request_params": PluginType(request_params.RequestParamsConfig, request_params.check, request_params.resolve),
    "prompt_cache": PluginType(prompt_cache.PromptCacheConfig, resolve=prompt_cache.resolve),
    "masking": PluginType(masking.MaskingConfig, masking.check, masking.resolve),
    "tools": PluginType(tools.ToolsConfig, tools.check, tools.resolve),
    "response_guard": PluginType(response_guard.ResponseGuardConfig, response_guard.check, response_guard.resolve),
}
CONFIGURATIONS = {name: t.configuration for name, t in PLUGINS.items()}

# The request plugins that rewrite the provider-bound request, in the spec's order; masking, the last
# rewrite, follows them on what they wrote (it asks System One, so dispatch runs it: pipeline/masking.py).
SHAPING = ("system_prompt", "header_mutation", "request_params", "prompt_cache")

# Plugin types of earlier schemas and what replaces each (spec 5.7, 8: "Removed plugins").
REMOVED_PLUGIN_TYPES = {
    "semantic-cache": "response_cache (mode: semantic or exact_then_semantic)",
    "semantic_cache": "response_cache (mode: semantic or exact_then_semantic)",
    "response-cache": "response_cache",
    "tool_selection": "tools with select",
    "rag": "context with a rag source",
    "memory": "context with a memory source",
    "context_compression": "context with compress",
    "response_jailbreak": "response_guard with a stage: response jailbreak rule",
    "hallucination": "response_guard with a hallucination rule",
    "jailbreak": "a jailbreak signal rule in the decision's rules (plugins run no classifier)",
    "pii": "a pii signal rule in the decision's rules, and masking to redact",
    "shadow_dispatch": "router_replay with shadow",
    "image_gen": "nothing: declare the decision's output and route to an api_format: images model",
}
