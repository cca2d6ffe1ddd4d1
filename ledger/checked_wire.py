"""A request on the writer process's wire: a worker's checked envelope, in msgpack.

A worker sends the writer what it checked (``ledger.admission_checks.Checked``). Pickled,
a Checked carries the envelope twice (the JSON object and its decoded payload), the
statement and the predicate both as models (each re-made, field checks and all, as it
loads) and the pickler's own class lookups: measured on groups of 32, loading it was the
largest part of the writer's own work per envelope after the commit. Here it goes as one
msgpack array: the envelope as received and the signature verdict. Everything the writer
judges is made by the writer from the bytes it stores, never taken on the worker's word:
the payload and signature bytes from the envelope's JSON object (so the verdict is matched
against the very bytes stored: ``SignatureVerdict.matches``), the statement read from that
payload, the predicate from the statement, and an ingestion's run from the statement's
subject (which the worker's manifest check found to be what the manifests digest to and
name: ``check_ingestion``). An attack review found a worker's statement and run, sent
beside the envelope, taken as they came.

A request that is not a plainly checked envelope (a refusal kept for a later step, a value
msgpack cannot carry, a test's raw frame) goes pickled as before: a msgpack body starts
with ``TAG``, which no pickle does (a pickle starts with its protocol byte, 0x80).
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import enum
import functools
import io
import pickle
from typing import TYPE_CHECKING, Any

import msgspec

from domain.errors import DomainError
from domain.statements import PredicateType
from ledger.admission_checks import Checked, RunNamed, judged_predicate, names_a_run
from ledger.signing.dsse import Envelope, parse_envelope
from ledger.signing.verdict import SignatureVerdict

if TYPE_CHECKING:
    from domain.statements import Statement

__all__ = ["TAG", "VOUCHED", "decode_request", "encode_request"]

TAG = b"K"


@functools.cache
def _codec() -> tuple[msgspec.msgpack.Encoder, msgspec.msgpack.Decoder[Any], type[Any]]:
    """Made on first use (the writer process and the workers only)."""
    request = msgspec.defstruct(  # real types, not this module's string annotations
        "Request",
        [
            ("number", int),
            ("raw", dict[str, Any]),  # the envelope's JSON object, as received
            ("verdict", tuple[str, str, str, bytes] | None),  # SignatureVerdict
            ("bad_signature", bool),
        ],
        array_like=True,
        frozen=True,
    )
    return msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(request), request


def encode_request(number: int, item: object) -> bytes:
    """The body of one request: ``TAG`` and msgpack for a checked envelope whose every
    step so far passed, else the pickle of ``(number, item)``."""
    from multiprocessing.reduction import ForkingPickler  # noqa: PLC0415

    if (
        isinstance(item, Checked)
        and type(item.envelope.raw) is dict
        and not isinstance(item.predicate, BaseException)
        and not isinstance(item.run, BaseException)
    ):
        encoder, _, request = _codec()
        verdict = item.verdict
        try:
            return TAG + encoder.encode(
                request(
                    number,
                    item.envelope.raw,
                    None
                    if verdict is None
                    else (
                        verdict.keyid,
                        verdict.key_sha256,
                        verdict.signed_digest,
                        verdict.signature,
                    ),
                    item.bad_signature,
                )
            )
        except (TypeError, ValueError, OverflowError):  # not msgpack's to carry: pickled
            pass
    return bytes(ForkingPickler.dumps((number, item)))


def decode_request(body: bytes) -> object:
    """A request's body as the message it stands for: ``(number, Checked)``, or what was
    pickled. Raises if it does not decode (the worker that sent it is cut off)."""
    if body[:1] != TAG:
        message = _Unpickler(io.BytesIO(body)).load()
        if type(message) is tuple and len(message) == 2 and isinstance(message[1], Checked):
            # A pickled Checked is read like a msgpack one, from its envelope's JSON object:
            # taken as it came, its payload and statement were the worker's word (a verdict
            # matched the payload brought along while another object was stored). Only a
            # refusal of its run is the worker's (it can refuse, never admit, its envelope).
            sent: Checked = message[1]
            refused = sent.run if isinstance(sent.run, DomainError) else None
            return message[0], _checked(
                sent.envelope.raw, sent.verdict, sent.bad_signature, refused
            )
        if type(message) is tuple and len(message) == 2 and isinstance(message[1], Envelope):
            # A bare envelope alike: its fields were the worker's word beside the object
            # stored. The writer parses the object it stores (``check_stateless``).
            return message[0], message[1].raw
        return message
    _, decoder, _ = _codec()
    request = decoder.decode(memoryview(body)[1:])
    verdict = None if request.verdict is None else SignatureVerdict(*request.verdict)
    return request.number, _checked(request.raw, verdict, request.bad_signature, None)


def _checked(
    raw: object,
    verdict: SignatureVerdict | None,
    bad_signature: bool,
    run_refused: DomainError | None,
) -> Checked:
    """What the writer judges of a worker's checked envelope, made from the JSON object it
    stores: the envelope, its statement, predicate and run; the worker's verdict beside,
    for a statement of a ``VOUCHED`` type only."""
    envelope: Envelope = parse_envelope(raw)
    statement: Statement = envelope.statement()  # from the stored payload, not the wire
    predicate = judged_predicate(statement)
    run: RunNamed | DomainError | None = None
    if names_a_run(statement, predicate):
        run = run_refused or RunNamed(statement.subject_digest, statement.subject_name)
    taken = verdict if statement.predicateType in VOUCHED else None
    return Checked(envelope, statement, predicate, run, taken, bad_signature)


# The statements a worker's signature verdict is taken for: the bulk of writes, and none
# that moves evidence after admission (an attestation never does; an ingestion is a source's
# claim at admission). A verdict is no proof (docs/deployment.md, "Who the writer trusts"), so
# the writer verifies every other statement itself, whatever a worker says: a rerun's result
# (the one path to "verified"), a key's registration, roles or revocation, a retraction, a
# rerun request or claim, an attachment. They are few; their Ed25519 costs nothing that shows.
VOUCHED = frozenset({PredicateType.INGESTION, PredicateType.ATTESTATION})


# What a pickled request may name: the project's own exceptions, dataclasses, Structs and
# enums (a refusal kept for a later step, an envelope, the models), and plain values. A
# pickle names callables that run as it loads; an attack review had a worker's pickle make
# the writer call ``os.mkdir``. Anything else fails the load, and that worker is cut off.
_PLAIN = frozenset({"dict", "list", "tuple", "set", "frozenset", "bytes", "bytearray", "str",
                    "int", "float", "bool", "complex", "NoneType"})  # fmt: skip


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _PLAIN:
            return getattr(builtins, name)
        if (module, name) == ("msgspec._utils", "rebuild"):
            # How msgspec pickles a Struct with keyword-only fields (a predicate model):
            # ``cls(**kwargs)``, with a class this unpickler allowed, as REDUCE calls one.
            return super().find_class(module, name)
        if module == "datetime" and name in ("datetime", "date", "timedelta", "timezone"):
            return getattr(datetime, name)
        if module.split(".", 1)[0] in ("domain", "ledger") and "." not in name:
            found = super().find_class(module, name)
            # The class itself the project's, not one a project module imported (a dotted
            # name or a re-export reached eventsourcing's and msgspec's classes).
            if str(getattr(found, "__module__", "")).split(".", 1)[0] not in ("domain", "ledger"):
                raise pickle.UnpicklingError(f"a request may not name {module}.{name}")
            if isinstance(found, type) and (
                issubclass(found, (BaseException, msgspec.Struct, enum.Enum))
                or dataclasses.is_dataclass(found)
            ):
                return found
        raise pickle.UnpicklingError(f"a request may not name {module}.{name}")
