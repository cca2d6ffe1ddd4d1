"""Strict models (msgspec Structs) of the ``kernelindex.dev/v1alpha1`` manifest kinds.

One module per kind, each mirroring the KernelIndex JSON Schema of that kind
(``kernelindex-schemas/<kind>.v1alpha1.schema.json``, Apache-2.0, KernelIndex); the shared
pieces live in :mod:`domain.manifests.models.common`. The models are a validation gate only:
digests are computed from the input document, never from a model dump.

A kind's module is imported when the kind is first named (``models.BenchmarkRun``, or
``from domain.manifests.models import BenchmarkRun``): making a kind's classes costs a few
milliseconds each, and re-verifying a kernel run's ingestion (``kernelindex show``,
``history``) needs five of the thirteen kinds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
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

# Kind → the module (in this package) that defines its model.
MODULES: Final = {
    "BenchmarkProtocol": "benchmark_protocol",
    "BenchmarkRun": "benchmark_run",
    "ExecutionEnvironment": "execution_environment",
    "ImplementationRevision": "implementation_revision",
    "ModelRevision": "model_revision",
    "OperationSpec": "operation_spec",
    "ServingConfiguration": "serving_configuration",
    "ServingRun": "serving_run",
    "ServingStackRevision": "serving_stack_revision",
    "ServingWorkload": "serving_workload",
    "SoftwareProject": "software_project",
    "WorkloadCase": "workload_case",
    "WorkloadSuite": "workload_suite",
}

__all__ = [
    "MODULES",
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


def __getattr__(name: str) -> object:
    """A kind's model, its module imported on first use (PEP 562)."""
    module = MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    model: object = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = model  # the next lookup finds it without calling this
    return model


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
