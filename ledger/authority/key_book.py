"""Keys as the log has them: registered at one place in the log, revoked (perhaps) at another.

Validity is defined by log position, not by clocks: a key signs an event only if its
registration comes before that event in the log and its revocation (if any) does not. Every
process agrees on log order (it is the order the sequencer gave the leaves), so an event
admitted before a revocation is valid for every verifier, and one after it for none, however
the writers' clocks drift. Expiry (``validUntil``) stays a time, compared with the time the
ledger recorded on the event itself, which is what admission compared too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from domain.rerun_binding import DeviceClass, describe_classes, may_measure
from domain.statements import KeyAction, Role
from domain.timestamps import parse_time
from ledger.errors import AdmissionError
from ledger.signing.keys import PublicKey

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import KeyPredicate


class KeyState(msgspec.Struct, frozen=True):
    """One key's registration and revocation. Positions are None only for key events admitted
    earlier in the group now being admitted (not sequenced yet, but before everything in it
    that follows them)."""

    key_id: str
    public_key: PublicKey
    roles: frozenset[Role]
    valid_from: datetime
    valid_until: datetime | None
    registered_at: datetime
    registered_position: int | None
    registered_by: str = ""
    label: str | None = None
    revoked_at: datetime | None = None
    revoked_position: int | None = None
    revocation_reason: str | None = None
    version: int = 1  # how many key events made this state (1 registered, 2 revoked)
    # An agent key's device classes, as its registration names them (domain.rerun_binding).
    devices: frozenset[DeviceClass] = frozenset()

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def registered_before(self, position: int | None) -> bool:
        """Registered earlier in the log than ``position`` (None: than anything admitted now)."""
        if position is None or self.registered_position is None:
            return position is None
        return self.registered_position < position

    def revoked_before(self, position: int | None) -> bool:
        """Revoked earlier in the log than ``position`` (None: than anything admitted now)."""
        if not self.revoked:
            return False
        if position is None or self.revoked_position is None:
            return True
        return self.revoked_position < position


KeyLookup = Callable[[str], KeyState | None]


def registered_state(
    predicate: KeyPredicate, *, position: int | None, received_at: datetime, signer: str
) -> KeyState:
    """The state a registration statement creates (the ledger checked its form)."""
    assert predicate.roles is not None and predicate.validFrom is not None
    return KeyState(
        key_id=predicate.keyId,
        public_key=PublicKey.from_b64(predicate.publicKey),
        roles=frozenset(predicate.roles),
        valid_from=parse_time(predicate.validFrom),
        valid_until=parse_time(predicate.validUntil) if predicate.validUntil else None,
        registered_at=received_at,
        registered_position=position,
        registered_by=signer,
        label=predicate.label,
        devices=registered_devices(predicate),
    )


def registered_devices(predicate: KeyPredicate) -> frozenset[DeviceClass]:
    return frozenset(
        DeviceClass(d.backend, d.product, d.architecture) for d in predicate.devices or ()
    )


class DeviceNotBoundError(AdmissionError):
    """An agent key claimed or reported a device its registration does not name."""

    code = "device-not-bound"
    status = 403


def check_device(state: KeyState, product: str, architecture: str, backend: str) -> None:
    """The key may claim or report this device: one of its registered classes admits it."""
    if not may_measure(state.devices, product, architecture, backend):
        raise DeviceNotBoundError(
            f"key {state.key_id} is registered for {describe_classes(state.devices)}; it may "
            f"not claim or report {product} ({architecture}, backend {backend})"
        )


def revoked_state(
    state: KeyState, predicate: KeyPredicate, *, position: int | None, received_at: datetime
) -> KeyState:
    return msgspec.structs.replace(
        state,
        revoked_at=received_at,
        revoked_position=position,
        revocation_reason=predicate.reason,
        version=state.version + 1,
    )


class KeyBook:
    """Key states learned from admitted (or verified) key events, fed in log order."""

    def __init__(self) -> None:
        self.states: dict[str, KeyState] = {}

    def __call__(self, key_id: str) -> KeyState | None:
        return self.states.get(key_id)

    def __len__(self) -> int:
        return len(self.states)

    def snapshot(self, key_ids: Iterable[str]) -> dict[str, KeyState]:
        """The states of these ids as they stand now (states are immutable)."""
        return {k: s for k in key_ids if (s := self.states.get(k)) is not None}

    def learn(
        self, predicate: KeyPredicate, *, position: int | None, received_at: datetime, signer: str
    ) -> None:
        """Apply one key event. A second registration of a key, or a revocation of an unknown
        or already revoked one, changes nothing: admission refuses those, and a verifier that
        meets one has already failed it."""
        known = self.states.get(predicate.keyId)
        if predicate.action is KeyAction.REGISTER:
            if known is None:
                self.states[predicate.keyId] = registered_state(
                    predicate, position=position, received_at=received_at, signer=signer
                )
        elif known is not None and not known.revoked:
            self.states[predicate.keyId] = revoked_state(
                known, predicate, position=position, received_at=received_at
            )
