"""FlashInfer-Bench traces → KernelIndex manifests (pure: bytes in, records out).

Input: the files of a FlashInfer-Bench dataset folder (``flashinfer-ai/flashinfer-trace``),
keyed by name: definitions (``{"name", "op_type", "axes", "inputs", "outputs", ...}``),
solutions (``{"name", "definition", "author", "spec", "sources", ...}``) and traces
(``*.jsonl``, one evaluation per line). Every trace line with an evaluation becomes one
:class:`~domain.importers.records.ImportRecord`; whatever cannot be mapped becomes a
:class:`~domain.importers.records.Rejection` with the reason, and the other lines still come
out.

The shapes follow the KernelIndex catalog export (source ``flashinfer-bench``), so that a trace
the catalog also holds maps to the very same manifests and digests. One module per thing
mapped:

* :mod:`.definition` — definition → ``OperationSpec``;
* :mod:`.workload` — trace workload → ``WorkloadCase`` (and the cases a rerun workload
  artifact describes, :func:`workload_case_digests`);
* :mod:`.solution` — solution → ``ImplementationRevision``;
* :mod:`.evaluation` — evaluation → the run's status, timing and metrics, its protocol and
  its environment;
* :mod:`.trace` — the mapper: each trace line → one record, and the record's external id.

The dataset commit is not inside the files, but the catalog pins it in every implementation
(``projectRevision.commit``); pass ``dataset_revision`` to reproduce the catalog's digests.
"""

from domain.importers.flashinfer_trace.dataset import SOURCE
from domain.importers.flashinfer_trace.evaluation import PROTOCOL
from domain.importers.flashinfer_trace.trace import (
    external_id_of,
    map_flashinfer_trace,
    trace_external_id,
)
from domain.importers.flashinfer_trace.workload import workload_case_digests

__all__ = [
    "PROTOCOL",
    "SOURCE",
    "external_id_of",
    "map_flashinfer_trace",
    "trace_external_id",
    "workload_case_digests",
]
