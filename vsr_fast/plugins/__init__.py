"""Plugins: one module per plugin type (spec 5.7). Plugins act; they turn nothing on by themselves."""
from .fast_response import FastResponseConfig as FastResponseConfig
from .response_cache import CachePolicy as CachePolicy
from .response_cache import ResponseCacheConfig as ResponseCacheConfig
from .router_replay import ReplayPolicy as ReplayPolicy
from .router_replay import RouterReplayConfig as RouterReplayConfig
from .router_replay import ShadowConfig as ShadowConfig

from .table import CONFIGURATIONS as CONFIGURATIONS
from .table import PLUGINS as PLUGINS
from .table import SHAPING as SHAPING

__all__ = [
    "CONFIGURATIONS", "PLUGINS", "SHAPING", "CachePolicy", "FastResponseConfig", "ReplayPolicy", "ResponseCacheConfig",
    "RouterReplayConfig", "ShadowConfig",
]
