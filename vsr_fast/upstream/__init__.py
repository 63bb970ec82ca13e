"""Upstream: connection pools, dispatch with fallback, and streaming."""
from .dispatch import Attempt as Attempt
from .dispatch import Dispatcher as Dispatcher
from .dispatch import Stream as Stream
from .dispatch import Whole as Whole
from .dispatch import failure_cause as failure_cause
from .pool import Upstreams as Upstreams
from .pool import open_upstreams as open_upstreams

__all__ = ["Attempt", "Dispatcher", "Stream", "Upstreams", "Whole", "failure_cause", "open_upstreams"]
