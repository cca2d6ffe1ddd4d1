"""C2SP ``tlog-proof@v1`` (https://c2sp.org/tlog-proof): one event's offline proof, checkable
by any tlog-proof verifier without this project.

::

    c2sp.org/tlog-proof@v1
    extra <base64 of the leaf data>
    index <leaf index>
    <base64 inclusion proof hash, one per line, from the leaf's sibling up>
    <empty line>
    <the checkpoint note, verbatim, with its witnesses' cosignatures>

The ``extra`` line carries the leaf's data (the JCS of ``{position, aggregate, version,
topic, envelope, receivedAt}``, ``ledger.proofs.log_entries``): its RFC 6962 leaf hash is
what the proof places in the tree. The data is not trusted for being there: a verifier
hashes it, and then holds its own expectation (the envelope it cares about) against what
it says. Pure functions over text.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from domain.canonical import canonical_b64decode
from domain.errors import CanonicalizationError
from ledger.proofs.errors import CodedError, ProofError
from ledger.proofs.hasher import HASH_SIZE, leaf_hash
from ledger.proofs.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.proofs.verify import verify_inclusion
from ledger.witness.policy import Policy, QuorumVerdict, quorum_met

__all__ = [
    "FILE_SUFFIX",
    "HEADER",
    "TlogProof",
    "TlogProofError",
    "VerifiedProof",
    "format_tlog_proof",
    "parse_tlog_proof",
    "verify_tlog_proof",
]

HEADER = "c2sp.org/tlog-proof@v1"
FILE_SUFFIX = ".tlog-proof"
_INDEX = re.compile(r"index (0|[1-9][0-9]{0,19})")
_MAX_PROOF = 64


class TlogProofError(CodedError, ValueError):
    """A tlog-proof is malformed, or does not prove what it says; ``code`` says which."""

    code = "malformed-tlog-proof"


@dataclass(frozen=True, slots=True)
class TlogProof:
    index: int
    proof: tuple[bytes, ...]
    checkpoint: str  # the signed checkpoint note, verbatim
    extra: bytes | None = None


@dataclass(frozen=True, slots=True)
class VerifiedProof:
    """What a verified proof shows: leaf ``index`` of the checkpoint's tree is ``leaf``."""

    checkpoint: Checkpoint
    index: int
    leaf: bytes  # the leaf hash
    extra: bytes | None
    quorum: QuorumVerdict | None  # the witness policy's verdict, when one was given


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def format_tlog_proof(
    index: int, proof: Sequence[bytes], checkpoint_note: str, extra: bytes | None = None
) -> str:
    """The proof file's text."""
    lines = [HEADER]
    if extra is not None:
        lines.append(f"extra {_b64(extra)}")
    lines.append(f"index {index}")
    lines += [_b64(h) for h in proof]
    return "".join(line + "\n" for line in lines) + "\n" + checkpoint_note


def _decode(text: str, what: str) -> bytes:
    try:
        return canonical_b64decode(text, what)
    except CanonicalizationError as exc:
        raise TlogProofError(exc.message) from None


def parse_tlog_proof(text: str | bytes) -> TlogProof:
    """Strictly parse a proof file; raise :class:`TlogProofError` saying what is wrong."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise TlogProofError("a tlog-proof is UTF-8 text") from None
    head, sep, checkpoint = text.partition("\n\n")
    if not sep or not checkpoint:
        raise TlogProofError("no empty line between the proof and the checkpoint")
    lines = head.split("\n")
    if lines[0] != HEADER:
        raise TlogProofError(f"the first line must be {HEADER!r}")
    rest = lines[1:]
    extra = None
    if rest and rest[0].startswith("extra "):
        extra = _decode(rest[0].removeprefix("extra "), "extra data")
        rest = rest[1:]
    if not rest or (match := _INDEX.fullmatch(rest[0])) is None:
        raise TlogProofError("expected 'index <n>' (decimal, no leading zeros)")
    hashes = rest[1:]
    if len(hashes) > _MAX_PROOF:
        raise TlogProofError(f"more than {_MAX_PROOF} inclusion proof lines")
    proof = tuple(_decode(h, f"proof line {i + 1}") for i, h in enumerate(hashes))
    if any(len(h) != HASH_SIZE for h in proof):
        raise TlogProofError(f"every proof line is a {HASH_SIZE}-byte hash")
    return TlogProof(int(match.group(1)), proof, checkpoint, extra)


def verify_tlog_proof(
    text: str | bytes,
    log_keys: Iterable[Verifier],
    *,
    origin: str | None = None,
    policy: Policy | None = None,
    leaf_data: bytes | None = None,
) -> VerifiedProof:
    """Verify a proof file: the checkpoint is signed by one of ``log_keys`` (for ``origin``),
    cosigned by ``policy``'s quorum when one is given, and the leaf — ``leaf_data`` if given,
    else the proof's extra data — is at ``index`` in its tree. Raises
    :class:`TlogProofError` (``code`` ``unverified-checkpoint``, ``quorum-not-met``,
    ``not-included``, ...) saying why not."""
    proof = parse_tlog_proof(text)
    data = leaf_data if leaf_data is not None else proof.extra
    if data is None:
        raise TlogProofError("no leaf data: the proof has no extra line and none was given")
    keys = list(log_keys)
    try:
        checkpoint, _ = open_checkpoint(proof.checkpoint, keys, origin=origin)
    except NoteError as exc:
        raise _refused("unverified-checkpoint", f"the checkpoint does not verify: {exc}") from None
    verdict = None
    if policy is not None:
        verdict = quorum_met(policy, proof.checkpoint, [] if policy.logs else keys)
        if not verdict.met:
            raise _refused(verdict.code, verdict.reason)
    leaf = leaf_hash(data)
    try:
        verify_inclusion(leaf, proof.index, checkpoint.size, proof.proof, checkpoint.root)
    except ProofError as exc:
        raise _refused("not-included", f"leaf {proof.index}: {exc.message}") from None
    return VerifiedProof(checkpoint, proof.index, leaf, proof.extra, verdict)


def _refused(code: str, message: str) -> TlogProofError:
    error = TlogProofError(message)
    error.code = code
    return error
