"""The v0.5 configuration: schema, loading, load checks."""
from .load import Loaded as Loaded
from .load import load_bytes as load_bytes
from .load import load_file as load_file
from .load import load_raw as load_raw
from .schema import RouterConfig as RouterConfig

__all__ = ["Loaded", "RouterConfig", "load_bytes", "load_file", "load_raw"]
