"""Canonical form and digest of a KernelIndex manifest (DESIGN.md §4).

The digest is computed from the *input document*, transformed only by the documented
authoring conveniences; never from a model round trip, which could add defaults or reorder
lists and so change what was signed.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec

from domain.canonical import digest_of
from domain.errors import CanonicalizationError, ManifestError
from domain.manifests.kinds import ECMA_WHITESPACE
from domain.manifests.registry import validate_manifest
from domain.quantities import NS_PER_UNIT

# The schema's duration pattern, with ECMA-262 whitespace so both accept the same strings.
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)" + ECMA_WHITESPACE + "?(ns|us|µs|ms|s)")
MAX_SAFE_INTEGER = 2**53 - 1
_LATENCY_STATISTICS = ("median", "mean", "p05", "p95", "minimum", "maximum", "mad")
_SET_LIKE_SUPPORT_LISTS = ("hardwareArchitectures", "productsTested", "axes", "dtypes", "layouts")


def duration_to_ns(value: object, where: str) -> object:
    """``"0.008 ms"`` → ``8000``; integers pass through; anything else is left for the schema."""
    if not isinstance(value, str):
        return value
    match = _DURATION.fullmatch(value)
    if match is None:
        raise CanonicalizationError(
            f"{where}: {value!r} is not a duration like '12 ns' or '0.5 ms'"
        )
    try:
        ns = Decimal(match.group(1)) * Decimal(NS_PER_UNIT[match.group(2)])
    except InvalidOperation:
        raise CanonicalizationError(f"{where}: {value!r} is not a number") from None
    if ns != ns.to_integral_value():
        raise CanonicalizationError(
            f"{where}: {value!r} is {ns} ns, not a whole number of nanoseconds (ambiguous)"
        )
    whole = int(ns)
    if whole > MAX_SAFE_INTEGER:
        raise CanonicalizationError(f"{where}: {value!r} exceeds the largest safe integer")
    return whole


def _utf16_key(text: object) -> bytes:
    # KernelIndex sorts with JavaScript's default comparison: UTF-16 code units.
    return str(text).encode("utf-16-be")


def _sorted_unique(values: list[Any], where: str) -> list[Any]:
    if not all(isinstance(v, str) for v in values):
        raise ManifestError(f"{where}: every item must be a string")
    return sorted(set(values), key=_utf16_key)


def _canonicalize_run(spec: dict[str, Any]) -> None:
    timing = spec.get("timing")
    if not isinstance(timing, dict):
        return
    latency = timing.get("latencyNs")
    if not isinstance(latency, dict):
        return
    for stat in _LATENCY_STATISTICS:
        if stat in latency:
            latency[stat] = duration_to_ns(latency[stat], f"spec.timing.latencyNs.{stat}")
    interval = latency.get("confidence95")
    if isinstance(interval, list):
        latency["confidence95"] = [
            duration_to_ns(v, f"spec.timing.latencyNs.confidence95[{i}]")
            for i, v in enumerate(interval)
        ]


def _canonicalize_protocol(spec: dict[str, Any]) -> None:
    measurement = spec.get("measurement")
    if isinstance(measurement, dict) and "warmupDuration" in measurement:
        measurement["warmupDuration"] = duration_to_ns(
            measurement["warmupDuration"], "spec.measurement.warmupDuration"
        )


def _canonicalize_implementation(spec: dict[str, Any]) -> None:
    support = spec.get("support")
    if not isinstance(support, dict):
        return
    for field in _SET_LIKE_SUPPORT_LISTS:
        if isinstance(support.get(field), list):
            support[field] = _sorted_unique(support[field], f"spec.support.{field}")


_KIND_RULES: Mapping[str, Callable[[dict[str, Any]], None]] = {
    "BenchmarkRun": _canonicalize_run,
    "BenchmarkProtocol": _canonicalize_protocol,
    "ImplementationRevision": _canonicalize_implementation,
}


def canonical_manifest(document: object) -> dict[str, Any]:
    """Validate a parsed manifest and return its canonical form (a new dict).

    Steps 2–4 of DESIGN.md §4: strict schema validation, duration conversion, set-like
    lists sorted and de-duplicated. Absent fields stay absent.
    """
    validate_manifest(document)
    assert isinstance(document, dict)  # validate_manifest guarantees a mapping
    result = copy.deepcopy(document)
    rule = _KIND_RULES.get(result["kind"])
    if rule is not None:
        spec = result.get("spec")
        if isinstance(spec, dict):
            try:
                rule(spec)
            except CanonicalizationError as exc:
                raise CanonicalizationError(f"{result['kind']}: {exc.message}") from None
    return result


def digest_input(canonical: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a manifest that its digest covers: metadata never contributes."""
    return {
        "apiVersion": canonical["apiVersion"],
        "kind": canonical["kind"],
        "spec": canonical["spec"],
    }


def manifest_digest(document: object) -> str:
    """``sha256:`` digest of a manifest (validated and canonicalised first).

    Memoised on the document's exact content: the same protocol and environment manifests
    come with thousands of runs, and validating them again would dominate ingestion and
    verification. The key is the document's MessagePack encoding, which tells apart every
    JSON type and value (``1`` from ``1.0`` and ``true``, NaN from null) and includes
    metadata, so a hit validated the same document; it is a fifth of the cost of the JSON
    text the key used to be (issue 16). Failures are never cached: a bad manifest is
    re-checked every time.
    """
    try:
        key = msgspec.msgpack.encode(document, order="sorted")
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        return _digest(document)  # not plain data: validation says what is wrong
    found = _DIGESTS.get(key)
    if found is None:
        found = _DIGESTS[key] = _digest(document)
        if len(_DIGESTS) > _DIGESTS_KEPT:
            try:
                _DIGESTS.pop(next(iter(_DIGESTS)), None)  # the oldest entry
            except RuntimeError:  # another thread changed the memo meanwhile: next time
                pass
    return found


_DIGESTS_KEPT = 4096
_DIGESTS: dict[bytes, str] = {}


def _digest(document: object) -> str:
    return digest_of(digest_input(canonical_manifest(document)))
