"""The public KernelIndex catalog export → records (pure: lines in, records out).

The export is JSON Lines (zstd-compressed on disk; decompressing is the caller's I/O), one
``{"table": <name>, "row": {...}}`` object a line. Tables come in dependency order: sources,
projects, operations, operation aliases, workloads, implementations, benchmark runs, then
measurements, record events, artifacts and the serving tables.

:func:`map_kernelindex_catalog` mirrors every ``benchmark_runs`` row as an
:class:`ImportRecord` whose manifest set is the row's ``manifest`` (run, protocol, environment)
plus the ``workloads`` row named by ``workloadId`` and the ``implementations`` row named by
``implementationId``. Its external id is the one the source's own importer gives the same
result (KernelBot: :func:`~domain.importers.gpumode.kernelbot_external_id`; FlashInfer:
:func:`~domain.importers.flashinfer_trace.external_id_of`; else ``sourceNative.externalId``,
else the row id), so importing a result from both keeps one id. Nothing stated is trusted:
every digest is recomputed and a row is refused (a :class:`Rejection` with the reason) when
any differs — ``runDigest``, the workload's ``workloadDigest``, the implementation's
``implementationDigest``, the run's protocol/environment/workload/implementation references,
the row's ``protocolKey``, ``environmentKey``, ``correctnessKey`` and ``comparisonKey``
(recomputed with :func:`domain.comparison.comparison_components`) and its ``status``.

:func:`catalog_manifests` yields the other manifests of the export (operations, projects,
workloads, implementations, serving kinds) after the same digest check; they are stored as
manifests, not runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from domain.comparison import comparison_components
from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.catalog_form import json_artifact
from domain.importers.catalog_rows import RUN_TABLE, published_at
from domain.importers.fields import RECORD_ERRORS, MappingError, as_object, reason, text
from domain.importers.flashinfer_trace import SOURCE as FLASHINFER_SOURCE
from domain.importers.flashinfer_trace import external_id_of
from domain.importers.gpumode import SOURCE as KERNELBOT_SOURCE
from domain.importers.gpumode import kernelbot_external_id
from domain.importers.records import ImportRecord, Rejection, Skipped
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set

RUN_MEMBERS: Final = ("run", "protocol", "environment")

# Tables whose rows carry a manifest → the row field stating its digest (None: none stated).
MANIFEST_TABLES: Final[Mapping[str, str | None]] = {
    "projects": None,
    "operations": "semanticDigest",
    "workloads": "workloadDigest",
    "implementations": "implementationDigest",
    "model_revisions": "modelDigest",
    "serving_stack_revisions": "stackDigest",
    "serving_configurations": "configurationDigest",
    "serving_workloads": "workloadDigest",
    "serving_runs": "runDigest",
}
DEFAULT_MANIFEST_TABLES: Final = tuple(MANIFEST_TABLES)


def read_line(line: bytes, number: int) -> tuple[str, dict[str, Any]] | None:
    """``(table, row)`` of one export line; None for a blank line; DomainError if malformed."""
    if not line.strip():
        return None
    try:
        record = as_object(parse_json(line), "line")
        table = text(record.get("table"), "table")
        row = as_object(record.get("row"), "row")
    except DomainError as exc:
        raise MappingError(f"line {number}: {exc.message}") from None
    return table, row


def checked_manifest(row: Mapping[str, Any], digest_field: str | None, what: str) -> dict[str, Any]:
    """The row's manifest, validated; its digest must equal the row's stated one."""
    document = as_object(row.get("manifest"), f"{what}.manifest")
    actual = manifest_digest(document)
    if digest_field is not None:
        stated = row.get(digest_field)
        if stated != actual:
            raise MappingError(
                f"{what}: {digest_field} states {stated} but the manifest digests to {actual}"
            )
    return document


class _Lookup:
    """Rows of a table by id, checked once on first use (most workloads are never used)."""

    def __init__(self, digest_field: str) -> None:
        self.digest_field = digest_field
        self.rows: dict[str, dict[str, Any]] = {}
        self.checked: dict[str, dict[str, Any] | str] = {}

    def add(self, row: dict[str, Any]) -> None:
        row_id = row.get("id")
        if isinstance(row_id, str):
            self.rows[row_id] = row
            self.checked.pop(row_id, None)

    def has(self, row_id: object) -> bool:
        return isinstance(row_id, str) and row_id in self.rows

    def get(self, row_id: str, table: str) -> dict[str, Any]:
        found = self.checked.get(row_id)
        if found is None:
            try:
                found = checked_manifest(self.rows[row_id], self.digest_field, f"{table} {row_id}")
            except RECORD_ERRORS as exc:
                found = reason(exc)
            self.checked[row_id] = found
        if isinstance(found, str):
            raise MappingError(found)
        return found


class _Index:
    """What runs refer to: source slugs and names, workload and implementation rows."""

    def __init__(self) -> None:
        self.sources: dict[str, str] = {}
        self.source_names: dict[str, str] = {}  # slug -> the source's own name
        self.workloads = _Lookup("workloadDigest")
        self.implementations = _Lookup("implementationDigest")

    def add_source(self, row: Mapping[str, Any]) -> None:
        if isinstance(row.get("id"), str) and isinstance(row.get("slug"), str):
            self.sources[row["id"]] = row["slug"]
            if isinstance(row.get("name"), str) and row["name"].strip():
                self.source_names[row["slug"]] = row["name"].strip()

    def ready(self, row: Mapping[str, Any]) -> bool:
        """Whether every row this run names has been seen (the export lists them first)."""
        workload, implementation = row.get("workloadId"), row.get("implementationId")
        return (workload is None or self.workloads.has(workload)) and (
            implementation is None or self.implementations.has(implementation)
        )


def map_kernelindex_catalog(lines: Iterable[bytes]) -> Iterator[ImportRecord | Rejection]:
    """One record per ``benchmark_runs`` row, or a rejection saying which digest disagrees.

    Streams: sources, workloads and implementations are held in memory (a few MB), runs are
    mapped as they come. A run listed before a row it names waits until the end. An export
    without runs gives one :class:`Skipped` saying so.
    """
    index = _Index()
    waiting: list[tuple[int, dict[str, Any]]] = []
    runs = 0
    for number, line in enumerate(lines, 1):
        try:
            parsed = read_line(line, number)
        except DomainError as exc:
            yield Rejection(None, exc.message)
            continue
        if parsed is None:
            continue
        table, row = parsed
        if table == "sources":
            index.add_source(row)
        elif table == "workloads":
            index.workloads.add(row)
        elif table == "implementations":
            index.implementations.add(row)
        elif table == RUN_TABLE:
            runs += 1
            if index.ready(row):
                yield map_catalog_run(row, index, number)
            else:
                waiting.append((number, row))
    for number, row in waiting:
        yield map_catalog_run(row, index, number)
    if runs == 0:
        yield Skipped(
            None,
            f"no {RUN_TABLE} rows in the export: its other tables are manifests, not runs",
        )


def _external_id(
    row: Mapping[str, Any], manifests: Mapping[str, dict[str, Any]], source: str
) -> str:
    """The id the source's own importer gives the same result, so that importing both keeps
    one id per result (else the catalog row's id)."""
    native = manifests["run"]["spec"].get("sourceNative") or {}
    external = native.get("externalId")
    if not isinstance(external, str):
        if source == FLASHINFER_SOURCE:
            # FlashInfer traces have no id of their own: the trace importer's id is made of
            # what the manifests keep.
            return external_id_of(manifests) or str(row["id"])
        return str(row["id"])
    if source == KERNELBOT_SOURCE:
        # One KernelBot submission yields many runs (per case, per runner GPU).
        benchmark = str(native.get("benchmark", ""))
        return kernelbot_external_id(
            external, benchmark, str(manifests["environment"]["metadata"]["name"])
        )
    return external


def map_catalog_run(row: dict[str, Any], index: _Index, number: int) -> ImportRecord | Rejection:
    """One ``benchmark_runs`` row, checked, as a record (or a rejection with the reason)."""
    row_id = row.get("id")
    where = f"line {number}: benchmark run {row_id}"
    try:
        if not isinstance(row_id, str):
            raise MappingError("row has no id")
        bundle = as_object(row.get("manifest"), "manifest")
        extra = sorted(set(bundle) - set(RUN_MEMBERS))
        if extra:
            raise MappingError(f"manifest has unexpected members: {', '.join(extra)}")
        manifests: dict[str, dict[str, Any]] = {
            role: as_object(bundle.get(role), f"manifest.{role}") for role in RUN_MEMBERS
        }
        run = manifests["run"]
        run_digest = manifest_digest(run)
        if row.get("runDigest") != run_digest:
            raise MappingError(
                f"runDigest states {row.get('runDigest')} but the run digests to {run_digest}"
            )
        workload_id, implementation_id = row.get("workloadId"), row.get("implementationId")
        if workload_id is not None:
            if not index.workloads.has(workload_id):
                raise MappingError(f"workload {workload_id} is not in the export")
            manifests["workload"] = index.workloads.get(workload_id, "workload")
        if implementation_id is not None:
            if not index.implementations.has(implementation_id):
                raise MappingError(f"implementation {implementation_id} is not in the export")
            manifests["implementation"] = index.implementations.get(
                implementation_id, "implementation"
            )
        native = run["spec"].get("sourceNative") or {}
        source = native.get("source") or index.sources.get(str(row.get("sourceId")))
        if not isinstance(source, str):
            raise MappingError(f"source {row.get('sourceId')} is not in the export")
        check_manifest_set(manifests)
        # The set is validated and its digests agree: the key may read the manifests as they are.
        check_and_compare(row, manifests)
        return ImportRecord(
            source=source,
            external_id=_external_id(row, manifests, source),
            manifests=manifests,
            snapshot=json_artifact(row, f"{RUN_TABLE}:{row_id}"),
            published_at=published_at(row),
            source_name=index.source_names.get(source),
        )
    except RECORD_ERRORS as exc:
        return Rejection(row_id if isinstance(row_id, str) else None, f"{where}: {reason(exc)}")


def check_and_compare(row: Mapping[str, Any], manifests: Mapping[str, dict[str, Any]]) -> None:
    """The row's denormalised keys must equal what its manifests give.

    Call it on a manifest set that :func:`check_manifest_set` accepted (validated, workload
    digest equal to the run's reference): the comparison key then reads fields as they are.
    """
    run = manifests["run"]
    status = run["spec"].get("status")
    if row.get("status") != status:
        raise MappingError(f"status states {row.get('status')!r} but the run says {status!r}")
    workload = manifests.get("workload")
    stated_key = row.get("comparisonKey")
    if workload is None:
        if stated_key is not None:
            raise MappingError("comparisonKey is stated but the run names no workload to check it")
        return
    components = comparison_components(run, workload, trusted=True)
    for key, actual in (
        ("protocolKey", components.protocol),
        ("environmentKey", components.environment),
        ("correctnessKey", components.correctness),
        ("comparisonKey", components.key),
    ):
        if row.get(key) != actual:
            raise MappingError(f"{key} states {row.get(key)} but recomputes to {actual}")


def catalog_manifests(
    lines: Iterable[bytes],
    *,
    tables: Iterable[str] = DEFAULT_MANIFEST_TABLES,
    rejected: list[Rejection] | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(table, manifest)`` for every row of ``tables`` whose manifest checks out.

    A row whose manifest is invalid or digests differently from the digest it states is
    skipped, and (when ``rejected`` is given) a :class:`Rejection` saying why is appended to it.
    Workloads and implementations are included by default: most catalog workloads (3,924 of
    5,627) and some implementations are named by no run, so the run records alone miss them.
    """
    wanted = set(tables)
    unknown = wanted - set(MANIFEST_TABLES)
    if unknown:
        raise ValueError(f"tables without manifests: {', '.join(sorted(unknown))}")
    for number, line in enumerate(lines, 1):
        row_id: str | None = None
        try:
            parsed = read_line(line, number)
            if parsed is None or parsed[0] not in wanted:
                continue
            table, row = parsed
            row_id = row["id"] if isinstance(row.get("id"), str) else None
            where = f"line {number}: {table} {row_id}"
            document = checked_manifest(row, MANIFEST_TABLES[table], where)
        except RECORD_ERRORS as exc:
            if rejected is not None:
                rejected.append(Rejection(row_id, reason(exc)))
            continue
        yield table, document
