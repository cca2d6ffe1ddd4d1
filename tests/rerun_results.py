"""A rerun result an honest agent on the seed run's GPU would sign: shared by the job tests
and the replay (abuse) tests."""

from __future__ import annotations

import statistics
from datetime import timedelta
from typing import Any

from served_app import Served

from domain.timestamps import utc_now
from ledger.signing.authoring import rerun_request_envelope

B200, SM100 = "NVIDIA B200", "sm_100"
CLAIMED = 1750693


def device(product: str = B200, arch: str = SM100, backend: str = "cuda") -> dict[str, str]:
    return {"product": product, "architecture": arch, "gpuUuidHash": "a" * 64, "backend": backend}


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
    """An admin-signed request for a rerun of ``run`` (on a B200 unless said), for an hour."""
    record = served.client.get(f"/v1/runs/{run}").json()
    return rerun_request_envelope(
        run,
        name,
        served.home.key("admin"),
        artifact_digest=record["implementationDigest"],
        workload_digest=record["workloadDigest"],
        product=product,
        architecture=architecture,
        expires_at=utc_now() + timedelta(hours=1),
    )
