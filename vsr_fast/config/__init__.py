"""The v0.5 configuration: schema, shape and load checks. Routing compiles what passes (``vsr_fast.routing``)."""
from .load import Checked as Checked
from .load import check_bytes as check_bytes
from .load import check_file as check_file
from .load import check_raw as check_raw
from .schema import RouterConfig as RouterConfig

__all__ = ["Checked", "RouterConfig", "check_bytes", "check_file", "check_raw"]
