"""Finishing touches to the generated OpenAPI document, where Litestar's rendering of the
reply models is not the truth on the wire.

- ``int | float`` (a figure as its source reported it) comes out as
  ``oneOf: [integer, number]``, which an integer matches twice and so fails: JSON has one
  number type, so it is said as ``number``. Nested and one-armed ``oneOf`` (from optional
  fields) are flattened too.
- Some successes come in media types besides the handler's own (a comparison as CSV or
  Markdown, an artifact in its own media type); Litestar documents one per reply.
- Replies carry headers the handlers set by hand: ``Retry-After`` on 429, ``Location`` on a
  write's receipt.
- Every string path and query parameter is text without control characters, as the edge
  refuses otherwise (``api.server.request_text``): its ``pattern`` says so, unless the
  parameter has a narrower pattern, an enumeration or a format (a URI) of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any

from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIFormat,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Reference,
    Schema,
)

from api.server.request_text import PARAMETER_PATTERN
from api.service.models.views import Comparison

_TEXT = Schema(type=OpenAPIType.STRING)
# path, method -> the success's body per media type.
_MEDIA_TYPES: dict[tuple[str, str], dict[str, Schema | Reference]] = {
    ("/v1/comparisons", "get"): {
        "application/json": Reference(ref=f"#/components/schemas/{Comparison.__name__}"),
        "text/csv": _TEXT,
        "text/markdown": _TEXT,
    },
    ("/v1/artifacts/{digest}", "get"): {
        "*/*": Schema(
            type=OpenAPIType.STRING,
            description="The artifact's bytes, as its own media type (application/octet-stream "
            "when it has none)",
        )
    },
}
_RETRY_AFTER = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.INTEGER, minimum=1),
    description="Seconds until a request may succeed",
)
_LOCATION = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING),
    description="The history of what the write is about (a run's, or the key)",
)
_SCHEMA_FIELDS = [f.name for f in fields(Schema)]


def finish_document(schema: OpenAPI) -> None:
    """Apply the touches above to the generated (and cached) document, in place."""
    for component in ((schema.components and schema.components.schemas) or {}).values():
        if isinstance(component, Schema):
            _tidy(component)
    for path, item in (schema.paths or {}).items():
        for method in ("get", "post"):
            operation: Operation | None = getattr(item, method, None)
            if operation is None:
                continue
            for parameter in operation.parameters or ():
                if not isinstance(parameter, Reference) and isinstance(parameter.schema, Schema):
                    _tidy(parameter.schema)
                    _text_only(parameter.schema)
            _finish_responses(operation, _MEDIA_TYPES.get((path, method)))


def _finish_responses(
    operation: Operation, media_types: dict[str, Schema | Reference] | None
) -> None:
    replies = operation.responses or {}
    for status, reply in replies.items():
        if not isinstance(reply, OpenAPIResponse):
            continue
        if media_types is not None and status.startswith("2"):
            reply.content = {name: OpenAPIMediaType(schema=s) for name, s in media_types.items()}
        for media in (reply.content or {}).values():
            if isinstance(media.schema, Schema):
                _tidy(media.schema)
        if status == "429":
            reply.headers = {**(reply.headers or {}), "Retry-After": _RETRY_AFTER}
        if status in {"200", "201"} and operation.request_body is not None:
            reply.headers = {**(reply.headers or {}), "Location": _LOCATION}
    operation.responses = dict(sorted(replies.items()))


# String formats whose grammar has no control character: a parameter of one needs no pattern
# (and a pattern beside one makes a generator draw from the pattern and throw away most of
# what it drew as not of the format: schemathesis' "filter_too_much" health check).
CONTROL_FREE_FORMATS = frozenset(
    {
        OpenAPIFormat.URI,
        OpenAPIFormat.URI_REFERENCE,
        OpenAPIFormat.DATE,
        OpenAPIFormat.DATE_TIME,
        OpenAPIFormat.UUID,
        OpenAPIFormat.EMAIL,
    }
)


def _text_only(schema: Schema) -> None:
    """State the edge's rule on a string parameter that has no narrower one."""
    narrower = schema.pattern, schema.enum, schema.const
    if any(n is not None for n in narrower) or schema.format in CONTROL_FREE_FORMATS:
        return
    arms = [schema, *(schema.one_of or ())]
    if any(isinstance(a, Schema) and a.type == OpenAPIType.STRING for a in arms):
        schema.pattern = PARAMETER_PATTERN


def _tidy(schema: Schema) -> None:
    """Flatten ``schema``'s ``oneOf`` arms (and its children's), in place."""
    for child in _children(schema):
        _tidy(child)
    if not schema.one_of:
        return
    arms = list(_flattened(schema.one_of))
    if any(_is_plain(a, OpenAPIType.NUMBER) for a in arms):
        arms = [a for a in arms if not _is_plain(a, OpenAPIType.INTEGER)]
    only = arms[0] if len(arms) == 1 else None
    if isinstance(only, Schema):
        schema.one_of = None
        for name in _SCHEMA_FIELDS:  # the arm's own keywords, beside the field's description
            if getattr(schema, name) is None:
                setattr(schema, name, getattr(only, name))
    else:
        schema.one_of = arms


def _children(schema: Schema) -> Iterator[Schema]:
    nested: list[Any] = [
        *(schema.properties or {}).values(),
        schema.items,
        schema.additional_properties,
        *(schema.prefix_items or ()),
        *(schema.all_of or ()),
        *(schema.any_of or ()),
        *(schema.one_of or ()),
    ]
    yield from (s for s in nested if isinstance(s, Schema))


def _flattened(arms: Sequence[Schema | Reference]) -> Iterator[Schema | Reference]:
    for arm in arms:
        if isinstance(arm, Schema) and arm.one_of and _only(arm, "one_of"):
            yield from _flattened(arm.one_of)
        else:
            yield arm


def _only(schema: Schema, *names: str) -> bool:
    return all(getattr(schema, n) is None for n in _SCHEMA_FIELDS if n not in names)


def _is_plain(arm: Schema | Reference, kind: OpenAPIType) -> bool:
    return isinstance(arm, Schema) and arm.type == kind and _only(arm, "type")
