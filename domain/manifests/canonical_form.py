"""Canonical form and digest of a KernelIndex manifest (docs/design.md §4).

The digest is computed from the *input document*, transformed only by the documented
authoring conveniences; never from a model round trip, which could add defaults or reorder
lists and so change what was signed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec

from domain.canonical import digest_of
from domain.errors import CanonicalizationError, ManifestError
from domain.manifests.kinds import API_VERSION, ECMA_WHITESPACE, MANIFEST_KINDS
from domain.manifests.registry import validate_manifest
from domain.quantities import NS_PER_UNIT


# The schema's duration pattern, with ECMA-262 whitespace so both accept the same strings.
# Compiled on first use: only a duration written as text needs it, and compiling ECMA's
# white space (ranges past Latin-1) costs a start-up ~2M instructions (issue 33).
@functools.cache
def _duration_pattern() -> re.Pattern[str]:
    return re.compile(r"([0-9]+(?:\.[0-9]+)?)" + ECMA_WHITESPACE + "?(ns|us|µs|ms|s)")


MAX_SAFE_INTEGER = 2**53 - 1
_LATENCY_STATISTICS = ("median", "mean", "p05", "p95", "minimum", "maximum", "mad")
_SET_LIKE_SUPPORT_LISTS = ("hardwareArchitectures", "productsTested", "axes", "dtypes", "layouts")


def duration_to_ns(value: object, where: str) -> object:
    """``"0.008 ms"`` → ``8000``; integers pass through; anything else is left for the schema."""
    if not isinstance(value, str):
        return value
    match = _duration_pattern().fullmatch(value)
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


# Each rule rewrites the few fields it converts in ``spec``, a copy of the document's spec,
# copying every container on the way to them first (the document itself is never changed;
# the rest of the canonical form is shared with it, which is why it is read-only).


def _copied(parent: dict[str, Any], field: str) -> dict[str, Any] | None:
    """``parent[field]`` replaced by a shallow copy of itself, if it is an object."""
    child = parent.get(field)
    if not isinstance(child, dict):
        return None
    copy = parent[field] = dict(child)
    return copy


def _canonicalize_run(spec: dict[str, Any]) -> None:
    timing = _copied(spec, "timing")
    latency = _copied(timing, "latencyNs") if timing is not None else None
    if latency is None:
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
    measurement = _copied(spec, "measurement")
    if measurement is not None and "warmupDuration" in measurement:
        measurement["warmupDuration"] = duration_to_ns(
            measurement["warmupDuration"], "spec.measurement.warmupDuration"
        )


def _canonicalize_implementation(spec: dict[str, Any]) -> None:
    support = _copied(spec, "support")
    if support is None:
        return
    for field in _SET_LIKE_SUPPORT_LISTS:
        if isinstance(support.get(field), list):
            support[field] = _sorted_unique(support[field], f"spec.support.{field}")


_KIND_RULES: Mapping[str, Callable[[dict[str, Any]], None]] = {
    "BenchmarkRun": _canonicalize_run,
    "BenchmarkProtocol": _canonicalize_protocol,
    "ImplementationRevision": _canonicalize_implementation,
}


def canonical_manifest(document: object, *, json_read: bool = False) -> dict[str, Any]:
    """Validate a parsed manifest and return its canonical form, a new dict that shares what
    the conversions leave unchanged with ``document`` (read both as read-only; a deep copy
    was a fifth of a manifest's digest, issue 16).

    Steps 2–4 of docs/design.md §4: strict schema validation, duration conversion, set-like
    lists sorted and de-duplicated. Absent fields stay absent. ``json_read``: see
    ``validate_manifest``.
    """
    validate_manifest(document, json_read=json_read)
    assert isinstance(document, dict)  # validate_manifest guarantees a mapping
    return _canonical(document)


def _canonical(document: dict[str, Any]) -> dict[str, Any]:
    """Steps 3–4 (conversions) of a document that has the shape ``digest_input`` reads."""
    result = dict(document)
    rule = _KIND_RULES.get(result["kind"])
    if rule is not None:
        spec = _copied(result, "spec")
        if spec is not None:
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


def manifest_digest(document: object, *, json_read: bool = False) -> str:
    """``sha256:`` digest of a manifest (validated and canonicalised first).

    Memoised on the document's exact content: the same protocol and environment manifests
    come with thousands of runs, and validating them again would dominate ingestion and
    verification. The key is the document's MessagePack encoding, which tells apart every
    JSON type and value (``1`` from ``1.0`` and ``true``, NaN from null) and includes
    metadata, so a hit validated the same document; it is a fifth of the cost of the JSON
    text the key used to be (issue 16). Failures are never cached: a bad manifest is
    re-checked every time. ``json_read``: the document is what the strict JSON reader
    read from text (``validate_manifest``); the digest is the same either way, and its key
    keeps the text's order (not sorting saves a third of the key's cost: a signed
    statement's text is canonical, sorted already). A key names one document whichever way
    it was made, and every document it names has one digest.
    """
    try:
        key = (
            msgspec.msgpack.encode(document)
            if json_read
            else msgspec.msgpack.encode(document, order="sorted")
        )
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        return _digest(document, json_read)  # not plain data: validation says what is wrong
    found = _DIGESTS.get(key)
    if found is None:
        found = _DIGESTS[key] = _digest(document, json_read)
        if len(_DIGESTS) > _DIGESTS_KEPT:
            _forget_oldest()
    return found


_DIGESTS_KEPT = 4096
_DIGESTS: dict[bytes, str] = {}


def _forget_oldest() -> None:
    """Drop the oldest quarter of the memo at once. One entry at a time cost ~2.6 µs a new
    manifest once the memo was full (a server past 4,096 runs, a catalog import): finding a
    dict's first entry walks the slots its earlier pops emptied, until the next resize."""
    # If another thread changed the memo meanwhile, what is left goes next time.
    with contextlib.suppress(RuntimeError):
        for oldest in list(itertools.islice(_DIGESTS, _DIGESTS_KEPT // 4)):
            _DIGESTS.pop(oldest, None)


def _digest(document: object, json_read: bool = False) -> str:
    # The canonical form of a document read from JSON text is made of its values, strings
    # and safe integers (the conversions refuse others): ``canonical_json``'s ``json_read``.
    canonical = canonical_manifest(document, json_read=json_read)
    return digest_of(digest_input(canonical), json_read=json_read)


def admitted_manifest_digest(document: object, *, json_read: bool = False) -> str:
    """The digest of a manifest this ledger admitted, recomputed on a read: the canonical
    form (durations, set-like lists) without the schema gate, so a read never loads the
    manifest models (once pydantic and most of a read command's start, issue 33).

    Why skipping the gate on a read cannot let a tampered manifest pass: the document is
    read from one of the ledger's own stored events, which admission schema-checked before
    storing it, and the reader re-checks the event's signature over the payload that
    carries it; the digest covers the content (``digest_input``). A manifest changed
    behind the ledger's back changes the signed payload, so the signature fails; signed
    again, it digests to another value than the run's references and the statement's
    subject, so the digests fail, unless the new signer recomputed them, which takes a key
    the ledger trusts for that statement. What a read no longer catches is exactly that: a
    schema-invalid manifest signed by a trusted key and written into the database past
    admission (or one admitted under an older schema). ``kernelindex audit`` and the
    offline verifier (``ledger.verify``: bundles are third-party input) keep the gate,
    through :func:`manifest_digest`, as admission does.

    What the conversions and ``digest_input`` read is checked first (a stored document can
    still be damaged): a damaged one raises a ``DomainError``, a failed check, never a
    ``KeyError`` that would stop a page. Never memoised in ``_DIGESTS``: a hit there means
    *validated*, and a read must not let an unvalidated document skip admission's gate.
    ``json_read``: the document is what the strict JSON reader read (``canonical_json``).
    """
    if not isinstance(document, dict):
        raise ManifestError(f"stored manifest is not a JSON object: {type(document).__name__}")
    problem = _admitted_shape_problem(document)
    if problem:
        raise ManifestError(f"stored manifest is not as admission checked it: {problem}")
    return digest_of(digest_input(_canonical(document)), json_read=json_read)


def _admitted_shape_problem(document: dict[str, Any]) -> str:
    """What of the shape the canonical form and a run's checks read is wrong, or ''."""
    if document.get("apiVersion") != API_VERSION:
        return f"apiVersion is not {API_VERSION!r}"
    if document.get("kind") not in MANIFEST_KINDS:
        return "kind is not a manifest kind"
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return "metadata.name is not a string"
    if not isinstance(document.get("spec"), dict):
        return "spec is not an object"
    return ""
