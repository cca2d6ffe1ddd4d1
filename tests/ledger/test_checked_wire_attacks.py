"""Attack review of the writer wire (``ledger.checked_wire``): what a worker sent beside the
envelope (its statement, the run its manifests name) was taken by the writer as it came,
which bound only the signature verdict to the bytes it stores; a worker whose HTTP input
broke it (the one way it is less trusted than the writer) could get an event stored that the
writer, checking by itself, refuses. Now the writer reads both from the stored payload: each
test here holds the writer to its own reading."""

from __future__ import annotations

import dataclasses

from domain.errors import DomainError
from ledger.admission_checks import Checked, KnownKeys, RunNamed, check_stateless
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import attestation_envelope, ingestion_envelope
from ledger.signing.dsse import parse_envelope
from tests.ledger.test_admission import SEED_NAME, SEED_RUN, World, ingest_seed, world  # noqa: F401
from tests.ledger.test_worker_checks import over_the_wire


def _checked(w: World, raw: dict[str, object]) -> Checked:
    return check_stateless(raw, KnownKeys(w.ledger.key_states))


def test_a_run_on_the_wire_other_than_the_manifests_name_is_not_stored(world: World) -> None:
    """LOW, fixed (defence in depth): an ingestion whose wire ``run`` named another digest
    and name than its signed manifests was stored under the worker's words."""
    genuine = _checked(world, ingestion_envelope(world.seed, world.ingester, now=world.clock.now))
    assert genuine.verdict is not None and isinstance(genuine.run, RunNamed)
    fake = RunNamed("sha256:" + "ab" * 32, "not-the-manifests-name")
    before = world.count()
    [result] = world.ledger.append_many([over_the_wire(dataclasses.replace(genuine, run=fake))])
    if isinstance(result, DomainError):
        assert world.count() == before, "a refused write stores nothing"
        return
    assert isinstance(result, LoggedEvent)
    assert world.ledger.run(fake.run_digest) is None, (
        "a run stored under a digest no signed manifest names (the worker's word)"
    )
    run = world.ledger.run(SEED_RUN)
    assert run is not None
    assert (run.run_digest, run.run_name) == (genuine.run.run_digest, genuine.run.run_name), (
        "the run stored is named by the worker, not by the signed manifests"
    )


def test_a_statement_on_the_wire_other_than_the_payload_is_not_what_is_judged(
    world: World,
) -> None:
    """LOW, fixed (defence in depth): a signed note whose own subject name is not the run's
    (the writer alone refuses it: SubjectMismatchError), sent with the statement of a correct
    note beside it, was admitted, the stored payload being the refused one."""
    run = ingest_seed(world)
    wrong = attestation_envelope(
        run, "not-" + SEED_NAME, world.attester, type_="note", body="n", now=world.clock.now
    )
    [alone] = world.ledger.append_many([wrong])
    assert isinstance(alone, DomainError), "the writer by itself refuses this envelope"
    right = attestation_envelope(
        run, SEED_NAME, world.attester, type_="note", body="n", now=world.clock.now
    )
    sent = dataclasses.replace(_checked(world, wrong), statement=parse_envelope(right).statement())
    before = world.count()
    [result] = world.ledger.append_many([over_the_wire(sent)])
    assert isinstance(result, DomainError), (
        f"stored at {getattr(result, 'position', '?')}: an envelope the writer refuses by itself"
    )
    assert world.count() == before


def _variants(text: str) -> list[str]:
    """Spellings of a payload's base64 that binascii's lenient reader (``stored_payload``)
    reads as the same bytes, none of them the canonical one."""
    body = text.rstrip("=")
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".index(body[-1])
    found = [text + "\n", " " + text, text[:4] + "\n" + text[4:], text + "=", text + "A==="]
    if text.endswith("="):
        found.append(body)  # padding dropped (binascii refuses this one)
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        found.append(body[:-1] + alphabet[last | 1] + text[len(body) :])  # stray low bit
    return found


def test_payload_base64_spellings_other_than_the_canonical_one_are_refused(
    world: World,
) -> None:
    """Held (guard): whatever base64 spelling of the signed payload a client sends, it is
    refused by the worker's checks and by the writer alone, and nothing is stored: the stored
    text is always the canonical spelling, which msgspec and binascii read alike."""
    run = ingest_seed(world)
    raw = attestation_envelope(
        run, SEED_NAME, world.attester, type_="note", body="n?", now=world.clock.now
    )
    before = world.count()
    for text in _variants(raw["payload"]):
        variant = {**raw, "payload": text}
        try:
            check_stateless(variant, KnownKeys(world.ledger.key_states))
        except DomainError:
            pass
        else:
            raise AssertionError(f"a worker passed the spelling {text!r}")
        [result] = world.ledger.append_many([variant])
        assert isinstance(result, DomainError), text
    assert world.count() == before
