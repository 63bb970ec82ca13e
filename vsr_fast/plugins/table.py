"""Plugin type -> the block its ``configuration`` holds, for the types this router serves (spec 5.7)."""
from .fast_response import FastResponseConfig
from .response_cache import ResponseCacheConfig
from .router_replay import RouterReplayConfig

CONFIGURATIONS = {
    "router_replay": RouterReplayConfig,
    "response_cache": ResponseCacheConfig,
    "fast_response": FastResponseConfig,
}
