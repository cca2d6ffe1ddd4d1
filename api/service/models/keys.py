"""Replies about keys: one registered key, and a page of them."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Literal

from api.service.models import ApiModel
from ledger.authority import KeyState


class KeyRecord(ApiModel, kw_only=True):
    key_id: str
    public_key: str  # base64 of the raw Ed25519 public key
    roles: list[str]
    label: str | None
    valid_from: datetime
    valid_until: datetime | None
    registered_at: datetime
    registered_position: int | None
    revoked_at: datetime | None
    revoked_position: int | None
    status: Literal["active", "revoked"]
    # An agent key's device classes: {"backend": "cuda", "product", "architecture"} of a
    # GPU, or {"backend": "cpu-test"}; what it may claim and report on (empty: not an agent).
    devices: list[dict[str, str]]

    @classmethod
    def of(cls, state: KeyState) -> KeyRecord:
        return cls(
            key_id=state.key_id,
            public_key=base64.b64encode(state.public_key.raw).decode(),
            roles=sorted(str(r) for r in state.roles),
            label=state.label,
            valid_from=state.valid_from,
            valid_until=state.valid_until,
            registered_at=state.registered_at,
            registered_position=state.registered_position,
            revoked_at=state.revoked_at,
            revoked_position=state.revoked_position,
            status="revoked" if state.revoked else "active",
            devices=[d.to_json() for d in sorted(state.devices)],
        )


class KeyList(ApiModel, kw_only=True):
    items: list[KeyRecord]  # in registration order
    next: str | None  # the cursor of the next page; None: this is the last
