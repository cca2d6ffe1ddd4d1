"""The manifest kinds we know, and the schema gate every manifest passes through.

:func:`validate_manifest` accepts exactly what the normative KernelIndex JSON Schema of the
manifest's kind accepts (docs/design.md §4, step 2). It only *checks*: the input is not modified and
the validated model must not be dumped for hashing (a round trip could add or reorder things).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from domain.errors import ManifestError
from domain.manifests.kinds import API_VERSION, MANIFEST_KINDS

if TYPE_CHECKING:
    from domain.manifests.models.common import Manifest

__all__ = ["API_VERSION", "MANIFEST_KINDS", "manifest_models", "validate_manifest"]


@functools.cache
def manifest_models() -> Mapping[str, type[Manifest]]:
    """Kind name → model of the whole object ``{apiVersion, kind, metadata, spec}``.

    Each kind's model is made on first use (``domain.manifests.models`` imports a kind's
    module when it is first asked for): a command that only reads the projected views
    (``kernelindex leaderboard``, ``search``) never pays for them, and re-verifying a kernel
    run's manifests pays for only the kinds it holds."""
    return _KindModels()


class _KindModels(Mapping[str, "type[Manifest]"]):
    """The models of ``MANIFEST_KINDS``, each imported when it is first looked up."""

    def __init__(self) -> None:
        self._made: dict[str, type[Manifest]] = {}

    def __getitem__(self, kind: str) -> type[Manifest]:
        model = self._made.get(kind)  # not an import statement per manifest checked
        if model is not None:
            return model
        if kind not in MANIFEST_KINDS:
            raise KeyError(kind)
        from domain.manifests import models  # noqa: PLC0415 - see manifest_models

        made: type[Manifest] = getattr(models, kind)
        self._made[kind] = made
        return made

    def __contains__(self, kind: object) -> bool:  # without importing the kind's module
        return kind in MANIFEST_KINDS

    def __iter__(self) -> Iterator[str]:
        return iter(MANIFEST_KINDS)

    def __len__(self) -> int:
        return len(MANIFEST_KINDS)


def build_validators() -> None:
    """Import every kind's model now: a process that validates from several threads (the
    server) does so at start, so no request waits for a module import. (The models are
    msgspec Structs: each is ready once its class exists.)"""
    for _ in manifest_models().values():
        pass


def validate_manifest(obj: object, *, json_read: bool = False) -> Manifest:
    """Validate a parsed manifest against the schema of its kind; raise ``ManifestError``.

    The message names the kind and the first failing location in dotted form, for example
    ``BenchmarkRun: spec.timing.latencyNs.foo: unknown field``.

    ``json_read``: ``obj`` is what ``domain.documents.parse_json`` read from JSON text (a
    signed statement's manifest, at admission): only JSON values, which ``_as_json`` would
    read back as themselves (property-tested), so that round trip is skipped.
    """
    if not isinstance(obj, dict):
        raise ManifestError(f"manifest must be a JSON object, not {_json_type(obj)}")
    if "kind" not in obj:
        raise ManifestError("manifest: kind: required field missing")
    kind = obj["kind"]
    if not isinstance(kind, str):
        raise ManifestError("manifest: kind: must be a string")
    # Not Mapping.get (its Python frames): each manifest checked asks.
    model = manifest_models()[kind] if kind in MANIFEST_KINDS else None
    if model is None:
        known = ", ".join(sorted(MANIFEST_KINDS))
        raise ManifestError(f"manifest: kind: unknown kind {kind!r} (known: {known})")
    if obj.get("apiVersion") != API_VERSION:
        raise ManifestError(f"{kind}: apiVersion: must be {API_VERSION!r}")
    # Loaded with the models (a process that validates no manifest never imports them).
    import msgspec  # noqa: PLC0415

    # The schema speaks of JSON text: a value no JSON text spells (a Decimal, a tuple, a set,
    # bytes, a Mapping that is no dict, NaN) is refused first, and the Structs read only what
    # the document's JSON text reads back as.
    document = obj if json_read else _as_json(kind, obj)
    try:
        validated = msgspec.convert(document, model, strict=True)
    except msgspec.ValidationError as exc:
        from domain.manifests.models.schema_errors import describe  # noqa: PLC0415 - refusals only

        try:
            where = describe(model, exc, document)
        except Exception:  # a refusal never crashes: then msgspec's own words
            where = str(exc)
        raise ManifestError(f"{kind}: {where}") from exc
    return validated


def _as_json(kind: str, obj: dict[str, object]) -> object:
    """``obj`` read back from its JSON text, when it is a JSON value: only dicts with string
    keys, lists, strings, finite numbers, booleans and null. msgspec's encoder writes other
    Python values as something else (a Decimal or bytes as a string, a tuple or set as an
    array, NaN as null), so what is read back must equal ``obj``; a lone surrogate fails the
    encoder. (Converting what is read back, not ``obj``, costs less than decoding the text
    into the model, and no Mapping is ever read by the Structs' Python field names.)"""
    import msgspec  # noqa: PLC0415

    deep = False
    try:
        document = msgspec.json.decode(msgspec.json.encode(obj))
        if document == obj:
            return document
    except RecursionError:  # deeper than any JSON reader here would read (64 levels)
        deep = True
    except (ValueError, OverflowError, TypeError):  # a surrogate, or no JSON value
        pass
    from domain.manifests.models.schema_errors import first_non_json  # noqa: PLC0415

    found = first_non_json(obj)
    if found is None:
        deeper = "nests too deeply to be written as JSON text"
        found = ((), deeper if deep else "must be a JSON value")
    loc, what = found
    raise ManifestError(f"{kind}: {'.'.join(loc) or '(root)'}: {what}") from None


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"
