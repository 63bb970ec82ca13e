"""This router as ``config migrate`` fits its output to: the plugin types it serves, its built-in models and the
preset labels a rule may list. They live in layers above ``config``, so they are handed down from here."""
from __future__ import annotations

from ..config.migrate import Target
from ..plugins.table import CONFIGURATIONS
from ..systemone.capabilities import BUILTIN_ARTIFACTS
from ..systemone.presets import DOMAINS, PII_LABELS
from ..models.vsr_static._model import UNANSWERED


def router_target() -> Target:
    """The Target of this router."""
    return Target(plugins=dict(CONFIGURATIONS), artifacts=frozenset(BUILTIN_ARTIFACTS),
                  preset_labels={"pii": tuple(PII_LABELS), "domain": tuple(DOMAINS)},
                  unanswered=frozenset(UNANSWERED))
