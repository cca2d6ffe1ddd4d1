"""Sample solutions the agent is checked with: two honest kernels and five cheats.

Each folder holds a SOL-ExecBench ``definition.json``, a ``workload.jsonl``, a
``solution.json`` (the agent's binding: an ``extern "C"`` kernel and a declarative launch) and
the kernel's ``kernel.cu``, which is the source of truth for the ``sources`` embedded in
``solution.json`` (``python -m gpu_agent.samples sync`` re-embeds it; a test checks they
agree). README.md says what each one does and, for the adversarial ones, what it cheats and
which check must catch it — :data:`SAMPLES` says the same in machine-readable form, and
``gpu_agent/selfcheck.py`` holds every run to it on a GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gpu_agent import inputs
from gpu_agent.definition import parse_definition
from gpu_agent.workload import parse_workloads_jsonl

SAMPLES_DIR = Path(__file__).resolve().parent

# The job id every sample is run under by the self-check and the CPU tests. Public rounds
# are seeded from it (gpu_agent/inputs.py), and ``adv_secret_round_wrong`` has the public
# inputs of this job built in: it models a submitter who could reproduce the public rounds.
# (A job id is a UUID and a nonce 64 hex digits, as in a signed rerun request.)
SAMPLE_JOB_ID = "985ab66c-f377-56c8-b4c1-572e0887702f"  # uuid5(URL, ".../samples/job")
# Any other nonce does as well: it only seeds the secret and post-timing rounds.
SAMPLE_NONCE = "248834a82a762817c9d14d0b08d26281bc3864bb92a9c0d529ab2b8cecf0db6b"

# "refill": not refused but *neutralised* — the refill before every timed launch makes the
# cheat do its work while timed (gpu_agent/selfcheck.py checks it was timed working).
Check = Literal["poison", "mutation", "tolerance", "floor", "refill"]


@dataclass(frozen=True)
class SampleInfo:
    name: str
    honest: bool
    summary: str
    # For the adversarial samples: the check that must refuse it and the rounds it may do so
    # in ("secret" = the nonce-seeded pre-timing round, "post" = the post-timing round).
    caught_by: Check | None = None
    rounds: tuple[str, ...] = ()


SAMPLES: dict[str, SampleInfo] = {
    info.name: info
    for info in (
        SampleInfo(
            "rmsnorm_h4096_bf16",
            honest=True,
            summary="RMSNorm, 4096 bf16 per row: one 512-thread block per row, one 16-byte "
            "vector per thread, fp32 warp-shuffle reduction",
        ),
        SampleInfo(
            "silu_and_mul_bf16",
            honest=True,
            summary="SwiGLU silu(x[:, :d]) * x[:, d:], d = 14336, bf16: one 16-byte vector "
            "of each half per thread, fp32 inside",
        ),
        SampleInfo(
            "adv_unwritten_output",
            honest=False,
            summary="never writes the last 8 values of the last row (under 1 %: passes a "
            "0.99 matched ratio)",
            caught_by="poison",
        ),
        SampleInfo(
            "adv_mutates_input",
            honest=False,
            summary="correct output, but writes its result back into hidden_states",
            caught_by="mutation",
        ),
        SampleInfo(
            "adv_cached_result",
            honest=False,
            summary="device-side result cache keyed on the hidden_states pointer: stale "
            "results for new values in a buffer it has seen",
            caught_by="tolerance",
        ),
        SampleInfo(
            "adv_secret_round_wrong",
            honest=False,
            summary="correct only on the public-round inputs of job "
            f"{SAMPLE_JOB_ID!r} (recognised by their first values), 12.5 % off otherwise",
            caught_by="tolerance",
            rounds=("secret", "post"),
        ),
        SampleInfo(
            "adv_sub_floor",
            honest=False,
            summary="computes only when its output is poisoned (i.e. checked); would return "
            "at once when timed, but timed launches are refilled (poisoned) too, so it computes",
            caught_by="refill",
        ),
    )
}


@dataclass(frozen=True)
class Sample:
    info: SampleInfo
    folder: Path
    definition: dict[str, Any]
    workloads: list[dict[str, Any]]
    solution: dict[str, Any]

    @property
    def name(self) -> str:
        return self.info.name

    def definition_text(self) -> str:
        return (self.folder / "definition.json").read_text("utf-8")

    def workload_text(self) -> str:
        return (self.folder / "workload.jsonl").read_text("utf-8")

    def solution_text(self) -> str:
        return (self.folder / "solution.json").read_text("utf-8")


def sample_names() -> list[str]:
    return list(SAMPLES)


def load_sample(name: str) -> Sample:
    if name not in SAMPLES:
        raise KeyError(f"no sample {name!r} (known: {', '.join(SAMPLES)})")
    folder = SAMPLES_DIR / name
    definition = json.loads((folder / "definition.json").read_text("utf-8"))
    workloads = [
        json.loads(line)
        for line in (folder / "workload.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    solution = json.loads((folder / "solution.json").read_text("utf-8"))
    return Sample(SAMPLES[name], folder, definition, workloads, solution)


def all_samples() -> list[Sample]:
    return [load_sample(name) for name in SAMPLES]


def stale_sources(sample: Sample) -> list[str]:
    """Paths whose embedded ``sources[].content`` differs from the file in the folder."""
    return [
        source["path"]
        for source in sample.solution["sources"]
        if (sample.folder / source["path"]).read_text("utf-8") != source["content"]
    ]


def sync_sources(sample: Sample) -> bool:
    """Re-embed the folder's source files into ``solution.json``; True if it changed."""
    if not stale_sources(sample):
        return False
    solution = dict(sample.solution)
    solution["sources"] = [
        {"path": s["path"], "content": (sample.folder / s["path"]).read_text("utf-8")}
        for s in sample.solution["sources"]
    ]
    (sample.folder / "solution.json").write_text(
        json.dumps(solution, indent=2, ensure_ascii=False) + "\n", "utf-8"
    )
    return True


# --- adv_secret_round_wrong: the public inputs it has built in ------------------------------

SECRET_SAMPLE = "adv_secret_round_wrong"  # noqa: S105 - a sample name, not a secret
FINGERPRINT_BEGIN = "// BEGIN PUBLIC FINGERPRINTS (python -m gpu_agent.samples sync)"
FINGERPRINT_END = "// END PUBLIC FINGERPRINTS"


def public_fingerprints(job_id: str = SAMPLE_JOB_ID) -> list[tuple[str, int, int, int]]:
    """``(workload uuid, public round, word0, word1)`` for every public round of the secret
    sample's workloads: the first four bfloat16 values of ``hidden_states`` as two
    little-endian 32-bit words — what the kernel reads through a ``uint2`` at its input."""
    folder = SAMPLES_DIR / SECRET_SAMPLE
    definition = parse_definition(json.loads((folder / "definition.json").read_text("utf-8")))
    workload_text = (folder / "workload.jsonl").read_text("utf-8")
    rows: list[tuple[str, int, int, int]] = []
    for workload in parse_workloads_jsonl(workload_text, definition):
        for index in range(inputs.PUBLIC_ROUNDS):
            seed = inputs.public_seed(job_id, workload.uuid, index)
            hidden = np.asarray(inputs.generate(definition, workload, seed)["hidden_states"])
            bits = np.ascontiguousarray(hidden.reshape(-1)[:4]).view(np.uint16).astype(np.uint32)
            rows.append(
                (
                    workload.uuid,
                    index,
                    int(bits[0] | (bits[1] << 16)),
                    int(bits[2] | (bits[3] << 16)),
                )
            )
    return rows


def fingerprint_block(job_id: str = SAMPLE_JOB_ID) -> str:
    """The C++ table between the markers in the secret sample's kernel.cu."""
    entries = public_fingerprints(job_id)
    lines = [
        FINGERPRINT_BEGIN,
        f"// Job {job_id}: first 4 hidden_states values per public round.",
        f"constexpr int kKnown = {len(entries)};",
        "__constant__ uint2 kPublicInputs[kKnown] = {",
    ]
    lines += [
        f"    {{0x{w0:08x}u, 0x{w1:08x}u}},  // workload {uuid}, public-{index}"
        for uuid, index, w0, w1 in entries
    ]
    lines += ["};", FINGERPRINT_END]
    return "\n".join(lines)


def embedded_fingerprint_block(kernel_source: str) -> str | None:
    """The table currently in ``kernel_source`` (markers included), or None."""
    start = kernel_source.find(FINGERPRINT_BEGIN)
    end = kernel_source.find(FINGERPRINT_END)
    if start < 0 or end < start:
        return None
    return kernel_source[start : end + len(FINGERPRINT_END)]


def sync_fingerprints(job_id: str = SAMPLE_JOB_ID) -> bool:
    """Rewrite the secret sample's table from gpu_agent/inputs.py; True if it changed."""
    path = SAMPLES_DIR / SECRET_SAMPLE / "kernel.cu"
    text = path.read_text("utf-8")
    current = embedded_fingerprint_block(text)
    if current is None:
        raise ValueError(f"{path}: no fingerprint markers")
    wanted = fingerprint_block(job_id)
    if current == wanted:
        return False
    path.write_text(text.replace(current, wanted), "utf-8")
    return True
