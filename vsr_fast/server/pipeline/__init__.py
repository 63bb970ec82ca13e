"""The request pipeline: one lifecycle per inference request, stage by stage (``run.py`` lists them)."""
from .run import handle_api as handle_api, refused as refused

__all__ = ["handle_api", "refused"]
