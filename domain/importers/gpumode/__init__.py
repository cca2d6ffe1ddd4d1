"""GPU MODE KernelBot leaderboard results → KernelIndex manifests (pure: bytes in, records out).

Input: a page of the ``GPUMODE/kernelbot-data`` dataset as the Hugging Face datasets server
returns it (``{"rows": [{"row": {...}, "truncated_cells": [...]}, ...]}``) or a bare list of
rows. A submission row (``submission_id``, ``leaderboard_id``, ``run_result``...) of a ranked
(``run_mode: leaderboard``) run yields one :class:`~domain.importers.records.ImportRecord` per
benchmark case in ``run_result`` (``benchmark.<i>.{spec,mean,best,worst,std,runs}``), exactly as
the KernelIndex catalog represents KernelBot per-case results:

* protocol ``gpumode-kernelbot-eval`` (per-case wall-clock mean, ``kernelbot_eval``);
* environment ``gpumode-kernelbot-<gpu>`` from ``run_system_info.gpu`` (vendor, product,
  architecture; runner software rides the run's labels) — both in :mod:`.runner`;
* workload ``WorkloadCase`` of the problem's ``OperationSpec``: the case's axes parsed from
  ``benchmark.<i>.spec`` (``"k: 7168; m: 1024; n: 1536; seed: 8135"``), input tensors with
  their shapes resolved (:mod:`.case`);
* implementation ``ImplementationRevision`` ``kernelbot-submission-<id>`` (source pinned by
  digest when the row carries its code; :mod:`.submission`);
* run: ``timing.latencyNs`` mean/minimum/maximum = Math.round of mean/best/worst ns,
  ``samples`` = runs, a ``latency:std:ns`` measurement, ``sourceNative`` =
  ``{source: gpumode-kernelbot, benchmark: "<leaderboard>/<i>", externalId:
  "submission/<id>", metrics: {best_ns, mean_ns, leaderboard_score_s}}``, ``observedAt`` =
  submission time (:mod:`.case`).

KernelBot rows name a leaderboard by id only and carry no operation semantics, so the problems
this importer knows are listed in :data:`KNOWN_PROBLEMS` (:mod:`.problems`); a leaderboard
listing (``leaderboards.json``, :func:`parse_leaderboards`) may be passed to name other
leaderboard ids. A leaderboard listing given as ``data`` describes no results: each of its rows
gives a :class:`~domain.importers.records.Skipped` saying so.

A row whose ``code`` is null (the dataset keeps some code apart, by ``code_id``) gives an
implementation without ``source``: the mapper cannot pin bytes it does not have. The catalog
holds such submissions with their source pinned; the importer keeps that richer run rather
than supersede it (:mod:`ledger.importing`).
"""

from domain.importers.gpumode.dataset import SOURCE, kernelbot_external_id
from domain.importers.gpumode.pages import Leaderboard, parse_leaderboards
from domain.importers.gpumode.problems import KNOWN_LEADERBOARD_IDS, KNOWN_PROBLEMS, Problem
from domain.importers.gpumode.runner import EVAL_PROTOCOL
from domain.importers.gpumode.submission import map_gpumode

__all__ = [
    "EVAL_PROTOCOL",
    "KNOWN_LEADERBOARD_IDS",
    "KNOWN_PROBLEMS",
    "SOURCE",
    "Leaderboard",
    "Problem",
    "kernelbot_external_id",
    "map_gpumode",
    "parse_leaderboards",
]
