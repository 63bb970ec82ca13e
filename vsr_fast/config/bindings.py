"""Type bindings (spec 6.5): ``global.model_catalog.bindings`` and ``recipes[].model_bindings`` name the deployment
that answers an application signal's rules, by condition type (a rule's own ``deployment`` wins, then the recipe's
binding, then the global one, then the decision model).

A key that is no application signal's condition type would load and never be read: a misspelt ``jailbrake`` or the
signals field ``domains`` (the condition type is ``domain``) is refused as an unknown field is, the closest key
suggested. ``systemone`` is refused with why: type bindings choose only application signals, and a ``systemone``
rule, selector, judge or check names its own deployment or asks the decision model.
"""
from __future__ import annotations

from .schema import RouterConfig
from .shape import did_you_mean

# Each application signal's condition type, and the ``signals`` field that declares its rules.
APPLICATION_TYPES = {"domain": "domains", "fact_check": "fact_check", "user_feedback": "user_feedbacks",
                     "jailbreak": "jailbreak", "safety": "safety", "pii": "pii", "hallucination": "hallucination",
                     "refusal": "refusal", "turn_relation": "turn_relation", "complexity": "complexity",
                     "modality": "modality"}


def check_bindings(config: RouterConfig, errors: list[str]) -> None:
    """Every binding's key an application signal's condition type."""
    maps = [("global.model_catalog.bindings", config.global_.model_catalog.bindings)]
    maps += [(f"recipes[{r.name}].model_bindings", r.model_bindings) for r in config.recipes]
    for path, bindings in maps:
        for key in bindings:
            if key in APPLICATION_TYPES:
                continue
            if key == "systemone":
                errors.append(f"{path}.{key}: unknown_field: type bindings choose only application signals; a "
                              "systemone rule, selector (algorithm.systemone), judge (match.judge) or check "
                              "(escalate.accept.systemone) names its own deployment, else asks the decision model "
                              "(global.model_catalog.system.decision_model)")
                continue
            errors.append(f"{path}.{key}: unknown_field: not an application signal's condition type "
                          f"({', '.join(APPLICATION_TYPES)}){did_you_mean(key, APPLICATION_TYPES)}")
