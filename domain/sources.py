"""The sources runs come from, by the slug an ingestion names them with, and what each
calls itself (as the public KernelIndex catalog's ``sources`` table names them). One small
module, so that reading a run (its page, ``show``) needs no importer of any source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SOL_EXECBENCH: Final = "sol-execbench"
FLASHINFER_BENCH: Final = "flashinfer-bench"
GPUMODE_KERNELBOT: Final = "gpumode-kernelbot"

# What each source calls itself (conformance/fixtures/kernelindex-catalog): for runs whose
# ingestion does not say it.
SOURCE_NAMES: Final[Mapping[str, str]] = {
    SOL_EXECBENCH: "NVIDIA SOL-ExecBench",
    GPUMODE_KERNELBOT: "GPU MODE KernelBot",
    FLASHINFER_BENCH: "FlashInfer-Bench",
    "mlperf-inference": "MLPerf Inference",
}
