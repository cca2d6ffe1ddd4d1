"""``WorkloadSuite``: a list of cases of one operation scored together.

Mirrors ``kernelindex-schemas/workload-suite.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from msgspec import Meta

from domain.manifests.models.common import (
    UNSET,
    AxisValues,
    Identifier,
    Manifest,
    Sha256Digest,
    StrictModel,
    Text200,
    Text500,
    UnsetType,
)


class SuiteCase(StrictModel, kw_only=True, frozen=True):
    external_id: Text200
    axes: AxisValues


class SuiteCorrectness(StrictModel, kw_only=True, frozen=True):
    comparator: Identifier
    description: Text500 | UnsetType = UNSET


class Aggregation(StrictModel, kw_only=True, frozen=True):
    metric: Identifier
    statistic: Identifier


class WorkloadSuiteSpec(StrictModel, kw_only=True, frozen=True):
    operation_spec_digest: Sha256Digest
    cases: Annotated[list[SuiteCase], Meta(min_length=1)]
    correctness: SuiteCorrectness
    aggregation: Aggregation


class WorkloadSuite(Manifest, kw_only=True, frozen=True):
    kind: Literal["WorkloadSuite"]
    spec: WorkloadSuiteSpec
