"""The rerun agent's loop: fingerprint the device, poll, claim, fetch, measure, sign, post.

The agent is a client of the ledger's HTTP API and holds an agent-role key, bound by its
registration to device classes: one key per backend. Before it polls, the agent reads its
key's registration and refuses to run on a device the key is not bound to (:meth:`Agent.start`):
the CPU double runs submitted code on the CPU, so a key that ever did must never sign GPU
results, nor a GPU key be pointed at the CPU double. A refusal about the agent itself (its
key, role or device: no retry can fix it) stops the agent with the ledger's code
(:class:`AgentConfigError`); anything else about a job is retried or ends the job. Every job it
claims ends in a signed result: measured (correct or not), or ``outcome: failed`` with the
reason (unsupported solution, build error, device fault...) — a claimed job is never
silently dropped. The solution and workload are fetched by digest and re-hashed before use;
submitted code never runs in this process (the harness runs each case in a child process).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from domain.content_coding import ACCEPT_ENCODING, BadReplyError, SlowReplyError, reply_body
from domain.errors import DomainError
from domain.rerun_binding import DeviceClass, describe_classes, device_classes, may_measure
from domain.statements import MAX_LEASE_SECONDS, MEASURING_BACKENDS, CaseReason, Role
from domain.timestamps import parse_time, utc_now
from gpu_agent import harness
from gpu_agent.harness import HarnessConfig, HarnessError, JobSpec
from gpu_agent.sol_parsing import SolutionError
from ledger.signing.authoring import rerun_claim_envelope, rerun_envelope
from ledger.signing.keys import SigningKey

DEFAULT_LEASE_SECONDS = 3600
MAX_ARTIFACT_BYTES = 16 * 1024 * 1024
# The ledger is trusted for transport only: a reply is read within these bounds or refused
# (an artifact at its limit, with room for JSON around a job list).
MAX_REPLY_BYTES = 2 * MAX_ARTIFACT_BYTES
REPLY_DEADLINE = 600.0


class AgentError(DomainError):
    """The ledger or an artifact could not be used (not a failure of the job itself)."""

    code = "agent-error"


class AgentConfigError(AgentError):
    """The ledger refuses this agent itself (its key, role, clock or device), or will: only
    the operator can fix that, so the agent stops with the problem's code, never retrying it
    or failing job after job."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# Refusals of a write that are about the agent, not the job: its key (unknown, revoked,
# expired, another role), its device (not bound to the key) or an envelope this agent cannot
# make acceptable (its signature, clock or form). A job taken, expired or gone (404, 409, 422
# rerun-rejected) or a busy ledger (429, 5xx) is not: the agent polls on.
CONFIG_STATUSES = frozenset({401, 403})
CONFIG_CODES = frozenset(
    {"bad-signature", "bad-timestamp", "schema-violation", "malformed-document"}
)


@dataclass(frozen=True)
class Device:
    product: str
    architecture: str
    gpu_uuid_hash: str
    backend: str

    def claim_json(self) -> dict[str, str]:
        return {
            "product": self.product,
            "architecture": self.architecture,
            "gpuUuidHash": self.gpu_uuid_hash,
            "backend": self.backend,
        }


@dataclass(frozen=True)
class JobOutcome:
    job_id: str
    run_digest: str
    outcome: str  # "completed" or "failed"
    all_correct: bool
    reason: str | None
    receipt: dict[str, Any]


class LedgerApi:
    """The few endpoints an agent uses; problem+json replies become AgentError."""

    def __init__(self, base_url: str, client: httpx.Client | None = None) -> None:
        self.base = base_url.rstrip("/")
        self.http = client or httpx.Client(timeout=60.0)

    def _call(self, method: str, path: str, **options: Any) -> httpx.Response:
        """One request; its reply read within ``MAX_REPLY_BYTES`` and ``REPLY_DEADLINE``."""
        ends = time.monotonic() + REPLY_DEADLINE
        request = self.http.build_request(
            method, f"{self.base}{path}", headers={"Accept-Encoding": ACCEPT_ENCODING}, **options
        )
        try:
            reply = self.http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise AgentError(f"{method} {path}: the ledger did not answer ({exc})") from exc
        try:
            body = reply_body(reply, MAX_REPLY_BYTES, lambda: time.monotonic() > ends)
        except (BadReplyError, SlowReplyError) as exc:
            raise AgentError(f"{method} {path}: {exc.message}") from None
        except httpx.HTTPError as exc:
            # A reply cut or broken mid-body is the ledger's (or the network's), as a bad one
            # is: an AgentError, so that a claimed job still ends in a signed failed result.
            raise AgentError(f"{method} {path}: the reply broke off ({exc})") from exc
        finally:
            reply.close()
        media = reply.headers.get("content-type", "application/octet-stream")
        return httpx.Response(
            reply.status_code, headers={"content-type": media}, content=body, request=request
        )

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            code: object = None
            try:
                problem = response.json()
                code = problem.get("code")
                detail = f"{code}: {problem.get('detail')}"
            except (ValueError, AttributeError):
                detail = response.text[:500]
            where = f"{response.request.method} {response.request.url.path}"
            if isinstance(code, str) and (
                response.status_code in CONFIG_STATUSES or code in CONFIG_CODES
            ):
                raise AgentConfigError(
                    code,
                    f"the ledger refuses this agent ({where}: {problem.get('detail')}); "
                    "no retry can fix this: check the agent's key and device "
                    "(one key per backend)",
                )
            raise AgentError(f"{where}: {detail}")
        return response.json()

    def key(self, key_id: str) -> dict[str, Any] | None:
        """A key's registration as the ledger holds it (None: no such key is registered)."""
        response = self._call("GET", f"/v1/keys/{key_id}")
        if response.status_code == 404:
            return None
        record: dict[str, Any] = self._json(response)
        return record

    def open_jobs(self, device: Device, agent: str) -> list[dict[str, Any]]:
        params = {"product": device.product, "architecture": device.architecture, "agent": agent}
        jobs: list[dict[str, Any]] = self._json(self._call("GET", "/v1/jobs", params=params))
        return jobs

    def claim(self, job_id: str, envelope: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = self._json(
            self._call("POST", f"/v1/jobs/{job_id}/claims", json=envelope)
        )
        return reply

    def artifact(self, digest: str) -> bytes:
        response = self._call("GET", f"/v1/artifacts/{digest}")
        if response.status_code >= 400:
            self._json(response)
        content = response.content
        if len(content) > MAX_ARTIFACT_BYTES:
            raise AgentError(f"artifact {digest} is larger than {MAX_ARTIFACT_BYTES} bytes")
        actual = "sha256:" + hashlib.sha256(content).hexdigest()
        if actual != digest:
            raise AgentError(f"artifact {digest} arrived with digest {actual}: refusing it")
        return content

    def post_result(self, run_digest: str, envelope: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = self._json(
            self._call("POST", f"/v1/runs/{run_digest}/reruns", json=envelope)
        )
        return reply


def probe(backend: str, config: HarnessConfig) -> tuple[Device, dict[str, Any]]:
    """The device as the backend reports it (in a child process, like every measurement)."""
    found = harness.probe_device(backend, config, calibrate=False)
    info = found["device"]
    device = Device(
        product=str(info["product"]),
        architecture=str(info["architecture"]),
        gpu_uuid_hash=str(info["gpu_uuid_hash"]),
        backend=str(info["backend"]),
    )
    return device, info


def device_class(device: Device) -> DeviceClass:
    """The class a key must be bound to for this device, as ``keys register --device``
    names it: product and architecture for a GPU, the backend alone for a test double."""
    if device.backend in MEASURING_BACKENDS:
        return DeviceClass(device.backend, device.product, device.architecture)
    return DeviceClass(device.backend)


def check_key(
    key_id: str, record: Mapping[str, Any] | None, device: Device
) -> frozenset[DeviceClass]:
    """The device classes of an active agent key bound to ``device``; otherwise why not, as
    the code admission would refuse its claims with (so the operator sees one vocabulary)."""
    if record is None:
        raise AgentConfigError(
            "unknown-key",
            f"key {key_id} is not registered with this ledger: register it as an agent key "
            f"bound to this device (kernelindex keys register KEY.pem --role agent "
            f"--device {_quoted(device_class(device).label())})",
        )
    if record.get("status") != "active":
        raise AgentConfigError(
            "revoked-key", f"key {key_id} was revoked: it may not claim or report anything"
        )
    until = record.get("validUntil")
    if isinstance(until, str) and parse_time(until) <= utc_now():
        raise AgentConfigError("expired-key", f"key {key_id} expired at {until}")
    roles = record.get("roles")
    if not isinstance(roles, list) or Role.AGENT.value not in roles:
        raise AgentConfigError(
            "wrong-role", f"key {key_id} is not an agent key (its roles: {roles})"
        )
    classes = device_classes(record.get("devices"))
    if not may_measure(classes, device.product, device.architecture, device.backend):
        wanted = device_class(device).label()
        raise AgentConfigError(
            "device-not-bound",
            f"key {key_id} is bound to {describe_classes(classes)}, not to this device: "
            f"{device.product} ({device.architecture}, backend {device.backend}), of class "
            f"{wanted}. Use one key per backend: register another key for this device "
            f"(kernelindex keys register KEY.pem --role agent --device {_quoted(wanted)}) and "
            "start the agent with it",
        )
    return classes


def _quoted(label: str) -> str:
    return f"'{label}'" if " " in label else label


def _failed_result(job: Mapping[str, Any], device: Device, reason: str) -> dict[str, Any]:
    """A signed record that the claimed job could not be measured, and why."""
    return {
        "jobId": job["jobId"],
        "nonce": job["nonce"],
        "outcome": "failed",
        "failure": reason,  # a JobFailure code (the rerun vocabulary), never the message
        "cases": [{"case": "job", "status": "error", "reason": CaseReason.JOB_FAILED.value}],
        "summary": {"allCorrect": False, "samples": 0},
        "environment": {
            "product": device.product,
            "architecture": device.architecture,
            "gpuUuidHash": device.gpu_uuid_hash,
            "backend": device.backend,
        },
        "calibration": {},
    }


@dataclass
class Agent:
    api: LedgerApi
    key: SigningKey
    backend: str
    config: HarnessConfig = field(default_factory=HarnessConfig)
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    log: Callable[[str], None] = print
    _device: Device | None = None

    @property
    def device(self) -> Device:
        if self._device is None:
            self._device, _ = probe(self.backend, self.config)
        return self._device

    def start(self) -> frozenset[DeviceClass]:
        """Probe the device, then read this agent's key registration from the ledger: the
        key's device classes if it is an active agent key bound to this device, else
        :class:`AgentConfigError` (one key per backend). Call it before polling."""
        device = self.device
        return check_key(self.key.key_id, self.api.key(self.key.key_id), device)

    def run_once(self) -> JobOutcome | None:
        """Take one open job for this device, if any, and see it through."""
        jobs = self.api.open_jobs(self.device, self.key.key_id)
        if not jobs:
            return None
        job = jobs[0]
        claim = rerun_claim_envelope(
            job["runDigest"],
            job["runName"],
            self.key,
            job_id=job["jobId"],
            device=self.device.claim_json(),
            lease_seconds=min(self.lease_seconds, MAX_LEASE_SECONDS),
        )
        claimed = self.api.claim(job["jobId"], claim)["job"]
        self.log(f"claimed job {claimed['jobId']} for run {claimed['runDigest']}")
        result = self._measure(claimed)
        envelope = rerun_envelope(claimed["runDigest"], claimed["runName"], self.key, result=result)
        receipt = self.api.post_result(claimed["runDigest"], envelope)
        outcome = JobOutcome(
            job_id=claimed["jobId"],
            run_digest=claimed["runDigest"],
            outcome=str(result.get("outcome", "completed")),
            all_correct=bool(result["summary"]["allCorrect"]),
            reason=result.get("failure"),
            receipt=receipt,
        )
        self.log(
            f"posted result for job {outcome.job_id}: {outcome.outcome}, "
            f"all correct {outcome.all_correct} (leaf {receipt['log']['leafIndex']})"
        )
        return outcome

    def _measure(self, job: Mapping[str, Any]) -> dict[str, Any]:
        try:
            solution = json.loads(self.api.artifact(job["artifactDigest"]))
            package = json.loads(self.api.artifact(job["workloadDigest"]))
            spec = JobSpec(
                job_id=job["jobId"],
                nonce=job["nonce"],
                solution=solution,
                definition=package["definition"],
                workloads=package["workloads"],
            )
            return harness.run_job(spec, self.backend, self.config)
        except (AgentError, SolutionError, HarnessError, ValueError, KeyError, TypeError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            self.log(f"job {job['jobId']} failed: {reason}")
            return _failed_result(job, self.device, harness.failure_code(exc).value)

    def run_forever(self, poll_seconds: float = 10.0) -> None:
        while True:
            try:
                done = self.run_once()
            except AgentConfigError:
                raise  # the operator's to fix: polling on would be refused the same way
            except AgentError as exc:
                self.log(f"ledger unavailable or refused: {exc}; retrying")
                done = None
            if done is None:
                time.sleep(poll_seconds)
