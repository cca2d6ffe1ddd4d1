"""A small HTTP client for a KernelIndex server, and local re-verification of what it serves.

The CLI's ``--server`` mode goes through here. Replies that are problem+json become a
``RemoteError`` carrying the server's stable ``code``, so the CLI prints the same
``error[<code>]`` a local ledger would. A server is trusted for transport only: every event of
a history it sends is re-verified here from its DSSE envelope, against the keys it reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from domain.errors import DomainError
from domain.statements import Role
from domain.timestamps import parse_time
from ledger.aggregates import run_id
from ledger.authority import KeyState
from ledger.dsse import parse_envelope
from ledger.event_verification import CheckOutcome, EventVerification, verify_event
from ledger.keys import PublicKey
from ledger.trust import TrustRoot
from ledger.verification_report import Check

DEFAULT_TIMEOUT = 30.0
USER_AGENT = "kernelindex-cli"


class RemoteError(DomainError):
    """The server refused a request (its problem+json code), or could not be reached."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def _segment(value: str) -> str:
    """One path segment: a user's reference must not add segments or a query to the URL."""
    return quote(value, safe=":")


class LedgerClient:
    """Typed calls to the ``/v1`` API. Use as a context manager, or call ``close()``."""

    def __init__(
        self,
        base_url: str,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise RemoteError(
                "malformed-request",
                f"server URL must look like http://host:port, got {base_url!r}",
            )
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
        )

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ----------------------------------------------------------------- calls

    def run(self, reference: str) -> dict[str, Any]:
        """One run record (GET /v1/runs/{ref}); ``reference`` is a digest or unique prefix."""
        return self._object("GET", f"/v1/runs/{_segment(reference)}")

    def history(self, reference: str) -> dict[str, Any]:
        """A run's events as the server verified them (GET /v1/runs/{ref}/history)."""
        return self._object("GET", f"/v1/runs/{_segment(reference)}/history")

    def post_attestation(self, run_digest: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Append a signed attestation; the receipt (201, or 200 for a duplicate)."""
        return self._object("POST", f"/v1/runs/{_segment(run_digest)}/attestations", body=envelope)

    def post_rerun_request(self, run_digest: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Append an admin-signed rerun request; the receipt (201, or 200 for a duplicate)."""
        path = f"/v1/runs/{_segment(run_digest)}/rerun-requests"
        return self._object("POST", path, body=envelope)

    def key(self, key_id: str) -> dict[str, Any]:
        """One registered key with its public key, roles and validity (GET /v1/keys/{id})."""
        return self._object("GET", f"/v1/keys/{_segment(key_id)}")

    def trust_root(self) -> dict[str, Any]:
        return self._object("GET", "/v1/trust-root")

    # ------------------------------------------------------------- transport

    def _object(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        reply = self._send(method, path, body)
        value = self._decode(reply, method, path)
        if reply.is_success:
            if not isinstance(value, dict):
                raise RemoteError("bad-reply", f"{method} {path}: the server sent no JSON object")
            return value
        raise self._problem(reply, value, method, path)

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None) -> httpx.Response:
        content = json.dumps(dict(body)).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            return self._http.request(method, path, content=content, headers=headers)
        except httpx.TimeoutException:
            raise RemoteError(
                "unreachable", f"{self.base_url} did not answer within {self.timeout:g} s"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteError("unreachable", f"cannot reach {self.base_url}: {exc}") from None

    @staticmethod
    def _decode(reply: httpx.Response, method: str, path: str) -> Any:
        try:
            return reply.json()
        except ValueError:
            if reply.is_success:
                raise RemoteError(
                    "bad-reply", f"{method} {path}: the server's reply is not JSON"
                ) from None
            return None  # an error page from a proxy, say: reported by status below

    @staticmethod
    def _problem(reply: httpx.Response, value: Any, method: str, path: str) -> RemoteError:
        status = reply.status_code
        fallback = f"{method} {path} answered {status} {reply.reason_phrase}".rstrip()
        if not isinstance(value, dict):
            return RemoteError(f"http-{status}", fallback, status)
        code = value.get("code")
        if not isinstance(code, str) or not code:
            kind = value.get("type")
            code = kind.rsplit("/", 1)[-1] if isinstance(kind, str) and kind else f"http-{status}"
        detail = value.get("detail") or value.get("title") or fallback
        return RemoteError(code, str(detail), status)


# ------------------------------------------------------- checked replies


def _names(reference: str, digest: str) -> bool:
    """Whether the run the server answered with is the one the reference names."""
    ref = reference.strip().lower()
    if not ref.startswith("sha256:"):
        ref = "sha256:" + ref
    return digest.startswith(ref)


def remote_run(client: LedgerClient, reference: str) -> tuple[str, str]:
    """(digest, name) of the run a reference names, refusing a reply about another run."""
    record = client.run(reference)
    digest, name = record.get("digest"), record.get("name")
    if not isinstance(digest, str) or not isinstance(name, str):
        raise RemoteError("bad-reply", "the server's run record lacks a digest or name")
    if not _names(reference, digest):
        raise RemoteError("bad-reply", f"asked for run {reference}, the server answered {digest}")
    return digest, name


@dataclass(frozen=True)
class RemoteEvent:
    """One event re-verified here, with what only the server knows (its log leaf)."""

    entry: EventVerification
    leaf_index: int | None
    envelope_digest: str | None


@dataclass(frozen=True)
class RemoteHistory:
    run: str
    events: list[RemoteEvent]

    @property
    def ok(self) -> bool:
        return all(e.entry.ok for e in self.events)


def remote_history(client: LedgerClient, reference: str) -> RemoteHistory:
    """A run's history from the server, each event re-verified locally.

    The signature is checked against the public key the server reports for each signing key
    id, with the same checks a local ``history`` runs (envelope, event type, subject, key
    validity, role, ingested digests). An event the server calls verified that fails here, or
    one it calls unverified that passes here, is shown as failed with the reason.
    """
    reply = client.history(reference)
    run, events = reply.get("run"), reply.get("events")
    if not isinstance(run, str) or not isinstance(events, list):
        raise RemoteError("bad-reply", "the server's history lacks a run digest or events")
    if not _names(reference, run):
        raise RemoteError("bad-reply", f"asked for run {reference}, the server answered {run}")
    trust_root = TrustRoot.from_json(client.trust_root())
    keys = _signing_keys(client, events)
    return RemoteHistory(run, [_recheck(item, run, keys, trust_root) for item in events])


def _signature_key_ids(item: object) -> set[str]:
    envelope = item.get("envelope") if isinstance(item, dict) else None
    signatures = envelope.get("signatures") if isinstance(envelope, dict) else None
    found: set[str] = set()
    for signature in signatures if isinstance(signatures, list) else []:
        keyid = signature.get("keyid") if isinstance(signature, dict) else None
        if isinstance(keyid, str) and keyid:
            found.add(keyid)
    return found


def _signing_keys(client: LedgerClient, events: list[Any]) -> dict[str, KeyState]:
    """The server's record of every key an envelope names; a key it cannot show is unknown."""
    wanted: set[str] = set()
    for item in events:
        wanted |= _signature_key_ids(item)
    records: dict[str, KeyState] = {}
    for key_id in sorted(wanted):
        try:
            data = client.key(key_id)
        except RemoteError as exc:
            if exc.status is not None and exc.status < 500:
                continue  # not registered (or not a key id): its signatures verify nothing
            raise
        record = _key_record(data)
        # A server answering with some other key must not make a signature verify.
        if record is not None and record.key_id == key_id == record.public_key.key_id:
            records[key_id] = record
    return records


def _key_record(data: dict[str, Any]) -> KeyState | None:
    try:
        revoked_at = data.get("revokedAt")
        return KeyState(
            key_id=str(data["keyId"]),
            public_key=PublicKey.from_b64(str(data["publicKey"])),
            roles=frozenset(Role(str(r)) for r in data["roles"]),
            valid_from=parse_time(str(data["validFrom"])),
            valid_until=parse_time(data["validUntil"]) if data.get("validUntil") else None,
            registered_at=parse_time(str(data["registeredAt"])),
            registered_position=int(data["registeredPosition"]),
            label=data.get("label"),
            revoked=revoked_at is not None,
            revoked_at=parse_time(revoked_at) if revoked_at else None,
            revoked_position=(
                int(data["revokedPosition"]) if data.get("revokedPosition") is not None else None
            ),
        )
    except (KeyError, TypeError, ValueError):  # DomainError is a ValueError too
        return None


def _recheck(
    item: object, run: str, keys: dict[str, KeyState], trust_root: TrustRoot
) -> RemoteEvent:
    if not isinstance(item, dict):
        entry = EventVerification(position=-1, version=0, event="?")
        entry.checks.append(CheckOutcome(Check.RECORD, False, "the server sent a non-object event"))
        return RemoteEvent(entry, None, None)
    position, version = item.get("position"), item.get("version")
    leaf = item.get("leafIndex")
    leaf_index = leaf if isinstance(leaf, int) else None
    if not isinstance(position, int) or not isinstance(version, int):
        entry = EventVerification(position=-1, version=0, event=str(item.get("event")))
        entry.checks.append(CheckOutcome(Check.RECORD, False, "the server sent no position"))
        return RemoteEvent(entry, leaf_index, None)
    entry = verify_event(
        position=position,
        version=version,
        event=str(item.get("event")),
        aggregate_id=run_id(run),
        envelope_json=item.get("envelope"),
        received_at=str(item.get("receivedAt")),
        keys=keys.get,
        trust_root=trust_root,
    )
    entry.checks.append(_agreement(item, entry))
    return RemoteEvent(entry, leaf_index, _envelope_digest(item.get("envelope")))


def _agreement(item: dict[str, Any], local: EventVerification) -> CheckOutcome:
    """Whether the server's verdict, signer and role match what was verified here."""
    if item.get("verified") is not True:
        checks = item.get("checks")
        reasons = [
            f"{c.get('name')}: {c.get('detail')}"
            for c in (checks if isinstance(checks, list) else [])
            if isinstance(c, dict) and not c.get("ok")
        ]
        why = "; ".join(reasons) or "no reason given"
        return CheckOutcome(
            Check.SERVER, False, f"the server reports this event unverified ({why})"
        )
    if not local.ok:
        return CheckOutcome(
            Check.SERVER, False, "the server reports this event verified; it is not"
        )
    if (item.get("signer"), item.get("role")) != (local.signer, local.role):
        return CheckOutcome(
            Check.SERVER,
            False,
            f"the server names signer {item.get('signer')} ({item.get('role')}); "
            f"the envelope is signed by {local.signer} ({local.role})",
        )
    return CheckOutcome(Check.SERVER, True)


def _envelope_digest(envelope: object) -> str | None:
    try:
        return parse_envelope(envelope).digest
    except DomainError:
        return None
