"""An event's inclusion proof, checked: the hot loop of verifying a bundle, with a fast path
that decides exactly as the slow one would. (The leaf is ``LogEntry.leaf_hash``: its JCS
takes ``domain.canonical``'s C-encoder path, the one rule for every canonical serialisation.)"""

from __future__ import annotations

from ledger.proofs.hasher import HASH_SIZE, node_hash
from ledger.proofs.verify import verify_inclusion

__all__ = ["InclusionChecker"]


# One state the RFC 9162 loop passed through: ((fn, sn), running hash, proof hashes used).
_Passed = tuple[tuple[int, int], bytes, int]


class InclusionChecker:
    """``verify_inclusion`` that reuses the paths of proofs it has already accepted.

    The RFC 9162 verification loop's state between two proof hashes is ``(fn, sn)`` and the
    running hash ``r``; what follows depends on nothing else but the proof hashes left. So
    when a proof reaches a state an accepted proof passed through, with the same running hash
    and the same remaining hashes, it is accepted too: the full loop would end at the same
    root. Leaves verified in order share most of their paths, so most proofs cost a hash or
    two. Anything else (including every failure) is decided by ``verify_inclusion`` itself,
    so results and error messages are exactly its own.
    """

    MAX_STATES = 4096  # flat memory: forget everything past this many states

    def __init__(self) -> None:
        self.tree: tuple[int, bytes] | None = None
        self.states: dict[tuple[int, int], tuple[bytes, list[bytes], int]] = {}

    def verify(self, leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> None:
        if (size, root) != self.tree or len(self.states) > self.MAX_STATES:
            self.tree = (size, root)
            self.states = {}
        if not self._well_formed(leaf, index, size, proof, root):
            verify_inclusion(leaf, index, size, proof, root)  # raises with the reason
            return
        # The loop of verify_inclusion, inlined: this is the hot path of a bundle's events.
        fn, sn, r = index, size - 1, leaf
        passed: list[_Passed] = []
        for k, p in enumerate(proof):
            if len(p) != HASH_SIZE:  # each hash checked as used; the rest, below
                verify_inclusion(leaf, index, size, proof, root)  # raises with the reason
                return
            if fn & 1 or fn == sn:
                r = node_hash(p, r)
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
            else:
                r = node_hash(r, p)
            fn >>= 1
            sn >>= 1
            seen = self.states.get((fn, sn))
            # The hashes left equal those an accepted proof had left: of the right length.
            if seen is not None and seen[0] == r and seen[1][seen[2] :] == proof[k + 1 :]:
                self._remember(passed, proof)
                return
            passed.append(((fn, sn), r, k + 1))
        if sn != 0 or r != root:
            verify_inclusion(leaf, index, size, proof, root)  # raises with the reason
            return
        self._remember(passed, proof)

    @staticmethod
    def _well_formed(leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> bool:
        """A leaf and root of the right length, an index in the tree and a proof of the
        right size: what ``verify_inclusion`` checks before its loop, but the proof hashes'
        lengths (``verify`` checks those it uses: the rest equal an accepted proof's)."""
        inner = (index ^ (size - 1)).bit_length() if size > 0 else 0
        return not (
            len(leaf) != HASH_SIZE
            or len(root) != HASH_SIZE
            or not 0 <= index < size
            or len(proof) != inner + (index >> inner).bit_count()
        )

    def _remember(self, passed: list[_Passed], proof: list[bytes]) -> None:
        for state, r, rest in passed:
            self.states[state] = (r, proof, rest)
