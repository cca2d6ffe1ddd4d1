"""A request on the writer process's wire: a worker's checked envelope, in msgpack.

A worker sends the writer what it checked (``ledger.admission_checks.Checked``). Pickled,
a Checked carries the envelope twice (the JSON object and its decoded payload), the
statement and the predicate both as models (each re-made, field checks and all, as it
loads) and the pickler's own class lookups: measured on groups of 32, loading it was the
largest part of the writer's own work per envelope after the commit. Here it goes as one
msgpack array of what the writer cannot cheaply make itself: the envelope as received, the
statement (msgspec reads it into its model in C), the run the manifests name and the
signature verdict. The writer makes the rest from those, itself: the envelope's payload and
signature bytes from the JSON object it stores (so the verdict is matched against the very
bytes stored: ``SignatureVerdict.matches``), and the predicate from the statement.

A request that is not a plainly checked envelope (a refusal kept for a later step, a value
msgpack cannot carry, a test's raw frame) goes pickled as before: a msgpack body starts
with ``TAG``, which no pickle does (a pickle starts with its protocol byte, 0x80).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.admission_checks import Checked, RunNamed, judged_predicate
from ledger.signing.dsse import Envelope, parse_envelope
from ledger.signing.verdict import SignatureVerdict

if TYPE_CHECKING:
    from domain.statements import Statement

__all__ = ["TAG", "decode_request", "encode_request"]

TAG = b"K"


@functools.cache
def _codec() -> tuple[msgspec.msgpack.Encoder, msgspec.msgpack.Decoder[Any], type[Any]]:
    """Made on first use: the statement model is made only where a statement is checked."""
    from domain.statement_models.statement import Statement  # noqa: PLC0415

    request = msgspec.defstruct(  # real types, not this module's string annotations
        "Request",
        [
            ("number", int),
            ("raw", dict[str, Any]),  # the envelope's JSON object, as received
            ("statement", Statement),
            ("run", tuple[str, str] | None),  # RunNamed
            ("verdict", tuple[str, str, str, str] | None),  # SignatureVerdict
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
                    item.statement,
                    None if item.run is None else (item.run.run_digest, item.run.run_name),
                    None
                    if verdict is None
                    else (
                        verdict.keyid,
                        verdict.key_sha256,
                        verdict.signed_digest,
                        verdict.signature_sha256,
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
        from multiprocessing.reduction import ForkingPickler  # noqa: PLC0415

        return ForkingPickler.loads(body)
    _, decoder, _ = _codec()
    request = decoder.decode(memoryview(body)[1:])
    envelope: Envelope = parse_envelope(request.raw)
    statement: Statement = request.statement
    return request.number, Checked(
        envelope,
        statement,
        judged_predicate(statement),
        None if request.run is None else RunNamed(*request.run),
        None if request.verdict is None else SignatureVerdict(*request.verdict),
        request.bad_signature,
    )
