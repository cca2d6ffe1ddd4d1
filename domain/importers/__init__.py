"""Source formats mapped to KernelIndex manifests (pure: bytes in, records out).

One subpackage (or module) per source: :mod:`.sol_execbench`, :mod:`.sol_leaderboard`,
:mod:`.flashinfer_trace`, :mod:`.gpumode`, :mod:`.kernelindex_catalog`. Shared by them:
:mod:`.records` (what a mapper yields), :mod:`.names` (metadata names and titles), and, for
the importers that write the catalog's shapes, :mod:`.fields` (typed reads),
:mod:`.catalog_form` (numbers, times, artifacts, manifests) and :mod:`.operations` (axis
values and shapes of an ``OperationSpec``).
"""
