"""Attacks on the statement models as msgspec Structs (issue 36's review): what the error
says about where a statement is wrong, and the stored flag's scope (a context variable)."""

from __future__ import annotations

import re
import statistics
import threading
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest

from domain.statements import (
    CaseStatus,
    PredicateType,
    RerunCase,
    StatementError,
    build_predicate,
    make_statement,
    parse_statement,
)

T = "2026-08-15T02:09:57.573Z"
NOTE = {"issuedAt": T, "type": "note", "body": "x"}


# --- the error's location ----------------------------------------------------------------
# msgspec writes where an error is as a suffix, `` - at `$.path` ``, and an unknown field's
# name inside the message: a name that spells a suffix must not move the error elsewhere.


@pytest.mark.parametrize(
    "name",
    [
        "z` - at `$.subject[0].digest",
        "a - at `$.cases[0].status",
        "q - at `key` in `$.manifests",
        "a - at `",
        "` - at `$`",
    ],
)
def test_an_unknown_field_is_named_where_it_is(name: str) -> None:
    with pytest.raises(StatementError) as refused:
        build_predicate(PredicateType.ATTESTATION, NOTE | {name: 1})
    assert refused.value.message == f"predicate.{name}: unknown field"
    statement = make_statement("n", "sha256:" + "ab" * 32, PredicateType.ATTESTATION, NOTE)
    with pytest.raises(StatementError) as refused:
        parse_statement(statement | {name: 1})
    assert refused.value.message == f"statement {name}: unknown field"


def test_a_nested_unknown_field_keeps_its_place() -> None:
    """The fix does not move a genuine nested error to the top."""
    fields = {
        "issuedAt": T,
        "action": "register",
        "keyId": "sha256:" + "ab" * 32,
        "publicKey": "A" * 43 + "=",
        "roles": ["agent"],
        "devices": [{"backend": "cpu-test", "odd - at `$": 1}],
    }
    with pytest.raises(StatementError) as refused:
        build_predicate(PredicateType.KEY, fields)
    assert refused.value.message == "predicate.devices.0.odd - at `$: unknown field"


# --- the stored flag: one conversion's, never another thread's or a later one's --------------

FREE_TEXT_RESULT: dict[str, Any] = {
    "issuedAt": T,
    "jobId": "0a0a0a0a-1111-4222-8333-444455556666",
    "nonce": "5e" * 32,
    "protocol": "kernelindex-rerun-v1",
    "cases": [{"case": "c", "status": "error", "reason": "Traceback: a solution's words"}],
    "summary": {"allCorrect": False, "samples": 2, "medianNs": 1.5, "samplesNs": [1.0, 2.0]},
    "environment": {
        "product": "cpu",
        "architecture": "x86_64",
        "gpuUuidHash": "b" * 64,
        "backend": "cpu-test",
    },
    "calibration": {},
}


def test_free_text_reads_stored_and_is_refused_new() -> None:
    build_predicate(PredicateType.RERUN, FREE_TEXT_RESULT, stored=True)
    with pytest.raises(StatementError, match="not free text"):
        build_predicate(PredicateType.RERUN, FREE_TEXT_RESULT)


def test_a_stored_read_in_another_thread_does_not_admit_free_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An admission paused inside its conversion (in the summary's check, before its cases:
    msgspec converts in the object's order) while a verifier, in another thread, is inside
    the conversion of a stored result: the admission still applies the vocabulary."""
    pauses = {name: (threading.Event(), threading.Event()) for name in ("admission", "verify")}
    median = statistics.median

    def pausing(data: Any) -> Any:
        inside, go_on = pauses.get(threading.current_thread().name, (None, None))
        if inside is not None and go_on is not None:
            inside.set()
            go_on.wait(10)
        return median(data)

    monkeypatch.setattr(statistics, "median", pausing)
    summary_first = {"summary": FREE_TEXT_RESULT["summary"], **FREE_TEXT_RESULT}
    outcomes: dict[str, object] = {}

    def run(name: str, stored: bool) -> None:
        try:
            outcomes[name] = build_predicate(PredicateType.RERUN, summary_first, stored=stored)
        except StatementError as exc:
            outcomes[name] = exc

    threads = [
        threading.Thread(target=run, args=(name, name == "verify"), name=name)
        for name in ("admission", "verify")
    ]
    try:
        threads[0].start()
        assert pauses["admission"][0].wait(10)
        threads[1].start()
        assert pauses["verify"][0].wait(10)
        pauses["admission"][1].set()  # the admission goes on while the verifier is inside
        threads[0].join(10)
    finally:
        for _, go_on in pauses.values():
            go_on.set()
        for thread in threads:
            thread.join(10)
    assert isinstance(outcomes["admission"], StatementError)
    assert "not free text" in str(outcomes["admission"])
    assert not isinstance(outcomes["verify"], StatementError)


def test_a_stored_read_that_fails_leaves_admission_strict() -> None:
    """A Struct made outside a conversion (``RerunCase(...)``, ``msgspec.structs.replace``)
    is checked as new: a stored read that raised must not leave its flag behind."""
    broken = FREE_TEXT_RESULT | {"summary": {"allCorrect": "no", "samples": 0}}
    with pytest.raises(StatementError):
        build_predicate(PredicateType.RERUN, broken, stored=True)
    with pytest.raises(ValueError, match="not free text"):
        RerunCase(case="c", status=CaseStatus.ERROR, reason="Traceback: a solution's words")


# --- Python callers (a client before it signs, the agent's harness): not JSON's values -------
# JSON has no tuple, set or mapping proxy, so admission and every verifier never meet them;
# a Python caller of build_predicate can. The pydantic models refused them (strict lists and
# dicts); msgspec's strict conversion takes them, so build_predicate refuses what JSON cannot
# say before the model sees it, as the manifests' gate does (``first_non_json``).

KEY_REGISTRATION: dict[str, Any] = {
    "issuedAt": T,
    "action": "register",
    "keyId": "sha256:" + "ab" * 32,
    "publicKey": "A" * 43 + "=",
}


@pytest.mark.parametrize(
    "roles",
    [("ingester",), {"ingester"}, frozenset({"ingester"})],
    ids=["tuple", "set", "frozenset"],
)
def test_a_list_field_refuses_what_json_cannot_say(roles: object) -> None:
    with pytest.raises(StatementError, match=r"^predicate roles: must be a JSON value, not a"):
        build_predicate(PredicateType.KEY, KEY_REGISTRATION | {"roles": roles})
    # The same field as JSON says it is taken.
    assert build_predicate(PredicateType.KEY, KEY_REGISTRATION | {"roles": ["ingester"]})


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        (MappingProxyType(KEY_REGISTRATION | {"roles": ["ingester"]}), "(root)"),
        (KEY_REGISTRATION | {"roles": ["ingester"], "labels": {1: "x"}}, "labels.1"),
        (KEY_REGISTRATION | {"roles": ["ingester"], "validFrom": Decimal("1")}, "validFrom"),
        (KEY_REGISTRATION | {"roles": ["ingester\udcff"]}, "roles.0"),
    ],
    ids=["mapping proxy", "non-string key", "decimal", "lone surrogate"],
)
def test_a_predicate_from_python_is_refused_where_json_cannot_say_it(
    fields: Any, where: str
) -> None:
    with pytest.raises(StatementError, match=rf"^predicate {re.escape(where)}: "):
        build_predicate(PredicateType.KEY, fields)
