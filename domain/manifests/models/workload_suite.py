"""``WorkloadSuite``: a list of cases of one operation scored together.

Mirrors ``kernelindex-schemas/workload-suite.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from annotated_types import MinLen

from domain.manifests.models.common import (
    AxisValues,
    Identifier,
    Manifest,
    Sha256Digest,
    StrictModel,
    Text200,
    Text500,
)


class SuiteCase(StrictModel):
    external_id: Text200
    axes: AxisValues


class SuiteCorrectness(StrictModel):
    comparator: Identifier
    description: Text500 | None = None


class Aggregation(StrictModel):
    metric: Identifier
    statistic: Identifier


class WorkloadSuiteSpec(StrictModel):
    operation_spec_digest: Sha256Digest
    cases: Annotated[list[SuiteCase], MinLen(1)]
    correctness: SuiteCorrectness
    aggregation: Aggregation


class WorkloadSuite(Manifest):
    kind: Literal["WorkloadSuite"]
    spec: WorkloadSuiteSpec
