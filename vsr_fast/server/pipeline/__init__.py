"""The request pipeline: one lifecycle per inference request, stage by stage (``run.py`` lists them)."""
from .run import accounted as accounted, handle_api as handle_api, refused as refused

__all__ = ["accounted", "handle_api", "refused"]
