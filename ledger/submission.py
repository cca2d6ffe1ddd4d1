"""Direct submissions: a SOL-ExecBench solution folder and a measured latency → a signed run.

``kernelindex submit`` goes through here. A folder holds ``definition.json``, ``workload.jsonl``
and ``solution.json`` (SOL-ExecBench formats). Two artifacts are stored, in the layout the
rerun agent fetches by digest:

* the **solution**: the exact bytes of ``solution.json`` (:data:`SOLUTION_MEDIA_TYPE`); the
  implementation's ``spec.source.contentDigest`` names it;
* the **workload**: compact JSON of ``{"definition": ..., "workloads": [...]}`` in the
  documents' own key order (a definition's inputs are the solution's argument order) — the SOL
  definition and every workload line
  (:func:`domain.importers.records.workload_artifact`, the rule imports follow too).

The manifests reuse the SOL-ExecBench importer's mapping (operation, suite, implementation),
so a submitted kernel lands in the same digests an import of the same folder would give its
operation and suite. The run's workload is the suite of all the folder's workloads; its
timing is the submitter's mean over them. The workload artifact is named in the suite's
``metadata.sourceRefs`` (``kernelindex:artifact/<digest>``): the run's ``sourceNative`` is
closed to extra keys and its ``metrics`` hold numbers only, and metadata never enters a
digest, so the reference is signed (it is in the ingestion statement) without changing which
suite the run is about.

Submitting the same folder with the same figures again appends nothing: the run's external id
is derived from the solution, the workload, the hardware and the latency, and an existing run
with that id is returned (when no ``observed_at`` is given the measurement time would
otherwise differ on every call).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from domain.canonical import canonical_json, digest_of
from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.records import Artifact, referencing, workload_artifact
from domain.importers.sol_execbench import implementation_from_solution, map_definition
from domain.importers.sol_execbench.values import kebab
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.kinds import API_VERSION
from domain.manifests.manifest_set import check_manifest_set
from domain.timestamps import format_time, utc_now
from ledger.aggregates import Run
from ledger.application import Ledger
from ledger.errors import AlreadyExistsError
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import ingestion_envelope
from ledger.signing.keys import SigningKey
from ledger.store.artifacts import ArtifactStore
from ledger.store.stored_events import statement_of

SOURCE: Final = "direct"
SOLUTION_MEDIA_TYPE: Final = "application/vnd.sol-execbench.solution+json"
FOLDER_FILES: Final = ("definition.json", "workload.jsonl", "solution.json")
MAX_LATENCY_NS: Final = 2**53 - 1

JsonObject = dict[str, Any]


class SubmissionError(DomainError):
    """A submission folder or its figures cannot make a run."""

    code = "bad-submission"


@dataclass(frozen=True)
class Submission:
    """The run a submission made (or found already ingested) and the artifacts it names."""

    run_digest: str
    run_name: str
    solution_digest: str
    workload_digest: str
    receipt: LoggedEvent | None  # None: the run was already in the ledger, nothing was appended

    @property
    def appended(self) -> bool:
        return self.receipt is not None

    def to_json(self) -> JsonObject:
        return {
            "run": self.run_digest,
            "name": self.run_name,
            "solutionDigest": self.solution_digest,
            "workloadDigest": self.workload_digest,
            "appended": self.appended,
            "receipt": self.receipt.to_json() if self.receipt is not None else None,
        }


@dataclass(frozen=True)
class PreparedSubmission:
    """Everything a submission appends and stores, before it touches a ledger."""

    manifests: dict[str, JsonObject]
    run_digest: str
    run_name: str
    external_id: str
    solution: Artifact
    workload: Artifact


def read_submission_folder(folder: Path) -> dict[str, bytes]:
    """The three files a submission needs, by name; a missing one is a SubmissionError."""
    if not folder.is_dir():
        raise SubmissionError(f"{folder} is not a folder")
    files: dict[str, bytes] = {}
    for name in FOLDER_FILES:
        path = folder / name
        if not path.is_file():
            raise SubmissionError(f"{folder} has no {name}")
        files[name] = path.read_bytes()
    return files


def _object(files: Mapping[str, bytes], name: str) -> Mapping[str, Any]:
    value = parse_json(_file(files, name))
    if not isinstance(value, dict):
        raise SubmissionError(f"{name} must hold a JSON object")
    return value


def _file(files: Mapping[str, bytes], name: str) -> bytes:
    data = files.get(name)
    if data is None:
        raise SubmissionError(f"the submission has no {name}")
    return data


def _workload_lines(data: bytes) -> list[Mapping[str, Any]]:
    entries: list[Mapping[str, Any]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = parse_json(line)
        except DomainError as exc:
            raise SubmissionError(f"workload.jsonl line {number}: {exc.message}") from None
        if not isinstance(value, dict):
            raise SubmissionError(f"workload.jsonl line {number} must be a JSON object")
        entries.append(value)
    if not entries:
        raise SubmissionError("workload.jsonl holds no workloads")
    return entries


def direct_protocol() -> JsonObject:
    """The protocol of a direct submission: the submitter measured and reports a mean.

    Its own comparability family keeps self-reported timings out of the groups of harness-
    measured ones (their timers are not the same). No correctness block: nobody but the
    submitter has checked the result until a rerun does.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {
            "name": "kernelindex-direct-submission",
            "title": "Direct submission (submitter-reported mean latency)",
        },
        "spec": {
            "harness": {"name": "submitter"},
            "measurement": {"timer": "submitter_reported", "primaryStatistic": "mean"},
            "comparability": {"family": "kernelindex_direct"},
        },
    }


def direct_environment(product: str, architecture: str) -> JsonObject:
    """Only what a submitter states: the GPU product and architecture."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {
            "name": kebab(f"direct-{product}-{architecture}") or "direct",
            "title": f"{product} ({architecture}), as submitted"[:200],
        },
        "spec": {
            "hardware": {"vendor": "nvidia", "product": product, "architecture": architecture},
            "software": {},
        },
    }


def prepare_submission(
    files: Mapping[str, bytes],
    *,
    latency_ns: int,
    product: str,
    architecture: str,
    observed_at: datetime | None = None,
) -> PreparedSubmission:
    """Map a folder's files and the figures to a checked manifest set (pure but for the clock).

    ``files`` maps ``definition.json``, ``workload.jsonl`` and ``solution.json`` to bytes.
    """
    if isinstance(latency_ns, bool) or not 0 < latency_ns <= MAX_LATENCY_NS:
        raise SubmissionError(f"latency must be a positive integer of ns, got {latency_ns}")
    if not product.strip():
        raise SubmissionError("the GPU product must not be empty")
    if observed_at is not None and observed_at.tzinfo is None:
        raise SubmissionError("the observation time must carry a time zone")
    definition = _object(files, "definition.json")
    workloads = _workload_lines(_file(files, "workload.jsonl"))
    solution_bytes = _file(files, "solution.json")
    solution = _object(files, "solution.json")

    mapped = map_definition(definition, workloads)
    if mapped.problems:
        raise SubmissionError("workload.jsonl: " + "; ".join(mapped.problems))
    assert mapped.suite is not None  # map_definition builds the suite by default
    implementation_of = implementation_from_solution(solution, definition, mapped.operation_digest)

    solution_artifact = Artifact(solution_bytes, SOLUTION_MEDIA_TYPE, "solution.json")
    workload = workload_artifact(definition, workloads)

    implementation = copy.deepcopy(implementation_of.implementation)
    # The importer pins the canonical form of the solution; the agent runs the file as
    # submitted, so the exact bytes are what the implementation names.
    implementation["spec"]["source"] = {
        "contentDigest": solution_artifact.digest,
        "fileName": "solution.json",
        "sizeBytes": len(solution_bytes),
    }
    suite = referencing(mapped.suite, workload)
    protocol = direct_protocol()
    environment = direct_environment(product, architecture)

    key = hashlib.sha256(
        canonical_json(
            {
                "solution": solution_artifact.digest,
                # The digest of the workloads' canonical JSON (the artifact's digest before it
                # kept the documents' key order): a submission's run digest stays what it was.
                "workload": digest_of({"definition": definition, "workloads": workloads}),
                "product": product,
                "architecture": architecture,
                "latencyNs": latency_ns,
            }
        )
    ).hexdigest()
    solution_name = implementation_of.name
    external_id = f"{kebab(solution_name)[:100] or 'solution'}/{key}"
    run_name = f"direct-{kebab(solution_name)[:80] or 'solution'}-{key[:12]}"
    run: JsonObject = {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkRun",
        "metadata": {
            "name": run_name,
            "title": f"{solution_name} · {mapped.name} · {product}"[:200],
        },
        "spec": {
            "implementationDigest": manifest_digest(implementation),
            "workloadDigest": manifest_digest(suite),
            "protocolDigest": manifest_digest(protocol),
            "environmentDigest": manifest_digest(environment),
            "status": "passed",
            "timing": {"primaryStatistic": "mean", "latencyNs": {"mean": latency_ns}},
            "sourceNative": {
                "source": SOURCE,
                "benchmark": mapped.name[:200],
                "externalId": external_id,
                "metrics": {"latency_ns": latency_ns},
            },
            "observedAt": format_time(observed_at or utc_now()),
        },
    }
    manifests = {
        "run": run,
        "protocol": protocol,
        "environment": environment,
        "implementation": implementation,
        "workload": suite,
    }
    checked = check_manifest_set(manifests)
    return PreparedSubmission(
        manifests=manifests,
        run_digest=checked.run_digest,
        run_name=checked.run_name,
        external_id=external_id,
        solution=solution_artifact,
        workload=workload,
    )


def _existing_submission(ledger: Ledger, prepared: PreparedSubmission) -> str | None:
    """The latest run ingested for this submission's external id, if any.

    Scans the ingestion events like the importer's index does; the run name (which carries
    the submission key) filters before any statement is decoded.
    """
    found: str | None = None
    for stored in ledger.stored_states(Run.Ingested):
        if stored.get("run_name") != prepared.run_name:
            continue
        try:
            predicate = statement_of(stored)["predicate"]
        except (ValueError, KeyError, TypeError):
            continue  # damaged records are audit's business
        if predicate.get("source") == SOURCE and predicate.get("externalId") == (
            prepared.external_id
        ):
            found = str(stored["run_digest"])
    return found


def submit_solution(
    ledger: Ledger,
    ingester_key: SigningKey,
    folder_files: Mapping[str, bytes],
    *,
    latency_ns: int,
    product: str,
    architecture: str,
    observed_at: datetime | None = None,
) -> Submission:
    """Store the solution and workload artifacts, then sign and append the run (once)."""
    prepared = prepare_submission(
        folder_files,
        latency_ns=latency_ns,
        product=product,
        architecture=architecture,
        observed_at=observed_at,
    )
    # Stored first: a run must never name an artifact the agent cannot fetch.
    ArtifactStore(ledger.store).put_many([prepared.solution, prepared.workload])

    def result(run_digest: str, receipt: LoggedEvent | None) -> Submission:
        return Submission(
            run_digest=run_digest,
            run_name=prepared.run_name,
            solution_digest=prepared.solution.digest,
            workload_digest=prepared.workload.digest,
            receipt=receipt,
        )

    if observed_at is None:
        existing = _existing_submission(ledger, prepared)
        if existing is not None:
            return result(existing, None)
    elif ledger.run_state(prepared.run_digest) is not None:
        return result(prepared.run_digest, None)
    envelope = ingestion_envelope(
        prepared.manifests,
        ingester_key,
        source=SOURCE,
        snapshot_digest=prepared.solution.digest,
    )
    try:
        receipt = ledger.append(envelope)
    except AlreadyExistsError:
        # Another submitter got there between the look-up and the append: same run.
        return result(prepared.run_digest, None)
    return result(prepared.run_digest, receipt)
