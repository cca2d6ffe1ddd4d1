"""Strict pydantic models of the ``kernelindex.dev/v1alpha1`` manifest kinds.

One module per kind, each mirroring the KernelIndex JSON Schema of that kind
(``kernelindex-schemas/<kind>.v1alpha1.schema.json``, Apache-2.0, KernelIndex); the shared
pieces live in :mod:`domain.manifests.models.common`. The models are a validation gate only:
digests are computed from the input document, never from a model dump.
"""

from domain.manifests.models.benchmark_protocol import BenchmarkProtocol
from domain.manifests.models.benchmark_run import BenchmarkRun
from domain.manifests.models.execution_environment import ExecutionEnvironment
from domain.manifests.models.implementation_revision import ImplementationRevision
from domain.manifests.models.model_revision import ModelRevision
from domain.manifests.models.operation_spec import OperationSpec
from domain.manifests.models.serving_configuration import ServingConfiguration
from domain.manifests.models.serving_run import ServingRun
from domain.manifests.models.serving_stack_revision import ServingStackRevision
from domain.manifests.models.serving_workload import ServingWorkload
from domain.manifests.models.software_project import SoftwareProject
from domain.manifests.models.workload_case import WorkloadCase
from domain.manifests.models.workload_suite import WorkloadSuite

__all__ = [
    "BenchmarkProtocol",
    "BenchmarkRun",
    "ExecutionEnvironment",
    "ImplementationRevision",
    "ModelRevision",
    "OperationSpec",
    "ServingConfiguration",
    "ServingRun",
    "ServingStackRevision",
    "ServingWorkload",
    "SoftwareProject",
    "WorkloadCase",
    "WorkloadSuite",
]
