"""The trust root: the keys a verifier starts from.

``trust-root.json`` names the admin keys (which may register every other key, themselves
included at bootstrap) and the log key that signs checkpoints. It holds public keys only,
and, for a ledger made with witnesses, the C2SP tlog-policy that ``verify`` holds a bundle's
checkpoint to when the caller names none (``witnessPolicy``, the policy file's text: parsed
by ``ledger.witness.policy`` where it is used, as this module stays free of it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from domain.errors import DomainError
from ledger.proofs.signed_note import InvalidKeyName, check_key_name
from ledger.signing.keys import PublicKey

TRUST_ROOT_VERSION = 1


class TrustRootError(DomainError):
    code = "bad-trust-root"


class TrustRoot(msgspec.Struct, frozen=True):
    origin: str
    admin_keys: tuple[PublicKey, ...]
    log_key: PublicKey
    created_at: str
    witness_policy: str | None = None  # a tlog-policy file's text: the default quorum

    def is_admin(self, key_id: str) -> bool:
        return any(k.key_id == key_id for k in self.admin_keys)

    def admin_key(self, key_id: str) -> PublicKey | None:
        return next((k for k in self.admin_keys if k.key_id == key_id), None)

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "version": TRUST_ROOT_VERSION,
            "origin": self.origin,
            "createdAt": self.created_at,
            "adminKeys": [{"keyId": k.key_id, "publicKey": k.b64} for k in self.admin_keys],
            "logKey": {"keyId": self.log_key.key_id, "publicKey": self.log_key.b64},
        }
        # Only when set: a ledger without witnesses keeps the trust root it always had.
        if self.witness_policy is not None:
            found["witnessPolicy"] = self.witness_policy
        return found

    @classmethod
    def from_json(cls, data: object) -> TrustRoot:
        if not isinstance(data, dict) or data.get("version") != TRUST_ROOT_VERSION:
            raise TrustRootError(f"trust root must be an object with version {TRUST_ROOT_VERSION}")
        # Unknown fields are refused, not ignored: what a verifier trusts must be exactly
        # what it was shown, with nothing a reader might interpret differently.
        _only(
            data,
            {"version", "origin", "createdAt", "adminKeys", "logKey", "witnessPolicy"},
            "trust root",
        )
        try:
            admins = tuple(_key(entry) for entry in data["adminKeys"])
            log_key = _key(data["logKey"])
            origin = data["origin"]
            created = data["createdAt"]
        except KeyError as exc:
            raise TrustRootError(f"trust root is missing {exc}") from None
        except TypeError:
            raise TrustRootError("trust root adminKeys must be a list of keys") from None
        if not admins:
            raise TrustRootError("trust root names no admin key")
        if not isinstance(origin, str):
            raise TrustRootError("trust root origin must be a string")
        try:
            check_key_name(origin)  # the origin names the log's checkpoint key
        except InvalidKeyName as exc:
            raise TrustRootError(f"trust root origin: {exc}") from None
        policy = data.get("witnessPolicy")
        if policy is not None and not isinstance(policy, str):
            raise TrustRootError("trust root witnessPolicy must be a tlog-policy file's text")
        return cls(
            origin=origin,
            admin_keys=admins,
            log_key=log_key,
            created_at=str(created),
            witness_policy=policy,
        )

    @classmethod
    def load(cls, path: Path) -> TrustRoot:
        try:
            return cls.from_json(json.loads(path.read_text("utf-8")))
        except OSError as exc:
            raise TrustRootError(f"cannot read trust root {path}: {exc.strerror}") from None
        except json.JSONDecodeError:
            raise TrustRootError(f"trust root {path} is not JSON") from None

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", "utf-8")


def _only(data: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise TrustRootError(f"{what} has unknown fields: {', '.join(map(repr, unknown))}")


def _key(entry: Any) -> PublicKey:
    if not isinstance(entry, dict):
        raise TrustRootError("trust root key must be an object with keyId and publicKey")
    _only(entry, {"keyId", "publicKey"}, "trust root key")
    try:
        key = PublicKey.from_b64(entry["publicKey"]).strong()
    except ValueError as exc:
        raise TrustRootError(f"trust root key: {exc}") from None
    if entry.get("keyId") != key.key_id:
        raise TrustRootError(
            f"trust root key id {entry.get('keyId')} does not match its public key"
        )
    return key
