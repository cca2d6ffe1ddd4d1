"""Turning mapped source records into signed ingestion events, idempotently.

For each record: if the ledger already holds that exact run, nothing is appended (a re-run of
an import adds no event). If the source's record changed — same source and external id, a
different run digest — the new run is ingested and an admin-signed lifecycle event marks the
old run superseded by it; the old run stays readable. The raw source bytes the record was
mapped from, and any artifacts it carries, are stored by digest; the ingestion statement
names the snapshot by digest. A bad record is reported with its reason and skipped.

A supersession never drops a field the held run has. A record that differs from the held run
only by lacking fields of it (a poorer view of the same result: a KernelBot row whose code is
kept apart, FlashInfer traces mapped without the dataset commit, after the catalog's richer
copy) keeps the held run: it counts as unchanged and ``kept`` says which fields it lacks. A
record that changed *and* lacks fields of the held run is rejected with both, and nothing is
written. Input that yields no run by design (:class:`~domain.importers.records.Skipped`) is
listed under ``skipped`` with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from domain.errors import DomainError
from domain.importers.records import (
    Artifact,
    ImportRecord,
    Rejection,
    Skipped,
    without_artifact_references,
)
from domain.manifests.canonical_form import canonical_manifest
from domain.manifests.manifest_set import (
    ATTACHABLE_MEMBERS,
    check_manifest_set,
    lacking_references,
)
from domain.timestamps import parse_time
from ledger.aggregates import Run
from ledger.application import Ledger
from ledger.errors import AlreadyExistsError
from ledger.signing.authoring import attachment_envelope, ingestion_envelope, lifecycle_envelope
from ledger.signing.keys import SigningKey
from ledger.store.artifacts import MAX_ARTIFACT_BYTES, ArtifactError, ArtifactStore
from ledger.store.stored_events import statement_of

# The run's references to the other members: they follow those members, compared on their own.
_REFERENCES: Final = frozenset(
    ("protocolDigest", "environmentDigest", "workloadDigest", "implementationDigest")
)
_SHOWN: Final = 6  # field paths named in a reason


@dataclass
class ImportSummary:
    new: int = 0
    unchanged: int = 0  # includes the kept ones
    superseded: int = 0
    attached: int = 0  # held runs given manifests they named and lacked
    rejected: list[tuple[str | None, str]] = field(default_factory=list)
    events: int = 0
    # Counted unchanged though they differ: the held run has fields the record lacks.
    kept: list[tuple[str | None, str]] = field(default_factory=list)
    # Input that yields no run by design (a leaderboard listing, a folder without traces).
    skipped: list[tuple[str | None, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "new": self.new,
            "unchanged": self.unchanged,
            "superseded": self.superseded,
            "attached": self.attached,
            "rejected": [{"externalId": e, "reason": r} for e, r in self.rejected],
            "kept": [{"externalId": e, "reason": r} for e, r in self.kept],
            "skipped": [{"externalId": e, "reason": r} for e, r in self.skipped],
            "events": self.events,
        }


def _leaves(value: object, path: str) -> Iterator[tuple[str, object]]:
    """``(path, value)`` of every scalar (an empty object or list holds nothing to drop)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def _manifest_leaves(role: str, document: Mapping[str, Any]) -> dict[str, object]:
    canonical = without_artifact_references(canonical_manifest(document))
    if role == "run":
        spec = {k: v for k, v in canonical["spec"].items() if k not in _REFERENCES}
        canonical = {**canonical, "spec": spec}
    return dict(_leaves(canonical, role))


def compare_records(held: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(dropped, changed)`` field paths of ``new`` against ``held`` (two manifest sets):
    dropped = present in the held set and absent from the new one; changed = present in both
    with different values, or present only in the new one. Manifests are compared in their
    canonical form, metadata included but for artifact references (what a rerun fetches, not a
    fact of the result: a record naming them is not "changed" against a held copy without
    them, the catalog's copy of a FlashInfer run, nor poorer than one with them); the run's
    digest references are left out (they follow the members they name, which are compared
    themselves)."""
    dropped: list[str] = []
    changed: list[str] = []
    for role in sorted(set(held) | set(new)):
        old_doc, new_doc = held.get(role), new.get(role)
        if old_doc is None or new_doc is None:
            if old_doc is not None:
                dropped.append(role)
            elif new_doc is not None:
                changed.append(role)
            continue
        before, after = _manifest_leaves(role, old_doc), _manifest_leaves(role, new_doc)
        dropped.extend(path for path in before if path not in after)
        changed.extend(
            path
            for path, value in after.items()
            if path not in before or not _same(before[path], value)
        )
    return dropped, changed


def _same(a: object, b: object) -> bool:
    """JSON equality: ``1 == 1.0``, but ``true`` is not ``1``."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _paths(paths: list[str]) -> str:
    shown = ", ".join(paths[:_SHOWN])
    return shown if len(paths) <= _SHOWN else f"{shown} and {len(paths) - _SHOWN} more"


# (run manifest, roles it has) → the attachable manifests it names and lacks that the
# ledger holds (``api.run_intake.held_manifests``).
Held = Callable[[Mapping[str, Any], set[str]], dict[str, dict[str, Any]]]

# Records admitted per transaction: one commit, one log sequencing pass for the group (an
# import of the 7,857-run catalog commits about 120 times, not 7,857).
GROUP: Final = 64


@dataclass
class _Staged:
    """A record whose ingestion envelope waits for its group's commit."""

    record: ImportRecord
    key: tuple[str, str | None]
    digest: str
    previous: str | None
    envelope: dict[str, Any]


@dataclass
class _FollowUp:
    """An envelope about a held run that waits for its group's ingestions: a supersession (of
    the run a changed record replaces, or one an interrupted import left owed) or an
    attachment of manifests the run lacks."""

    external_id: str | None
    kind: str  # "supersede" | "attach"
    envelope: dict[str, Any]
    run: str  # the run the envelope is about
    roles: tuple[str, ...] = ()  # what an attachment adds


class ImportStopped(DomainError):
    """The store refused a group's commit: nothing of that group is stored; the import is
    idempotent, so running it again completes it."""

    code = "import-stopped"


class Importer:
    """Records in, signed events out, in groups (see ``GROUP``). Each group admits its
    ingestions in one ``append_many``, then what follows from them in another (supersessions
    of the runs changed records replace, and of runs an interrupted import left owed;
    attachments of manifests held runs lack), then stores the raw bytes and artifacts of the
    records the ledger holds. A record refused on admission is reported with the ledger's
    reason, writes nothing, and leaves the rest of its group as it is; a store that refuses a
    whole commit stops the import (:class:`ImportStopped`), saying what was done."""

    def __init__(
        self,
        ledger: Ledger,
        ingester: SigningKey,
        admin: SigningKey | None,
        group: int = GROUP,
        held: Held | None = None,
    ) -> None:
        self.ledger = ledger
        # The attachable manifests a run names by digest and lacks, from the ledger (the
        # read models know them by digest; the ledger itself does not, hence a parameter).
        self.held = held
        self._seen: dict[str, dict[str, Any]] = {}  # digest → manifest, from this import
        self.ingester = ingester
        self.admin = admin
        self.artifacts = ArtifactStore(ledger.store)
        self.group = group
        # (source, external id) → the runs ingested for it, oldest first; run → its roles.
        self.runs_of: dict[tuple[str, str | None], list[str]] = {}
        self.roles: dict[str, set[str]] = {}
        self._index()
        self._checked: set[tuple[str, str | None]] = set()  # keys whose older runs are checked
        self._staged: list[_Staged] = []
        self._follow: list[_FollowUp] = []
        self._unchanged: list[ImportRecord] = []  # their bytes are stored with the next group

    def _index(self) -> None:
        """Each record's runs and each run's manifest roles, from the ingestion and attachment
        events (damaged records are audit's business, not the importer's)."""
        for stored in self.ledger.stored_states(Run.Ingested):
            try:
                predicate = statement_of(stored)["predicate"]
                digest = str(stored["run_digest"])
                self.roles[digest] = set(predicate["manifests"])
                if predicate.get("externalId") is not None:
                    self._ran((str(predicate["source"]), str(predicate["externalId"])), digest)
            except (ValueError, KeyError, TypeError):
                continue
        for stored in self.ledger.stored_states(Run.ManifestsAttached):
            try:
                self.roles.setdefault(str(stored["run_digest"]), set()).update(stored["roles"])
            except (KeyError, TypeError):
                continue

    def _ran(self, key: tuple[str, str | None], digest: str) -> None:
        """``digest`` is now the latest run of the record ``key``."""
        runs = self.runs_of.setdefault(key, [])
        if digest in runs:
            runs.remove(digest)  # the record came back to an older run
        runs.append(digest)

    def run(
        self,
        items: Iterable[ImportRecord | Rejection],
        progress: Callable[[ImportSummary], None] | None = None,
    ) -> ImportSummary:
        summary = ImportSummary()
        for item in items:
            if isinstance(item, Skipped):
                summary.skipped.append((item.external_id, item.reason))
            elif isinstance(item, Rejection):
                summary.rejected.append((item.external_id, item.reason))
            else:
                key = (item.source, item.external_id)
                if any(staged.key == key for staged in self._staged):
                    # The same record twice: the second is compared with the first, stored.
                    self._flush(summary)
                try:
                    self._one(item, summary)
                except DomainError as exc:
                    summary.rejected.append((item.external_id, exc.message))
            if len(self._staged) + len(self._follow) >= self.group:
                self._flush(summary)
            if progress is not None:
                progress(summary)
        self._flush(summary)
        if progress is not None:
            progress(summary)
        return summary

    def _one(self, record: ImportRecord, summary: ImportSummary) -> None:
        checked = check_manifest_set(record.manifests)
        _check_sizes(record)
        record = self._completed(record, checked.digests)
        digest = checked.run_digest
        key = (record.source, record.external_id)
        runs = self.runs_of.get(key, [])
        previous = runs[-1] if runs else None
        if previous == digest:
            self._unchanged.append(record)  # an earlier import may have died before its bytes
            summary.unchanged += 1
            self._owed(key, record)
            return
        if previous is not None and self._keeps(previous, record, summary):
            return
        if previous is not None and self.admin is None:
            raise DomainError(
                f"{record.source} record {record.external_id} changed; superseding the old run "
                f"{previous} needs the admin key, so nothing was written"
            )
        envelope = ingestion_envelope(
            record.manifests,
            self.ingester,
            source=record.source,
            external_id=record.external_id,
            fetched_at=parse_time(record.fetched_at) if record.fetched_at else None,
            snapshot_digest=record.snapshot.digest,
            published_at=parse_time(record.published_at) if record.published_at else None,
            source_name=record.source_name,
        )
        self._staged.append(_Staged(record, key, digest, previous, envelope))

    def _owed(self, key: tuple[str, str | None], record: ImportRecord) -> None:
        """What a held, unchanged run is still owed: the supersession of its record's older
        runs (an import that stopped between a group's two commits), and the manifests it
        names and lacks that this import or the ledger now has (as ``kernelindex ingest``
        attaches them)."""
        runs = self.runs_of.get(key, [])
        latest = runs[-1]
        if len(runs) > 1 and key not in self._checked and self.admin is not None:
            self._checked.add(key)
            for older in runs[:-1]:
                held = self.ledger.run_state(older)
                if held is not None and held.superseded_by is None and not held.retracted:
                    self._follow.append(
                        _FollowUp(
                            record.external_id,
                            "supersede",
                            self._supersession(record, older, held.run_name, latest),
                            older,
                        )
                    )
        lacking = lacking_references(record.manifests["run"], self.roles.get(latest, set()))
        taken = {role: record.manifests[role] for role in lacking if role in record.manifests}
        if taken and not any(f.run == latest and f.kind == "attach" for f in self._follow):
            name = str(record.manifests["run"]["metadata"]["name"])
            envelope = attachment_envelope(latest, name, taken, self.ingester)
            self._follow.append(
                _FollowUp(record.external_id, "attach", envelope, latest, tuple(taken))
            )

    def _completed(self, record: ImportRecord, digests: Mapping[str, str]) -> ImportRecord:
        """The record with the attachable manifests its run names and lacks, taken from
        this import's earlier records or from what the ledger holds, as ``kernelindex ingest``
        takes them: a leaderboard row that names its workload by digest lands in its group."""
        for role, digest in digests.items():
            if role in ATTACHABLE_MEMBERS:
                self._seen.setdefault(digest, record.manifests[role])
        wanted = lacking_references(record.manifests["run"], record.manifests)
        taken = {role: self._seen[d] for role, d in wanted.items() if d in self._seen}
        if self.held is not None and len(taken) < len(wanted):
            taken |= self.held(record.manifests["run"], set(record.manifests) | set(taken))
        if not taken:
            return record
        return replace(record, manifests={**record.manifests, **taken})

    def _flush(self, summary: ImportSummary) -> None:
        staged, self._staged = self._staged, []
        held, self._unchanged = self._unchanged, []
        try:
            if staged:
                held.extend(self._admit(staged, summary))
            follow, self._follow = self._follow, []
            if follow:
                self._follow_up(follow, summary)
        except DomainError as exc:
            raise ImportStopped(
                f"the import stopped: {exc.message}. Before it, {summary.new} new, "
                f"{summary.unchanged} unchanged, {summary.superseded} superseded were stored; "
                "the group in flight was not. Run the import again: it is idempotent."
            ) from exc
        # After admission, so a refused record writes nothing; a crash before this line is
        # mended by the next import, which finds the runs unchanged and stores their bytes.
        self.artifacts.put_many([a for record in held for a in _bytes_of(record)])

    def _admit(self, staged: list[_Staged], summary: ImportSummary) -> list[ImportRecord]:
        """Admit the group's ingestions and queue what follows from them; return the records
        the ledger now holds a run for."""
        held: list[ImportRecord] = []
        results = self.ledger.append_many([s.envelope for s in staged])
        for item, result in zip(staged, results, strict=True):
            if isinstance(result, AlreadyExistsError):  # held already, from another record
                summary.unchanged += 1
            elif isinstance(result, DomainError):
                summary.rejected.append((item.record.external_id, result.message))
                continue
            else:
                summary.events += 1
                self.roles[item.digest] = set(item.record.manifests)
                if item.previous is None:
                    summary.new += 1
                else:
                    old = self.ledger.run_state(item.previous)
                    name = old.run_name if old is not None else item.previous
                    envelope = self._supersession(item.record, item.previous, name, item.digest)
                    self._follow.append(
                        _FollowUp(item.record.external_id, "supersede", envelope, item.previous)
                    )
            self._ran(item.key, item.digest)
            held.append(item.record)
        return held

    def _follow_up(self, follow: list[_FollowUp], summary: ImportSummary) -> None:
        outcomes = self.ledger.append_many([f.envelope for f in follow])
        for item, outcome in zip(follow, outcomes, strict=True):
            if isinstance(outcome, AlreadyExistsError):
                continue  # done already (another record, or another importer)
            if isinstance(outcome, DomainError):
                summary.rejected.append(
                    (item.external_id, f"{item.kind} of {item.run} refused: {outcome.message}")
                )
                continue
            summary.events += 1
            if item.kind == "supersede":
                summary.superseded += 1
            else:
                summary.attached += 1
                self.roles.setdefault(item.run, set()).update(item.roles)

    def _keeps(self, previous: str, record: ImportRecord, summary: ImportSummary) -> bool:
        """Whether the held run stays as it is because the record lacks fields it has (True:
        counted unchanged, ``kept`` says why); raises when the record changed as well."""
        held = self.ledger.run_state(previous)
        if held is None:
            return False
        dropped, changed = compare_records(held.manifests(), record.manifests)
        if not dropped:
            return False
        what = f"the {record.source} record {record.external_id}"
        if changed:
            raise DomainError(
                f"{what} changed ({_paths(changed)}) but lacks what the held run {previous} "
                f"has ({_paths(dropped)}); superseding would drop it, so nothing was written"
            )
        self._unchanged.append(record)
        summary.unchanged += 1
        summary.kept.append(
            (
                record.external_id,
                f"kept the held run {previous}: {what} lacks {_paths(dropped)} and is otherwise "
                "the same",
            )
        )
        return True

    def _supersession(self, record: ImportRecord, old: str, name: str, new: str) -> dict[str, Any]:
        """The admin-signed lifecycle envelope marking ``old`` superseded by ``new``."""
        assert self.admin is not None  # _one refuses a changed record without it, _owed skips
        return lifecycle_envelope(
            old,
            name,
            self.admin,
            action="supersede",
            reason=f"the {record.source} record {record.external_id} changed",
            superseded_by=new,
        )


def _bytes_of(record: ImportRecord) -> list[Artifact]:
    return [record.snapshot, *record.artifacts]


def _check_sizes(record: ImportRecord) -> None:
    """Refuse the record before anything of it is written (not half-way through its group)."""
    for artifact in _bytes_of(record):
        if len(artifact.content) > MAX_ARTIFACT_BYTES:
            raise ArtifactError(
                f"artifact {artifact.name!r} is {len(artifact.content)} bytes; the limit is "
                f"{MAX_ARTIFACT_BYTES}"
            )
