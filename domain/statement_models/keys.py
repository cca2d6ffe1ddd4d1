"""An admin's key predicate: a key registered with its roles (and an agent's device classes),
or revoked."""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

from typing import Annotated

from msgspec import Meta

from domain.canonical import canonical_b64decode
from domain.statement_models.common import (
    KeyId,
    SignedPredicate,
    StrictModel,
    rfc3339,
    visible,
)
from domain.statements import MEASURING_BACKENDS, TEST_BACKENDS, KeyAction, Role


def _canonical_b64(text: str) -> None:
    # One key, one spelling: "...F4=" and "...F5=" decode alike but sign differently.
    canonical_b64decode(text, "publicKey")


Architecture = Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_]*\Z", max_length=50)]


class KeyDevice(StrictModel, kw_only=True, frozen=True):
    """A device class an agent key may measure on: a GPU (backend ``cuda``, its product and
    architecture) or a test backend (its name alone)."""

    backend: Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_-]*\Z", max_length=50)]
    product: Annotated[str, Meta(min_length=1, max_length=200)] | None = None
    architecture: Architecture | None = None

    _field_checks = (("product", visible),)

    def validate(self) -> None:
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


class KeyPredicate(SignedPredicate, kw_only=True, frozen=True):
    action: KeyAction
    keyId: KeyId
    # Canonical standard base64 of the raw 32-byte Ed25519 public key.
    publicKey: Annotated[str, Meta(pattern=r"^[A-Za-z0-9+/]{43}=\Z")]
    # Required to register; a revocation names the key by keyId and publicKey only.
    roles: Annotated[list[Role], Meta(min_length=1, max_length=5)] | None = None
    validFrom: str | None = None
    validUntil: str | None = None
    reason: Annotated[str, Meta(max_length=2000)] | None = None
    label: Annotated[str, Meta(max_length=200)] | None = None
    # An agent key's device classes (domain.rerun_binding): what it may claim and report on.
    devices: Annotated[list[KeyDevice], Meta(min_length=1, max_length=64)] | None = None

    _field_checks = (
        *SignedPredicate._field_checks,
        ("publicKey", _canonical_b64),
        ("validFrom", rfc3339),
        ("validUntil", rfc3339),
        ("reason", visible),
        ("label", visible),
    )

    def validate(self) -> None:
        if self.devices is None:
            return  # an agent registration without them is refused at admission
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
