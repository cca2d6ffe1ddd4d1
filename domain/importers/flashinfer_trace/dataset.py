"""What the FlashInfer-Bench dataset is, as its runs and implementations state it."""

from __future__ import annotations

from typing import Final

SOURCE: Final = "flashinfer-bench"
DATASET_REPOSITORY: Final = "https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace"
DATASET_LICENSE: Final = "Apache-2.0"
# The catalog states this comparator on FlashInfer runs and workloads (the protocol says
# flashinfer_bench_eval); kept verbatim so that digests and comparison keys agree.
RUN_COMPARATOR: Final = "sol_execbench_eval"
