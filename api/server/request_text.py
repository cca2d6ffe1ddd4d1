"""What a request's path and query may hold: UTF-8 text without control characters.

One definition for both faces of the rule: the edge refuses a request that breaks it
(``refusal``, before any handler or query runs), and the OpenAPI document states it as the
``pattern`` of every string parameter (``PARAMETER_PATTERN``), so a client generating values
from the document (schemathesis) sends only what the edge admits. No name, digest or filter
holds a control character; PostgreSQL refuses a NUL in text outright (a 500 once it reached a
query) while SQLite compared it, so without the rule the two databases answered differently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

# Unicode's control characters (category Cc: C0, DEL, C1). A surrogate is no UTF-8 text's
# (a lone one arrives as bytes that do not decode, refused as such); it is not in the pattern,
# which validators built on Rust's regex (schemathesis' jsonschema-rs) cannot compile then.
_EXCLUDED = r"\u0000-\u001f\u007f-\u009f"
# ECMA-262 (the document's regex dialect), Rust's regex and Python's re read this alike.
PARAMETER_PATTERN = f"^[^{_EXCLUDED}]*$"
_REFUSED = re.compile(f"[{_EXCLUDED}]")


class _NotText(ValueError):
    pass


def _decoded(where: str, encoded: bytes) -> str:
    try:
        return unquote_to_bytes(encoded).decode("utf-8")
    except UnicodeDecodeError:
        refused = f"the {where} is not UTF-8 text (a lone surrogate or a stray byte)"
        raise _NotText(refused) from None


def _control(where: str, text: str) -> str | None:
    found = _REFUSED.search(text)
    if found is None:
        return None
    return (
        f"the {where} holds the control character U+{ord(found.group()):04X}; names, "
        "digests and filters are text without control characters"
    )


def refusal(scope: Mapping[str, Any]) -> str | None:
    """Why the request's path or query breaks the rule, or None when it keeps it."""
    raw_path: bytes | None = scope.get("raw_path")
    try:
        # Some clients' raw_path carries the query too (the test client's does); without a
        # raw path, the server's decoded one (a stray byte is then already U+FFFD).
        if raw_path is not None:
            path = _decoded("path", raw_path.partition(b"?")[0])
        else:
            path = str(scope.get("path", ""))
        # '+' is a space in a query: it cannot hide a control character, so it stays.
        query = _decoded("query", scope.get("query_string", b""))
    except _NotText as not_text:
        return str(not_text)
    return _control("path", path) or _control("query", query)
