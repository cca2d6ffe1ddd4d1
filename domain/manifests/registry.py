"""The manifest kinds we know, and the schema gate every manifest passes through.

:func:`validate_manifest` accepts exactly what the normative KernelIndex JSON Schema of the
manifest's kind accepts (docs/design.md §4, step 2). It only *checks*: the input is not modified and
the validated model must not be dumped for hashing (a round trip could add or reorder things).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final

from domain.errors import ManifestError
from domain.manifests.kinds import API_VERSION, MANIFEST_KINDS

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails

__all__ = ["API_VERSION", "MANIFEST_KINDS", "manifest_models", "validate_manifest"]


@functools.cache
def manifest_models() -> Mapping[str, type[BaseModel]]:
    """Kind name → model of the whole object ``{apiVersion, kind, metadata, spec}``.

    Each kind's model is made on first use (``domain.manifests.models`` imports a kind's
    module when it is first asked for): the models take a tenth of a second to make, which a
    command that only reads the projected views (``kernelindex leaderboard``, ``search``)
    never pays, and re-verifying a kernel run's manifests pays for only the kinds it holds."""
    return _KindModels()


class _KindModels(Mapping[str, "type[BaseModel]"]):
    """The models of ``MANIFEST_KINDS``, each imported when it is first looked up."""

    def __getitem__(self, kind: str) -> type[BaseModel]:
        if kind not in MANIFEST_KINDS:
            raise KeyError(kind)
        from domain.manifests import models  # noqa: PLC0415 - see manifest_models

        model: type[BaseModel] = getattr(models, kind)
        return model

    def __contains__(self, kind: object) -> bool:  # without importing the kind's module
        return kind in MANIFEST_KINDS

    def __iter__(self) -> Iterator[str]:
        return iter(MANIFEST_KINDS)

    def __len__(self) -> int:
        return len(MANIFEST_KINDS)


def build_validators() -> None:
    """Build every model's deferred validator now: a process that validates from several
    threads (the server) does so at start, so no two threads build one at once. (The
    statement models are msgspec Structs: nothing to build.)"""
    for model in manifest_models().values():
        model.model_rebuild()


_MAX_REPORTED_ERRORS: Final = 20


def validate_manifest(obj: object) -> BaseModel:
    """Validate a parsed manifest against the schema of its kind; raise ``ManifestError``.

    The message names the kind and every failing location in dotted form, for example
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
    # Loaded with the models (a process that validates no manifest never imports pydantic).
    from pydantic import ValidationError  # noqa: PLC0415

    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise ManifestError(_describe(kind, exc)) from exc


def _describe(kind: str, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    lines = [_describe_one(error) for error in errors[:_MAX_REPORTED_ERRORS]]
    if len(errors) > _MAX_REPORTED_ERRORS:
        lines.append(f"... and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return f"{kind}: " + "; ".join(lines)


def _describe_one(error: ErrorDetails) -> str:
    loc = list(error["loc"])
    prefix = ""
    if loc and loc[-1] == "[key]":  # a map key that violates the map's propertyNames
        loc.pop()
        prefix = "invalid property name: "
    where = ".".join(str(part) for part in loc) or "(root)"
    return f"{where}: {prefix}{_message(error)}"


# Pydantic error type → the message, formatted with the error's context.
_MESSAGES: Final[Mapping[str, str]] = {
    "extra_forbidden": "unknown field",
    "missing": "required field missing",
    "string_too_long": "must be at most {max_length} characters",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "literal_error": "must be {expected}",
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
}


def _message(error: ErrorDetails) -> str:
    # Loaded with the models, which made this error.
    from domain.manifests.models.common import PATTERN_DESCRIPTIONS  # noqa: PLC0415

    ctx = error.get("ctx", {})
    if error["type"] == "string_pattern_mismatch":
        pattern = str(ctx["pattern"])
        return PATTERN_DESCRIPTIONS.get(pattern, f"must match pattern {pattern}")
    template = _MESSAGES.get(error["type"])
    return error["msg"] if template is None else template.format(**ctx)


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"
