"""``ServingRun``: one measured result of a model served by a configured stack.

Mirrors ``kernelindex-schemas/serving-run.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from annotated_types import Len, MaxLen

from domain.manifests.models.common import (
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
)


class Topology(StrictModel):
    accelerator_vendor: Identifier | None = None
    accelerator_model: Text200
    accelerators_per_node: PositiveInteger
    node_count: PositiveInteger
    interconnect: Text200 | None = None


class ServingHarness(StrictModel):
    name: Identifier
    version: Text100


class ServingSourceNative(StrictModel):
    """The result as the source (e.g. MLPerf Inference) published it."""

    source: Slug
    benchmark: Text200
    scenario: Identifier
    division: Identifier
    category: Identifier
    external_id: Text500
    metrics: dict[Identifier, NumberOrText500] | None = None


class ServingRunSpec(StrictModel):
    model_digest: Sha256Digest
    configuration_digest: Sha256Digest
    workload_digest: Sha256Digest
    topology: Topology
    harness: ServingHarness
    placement: Identifier | None = None
    quality_policy: Identifier
    status: Literal["valid", "invalid", "incomplete_evidence"]
    measurements: Annotated[list[Measurement], Len(1, 64)]
    source_native: ServingSourceNative | None = None
    caveats: Annotated[list[Text500], MaxLen(16)] | None = None
    observed_at: Timestamp


class ServingRun(Manifest):
    kind: Literal["ServingRun"]
    spec: ServingRunSpec
