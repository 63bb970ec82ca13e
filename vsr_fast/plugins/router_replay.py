"""``router_replay``: record the route; ``shadow`` sends a sampled copy to a candidate model (spec 5.7).

Two things live here: the plugin's configuration block, as written at each
layer, and the policy a request runs under once the layers are merged. The
Router Replay record, folded from a request's events, is
``vsr_fast.events.replay_record``; where records are kept is
``vsr_fast.events.records``; who writes them is the replay recorder
(``vsr_fast.events.recorder``).

Layers override field by field (spec 6.5): ``global.plugins``, then the
recipe's, then the decision's. A field a layer leaves out is ``UNSET`` and
keeps the value below it; ``shadow: null`` turns an inherited shadow off.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..config.schema_base import Block

TYPE = "router_replay"


class ShadowConfig(Block):
    """``router_replay.shadow``: where sampled copies go.

    Chat Completions, Messages and Responses requests are sampled. A copy is made only where one provider
    answered through single-model dispatch (spec 5.7): never for a cache hit, a fast_response or a Looper
    executor that asks several models (fusion, ratings...). The copy is the request that provider was sent,
    every request plugin applied (the tools policy, context, system_prompt, request_params, prompt_cache, and
    masking last: placeholders, never the values, whatever ``capture_personal_data`` says), written in the
    shadow model's format and name with header_mutation's headers; its answer joins the record's ``shadow``.
    A copy travels to its dispatcher in the event stream, whatever ``capture_request_body`` says (the record
    never keeps it); a request under ``capture_personal_data: false`` is never copied. A sampled copy not made
    (``capture_personal_data: false``, or a model the caller's key may not reach) is listed in the record's
    ``shadow`` as ``{model, skipped: personal_data | not_allowed}``, so it differs from one not sampled (``[]``).
    """

    model: Annotated[str, Meta(min_length=1)] | UnsetType = UNSET
    sample_rate: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    # Copies in flight to the shadow model at once. A copy that finds them all busy waits for one: the
    # dispatcher is off the request path and the event stream holds the backlog, so no sampled copy is skipped
    # for being busy (a copy the stream trimmed before it was read is gone with its entry).
    max_concurrency: Annotated[int, Meta(ge=1, le=64)] | UnsetType = UNSET
    timeout_seconds: Annotated[float, Meta(gt=0, le=600)] | UnsetType = UNSET


class RouterReplayConfig(Block):
    """``{type: router_replay, configuration: ...}`` at one layer."""

    enabled: bool | UnsetType = UNSET
    capture_request_body: bool | UnsetType = UNSET
    capture_response_body: bool | UnsetType = UNSET
    # false keeps no body and no identity, whatever the capture_* fields say, and makes no shadow copy (migrated
    # data_policy). A masking decision's request as received (the client's personal data) is kept only where a
    # layer says true explicitly: left unset, its record has no request copy (request_body: null), and
    # vsr-replay counts it as withheld, not replayable; its answer as the model wrote it (placeholders, never the
    # values: the model read the masked request) is kept as capture_response_body says. A shadow copy is masked
    # either way. On both routes no event carries the request's text (nor, under false, its answer): a
    # response_cache on the request stores the answer under its hashed key by the router's own task, never
    # through the stream, and keeps no semantic entry (the request's text): the decision's cache answers only the
    # same request (exact).
    capture_personal_data: bool | UnsetType = UNSET
    # How much of the request (and of the answer, and of a shadow's answer) the record keeps. A request past it
    # is kept cut (a Chat request as its canonical form, the current user turn last), and vsr-replay re-routes
    # that copy: its context signals read the token count the live route recorded, its other signals the cut
    # text, so its route is counted approximate, a move among those never as a change.
    max_body_bytes: Annotated[int, Meta(ge=0, le=1 << 20)] | UnsetType = UNSET
    # The record store's bounds, read from global.plugins only (one store serves every recipe): the oldest
    # records go past max_records, every record after ttl_seconds. A reload applies them at once.
    max_records: Annotated[int, Meta(ge=1, le=100_000_000)] | UnsetType = UNSET
    # A reload that lowers it leaves no older record readable (GET /api/v1/replay/{id}, the listing).
    ttl_seconds: Annotated[int, Meta(ge=1, le=366 * 86_400)] | UnsetType = UNSET
    shadow: ShadowConfig | None | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class ShadowPolicy:
    model: str
    sample_rate: float = 0.05
    max_concurrency: int = 2
    timeout_seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """What router_replay does for one request, the layers merged."""

    enabled: bool = True
    capture_request_body: bool = False
    capture_response_body: bool = False
    capture_personal_data: bool = True
    max_body_bytes: int = 4096
    max_records: int = 10_000
    ttl_seconds: int = 86_400
    shadow: ShadowPolicy | None = None

    @property
    def request_bytes(self) -> int:
        """How much of the request the record may keep (0: nothing, not even the identity)."""
        allowed = self.enabled and self.capture_request_body and self.capture_personal_data
        return self.max_body_bytes if allowed else 0

    @property
    def response_bytes(self) -> int:
        allowed = self.enabled and self.capture_response_body and self.capture_personal_data
        return self.max_body_bytes if allowed else 0


DISABLED = ReplayPolicy(enabled=False)


def resolve(*layers: RouterReplayConfig | None) -> ReplayPolicy:
    """The policy of a request: ``layers`` lowest first (global, recipe, decision); None skips a layer.

    No layer at all means no ``router_replay`` entry: nothing is recorded. A
    layer that exists turns recording on unless it says ``enabled: false``.
    """
    present = [layer for layer in layers if layer is not None]
    if not present:
        return DISABLED
    values: dict[str, object] = {}
    shadow: dict[str, object] | None = None
    for layer in present:
        for f in msgspec.structs.fields(RouterReplayConfig):
            value = getattr(layer, f.name)
            if value is UNSET:
                continue
            if f.name != "shadow":
                values[f.name] = value
            elif value is None:
                shadow = None
            else:
                shadow = dict(shadow or {})
                shadow.update({k.name: getattr(value, k.name) for k in msgspec.structs.fields(ShadowConfig)
                               if getattr(value, k.name) is not UNSET})
    if shadow is not None and "model" in shadow:
        values["shadow"] = ShadowPolicy(**shadow)  # type: ignore[arg-type]
    return ReplayPolicy(**values)  # type: ignore[arg-type]


def check(layers: Iterable[tuple[str, RouterReplayConfig | None]], models: Iterable[str]) -> list[str]:
    """Load errors of the merged layers: ``layers`` are ``(path, config)`` lowest first.

    A shadow must name a provider model. A shadow model with a delegated
    backend must be refused too (spec 6.7); the schema has no delegated
    credential yet, so that check joins when it does.
    """
    known = set(models)
    errors: list[str] = []
    shadow_model: str | UnsetType = UNSET
    where = ""
    for path, layer in layers:
        if layer is None or layer.shadow is UNSET:
            continue
        if layer.shadow is None:
            shadow_model, where = UNSET, ""
        elif layer.shadow.model is not UNSET:
            shadow_model, where = layer.shadow.model, f"{path}.shadow.model"
        elif shadow_model is UNSET:
            errors.append(f"{path}.shadow.model: missing_field: a shadow names the model its copies go to")
    if shadow_model is not UNSET and shadow_model not in known:
        errors.append(f"{where}: unknown_model: shadow model {shadow_model!r} is not in providers.models")
    return errors


__all__ = ["DISABLED", "ReplayPolicy", "RouterReplayConfig", "ShadowConfig", "ShadowPolicy", "TYPE", "check", "resolve"]
