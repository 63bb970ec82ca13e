"""Plugins: one module per plugin type (spec 5.7). Plugins act; they turn nothing on by themselves."""
from .fast_response import FastResponseConfig as FastResponseConfig
from .response_cache import CachePolicy as CachePolicy
from .response_cache import ResponseCache as ResponseCache
from .response_cache import ResponseCacheConfig as ResponseCacheConfig
from .router_replay import ReplayPolicy as ReplayPolicy
from .router_replay import ReplayRecord as ReplayRecord
from .router_replay import RouterReplayConfig as RouterReplayConfig
from .router_replay import ShadowConfig as ShadowConfig

# ``type`` -> the block its ``configuration`` holds, for the types these modules serve.
CONFIGURATIONS = {
    "router_replay": RouterReplayConfig,
    "response_cache": ResponseCacheConfig,
    "fast_response": FastResponseConfig,
}

__all__ = [
    "CONFIGURATIONS", "CachePolicy", "FastResponseConfig", "ReplayPolicy", "ReplayRecord", "ResponseCache", "ResponseCacheConfig",
    "RouterReplayConfig", "ShadowConfig",
]
