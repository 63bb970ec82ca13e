"""The routing table: entrypoints to recipes, recipes to decisions and models; loading compiles it."""
from .loaded import Loaded as Loaded
from .loaded import load_bytes as load_bytes
from .loaded import load_file as load_file
from .loaded import load_raw as load_raw
from .plan import Route as Route
from .plan import RoutingTable as RoutingTable

__all__ = ["Loaded", "Route", "RoutingTable", "load_bytes", "load_file", "load_raw"]
