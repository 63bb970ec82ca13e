"""Decisions: condition trees over signals, projections, and the recipe's strategy."""
from .engine import Chosen as Chosen
from .engine import choose as choose
from .engine import evaluate as evaluate

__all__ = ["Chosen", "choose", "evaluate"]
