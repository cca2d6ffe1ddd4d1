"""Small in-memory logs for the witness tests: RFC 6962 trees over made-up leaves, signed
checkpoints, consistency proofs, forks (same origin and key, other leaves after N), and the
add-checkpoint requests every witness implementation is held to."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ledger.proofs.hasher import leaf_hash
from ledger.proofs.reference import consistency_proof, root
from ledger.proofs.signed_note import Verifier, format_checkpoint, sign_note, verifier_key_string
from ledger.signing.keys import SigningKey


@dataclass
class ToyLog:
    origin: str
    key: SigningKey = field(default_factory=SigningKey.generate)
    leaves: list[bytes] = field(default_factory=list)
    tag: str = "main"

    @classmethod
    def grown(cls, origin: str, size: int, key: SigningKey | None = None) -> ToyLog:
        log = cls(origin, key or SigningKey.generate())
        log.grow(size)
        return log

    def grow(self, count: int) -> None:
        start = len(self.leaves)
        self.leaves += [
            leaf_hash(f"{self.tag} leaf {i}".encode()) for i in range(start, start + count)
        ]

    @property
    def size(self) -> int:
        return len(self.leaves)

    @property
    def vkey(self) -> str:
        return verifier_key_string(self.origin, self.key.public.raw)

    def key_verifier(self) -> Verifier:
        return Verifier.from_public_key(self.origin, self.key.public.raw)

    def root(self, size: int | None = None) -> bytes:
        return root(self.leaves[: self.size if size is None else size])

    def note(self, size: int | None = None, signer: SigningKey | None = None) -> str:
        size = self.size if size is None else size
        text = format_checkpoint(self.origin, size, self.root(size))
        return sign_note(text, self.origin, (signer or self.key).private_key())

    def proof(self, old: int, new: int) -> list[bytes]:
        return consistency_proof(old, new, self.leaves)

    def fork(self, at: int, tag: str = "fork") -> ToyLog:
        """Same origin and key, the same first ``at`` leaves, then other ones."""
        other = ToyLog(self.origin, self.key, list(self.leaves[:at]), tag)
        other.grow(self.size - at)
        return other


def request(old: int, note: str, proof: Sequence[bytes] = (), *, flip: int | None = None) -> bytes:
    """An add-checkpoint body; ``flip`` changes one byte of that proof hash."""
    hashes = [bytearray(h) for h in proof]
    if flip is not None:
        hashes[flip][0] ^= 0x01
    lines = "".join(base64.b64encode(bytes(h)).decode() + "\n" for h in hashes)
    return f"old {old}\n{lines}\n{note}".encode()


Case = tuple[str, bytes, int]


def refusal_cases(log: ToyLog) -> tuple[bytes, list[Case], bytes, list[Case]]:
    """For a witness that follows ``log`` (size >= 6) and has cosigned nothing: the request
    that makes it cosign size 4, the refusals it must then give (status codes of the spec),
    the request that advances it to size 6, and the refusals after that."""
    assert log.size >= 6
    forger = SigningKey.generate()
    fork = log.fork(3)
    stranger = ToyLog.grown("example.net/another-log", 6)
    first = request(0, log.note(4))
    before = [
        ("forged: signed by another key", request(4, log.note(6, forger), log.proof(4, 6)), 403),
        ("unknown origin", request(0, stranger.note()), 404),
        ("malformed: no blank line", f"old 4\n{log.note(6)}".encode(), 400),
        (
            "malformed: old size with a leading zero",
            request(4, log.note(6)).replace(b"old 4", b"old 04"),
            400,
        ),
        (
            "malformed: proof line not base64",
            request(4, log.note(6), log.proof(4, 6)).replace(b"=\n", b"!\n", 1),
            400,
        ),
        ("rolled back: old size above the checkpoint", request(4, log.note(2)), 400),
        ("rolled back: from its own size", request(2, log.note(2)), 409),
        ("stale old size", request(0, log.note(6)), 409),
        ("inconsistent: a fork after 3", request(4, fork.note(6), fork.proof(4, 6)), 422),
        ("inconsistent: same size, other root", request(4, fork.note(4)), 422),
        ("inconsistent: corrupt proof", request(4, log.note(6), log.proof(4, 6), flip=0), 422),
    ]
    advance = request(4, log.note(6), log.proof(4, 6))
    after = [
        ("rolled back after advancing", request(6, log.note(4)), 400),
        ("replayed old request", first, 409),
    ]
    return first, before, advance, after


def statuses(post: Callable[[bytes], int], log: ToyLog) -> dict[str, int]:
    """Every case's status from one witness (fresh, following ``log``), by case name."""
    first, before, advance, after = refusal_cases(log)
    seen = {"first": post(first)}
    seen.update({name: post(body) for name, body, _ in before})
    seen["advance"] = post(advance)
    seen.update({name: post(body) for name, body, _ in after})
    return seen


def expected_statuses(log: ToyLog) -> dict[str, int]:
    _, before, _, after = refusal_cases(log)
    return {
        "first": 200,
        **{n: s for n, _, s in before},
        "advance": 200,
        **{n: s for n, _, s in after},
    }
