"""Why a proof, a note or one of their inputs was rejected: one exception class per reason,
each with a stable ``code`` (``CodedError``, shared with ``signed_note``'s errors)."""

from __future__ import annotations

__all__ = [
    "CodedError",
    "IndexOutOfRange",
    "InvalidConsistencyRange",
    "InvalidHashLength",
    "ProofError",
    "RootMismatch",
    "WrongProofSize",
]


class CodedError(Exception):
    """``code`` is a stable machine-readable reason; ``message`` says what was wrong."""

    code = "invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def reason(self) -> str:
        """Alias of :attr:`code`."""
        return self.code


class ProofError(CodedError):
    """A Merkle proof (or one of its inputs) was rejected."""

    code = "invalid-proof"


class InvalidHashLength(ProofError):
    """A leaf hash, root or proof element is not exactly 32 bytes."""

    code = "invalid-hash-length"


class IndexOutOfRange(ProofError):
    """The leaf index is negative or not below the tree size."""

    code = "index-out-of-range"


class InvalidConsistencyRange(ProofError):
    """The sizes of a consistency proof are negative or decreasing."""

    code = "invalid-consistency-range"


class WrongProofSize(ProofError):
    """The proof has more or fewer hashes than the index and size(s) require."""

    code = "wrong-proof-size"


class RootMismatch(ProofError):
    """The root(s) recomputed from the proof differ from the expected root(s)."""

    code = "root-mismatch"
