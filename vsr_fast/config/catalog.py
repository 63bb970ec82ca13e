"""``global.model_catalog``: decision model deployments, bindings and signal budgets (spec 5.9, 6.2, 6.5)."""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from .schema_base import Block

TimeoutMs = Annotated[int, Meta(ge=1, le=60_000)]
QuestionTypeName = Literal["choice", "noul", "score", "set", "span"]
Medium = Literal["text", "image", "video", "audio"]


class DeploymentAuth(Block, kw_only=True):
    """A static key for a deployment, or the requesting user's delegated credential (spec 6.7); either goes
    under ``header`` and ``prefix``, ``Authorization: Bearer`` by default."""

    api_key_env: str | None = None
    api_key_file: str | None = None
    header: str = "Authorization"
    prefix: str = "Bearer"
    # "delegated": each call acts for the user whose request it serves, with the credential the authenticator
    # in front wrote (global.services.authz.delegated_credential); no key then, and no answer reused.
    credential: Literal["delegated"] | None = None


class Tls(Block, kw_only=True):
    verify: bool = True
    ca_file: str | None = None


class Capabilities(Block, kw_only=True):
    """What a remote System One API answers, when its model list does not say."""

    question_types: list[QuestionTypeName] = field(default_factory=lambda: ["choice", "noul", "score"])
    modalities: list[Medium] = field(default_factory=lambda: ["text"])
    presets: list[str] | None = None


class RoutingView(Block, kw_only=True):
    max_tokens: Annotated[int, Meta(ge=256, le=1_048_576)] | None = None
    head_share: Annotated[float, Meta(ge=0, le=1)] = 0.25


class ScanWindow(Block, kw_only=True):
    tokens: Annotated[int, Meta(ge=256, le=1_048_576)] | None = None
    overlap: Annotated[int, Meta(ge=0)] | None = None
    max_parallel: Annotated[int, Meta(ge=1, le=64)] = 4
    max_tokens: Annotated[int, Meta(ge=256, le=1_048_576)] | None = None
    reread_margin: Annotated[float, Meta(ge=0, le=20)] = 3.0


class Deployment(Block, kw_only=True):
    """A decision model: embedded (``model_runtime``), attached (with ``endpoint``) or remote (``systemone``)."""

    provider: Literal["model_runtime", "systemone"] = "model_runtime"
    artifact: str | None = None           # model_runtime: a built-in model name or "module:factory"
    device: str = "cpu"
    endpoint: str | None = None           # attached runtime or remote API
    model: str | None = None              # remote API: the model name it serves
    auth: DeploymentAuth | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout_ms: TimeoutMs | None = None
    max_retries: Annotated[int, Meta(ge=0, le=5)] = 0
    tls: Tls = Tls()
    capabilities: Capabilities | None = None
    routing_view: RoutingView = RoutingView()
    scan_window: ScanWindow = ScanWindow()


class DeploymentRef(Block, kw_only=True):
    deployment: Annotated[str, Meta(min_length=1)]


class System(Block, kw_only=True):
    decision_model: DeploymentRef = DeploymentRef(deployment="primary")


class OnSignalOverload(Block, kw_only=True):
    action: Literal["refuse", "retry"] = "refuse"
    wait_ms: Annotated[int, Meta(ge=0, le=60_000)] = 2000
    retry_after_seconds: Annotated[int, Meta(ge=0, le=60)] = 0


class ModelCatalog(Block, kw_only=True):
    deployments: dict[str, Deployment] = field(default_factory=dict)
    system: System = System()
    # Application signal condition type -> deployment name.
    bindings: dict[str, str] = field(default_factory=dict)
    # All of a request's signals; 0 derives it from the request's own deadline.
    signal_timeout_ms: Annotated[int, Meta(ge=0, le=600_000)] = 0
    on_signal_overload: OnSignalOverload = OnSignalOverload()


# The pre-declared deployments (spec 6.2): primary answers every question nothing else binds.
PRIMARY = "primary"
BUILTIN_DEPLOYMENTS = {PRIMARY: Deployment(provider="model_runtime", artifact="vsr-static-2")}
