"""SOL-ExecBench leaderboard API responses → KernelIndex runs (pure: bytes in, records out).

Input: the saved responses of ``/api/kernels`` (``kernels.json``, not needed: each
``kernel-<id>.json`` carries its whole definition), ``/api/kernels/<id>`` (``kernel-<id>.json``)
and ``/api/submissions?kernel_id=<id>`` (``submissions*.json``; several pages may be given).
Each submission becomes one :class:`~domain.importers.records.ImportRecord` whose manifests are

* ``run`` — a ``BenchmarkRun`` on the kernel's whole workload suite: ``timing.latencyNs.mean``
  = round(latency_ms · 10⁶) (JavaScript rounding, as KernelIndex), primary statistic ``mean``,
  ``sourceNative = {source: "sol-execbench", benchmark: kernel_name, externalId: "<id>",
  metrics: {latency_ms, sol_score, avg_speedup, fast_1_count, fast_1_total}}`` (the numbers the
  submission states), ``observedAt`` = ``finished_at`` (else ``submitted_at``) as UTC with
  milliseconds (the API's naive times are UTC; finer digits truncated);
* ``protocol`` — "SOL-ExecBench evaluation stack <version>" and ``environment`` — "SOL-ExecBench
  <GPU>, stack <version>", exactly as KernelIndex writes them (:mod:`.stack`);
* ``implementation`` — the leaderboard publishes no source, so an explicit no-source revision:
  ``projectRevision.version "submission-<id>"``, ``callable.language "unknown"``, the GPU's
  architecture and product, the definition's input dtypes, ``licensing {}``;
* ``workload`` — the kernel's ``WorkloadSuite`` (cases = the kernel's workloads, aggregation
  latency/mean), on the ``OperationSpec`` of the kernel's definition (mapped by
  :mod:`domain.importers.sol_execbench`).

The mapping reproduces the public KernelIndex catalog's manifests and digests (run,
implementation, suite, operation) for the SOL-ExecBench rows (checked in the tests). How a
submission's status maps is told in :mod:`.submission`; reading the responses, in
:mod:`.responses`. The operation and the individual ``WorkloadCase`` manifests are not part of
a run's manifest set; :func:`map_sol_leaderboard_definitions` gives them.
"""

from domain.importers.sol_leaderboard.responses import (
    KERNELS_URL,
    map_sol_leaderboard,
    map_sol_leaderboard_definitions,
)
from domain.importers.sol_leaderboard.stack import leaderboard_environment, leaderboard_protocol
from domain.importers.sol_leaderboard.submission import (
    implementation_from_submission,
    run_from_submission,
    submission_status,
)

__all__ = [
    "KERNELS_URL",
    "implementation_from_submission",
    "leaderboard_environment",
    "leaderboard_protocol",
    "map_sol_leaderboard",
    "map_sol_leaderboard_definitions",
    "run_from_submission",
    "submission_status",
]
