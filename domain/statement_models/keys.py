"""An admin's key predicate: a key registered with its roles (and an agent's device classes),
or revoked."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StrictStr, model_validator

from domain.canonical import canonical_b64decode
from domain.statement_models.common import (
    VISIBLE,
    KeyId,
    SignedPredicate,
    StrictModel,
    Timestamp,
)
from domain.statements import MEASURING_BACKENDS, TEST_BACKENDS, KeyAction, Role


def _canonical_b64(text: str) -> str:
    # One key, one spelling: "...F4=" and "...F5=" decode alike but sign differently.
    canonical_b64decode(text, "publicKey")
    return text


Architecture = Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=50)]


class KeyDevice(StrictModel):
    """A device class an agent key may measure on: a GPU (backend ``cuda``, its product and
    architecture) or a test backend (its name alone)."""

    backend: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=50)]
    product: Annotated[StrictStr, Field(min_length=1, max_length=200), VISIBLE] | None = None
    architecture: Architecture | None = None

    @model_validator(mode="after")
    def _known_backend(self) -> KeyDevice:
        hardware = (self.product, self.architecture)
        if self.backend in MEASURING_BACKENDS:
            if None in hardware:
                raise ValueError(f"a {self.backend} device class names product and architecture")
        elif self.backend in TEST_BACKENDS:
            if hardware != (None, None):
                raise ValueError("a test backend names no product or architecture")
        else:
            known = ", ".join(sorted(MEASURING_BACKENDS | TEST_BACKENDS))
            raise ValueError(f"unknown backend {self.backend!r}: one of {known}")
        return self


class KeyPredicate(SignedPredicate):
    action: Annotated[KeyAction, Field(strict=False)]
    keyId: KeyId
    # Canonical standard base64 of the raw 32-byte Ed25519 public key.
    publicKey: Annotated[
        StrictStr, Field(pattern=r"^[A-Za-z0-9+/]{43}=$"), AfterValidator(_canonical_b64)
    ]
    # Required to register; a revocation names the key by keyId and publicKey only.
    roles: (
        Annotated[list[Annotated[Role, Field(strict=False)]], Field(min_length=1, max_length=5)]
        | None
    ) = None
    validFrom: Timestamp | None = None
    validUntil: Timestamp | None = None
    reason: Annotated[StrictStr, Field(max_length=2000), VISIBLE] | None = None
    label: Annotated[StrictStr, Field(max_length=200), VISIBLE] | None = None
    # An agent key's device classes (domain.rerun_binding): what it may claim and report on.
    devices: Annotated[list[KeyDevice], Field(min_length=1, max_length=64)] | None = None

    @model_validator(mode="after")
    def _devices_with_agents(self) -> KeyPredicate:
        if self.devices is None:
            return self  # an agent registration without them is refused at admission
        if self.action is not KeyAction.REGISTER or Role.AGENT not in (self.roles or ()):
            raise ValueError("only an agent key's registration names device classes")
        seen = [(d.backend, d.product, d.architecture) for d in self.devices]
        if len(set(seen)) != len(seen):
            raise ValueError("devices must not name a device class twice")
        if len({d.backend in MEASURING_BACKENDS for d in self.devices}) > 1:
            raise ValueError(
                "a key names GPU device classes or test backends, never both: a key that runs "
                "code on a test backend must not be able to sign GPU results (use one key each)"
            )
        return self
