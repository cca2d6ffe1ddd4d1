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

    def __getitem__(self, kind: str) -> type[Manifest]:
        if kind not in MANIFEST_KINDS:
            raise KeyError(kind)
        from domain.manifests import models  # noqa: PLC0415 - see manifest_models

        model: type[Manifest] = getattr(models, kind)
        return model

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


def validate_manifest(obj: object) -> Manifest:
    """Validate a parsed manifest against the schema of its kind; raise ``ManifestError``.

    The message names the kind and the first failing location in dotted form, for example
    ``BenchmarkRun: spec.timing.latencyNs.foo: unknown field``.
    """
    if not isinstance(obj, dict):
        raise ManifestError(f"manifest must be a JSON object, not {_json_type(obj)}")
    if "kind" not in obj:
        raise ManifestError("manifest: kind: required field missing")
    kind = obj["kind"]
    if not isinstance(kind, str):
        raise ManifestError("manifest: kind: must be a string")
    model = manifest_models().get(kind)
    if model is None:
        known = ", ".join(sorted(MANIFEST_KINDS))
        raise ManifestError(f"manifest: kind: unknown kind {kind!r} (known: {known})")
    if obj.get("apiVersion") != API_VERSION:
        raise ManifestError(f"{kind}: apiVersion: must be {API_VERSION!r}")
    # Loaded with the models (a process that validates no manifest never imports them).
    import msgspec  # noqa: PLC0415

    _refuse_lone_surrogates(kind, obj)  # first: msgspec fails on one with a UnicodeError
    try:
        validated = msgspec.convert(obj, model, strict=True)
    except msgspec.ValidationError as exc:
        from domain.manifests.models.schema_errors import describe  # noqa: PLC0415 - refusals only

        try:
            where = describe(model, exc, obj)
        except Exception:  # a refusal never crashes: then msgspec's own words
            where = str(exc)
        raise ManifestError(f"{kind}: {where}") from exc
    return validated


def _refuse_lone_surrogates(kind: str, obj: dict[str, object]) -> None:
    """A lone surrogate is no Unicode character, so no JSON string holds one (the readers
    refuse it); a document made in Python could, and msgspec's convert would raise a
    UnicodeEncodeError, not its ValidationError, on one. The encoder finds one in C."""
    import msgspec  # noqa: PLC0415

    try:
        msgspec.json.encode(obj)
    except (ValueError, OverflowError, TypeError, RecursionError):  # a surrogate, or no JSON
        from domain.manifests.models.schema_errors import lone_surrogate_at  # noqa: PLC0415

        for loc in lone_surrogate_at(obj):
            where = ".".join(loc) or "(root)"
            raise ManifestError(f"{kind}: {where}: must not hold a lone surrogate") from None


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"
