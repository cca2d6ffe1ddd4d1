"""Property tests of the offline bundle verifier against mutated real bundles.

The bundle is exported from a demo ledger (the seed run with its claims, ingestion, key
events, attestation). Whatever is done to it, the verifier returns a report and never
raises; a mutated bundle verifies as fully valid only when the mutation is semantically a
no-op for what is signed (the trust root, the checkpoint, and every event's leaf-covered
fields and proof), and any change to a signed byte (payload, signature, a field the leaf
hash covers, the checkpoint note) is reported as a failure.
"""

from __future__ import annotations

import base64
import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import fuzz, fuzz_long, json_values, mutated_bytes, mutated_json
from hypothesis import given
from hypothesis import strategies as st

from api.demo import build_demo
from ledger.home import LedgerHome
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Report
from ledger.verify import VerificationPolicy, verify_bundle_lines
from projections.export import export_runs

SIGNED_EVENT_FIELDS = (
    "leafIndex",
    "position",
    "aggregate",
    "version",
    "topic",
    "receivedAt",
    "envelope",
    "proof",
)


def _export() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ledger, seed = build_demo(LedgerHome.at(Path(tmp) / "home"))
        out = io.StringIO()
        export_runs(ledger, out, [seed])
        ledger.close() if hasattr(ledger, "close") else None
        return out.getvalue().splitlines()


LINES = _export()
RECORDS = [json.loads(line) for line in LINES]
# The exporting ledger's own trust root, pinned as a careful user would.
ROOT = TrustRoot.from_json(next(r for r in RECORDS if r["type"] == "trustRoot")["trustRoot"])


def verify(lines: list[str]) -> Report:
    return verify_bundle_lines(lines, VerificationPolicy(trust_root=ROOT), workers=1)


def signed_view(lines: list[str]) -> Any:
    """What the signatures and the checkpoint vouch for; None if a line is not JSON."""
    try:
        records = [json.loads(line) for line in lines if line.strip()]
    except ValueError:
        return None
    view: list[Any] = []
    for record in records:
        if not isinstance(record, dict):
            return None
        kind = record.get("type")
        if kind == "trustRoot":
            root = record.get("trustRoot")
            # What verification rests on; createdAt and the like are informational.
            keys = ("origin", "adminKeys", "logKey")
            entry = ("trustRoot", [root.get(k) for k in keys] if isinstance(root, dict) else root)
            if entry not in view:  # the same root said twice says nothing new
                view.append(entry)
        elif kind in ("checkpoint", "heads"):
            view.append((kind, record.get("note")))
        elif kind == "event":
            view.append(("event", [record.get(f) for f in SIGNED_EVENT_FIELDS]))
    return view


def test_the_exported_bundle_verifies() -> None:
    """The starting point is fully valid (else every mutation 'fails' trivially)."""
    kinds = [r["type"] for r in RECORDS]
    assert kinds.count("event") >= 6 and "claim" in kinds and "checkpoint" in kinds
    assert "heads" in kinds
    report = verify(LINES)
    assert report.verified, report.to_json()["findings"]
    assert report.passed["signature"] == kinds.count("event")


@st.composite
def line_edits(draw: st.DrawFn) -> list[str]:
    lines = list(LINES)
    action = draw(
        st.sampled_from(["drop", "repeat", "swap", "insert", "mutate", "bytes", "truncate"])
    )
    at = draw(st.integers(0, len(lines) - 1))
    if action == "drop":
        del lines[at]
    elif action == "repeat":
        lines.insert(at, lines[at])
    elif action == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[at], lines[other] = lines[other], lines[at]
    elif action == "insert":
        lines.insert(at, json.dumps(draw(json_values)))
    elif action == "mutate":
        lines[at] = json.dumps(draw(mutated_json(RECORDS[at])))
    elif action == "bytes":
        lines[at] = draw(mutated_bytes(lines[at].encode())).decode("utf-8", "replace")
    else:
        lines = lines[:at]
    return lines


@fuzz
@given(line_edits())
def test_mutated_bundles_never_crash_or_falsely_verify(lines: list[str]) -> None:
    report = verify(lines)
    if report.verified:
        assert signed_view(lines) == signed_view(LINES), report.to_json()


@st.composite
def signed_byte_changes(draw: st.DrawFn) -> tuple[list[str], str]:
    """One change inside what is signed, and the name of what was changed."""
    lines = list(LINES)
    events = [i for i, r in enumerate(RECORDS) if r["type"] == "event"]
    target = draw(st.sampled_from(["payload", "sig", "checkpoint", *SIGNED_EVENT_FIELDS[:6]]))
    if target == "checkpoint":
        at = next(i for i, r in enumerate(RECORDS) if r["type"] == "checkpoint")
        record = copy.deepcopy(RECORDS[at])
        note = record["note"].encode()
        record["note"] = draw(mutated_bytes(note).filter(lambda b: b != note)).decode(
            "utf-8", "replace"
        )
        if record["note"] == RECORDS[at]["note"]:
            record["note"] += "x"
    else:
        at = draw(st.sampled_from(events))
        record = copy.deepcopy(RECORDS[at])
        if target in ("payload", "sig"):
            holder = (
                record["envelope"] if target == "payload" else record["envelope"]["signatures"][0]
            )
            key = "payload" if target == "payload" else "sig"
            raw = base64.b64decode(holder[key])
            holder[key] = base64.b64encode(
                draw(mutated_bytes(raw).filter(lambda b: b != raw))
            ).decode()
        elif isinstance(record[target], int):
            record[target] += draw(st.sampled_from([1, -1, 2**32]))
        else:
            text = record[target]
            changed = draw(mutated_bytes(text.encode())).decode("utf-8", "replace")
            record[target] = changed if changed != text else text + "0"
    lines[at] = json.dumps(record)
    return lines, target


@fuzz
@given(signed_byte_changes())
def test_any_change_to_a_signed_byte_fails_verification(change: tuple[list[str], str]) -> None:
    lines, target = change
    report = verify(lines)
    assert not report.verified, (target, report.to_json())
    failed = set(report.failed)
    assert failed & {
        "signature",
        "envelope",
        "inclusion",
        "checkpoint",
        "record-readable",
        "format",
        "complete",
        "heads",
    }, failed


def _replace_payload(lines: list[str], topic: str, edit: Any) -> list[str]:
    at = next(
        i for i, r in enumerate(RECORDS) if r["type"] == "event" and r["topic"].endswith(topic)
    )
    record = copy.deepcopy(RECORDS[at])
    statement = json.loads(base64.b64decode(record["envelope"]["payload"]))
    edit(statement)
    record["envelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return [*lines[:at], json.dumps(record), *lines[at + 1 :]]


def _set_manifests(value: Any) -> Any:
    return lambda s: s["predicate"].__setitem__("manifests", value)


@pytest.mark.parametrize(
    "lines",
    [
        # The last event line twice: its claim fold refuses it with an exception.
        [*LINES[:-1], LINES[-2], LINES[-1]],
        [*LINES[:3], "[" * 100_000 + "]" * 100_000, *LINES[3:]],
        _replace_payload(LINES, "Run.Ingested", _set_manifests(5)),
        _replace_payload(LINES, "Run.Ingested", _set_manifests("run")),
        _replace_payload(LINES, "Run.Attested", lambda s: s.__setitem__("predicate", [[[]]])),
        [*LINES[:3], json.dumps({"type": "event", "envelope": {"payload": "[" * 50}}), *LINES[3:]],
    ],
    ids=[
        "repeated-event",
        "deep-line",
        "manifests-int",
        "manifests-str",
        "predicate-list",
        "garbage-event",
    ],
)
def test_hostile_lines_are_reported_not_raised(lines: list[str]) -> None:
    report = verify(lines)
    assert not report.verified


def test_a_second_different_trust_root_line_is_refused() -> None:
    """Like a second header or checkpoint: which root did the verifier trust, then?"""
    at = next(i for i, r in enumerate(RECORDS) if r["type"] == "trustRoot")
    other = copy.deepcopy(RECORDS[at])
    other["trustRoot"]["origin"] = "kernelindex.local/elsewhere"
    after_checkpoint = at + 2
    lines = [*LINES[:after_checkpoint], json.dumps(other), *LINES[after_checkpoint:]]
    assert not verify(lines).verified


@pytest.mark.slow
@fuzz_long
@given(line_edits())
def test_long_fuzz_of_bundles(lines: list[str]) -> None:
    report = verify(lines)
    if report.verified:
        assert signed_view(lines) == signed_view(LINES)


def _replaced(kind: str, change: Any) -> list[str]:
    at = next(i for i, r in enumerate(RECORDS) if r["type"] == kind)
    record = copy.deepcopy(RECORDS[at])
    change(record)
    return [*LINES[:at], json.dumps(record), *LINES[at + 1 :]]


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["trustRoot"]["adminKeys"][0].update({"": None}),
        lambda r: r["trustRoot"].update({"note": "trust me"}),
        lambda r: r["trustRoot"].update({"origin": "kernelindex.local/\b"}),
    ],
    ids=["unknown-key-field", "unknown-root-field", "control-char-origin"],
)
def test_a_trust_root_with_anything_unexpected_is_refused(change: Any) -> None:
    """Found by the long fuzz: unknown fields were ignored (the bundle verified with a root
    unlike the one it was exported with) and a control character in the origin crashed."""
    report = verify(_replaced("trustRoot", change))
    assert not report.verified
    assert report.failed["trust-root"] >= 1


@pytest.mark.parametrize("standings", [True, [], {"source-native": 3}, "x"])
def test_a_malformed_claim_is_a_failed_claim(standings: Any) -> None:
    report = verify(_replaced("claim", lambda r: r.update({"standings": standings})))
    assert not report.verified
    assert report.failed["claim"] >= 1


def _noncanonical(token: str) -> str | None:
    """The same bytes spelt with a spare bit set, or None when ``token`` has no spare bits."""
    pads = len(token) - len(token.rstrip("="))
    if pads == 0 or len(token) % 4:
        return None
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = len(token) - pads - 1
    value = alphabet.index(token[last]) | 1  # the lowest bit is always spare when padded
    variant = token[:last] + alphabet[value] + token[last + 1 :]
    return (
        variant
        if variant != token and base64.b64decode(variant) == base64.b64decode(token)
        else None
    )


def _base64_sites(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """Every string in a record that is padded base64, and every such token in a note."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _base64_sites(v, (*path, k))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _base64_sites(v, (*path, i))]
    if not isinstance(value, str):
        return []
    tokens = value.replace("\n", " ").split(" ") if "\n" in value else [value]
    return [(path, t) for t in dict.fromkeys(tokens) if _noncanonical(t) is not None]


def _respelt(record: Any, path: tuple[Any, ...], token: str) -> Any:
    record = copy.deepcopy(record)
    holder = record
    for step in path[:-1]:
        holder = holder[step]
    text = holder[path[-1]]
    variant = _noncanonical(token)
    assert variant is not None
    holder[path[-1]] = variant if text == token else text.replace(token, variant)
    return record


SPELLINGS = [
    (at, path, token) for at, record in enumerate(RECORDS) for path, token in _base64_sites(record)
]


def test_the_sweep_reaches_every_kind_of_base64_in_a_bundle() -> None:
    kinds = {(RECORDS[at]["type"], path[-1] if path else None) for at, path, _ in SPELLINGS}
    for expected in [("trustRoot", "publicKey"), ("event", "payload"), ("event", "sig")]:
        assert expected in kinds, kinds
    assert {"checkpoint", "heads"} <= {RECORDS[at]["type"] for at, _, _ in SPELLINGS}


@pytest.mark.parametrize(
    ("at", "path", "token"),
    SPELLINGS,
    ids=[
        f"{RECORDS[at]['type']}:{'/'.join(map(str, path))}:{i}"
        for i, (at, path, _) in enumerate(SPELLINGS)
    ],
)
def test_a_second_spelling_of_any_base64_is_refused(
    at: int, path: tuple[Any, ...], token: str
) -> None:
    """Base64 is malleable (a decoder ignores the last character's spare bits). A bundle
    that verifies has one spelling of every key, hash and signature, so that what the
    verifier passed is byte for byte what was signed."""
    lines = [*LINES[:at], json.dumps(_respelt(RECORDS[at], path, token)), *LINES[at + 1 :]]
    report = verify(lines)
    assert not report.verified, (RECORDS[at]["type"], path, report.to_json()["findings"])


_EVENTS = [at for at, record in enumerate(RECORDS) if record["type"] == "event"]
_NUMBERS = ("leafIndex", "position", "version")


def _respellings(value: Any) -> list[Any]:
    """Other JSON spellings a lax reader would take for ``value``."""
    if isinstance(value, int):
        return [str(value), float(value), value + 0.5]
    return [[value], {"value": value}, None]


@pytest.mark.parametrize(
    ("field", "spelling"),
    [
        (field, spelling)
        for field in ("leafIndex", "position", "version", "aggregate", "topic", "receivedAt")
        for spelling in range(3)
    ],
)
def test_an_event_field_in_another_json_type_is_refused(field: str, spelling: int) -> None:
    """A bundle has one spelling of each event's place in the log: "5", 5.0 or 5.5 is not
    read as the 5 it was (the leaf hash covers the value read, so only the reader can tell),
    and a string field is not one in any other type."""
    for at in _EVENTS:
        record = copy.deepcopy(RECORDS[at])
        record[field] = _respellings(record[field])[spelling]
        lines = [*LINES[:at], json.dumps(record), *LINES[at + 1 :]]
        report = verify(lines)
        assert not report.verified
        assert report.failed["format"] >= 1, (field, record[field], report.to_json()["findings"])
