"""``global.model_catalog``: decision model and embedding deployments, bindings and signal budgets (spec 5.5, 5.9,
6.2, 6.5)."""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from .credentials import KeySource
from .schema_base import Block

TimeoutMs = Annotated[int, Meta(ge=1, le=60_000)]
QuestionTypeName = Literal["choice", "noul", "score", "set", "span"]
Medium = Literal["text", "image", "video", "audio"]


class DeploymentAuth(KeySource, kw_only=True):
    """A static key for a deployment, or the requesting user's delegated credential (spec 6.7); either goes
    under ``header`` and ``prefix``, ``Authorization: Bearer`` by default."""

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
    # openai_embeddings: the width of the vectors it answers with (required: the router never asks to find out).
    dimensions: Annotated[int, Meta(ge=1, le=65_536)] | None = None


class RoutingView(Block, kw_only=True):
    max_tokens: Annotated[int, Meta(ge=256, le=1_048_576)] | None = None
    head_share: Annotated[float, Meta(ge=0, le=1)] = 0.25


class ScanWindow(Block, kw_only=True):
    tokens: Annotated[int, Meta(ge=256, le=1_048_576)] | None = None
    overlap: Annotated[int, Meta(ge=0)] | None = None
    max_parallel: Annotated[int, Meta(ge=1, le=64)] = 4
    max_tokens: Annotated[int, Meta(ge=256, le=1_048_576)] | None = None
    reread_margin: Annotated[float, Meta(ge=0, le=20)] = 3.0


SYSTEMONE_MAX_RESPONSE_BYTES = 1 << 20


class Deployment(Block, kw_only=True):
    """A decision model: embedded (``model_runtime``), attached (with ``endpoint``) or remote (``systemone``);
    or an embedding model (spec 5.5): a built-in model's static embedding, or remote ``openai_embeddings``."""

    provider: Literal["model_runtime", "systemone", "openai_embeddings"] = "model_runtime"
    artifact: str | None = None           # model_runtime: a built-in model name or "module:factory"
    device: str = "cpu"
    endpoint: str | None = None           # attached runtime or remote API
    model: str | None = None              # remote API: the model name it serves
    auth: DeploymentAuth | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout_ms: TimeoutMs | None = None
    max_retries: Annotated[int, Meta(ge=0, le=5)] = 0
    # A remote or attached API's answer past this is invalid_response (too_large), read no further: 1 MiB holds
    # thousands of answers; a span answer over a long text may need more.
    max_response_bytes: Annotated[int, Meta(ge=1024, le=1 << 30)] = SYSTEMONE_MAX_RESPONSE_BYTES
    tls: Tls = Tls()
    capabilities: Capabilities | None = None
    routing_view: RoutingView = RoutingView()
    scan_window: ScanWindow = ScanWindow()


class DeploymentRef(Block, kw_only=True):
    deployment: Annotated[str, Meta(min_length=1)]


class System(Block, kw_only=True):
    decision_model: DeploymentRef = DeploymentRef(deployment="primary")


# The pre-declared embedding deployment (spec 5.5): the built-in decision model's static embedding.
VELA_EMBEDDING = "vela-embedding"
STATIC_DIMENSION = 256          # the width of every built-in vsr-static model's embedding


class Embeddings(Block, kw_only=True):
    """``global.model_catalog.embeddings``: the deployment recall embeds with when a store names none."""

    default: DeploymentRef = DeploymentRef(deployment=VELA_EMBEDDING)


class EmbeddingRef(Block, kw_only=True):
    """A store's ``embedding: {deployment, dimension}``: the model its index was built with, and its width."""

    deployment: Annotated[str, Meta(min_length=1)]
    dimension: Annotated[int, Meta(ge=1, le=65_536)]


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
    embeddings: Embeddings = Embeddings()


# The pre-declared deployments (spec 6.2): primary answers every question nothing else binds.
PRIMARY = "primary"
# The embedded model a model_runtime deployment without an artifact runs (vsr_fast.models.vsr_static.DEFAULT):
# -11 meets issue 11's goals held out, -5 misses two (bench/RESULTS.md).
DEFAULT_ARTIFACT = "vsr-static-11"
# What such a deployment ran before -11 became the default: records carry no artifact, only the configuration's
# version (its bytes), so a record made under a file without `artifact:` before then was routed by -5;
# replaying it as recorded needs `artifact: vsr-static-5` written (README, "The embedded decision model").
DEFAULT_ARTIFACT_BEFORE = "vsr-static-5"
BUILTIN_DEPLOYMENTS = {PRIMARY: Deployment(provider="model_runtime", artifact=DEFAULT_ARTIFACT)}
# The same static table as every vsr-static model: one loaded model serves both.
BUILTIN_EMBEDDINGS = {VELA_EMBEDDING: Deployment(provider="model_runtime", artifact=DEFAULT_ARTIFACT)}
STATIC_ARTIFACTS = ("vsr-static-1", "vsr-static-2", "vsr-static-3", "vsr-static-4", "vsr-static-5",
                    "vsr-static-6", "vsr-static-7", "vsr-static-8", "vsr-static-9", "vsr-static-10",
                    "vsr-static-11")


def embedding_deployments(catalog: ModelCatalog) -> dict[str, Deployment]:
    """The deployments that embed text: the pre-declared one, every ``openai_embeddings`` one and every
    built-in static model on the model runtime (its embedding table is an embedding model of its own)."""
    declared = {name: dep for name, dep in catalog.deployments.items()
                if dep.provider == "openai_embeddings"
                or dep.provider == "model_runtime" and not dep.endpoint and dep.artifact in STATIC_ARTIFACTS}
    return {**BUILTIN_EMBEDDINGS, **declared}


def dimension_of(dep: Deployment) -> int | None:
    """The width of the vectors a deployment answers with: declared for a remote one."""
    if dep.provider == "openai_embeddings":
        return dep.capabilities.dimensions if dep.capabilities else None
    return STATIC_DIMENSION
