"""SOL-ExecBench benchmark folders → KernelIndex manifests (pure: bytes in, records out).

A folder holds ``definition.json`` (the operator contract), ``workload.jsonl`` (one concrete
binding of the variable axes per line), ``solution*.json`` (implementations) and optionally
``trace*.jsonl`` (one benchmark result per line). The format documents are SOL-ExecBench's
``docs/{definition,workload,solution,trace}.md``.

The definition, workload and hardware normalisation here is shared with the leaderboard
importer (:mod:`domain.importers.sol_leaderboard`) and follows KernelIndex's own SOL importer,
so that our digests equal the public catalog's for the same source data (verified against
every SOL-ExecBench row of the catalog export in the tests). One module per thing mapped:

* :mod:`.operation` — ``Definition`` → ``OperationSpec``;
* :mod:`.workload` — workload entries → ``WorkloadCase`` and ``WorkloadSuite``, and an
  entry's identity (its ``uuid``, else a hash of its axes as KernelIndex writes them);
* :mod:`.definition` — a definition mapped whole (operation, cases, suite);
* :mod:`.solution` — ``Solution`` → ``ImplementationRevision`` (this package's own choice: the
  whole solution document, canonical JSON, is the pinned source);
* :mod:`.folder` — reading a folder, and its solutions as implementations
  (:func:`map_sol_execbench_solutions`, which also takes a definition from elsewhere, for
  ``reward-hacks/``, which has solutions only);
* :mod:`.trace` — each trace line → one run record (:func:`map_sol_execbench`);
* :mod:`.fields`, :mod:`.values`, :mod:`.vocabulary` — typed reads, KernelIndex's names,
  times and nanoseconds, and SOL's dtype, language and GPU names.

Problems in files a trace needs are reported in that trace's rejection.
"""

# The mappers, and what direct submissions (ledger.submission) reuse of them.
from domain.importers.sol_execbench.definition import MappedDefinition, map_definition
from domain.importers.sol_execbench.fields import SolFormatError
from domain.importers.sol_execbench.folder import map_sol_execbench_solutions
from domain.importers.sol_execbench.solution import MappedSolution, implementation_from_solution
from domain.importers.sol_execbench.trace import map_sol_execbench
from domain.importers.sol_execbench.vocabulary import SOURCE

__all__ = [
    "SOURCE",
    "MappedDefinition",
    "MappedSolution",
    "SolFormatError",
    "implementation_from_solution",
    "map_definition",
    "map_sol_execbench",
    "map_sol_execbench_solutions",
]
