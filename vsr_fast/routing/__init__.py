"""The routing table: entrypoints to recipes, recipes to decisions and models."""
from .plan import Route as Route
from .plan import RoutingTable as RoutingTable

__all__ = ["Route", "RoutingTable"]
