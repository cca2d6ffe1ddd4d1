"""When a registered key may sign: the rules shared by admission, history and verification."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.statements import Role
from domain.timestamps import parse_time
from ledger.errors import ClockSkewError, ExpiredKeyError, RevokedKeyError
from ledger.keys import PublicKey

# How far a signer's clock may run ahead of the ledger's.
MAX_CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class KeyRecord:
    key_id: str
    public_key: PublicKey
    roles: frozenset[Role]
    valid_from: datetime
    valid_until: datetime | None
    registered_at: datetime
    revoked_at: datetime | None
    label: str | None = None

    @classmethod
    def from_fields(
        cls,
        *,
        key_id: str,
        public_key_b64: str,
        roles: list[str],
        valid_from: str,
        valid_until: str | None,
        registered_at: str,
        revoked_at: str | None,
        label: str | None,
    ) -> KeyRecord:
        return cls(
            key_id=key_id,
            public_key=PublicKey.from_b64(public_key_b64),
            roles=frozenset(Role(r) for r in roles),
            valid_from=parse_time(valid_from),
            valid_until=parse_time(valid_until) if valid_until else None,
            registered_at=parse_time(registered_at),
            revoked_at=parse_time(revoked_at) if revoked_at else None,
            label=label,
        )

    def check_usable_now(self, now: datetime, issued_at: datetime) -> None:
        """Admission: may this key sign a statement issued at ``issued_at``, received ``now``?

        A revoked key signs nothing new whatever date it claims, since a thief controls
        the claimed date.
        """
        if self.revoked_at is not None:
            raise RevokedKeyError(f"key {self.key_id} was revoked at {self.revoked_at.isoformat()}")
        if self.valid_until is not None and now > self.valid_until:
            raise ExpiredKeyError(f"key {self.key_id} expired at {self.valid_until.isoformat()}")
        if issued_at > now + MAX_CLOCK_SKEW:
            raise ClockSkewError(f"issuedAt {issued_at.isoformat()} is in the future")
        if issued_at < self.valid_from or (
            self.valid_until is not None and issued_at > self.valid_until
        ):
            raise ExpiredKeyError(
                f"key {self.key_id} is not valid at issuedAt {issued_at.isoformat()}"
            )

    def invalid_at(self, moment: datetime) -> str | None:
        """History and audit: why the key could not sign something received at ``moment``."""
        if moment < self.registered_at:
            return f"key {self.key_id} was not registered until {self.registered_at.isoformat()}"
        if self.revoked_at is not None and moment >= self.revoked_at:
            return f"key {self.key_id} was revoked at {self.revoked_at.isoformat()}"
        if self.valid_until is not None and moment > self.valid_until:
            return f"key {self.key_id} expired at {self.valid_until.isoformat()}"
        return None
