"""What the FlashInfer-Bench dataset is, as its runs and implementations state it."""

from __future__ import annotations

from typing import Final

from domain.sources import FLASHINFER_BENCH

SOURCE: Final = FLASHINFER_BENCH  # domain.sources: one name for readers and importers
DATASET_REPOSITORY: Final = "https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace"
DATASET_LICENSE: Final = "Apache-2.0"
# The catalog states this comparator on FlashInfer runs and workloads (the protocol says
# flashinfer_bench_eval); kept verbatim so that digests and comparison keys agree.
RUN_COMPARATOR: Final = "sol_execbench_eval"
