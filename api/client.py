"""A small HTTP client for a KernelIndex server, and local re-verification of what it serves.

The CLI's ``--server`` mode goes through here. Replies that are problem+json become a
``RemoteError`` carrying the server's stable ``code``, so the CLI prints the same
``error[<code>]`` a local ledger would. A server is trusted for transport only: a history is
fetched as a bundle and verified here by the offline verifier, against the trust root the
user pins — key registrations chained to it, every event's inclusion against a checkpoint
signed by its log key, the run's completeness by the log's heads, and (with a checkpoint the
user holds) that the server's log extends what it showed before.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import msgspec

from domain.content_coding import (
    ACCEPT_ENCODING,
    BadReplyError,
    SlowReplyError,
    reply_body,
)
from domain.errors import DomainError
from domain.event_names import EventName
from domain.run_references import names_run
from ledger.event_verification import EventVerification
from ledger.ids import run_id
from ledger.proofs.signed_note import NoteError, parse_checkpoint
from ledger.signing.dsse import parse_envelope
from ledger.verification_report import Report
from ledger.verify import BundleVerifier, Expectation, Outcome, VerificationPolicy, outcome_of

DEFAULT_TIMEOUT = 30.0
USER_AGENT = "kernelindex-cli"
# The largest reply read from a server, which is trusted for transport only: a run's bundle
# with its artifacts (each at most 16 MiB) fits many times over; a reply that never ends does
# not take the client's memory with it.
MAX_REPLY_BYTES = 256 * 1024 * 1024
# The longest a reply may take, counted from its request: a server sending a byte just
# within each read's timeout would otherwise hold the client for as long as it likes.
DEFAULT_REPLY_DEADLINE = 600.0


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
        reply_deadline: float = DEFAULT_REPLY_DEADLINE,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise RemoteError(
                "malformed-request",
                f"server URL must look like http://host:port, got {base_url!r}",
            )
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.reply_deadline = reply_deadline
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
                "Accept-Encoding": ACCEPT_ENCODING,
            },
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

    def run_bundle(self, reference: str, held: list[int]) -> list[str]:
        """The bundle of one run's own history and its signers' keys (GET /v1/bundle), proving
        it extends checkpoints of the ``held`` sizes."""
        params: list[tuple[str, str | int | float | bool | None]] = [
            ("run", reference),
            ("group", "false"),
        ]
        params += [("checkpoint", size) for size in held]
        reply = self._send("GET", "/v1/bundle", None, params)
        if not reply.is_success:
            raise self._problem(
                reply, self._decode(reply, "GET", "/v1/bundle"), "GET", "/v1/bundle"
            )
        # Lines end at "\n" only: str.splitlines would also cut at U+2028, U+2029 and U+0085,
        # which the export writes unescaped inside strings (an artifact's file name).
        lines = reply.text.split("\n")
        return lines[:-1] if lines[-1] == "" else lines

    def artifact(self, digest: str) -> bytes | None:
        """A stored artifact's bytes (GET /v1/artifacts/{digest}), re-hashed here; None when
        the server does not hold it. Bytes that do not hash to ``digest`` are refused."""
        path = f"/v1/artifacts/{_segment(digest)}"
        reply = self._send("GET", path, None)
        if reply.status_code == 404:
            return None
        if not reply.is_success:
            raise self._problem(reply, self._decode(reply, "GET", path), "GET", path)
        content = reply.content
        if "sha256:" + hashlib.sha256(content).hexdigest() != digest:
            raise RemoteError("bad-reply", f"GET {path}: the bytes sent do not hash to {digest}")
        return content

    def post_attestation(self, run_digest: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Append a signed attestation; the receipt (201, or 200 for a duplicate)."""
        return self._object("POST", f"/v1/runs/{_segment(run_digest)}/attestations", body=envelope)

    def post_key(self, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Register a key (admin-signed, or self-signed by an attester); the receipt."""
        return self._object("POST", "/v1/keys", body=envelope)

    def post_rerun_request(self, run_digest: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Append an admin-signed rerun request; the receipt (201, or 200 for a duplicate)."""
        path = f"/v1/runs/{_segment(run_digest)}/rerun-requests"
        return self._object("POST", path, body=envelope)

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

    def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        params: list[tuple[str, str | int | float | bool | None]] | None = None,
    ) -> httpx.Response:
        content = json.dumps(dict(body)).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else None
        request = self._http.build_request(
            method, path, content=content, headers=headers, params=params
        )
        # The deadline counts from the request: a server that is slow to start its reply
        # spends the same allowance (the headers themselves are bounded only per read).
        ends = time.monotonic() + self.reply_deadline
        try:
            reply = self._http.send(request, stream=True)
            try:
                return self._bounded(reply, f"{method} {path}", ends)
            finally:
                reply.close()
        except httpx.TimeoutException:
            raise RemoteError(
                "unreachable", f"{self.base_url} did not answer within {self.timeout:g} s"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteError("unreachable", f"cannot reach {self.base_url}: {exc}") from None

    def _bounded(self, reply: httpx.Response, what: str, ends: float) -> httpx.Response:
        """The reply read whole and decoded, if it is at most ``MAX_REPLY_BYTES`` decoded and
        came by ``ends`` (monotonic); else refused as soon as it is not, the rest unread."""
        try:
            body = reply_body(reply, MAX_REPLY_BYTES, lambda: time.monotonic() > ends)
        except SlowReplyError:
            raise RemoteError(
                "unreachable",
                f"{what}: the server's reply took longer than {self.reply_deadline:g} s; "
                "not read further",
            ) from None
        except BadReplyError as exc:
            raise RemoteError("bad-reply", f"{what}: {exc.message}") from None
        # The bytes as decoded: the encoding headers no longer describe them.
        kept = [
            (k, v)
            for k, v in reply.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        extensions = {
            k: v for k, v in reply.extensions.items() if k in ("http_version", "reason_phrase")
        }
        return httpx.Response(
            reply.status_code,
            headers=kept,
            content=body,
            request=reply.request,
            extensions=extensions,
        )

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
    """Whether the run the server answered with is the one the reference names, by digest."""
    ref = reference.strip().lower()
    if not ref.startswith("sha256:"):
        ref = "sha256:" + ref
    return digest.startswith(ref)


def _named_by_ingestion(
    reference: str, run: str, kept: list[tuple[int, EventVerification]]
) -> bool:
    """Whether the run's verified ingestion (signed, checked above under the user's policy)
    gives it the name or source id ``reference`` is: the server's word is not enough."""
    for _, entry in kept:
        if entry.event != EventName.RUN_INGESTED or not entry.ok or entry.subject_digest != run:
            continue
        predicate = entry.predicate or {}
        run_manifest = (predicate.get("manifests") or {}).get("run") or {}
        name = (run_manifest.get("metadata") or {}).get("name")
        source, external_id = predicate.get("source"), predicate.get("externalId")
        if isinstance(name, str) and isinstance(source, str):
            extern = external_id if isinstance(external_id, str) else None
            return names_run(reference, name=name, source=source, external_id=extern)
    return False


def remote_run(client: LedgerClient, reference: str) -> tuple[str, str]:
    """(digest, name) of the run a reference names, refusing a reply about another run."""
    record = client.run(reference)
    digest, name = record.get("digest"), record.get("name")
    if not isinstance(digest, str) or not isinstance(name, str):
        raise RemoteError("bad-reply", "the server's run record lacks a digest or name")
    if not _names(reference, digest):
        if not reference.strip().lower().startswith("sha256:"):
            raise RemoteError(
                "unchecked-name",
                f"the server says {reference!r} is run {digest}, but a name is only the "
                "server's word here: give the run's digest (or a prefix of it); "
                f"`kernelindex history {reference} --server URL --trust-root FILE` shows it "
                "verified",
            )
        raise RemoteError("bad-reply", f"asked for run {reference}, the server answered {digest}")
    return digest, name


@dataclass(frozen=True)
class RemoteEvent:
    """One event as verified here, with the leaf the server's log gave it."""

    entry: EventVerification
    leaf_index: int | None
    envelope_digest: str | None


@dataclass(frozen=True)
class RemoteHistory:
    run: str
    events: list[RemoteEvent]
    report: Report
    checkpoint: str | None  # the verified checkpoint note the answer was proven against

    @property
    def outcome(self) -> Outcome:
        return outcome_of(self.report)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.VERIFIED and all(e.entry.ok for e in self.events)


def remote_history(
    client: LedgerClient, reference: str, policy: VerificationPolicy
) -> RemoteHistory:
    """A run's history from the server, verified here as an offline bundle under ``policy``
    (the trust root the user pins, the checkpoints they hold)."""
    held = [_size_of(note) for note in policy.held_checkpoints]
    lines = client.run_bundle(reference, [s for s in held if s is not None])
    run = _bundled_run(lines)
    # The bundle must prove this run, complete by the log's heads: the header naming it is
    # not signed, so without this a bundle of another run could answer for it.
    policy = msgspec.structs.replace(policy, expect=Expectation(run))
    with BundleVerifier(policy, workers=1, keep=[str(run_id(run))]) as verifier:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                verifier.feed(number, line)
        report = verifier.finish()
        kept = verifier.kept
    if not _names(reference, run) and not _named_by_ingestion(reference, run, kept):
        raise RemoteError("bad-reply", f"asked for run {reference}, the server answered {run}")
    events = [
        RemoteEvent(entry, leaf, _envelope_digest(entry.envelope))
        for leaf, entry in sorted(kept, key=lambda item: item[0])
    ]
    checkpoint = verifier.checkpoint_note if verifier.checkpoint is not None else None
    return RemoteHistory(run, events, report, checkpoint)


def _bundled_run(lines: list[str]) -> str:
    """The one run the bundle is about, refusing a bundle about another run."""
    try:
        header = json.loads(lines[0])
        runs = header["scope"]["runs"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise RemoteError("bad-reply", "the server's bundle has no header naming its run") from None
    if not isinstance(runs, list) or len(runs) != 1 or not isinstance(runs[0], str):
        raise RemoteError("bad-reply", "the server's bundle is not about exactly one run")
    return runs[0]


def _size_of(note: str) -> int | None:
    """The tree size a checkpoint note states (verified later, by the verifier)."""
    try:
        return parse_checkpoint(note[: note.find("\n\n") + 1]).size
    except NoteError:
        return None


def _envelope_digest(envelope: object) -> str | None:
    try:
        return parse_envelope(envelope).digest
    except DomainError:
        return None
