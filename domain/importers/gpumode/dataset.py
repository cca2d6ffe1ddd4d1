"""What the GPU MODE KernelBot dataset is, and how the ledger names one of its results."""

from __future__ import annotations

from typing import Final

from domain.sources import GPUMODE_KERNELBOT

SOURCE: Final = GPUMODE_KERNELBOT  # domain.sources: one name for readers and importers
DATASET_URL: Final = "https://huggingface.co/datasets/GPUMODE/kernelbot-data"
COMPARATOR: Final = "kernelbot_eval"
RANKED_RUN_MODE: Final = "leaderboard"


def kernelbot_external_id(submission: str, benchmark: str, environment: str) -> str:
    """The ledger's id of one KernelBot result.

    ``sourceNative.externalId`` (``submission/<id>``) names the submission, which yields one run
    per benchmark case and per runner GPU; the ledger needs one id per run, so the benchmark
    (``<leaderboard>/<case>`` or the leaderboard) and the environment name qualify it. The
    catalog importer uses the same rule, so a result imported from both sources keeps one id.
    """
    return f"{submission}#{benchmark}@{environment}"
