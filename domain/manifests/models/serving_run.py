"""``ServingRun``: one measured result of a model served by a configured stack.

Mirrors ``kernelindex-schemas/serving-run.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from msgspec import Meta

from domain.manifests.models.common import (
    UNSET,
    Identifier,
    Manifest,
    Measurement,
    NumberOrText500,
    PositiveInteger,
    Sha256Digest,
    Slug,
    StrictModel,
    Text100,
    Text200,
    Text500,
    Timestamp,
    UnsetType,
)


class Topology(StrictModel, kw_only=True, frozen=True):
    accelerator_vendor: Identifier | UnsetType = UNSET
    accelerator_model: Text200
    accelerators_per_node: PositiveInteger
    node_count: PositiveInteger
    interconnect: Text200 | UnsetType = UNSET


class ServingHarness(StrictModel, kw_only=True, frozen=True):
    name: Identifier
    version: Text100


class ServingSourceNative(StrictModel, kw_only=True, frozen=True):
    """The result as the source (e.g. MLPerf Inference) published it."""

    source: Slug
    benchmark: Text200
    scenario: Identifier
    division: Identifier
    category: Identifier
    external_id: Text500
    metrics: dict[Identifier, NumberOrText500] | UnsetType = UNSET


class ServingRunSpec(StrictModel, kw_only=True, frozen=True):
    model_digest: Sha256Digest
    configuration_digest: Sha256Digest
    workload_digest: Sha256Digest
    topology: Topology
    harness: ServingHarness
    placement: Identifier | UnsetType = UNSET
    quality_policy: Identifier
    status: Literal["valid", "invalid", "incomplete_evidence"]
    measurements: Annotated[list[Measurement], Meta(min_length=1, max_length=64)]
    source_native: ServingSourceNative | UnsetType = UNSET
    caveats: Annotated[list[Text500], Meta(max_length=16)] | UnsetType = UNSET
    observed_at: Timestamp


class ServingRun(Manifest, kw_only=True, frozen=True):
    kind: Literal["ServingRun"]
    spec: ServingRunSpec
