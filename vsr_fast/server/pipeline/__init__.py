"""The request pipeline: one lifecycle per inference request, stage by stage (``run.py`` lists them)."""
from .run import (STARTED as STARTED, accounted as accounted, handle_api as handle_api, refused as refused,
                  refused_connection as refused_connection)

__all__ = ["STARTED", "accounted", "handle_api", "refused", "refused_connection"]
