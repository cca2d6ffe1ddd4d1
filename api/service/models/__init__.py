"""Typed replies of the service: one model per reply, which the HTTP API encodes (and its
OpenAPI document describes), the pages render and the CLI prints.

Each model is a msgspec ``Struct`` whose fields are declared in wire order and renamed to
camelCase, so encoding a model gives the same bytes the API sent when it answered dicts. A
field that is sometimes absent (not null) on the wire defaults to ``UNSET``, which msgspec
leaves out when encoding.

Replies the service assembles itself are built as models directly. Those that arrive as JSON
documents from the layers below (a projection's read model, a ledger ``to_json``) are
converted with :func:`to_response`, strictly: a field the model does not declare, or a value
of another type, is an error here and never a field silently dropped from a reply.
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypeVar

import msgspec

T = TypeVar("T")

# JSON has one number type: a figure a source reports may be an integer or not, and must go
# out as it came (1750693, not 1750693.0). The document calls it "number" (openapi_document).
Number: TypeAlias = int | float
# A document carried through as it is (a manifest, a predicate, a source's own metrics).
Document: TypeAlias = dict[str, Any]


class ApiModel(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """Base of the reply models. Subclasses pass ``kw_only=True`` (msgspec does not inherit
    it) so that defaulted fields may sit anywhere in wire order."""


def to_response(data: object, model: type[T]) -> T:
    """``data`` (JSON-ready values) as ``model``; raises if it does not fit the model."""
    try:
        return msgspec.convert(data, model)
    except msgspec.ValidationError as exc:
        # A reply that does not fit its documented model is a server fault (a 500 naming the
        # model), never a body sent in a shape the document does not describe.
        raise TypeError(f"reply does not fit {model!r}: {exc}") from exc


def to_builtins(model: object) -> Any:
    """A reply as the JSON document it encodes to (camelCase names, absent fields left out),
    for what reads documents (a comparison's CSV and Markdown)."""
    return msgspec.to_builtins(model)
