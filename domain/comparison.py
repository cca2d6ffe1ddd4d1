"""Comparison keys: which runs may be ranked against each other (docs/design.md §8).

The recipe is KernelIndex's (its ``comparison.ts``), pinned against every one of the 7,857
benchmark runs of the public catalog export (``tests/domain/test_comparison_keys.py``)::

    comparisonKey  = sha256(JCS({v: 1, operation, workload, protocol, environment,
                                 correctness, metric}))
    operation      = workload.spec.operationSpecDigest
    workload       = run.spec.workloadDigest   (the workload manifest's digest)
    protocol       = run.spec.protocolDigest   (= the catalog's ``protocolKey``)
    environment    = run.spec.environmentDigest (= the catalog's ``environmentKey``)
    correctness    = sha256(JCS({correctness: workload.spec.correctness}))
                                               (= the catalog's ``correctnessKey``)
    metric         = "<metric>:<statistic>:<unit>" of the primary measurement,
                     or "none" when the run states no measurement at all

Every value is a ``sha256:<hex>`` string except ``v`` (the integer 1) and ``metric``.

Two details are not what a first reading of docs/design.md §8 suggests:

* ``correctness`` hashes the block *wrapped* in an object, ``{"correctness": block}``, not the
  block itself;
* ``metric`` is not always ``latency:<statistic>:ns``: GPU MODE leaderboard runs rank by a
  ``score`` in seconds (``score:geomean:s``, ``score:unspecified:s``), and failed runs that
  carry no measurement use the bare string ``"none"``.

The primary measurement (:func:`primary_measurement`) is ``spec.timing`` when present
(metric ``latency``, statistic ``timing.primaryStatistic``, unit ``ns``), else the first entry
of ``spec.measurements``, else none. In the catalog the timing statistic always equals the
protocol's ``measurement.primaryStatistic``, runs with both timing and measurements always rank
by timing (their measurement is a ``latency:std:ns`` side figure), and measurement-only runs
always carry exactly one measurement; the order of precedence beyond that is our choice.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeGuard

import msgspec

from domain.canonical import digest_of, is_digest
from domain.errors import DigestMismatchError, DomainError, ManifestError
from domain.manifests.canonical_form import canonical_manifest, digest_input, duration_to_ns

COMPARISON_KEY_VERSION = 1
NO_METRIC = "none"
LATENCY_METRIC = "latency"
LATENCY_UNIT = "ns"

_WORKLOAD_KINDS = ("WorkloadCase", "WorkloadSuite")


class ComparisonKeyError(DomainError):
    """A run cannot be placed in a comparison group (for example: its workload is unknown)."""

    code = "no-comparison-key"


class PrimaryMeasurement(NamedTuple):
    """The figure a run is ranked by: ``(metric, statistic, unit, value)``.

    ``metric == "none"`` (and the other three ``None``) when the run states no measurement.
    ``value`` is an integer count of ns for latency, the source's number otherwise; it is
    ``None`` as well when the timing block names a primary statistic it does not report.
    """

    metric: str
    statistic: str | None
    unit: str | None
    value: int | float | None

    @property
    def key(self) -> str:
        """The ``metric`` component of the comparison key."""
        if self.metric == NO_METRIC:
            return NO_METRIC
        return f"{self.metric}:{self.statistic}:{self.unit}"

    @property
    def is_latency(self) -> bool:
        return self.metric == LATENCY_METRIC and self.unit == LATENCY_UNIT


NO_MEASUREMENT = PrimaryMeasurement(NO_METRIC, None, None, None)


class ComparisonComponents(msgspec.Struct, frozen=True):
    """The seven inputs of a comparison key, in the names KernelIndex hashes."""

    operation: str
    workload: str
    protocol: str
    environment: str
    correctness: str
    metric: str
    v: int = COMPARISON_KEY_VERSION

    def as_json(self) -> dict[str, Any]:
        return {
            "v": self.v,
            "operation": self.operation,
            "workload": self.workload,
            "protocol": self.protocol,
            "environment": self.environment,
            "correctness": self.correctness,
            "metric": self.metric,
        }

    @property
    def key(self) -> str:
        return _key_digest(
            self.v,
            self.operation,
            self.workload,
            self.protocol,
            self.environment,
            self.correctness,
            self.metric,
        )


# --- reading fields -------------------------------------------------------------------------------
#
# Hot: a projection rebuild derives a comparison key for every run. ``isinstance(x, dict)``
# answers for the dicts JSON decodes to before the (slower) ``Mapping`` check, and a string
# seen to be a digest is remembered as one; the answers are those of the plain checks.


# ``isinstance(x, MAPPINGS)``: ``isinstance(x, Mapping)``, answered for a dict without the ABC.
MAPPINGS = (dict, Mapping)


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, MAPPINGS)


# Strings (exactly ``str``) already seen to match the digest pattern: a bounded set, cleared
# when full, so a group's shared digests are matched once rather than once per run.
_DIGESTS_SEEN: set[str] = set()
_DIGESTS_SEEN_MAX = 1 << 16


def _is_digest(value: object) -> bool:
    if type(value) is str and value in _DIGESTS_SEEN:
        return True
    if not is_digest(value):
        return False
    if type(value) is str:
        if len(_DIGESTS_SEEN) >= _DIGESTS_SEEN_MAX:
            _DIGESTS_SEEN.clear()
        _DIGESTS_SEEN.add(value)
    return True


def _spec(document: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    spec = document.get("spec")
    if not _is_mapping(spec):
        raise ManifestError(f"{what}: has no spec object")
    return spec


def _digest_field(spec: Mapping[str, Any], field: str, what: str) -> str:
    value = spec.get(field)
    if not _is_digest(value):
        raise ManifestError(f"{what}: spec.{field} must be a sha256:<64 hex> digest")
    assert isinstance(value, str)
    return value


def _run_spec(run: Mapping[str, Any]) -> Mapping[str, Any]:
    if run.get("kind") != "BenchmarkRun":
        raise ManifestError(f"expected a BenchmarkRun manifest, got kind {run.get('kind')!r}")
    return _spec(run, "BenchmarkRun")


def _workload_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    if workload.get("kind") not in _WORKLOAD_KINDS:
        raise ManifestError(
            f"expected a WorkloadCase or WorkloadSuite manifest, got kind {workload.get('kind')!r}"
        )
    return _spec(workload, str(workload["kind"]))


# --- components -----------------------------------------------------------------------------------


def operation_digest(workload: Mapping[str, Any]) -> str:
    """``operation``: the workload's ``spec.operationSpecDigest``."""
    return _digest_field(_workload_spec(workload), "operationSpecDigest", "workload")


def workload_digest(run: Mapping[str, Any]) -> str:
    """``workload``: the run's ``spec.workloadDigest``."""
    return _digest_field(_run_spec(run), "workloadDigest", "BenchmarkRun")


def protocol_key(run: Mapping[str, Any]) -> str:
    """``protocol`` (the catalog's ``protocolKey``): the run's ``spec.protocolDigest``."""
    return _digest_field(_run_spec(run), "protocolDigest", "BenchmarkRun")


def environment_key(run: Mapping[str, Any]) -> str:
    """``environment`` (the catalog's ``environmentKey``): the run's ``spec.environmentDigest``."""
    return _digest_field(_run_spec(run), "environmentDigest", "BenchmarkRun")


# ``json.dumps(block, sort_keys=True, ensure_ascii=False)``, without making an encoder per call.
_BLOCK_TEXT = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


# Correctness blocks made only of string fields (every block in the catalog), by their items
# in order: a key that equal blocks of that shape share and no other block has.
_FLAT_BLOCKS: dict[tuple[tuple[str, str], ...], str] = {}
_FLAT_BLOCKS_MAX = 4096


def correctness_key_of(block: Mapping[str, Any]) -> str:
    """``sha256(JCS({"correctness": block}))`` for a correctness block."""
    # Few distinct blocks exist (three in the whole catalog): memoise on their JSON text, and
    # a dict of strings on its items (no JSON text to write: its digest is the text's).
    if type(block) is dict:
        items = tuple(block.items())
        if all(type(k) is str and type(v) is str for k, v in items):
            found = _FLAT_BLOCKS.get(items)
            if found is None:
                if len(_FLAT_BLOCKS) >= _FLAT_BLOCKS_MAX:
                    _FLAT_BLOCKS.clear()
                found = _FLAT_BLOCKS[items] = _correctness_digest(_BLOCK_TEXT(block))
            return found
    return _correctness_digest(_BLOCK_TEXT(block))


@functools.lru_cache(maxsize=4096)
def _correctness_digest(block_json: str) -> str:
    return digest_of({"correctness": json.loads(block_json)})


@functools.lru_cache(maxsize=65536)
def _key_digest(
    v: int,
    operation: str,
    workload: str,
    protocol: str,
    environment: str,
    correctness: str,
    metric: str,
) -> str:
    # Pure in its string inputs, and runs share groups: memoised for projection rebuilds.
    return digest_of(
        {
            "v": v,
            "operation": operation,
            "workload": workload,
            "protocol": protocol,
            "environment": environment,
            "correctness": correctness,
            "metric": metric,
        }
    )


def _correctness_of_spec(spec: Mapping[str, Any]) -> str:
    block = spec.get("correctness")
    if not _is_mapping(block):
        raise ManifestError("workload: spec.correctness must be an object")
    return correctness_key_of(block)


def correctness_key(workload: Mapping[str, Any]) -> str:
    """``correctness`` (the catalog's ``correctnessKey``) of a workload manifest.

    The schema requires ``spec.correctness``; it is refused when absent rather than guessed.
    """
    return _correctness_of_spec(_workload_spec(workload))


def workload_components(workload: Mapping[str, Any]) -> tuple[str, str]:
    """``(operation, correctness)``: the two components a workload manifest gives every run
    on it (:func:`operation_digest`, then :func:`correctness_key`, each failing as they do)."""
    spec = _workload_spec(workload)
    return _digest_field(spec, "operationSpecDigest", "workload"), _correctness_of_spec(spec)


def _latency_value(value: object, where: str) -> int | float | None:
    if value is None:
        return None
    if type(value) is int:
        return value  # what duration_to_ns returns for an int, checked as below
    converted = duration_to_ns(value, where)  # "1.2 ms" → 1200000; integers pass through
    if isinstance(converted, bool) or not isinstance(converted, int | float):
        raise ManifestError(f"{where}: must be a number of ns or a duration, got {value!r}")
    return converted


def primary_measurement(run: Mapping[str, Any]) -> PrimaryMeasurement:
    """The run's primary measurement (see the module docstring for the precedence).

    Accepts a raw or canonical ``BenchmarkRun`` manifest: a latency written as a duration
    (``"1.75 ms"``) is converted to ns with the §4 rules. The run's ``status`` plays no part:
    in the catalog every run without a measurement is a failed one and vice versa, so the
    export cannot tell the two readings apart; we follow the data.
    """
    return _primary_of_spec(_run_spec(run))


def readable_primary(run: Mapping[str, Any]) -> PrimaryMeasurement:
    """:func:`primary_measurement`, or no measurement where the run's does not read as one
    value. Admission refuses such runs (``check_manifest_set``); one a ledger admitted before
    it did is shown and folded without a claim, never a failure that stops every view."""
    try:
        return primary_measurement(run)
    except DomainError:
        return NO_MEASUREMENT


def _primary_of_spec(spec: Mapping[str, Any]) -> PrimaryMeasurement:
    timing = spec.get("timing")
    if _is_mapping(timing):
        statistic = timing.get("primaryStatistic")
        latency = timing.get("latencyNs")
        if not isinstance(statistic, str) or not _is_mapping(latency):
            raise ManifestError(
                "BenchmarkRun: spec.timing needs primaryStatistic and a latencyNs object"
            )
        value = _latency_value(latency.get(statistic), f"spec.timing.latencyNs.{statistic}")
        return PrimaryMeasurement(LATENCY_METRIC, statistic, LATENCY_UNIT, value)
    measurements = spec.get("measurements")
    if isinstance(measurements, list) and measurements:
        first = measurements[0]
        if not _is_mapping(first):
            raise ManifestError("BenchmarkRun: spec.measurements[0] must be an object")
        metric, statistic, unit, value = (
            first.get("metric"),
            first.get("statistic"),
            first.get("unit"),
            first.get("value"),
        )
        if not (isinstance(metric, str) and isinstance(statistic, str) and isinstance(unit, str)):
            raise ManifestError("BenchmarkRun: spec.measurements[0] needs metric, statistic, unit")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ManifestError("BenchmarkRun: spec.measurements[0].value must be a number")
        return PrimaryMeasurement(metric, statistic, unit, value)
    return NO_MEASUREMENT


def metric_key(run: Mapping[str, Any]) -> str:
    """``metric``: ``"<metric>:<statistic>:<unit>"`` of the primary measurement, or ``"none"``."""
    return primary_measurement(run).key


# --- the key --------------------------------------------------------------------------------------


def comparison_components(
    run: Mapping[str, Any],
    workload: Mapping[str, Any] | None,
    *,
    operation: str | None = None,
    correctness: Mapping[str, Any] | None = None,
    trusted: bool = False,
) -> ComparisonComponents:
    """The seven inputs of the comparison key of ``run``.

    ``workload`` is the run's WorkloadCase/WorkloadSuite manifest. Unless ``trusted``, both
    manifests are validated against their strict schemas and canonicalised (§4), and the
    workload's digest must equal ``run.spec.workloadDigest`` (:class:`DigestMismatchError`
    otherwise). Pass ``trusted=True`` only for manifests the ledger has already admitted in
    canonical form: then fields are read as they are.

    Without a workload, ``operation`` (an OperationSpec digest) and ``correctness`` (the
    workload's correctness block) must both be given, or :class:`ComparisonKeyError` says
    the run cannot be grouped. When a workload is given they are not allowed: the workload is
    the only source of truth for them.
    """
    values = _component_values(run, workload, operation, correctness, trusted, None)
    return ComparisonComponents(*values)


def comparison_key(
    run: Mapping[str, Any],
    workload: Mapping[str, Any] | None,
    *,
    operation: str | None = None,
    correctness: Mapping[str, Any] | None = None,
    trusted: bool = False,
    primary: PrimaryMeasurement | None = None,
) -> str:
    """``sha256:<hex>`` comparison key of ``run`` (see :func:`comparison_components`).

    ``primary``: the run's :func:`primary_measurement`, when the caller has it already (it
    is then not read again); it must be exactly what that function returns for ``run``."""
    values = _component_values(run, workload, operation, correctness, trusted, primary)
    return _key_digest(COMPARISON_KEY_VERSION, *values)


def _component_values(
    run: Mapping[str, Any],
    workload: Mapping[str, Any] | None,
    operation: str | None,
    correctness: Mapping[str, Any] | None,
    trusted: bool,
    primary: PrimaryMeasurement | None,
) -> tuple[str, str, str, str, str, str]:
    """(operation, workload, protocol, environment, correctness, metric), each checked in
    that order of failure: the run's workload digest first, then the workload's components,
    then the run's protocol, environment and metric."""
    if not trusted:
        run = canonical_manifest(run)
        if workload is not None:
            workload = canonical_manifest(workload)
        primary = None  # of the canonical run, read below
    run_spec = _run_spec(run)
    stated_workload = _digest_field(run_spec, "workloadDigest", "BenchmarkRun")
    if workload is not None:
        if operation is not None or correctness is not None:
            raise ComparisonKeyError(
                "operation and correctness come from the workload manifest when one is given"
            )
        if not trusted:
            actual = digest_of(digest_input(workload))
            if actual != stated_workload:
                raise DigestMismatchError(
                    f"the workload manifest digests to {actual}, but the run names "
                    f"{stated_workload}"
                )
        operation, correctness_digest = workload_components(workload)
    else:
        if operation is None or correctness is None:
            raise ComparisonKeyError(
                f"the run's workload {stated_workload} is unknown: its operation spec digest "
                "and correctness block are needed for a comparison key"
            )
        if not is_digest(operation):
            raise ComparisonKeyError(f"operation {operation!r} is not a sha256:<64 hex> digest")
        correctness_digest = correctness_key_of(correctness)
    protocol = _digest_field(run_spec, "protocolDigest", "BenchmarkRun")
    environment = _digest_field(run_spec, "environmentDigest", "BenchmarkRun")
    metric = (primary if primary is not None else _primary_of_spec(run_spec)).key
    return operation, stated_workload, protocol, environment, correctness_digest, metric
