"""The views' statements every face runs as the same text (issue 33): compiled ahead from
their Core definitions (``projections.view_queries``)."""

from __future__ import annotations

from projections.view_queries import GENERATED, generate


def test_the_generated_view_statements_are_what_the_core_definitions_compile_to() -> None:
    """A change to a view table or to one of these queries that is not regenerated
    (``python -m projections.view_queries``) fails here, not in a read."""
    assert GENERATED.read_text("utf-8") == generate()
