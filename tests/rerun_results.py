"""Rerun jobs and results an honest admin and agent would sign on the demo ledger: shared by
the job tests and the replay (abuse) tests.

The demo's seed run names no code (its source published none), so it cannot be rerun: the
jobs here are for a run submitted with its solution and workload stored
(:func:`submitted_run`), as ``kernelindex submit`` makes one."""

from __future__ import annotations

import statistics
from datetime import timedelta
from pathlib import Path
from typing import Any

from served_app import Served

from domain.importers.records import rerun_artifacts
from domain.rerun_binding import DeviceClass
from domain.timestamps import utc_now
from ledger.home import LedgerHome
from ledger.signing.authoring import rerun_request_envelope
from ledger.submission import read_submission_folder, submit_solution

B200, SM100 = "NVIDIA B200", "sm_100"
CLAIMED = 1750693
# The device classes an agent key is registered for: the B200, or the CPU test double.
ON_B200 = (DeviceClass("cuda", B200, SM100),)
ON_CPU_TEST = (DeviceClass("cpu-test"),)
SAMPLE = Path(__file__).resolve().parents[1] / "gpu_agent" / "samples" / "rmsnorm_h4096_bf16"


def device(product: str = B200, arch: str = SM100, backend: str = "cuda") -> dict[str, str]:
    return {"product": product, "architecture": arch, "gpuUuidHash": "a" * 64, "backend": backend}


def submitted_run(served: Served, latency_ns: int = CLAIMED) -> tuple[str, str]:
    """(digest, name) of a run submitted on a B200 with its solution and workload stored."""
    submitted = submit_solution(
        served.ledger,
        served.home.key("ingester"),
        read_submission_folder(SAMPLE),
        latency_ns=latency_ns,
        product=B200,
        architecture=SM100,
    )
    return submitted.run_digest, submitted.run_name


def submit_with_job(
    home: LedgerHome,
    folder: Path,
    device: Any,
    latency_ns: int,
    nonce: str | None = None,
) -> str:
    """Submit the solution in ``folder`` on ``device``'s product and architecture, then
    request a rerun of its run for an hour (as admin, naming the run's own code): its digest.
    ``nonce``: the job's secret, when a test must know it (else a fresh one)."""
    ledger = home.open()
    submitted = submit_solution(
        ledger,
        home.key("ingester"),
        read_submission_folder(folder),
        latency_ns=latency_ns,
        product=device.product,
        architecture=device.architecture,
    )
    run = ledger.run(submitted.run_digest)
    assert run is not None
    ledger.append(
        rerun_request_envelope(
            submitted.run_digest,
            run.run_name,
            home.key("admin"),
            artifact_digest=submitted.solution_digest,
            workload_digest=submitted.workload_digest,
            product=device.product,
            architecture=device.architecture,
            expires_at=utc_now() + timedelta(hours=1),
            **({"nonce": nonce} if nonce is not None else {}),
        )
    )
    return submitted.run_digest


def result(job: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    samples = [CLAIMED * (1 + 0.001 * i) for i in range(9)]
    env = device() | {"product": job["requirements"]["product"]}
    env |= {"architecture": job["requirements"]["architecture"]}
    value: dict[str, Any] = {
        "jobId": job["jobId"],
        "nonce": job["nonce"],
        "cases": [{"case": "case-0", "status": "passed"}],
        "summary": {
            "allCorrect": True,
            "medianNs": statistics.median(samples),
            "meanNs": statistics.mean(samples),
            "ci95Ns": [min(samples), max(samples)],
            "samples": len(samples),
            "samplesNs": samples,
        },
        "environment": env,
        "calibration": {"copyBandwidthBytesPerS": 7.0e12},
    }
    return value | overrides


def rerun_request(
    served: Served, run: str, name: str, product: str = B200, architecture: str = SM100
) -> dict[str, Any]:
    """An admin-signed request for a rerun of ``run`` (on a B200 unless said), for an hour,
    naming the code the run's manifests name (else its manifests' digests: refused)."""
    record = served.client.get(f"/v1/runs/{run}").json()
    named = rerun_artifacts(record.get("manifests") or {})
    return rerun_request_envelope(
        run,
        name,
        served.home.key("admin"),
        artifact_digest=named.solution or record["implementationDigest"],
        workload_digest=named.workload or record["workloadDigest"],
        product=product,
        architecture=architecture,
        expires_at=utc_now() + timedelta(hours=1),
    )
