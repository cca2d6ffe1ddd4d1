"""The log side of C2SP tlog-witness: ask each witness to cosign a new checkpoint.

For every witness the client keeps the size it believes the witness last cosigned (0 at
first). It sends ``old <size>``, the consistency proof from that size, a blank line and the
checkpoint. A 409 reply names the witness's size (``text/x.tlog.size``): the client adopts it
and asks again with the proof from there. A 200 reply's ``cosignature/v1`` line is kept only
if it verifies under the witness's configured key. Witnesses are asked in parallel, each
request times out quickly, transport failures and 5xx/429 are retried with exponential
backoff, and a witness that is down costs the log a lagging cosignature, never a write.

Two replies are alarms, logged at ERROR and returned as such: a witness that has cosigned a
tree larger than any this log produced (``ahead``), and a 422 (``inconsistent``): the
witness holds a different tree at the size the proof starts from, which is a split view or a
broken proof.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import httpx

from ledger.proofs.signed_note import MalformedNote, NoteError, parse_checkpoint, split_note
from ledger.witness.cosignature import (
    Cosignature,
    CosignerKey,
    add_signature_lines,
    signature_lines,
    verify_cosignature,
)

__all__ = [
    "CosigningResult",
    "Outcome",
    "ProofSource",
    "WitnessClient",
    "WitnessEndpoint",
    "WitnessOutcome",
]

ProofSource = Callable[[int, int], Sequence[bytes]]
"""``proof(old, new)``: the RFC 6962 consistency proof between two sizes of the log."""

Outcome = Literal[
    "cosigned", "superseded", "unavailable", "refused", "bad-cosignature", "ahead", "inconsistent"
]
ALARMS: frozenset[str] = frozenset({"ahead", "inconsistent"})

_log = logging.getLogger(__name__)
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_SIZE_BODY = re.compile(r"(0|[1-9][0-9]{0,19})\n")


@dataclass(frozen=True, slots=True)
class WitnessEndpoint:
    """A witness: its submission prefix (``<url>/add-checkpoint``) and cosigner key."""

    url: str
    key: CosignerKey

    @property
    def name(self) -> str:
        return self.key.name


@dataclass(frozen=True, slots=True)
class WitnessOutcome:
    """What one witness did with one checkpoint."""

    witness: str
    url: str
    outcome: Outcome
    detail: str
    cosignature: Cosignature | None = None
    witness_size: int | None = None

    @property
    def alarm(self) -> bool:
        return self.outcome in ALARMS


@dataclass(frozen=True, slots=True)
class CosigningResult:
    """The checkpoint note with the verified cosignatures added, and each witness's outcome."""

    note: str
    cosignatures: tuple[Cosignature, ...]
    outcomes: tuple[WitnessOutcome, ...]

    @property
    def lines(self) -> str:
        """The new cosignature lines, to append to the note's signature block."""
        return "".join(c.line() for c in self.cosignatures)

    @property
    def alarms(self) -> tuple[WitnessOutcome, ...]:
        return tuple(o for o in self.outcomes if o.alarm)


@dataclass
class _Tracked:
    endpoint: WitnessEndpoint
    size: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class WitnessClient:
    """Asks a fixed set of witnesses to cosign checkpoints of one log. Thread-safe: calls
    for one witness are serialized, so its tracked size only moves forward."""

    def __init__(
        self,
        witnesses: Sequence[WitnessEndpoint],
        *,
        timeout: float = 1.0,
        attempts: int = 3,
        backoff: float = 0.05,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        """``sizes``: what each witness (by name) is known to have cosigned already (the
        log's stored cosignatures), so a new client does not start every witness at 0 and
        learn its size from a 409 first; a wrong size costs only that 409."""
        urls = [w.url.rstrip("/") for w in witnesses]
        if len(set(urls)) != len(urls):
            raise ValueError("a witness URL is listed twice")
        known = sizes or {}
        self._witnesses = [_Tracked(w, max(0, known.get(w.name, 0))) for w in witnesses]
        self._timeout = timeout
        self._attempts = max(1, attempts)
        self._backoff = backoff
        self._sleep = sleep
        self._http = http or httpx.Client(timeout=timeout)
        self._own_http = http is None
        self._pool = ThreadPoolExecutor(max(1, len(witnesses)), thread_name_prefix="witness")
        self._largest = max([0, *(t.size for t in self._witnesses)])
        self._largest_lock = threading.Lock()

    def __enter__(self) -> WitnessClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._own_http:
            self._http.close()

    def log_size(self, size: int) -> None:
        """The log has grown to ``size`` (read from its store): a witness that has cosigned
        up to it is not ahead of the log, even if this client never asked for that size
        (another process of the same log did)."""
        with self._largest_lock:
            self._largest = max(self._largest, size)

    def sizes(self) -> dict[str, int]:
        """The size each witness is believed to have cosigned last, by witness name."""
        return {t.endpoint.name: t.size for t in self._witnesses}

    def cosign(self, note: str, proof: ProofSource) -> CosigningResult:
        """Ask every witness to cosign ``note`` (a log-signed checkpoint); return the note
        with the cosignatures that verified, and what each witness did."""
        text, _ = split_note(note)
        size = parse_checkpoint(text).size
        with self._largest_lock:
            self._largest = max(self._largest, size)
        outcomes = list(
            self._pool.map(lambda t: self._update(t, note, text, size, proof), self._witnesses)
        )
        cosignatures = tuple(o.cosignature for o in outcomes if o.cosignature is not None)
        cosigned = add_signature_lines(note, [c.note_signature() for c in cosignatures])
        return CosigningResult(cosigned, cosignatures, tuple(outcomes))

    def _update(
        self, tracked: _Tracked, note: str, text: str, size: int, proof: ProofSource
    ) -> WitnessOutcome:
        with tracked.lock:
            return _Exchange(self, tracked, note, text, size, proof).run()


class _Exchange:
    """One checkpoint offered to one witness, with its retries."""

    def __init__(
        self,
        client: WitnessClient,
        tracked: _Tracked,
        note: str,
        text: str,
        size: int,
        proof: ProofSource,
    ) -> None:
        self.client = client
        self.tracked = tracked
        self.endpoint = tracked.endpoint
        self.note, self.text, self.size, self.proof = note, text, size, proof

    def outcome(
        self,
        kind: Outcome,
        detail: str,
        cosignature: Cosignature | None = None,
        witness_size: int | None = None,
    ) -> WitnessOutcome:
        endpoint = self.endpoint
        result = WitnessOutcome(
            endpoint.name, endpoint.url, kind, detail, cosignature, witness_size
        )
        if result.alarm:
            _log.error("witness %s (%s): %s", self.endpoint.name, self.endpoint.url, detail)
        elif kind != "cosigned":
            _log.warning("witness %s (%s): %s", self.endpoint.name, self.endpoint.url, detail)
        return result

    def run(self) -> WitnessOutcome:
        client = self.client
        failures = conflicts = 0
        delay = client._backoff
        while True:
            old = self.tracked.size
            if old > self.size:
                return self.outcome(
                    "superseded", f"already cosigned size {old} > {self.size}", witness_size=old
                )
            try:
                body = self.body(old)
            except (ValueError, LookupError) as exc:
                return self.outcome("refused", f"no consistency proof from size {old}: {exc}")
            try:
                response = client._http.post(
                    self.endpoint.url.rstrip("/") + "/add-checkpoint",
                    content=body,
                    timeout=client._timeout,
                )
            except httpx.HTTPError as exc:
                failures += 1
                if failures >= client._attempts:
                    return self.outcome("unavailable", f"{type(exc).__name__}: {exc}")
                client._sleep(delay)
                delay *= 2
                continue
            status = response.status_code
            if status == 200:
                return self.accept(response.content)
            if status == 409:
                conflicts += 1
                learned = self.learn_size(response)
                if learned is not None or conflicts > client._attempts:
                    return learned or self.outcome("refused", "409 again after learning the size")
                continue
            if status == 422:
                return self.outcome(
                    "inconsistent",
                    f"422 from old size {old}: {_reason(response)}",
                    witness_size=old,
                )
            if status in _RETRY_STATUSES:
                failures += 1
                if failures >= client._attempts:
                    return self.outcome("unavailable", f"{status}: {_reason(response)}")
                client._sleep(delay)
                delay *= 2
                continue
            return self.outcome("refused", f"{status}: {_reason(response)}")

    def body(self, old: int) -> bytes:
        hashes = list(self.proof(old, self.size)) if 0 < old < self.size else []
        lines = "".join(base64.b64encode(h).decode("ascii") + "\n" for h in hashes)
        return f"old {old}\n{lines}\n{self.note}".encode()

    def learn_size(self, response: httpx.Response) -> WitnessOutcome | None:
        """Adopt the size a 409 names; an outcome if it cannot be used."""
        kind = response.headers.get("content-type", "").split(";")[0].strip()
        raw = response.text
        if kind != "text/x.tlog.size" or not _SIZE_BODY.fullmatch(raw):
            return self.outcome("refused", f"409 without a text/x.tlog.size body: {raw[:80]!r}")
        learned = int(raw)
        with self.client._largest_lock:
            largest = self.client._largest
        if learned > largest:
            return self.outcome(
                "ahead",
                f"the witness has cosigned size {learned}, larger than this log's {largest}",
                witness_size=learned,
            )
        self.tracked.size = learned
        if learned > self.size:
            return self.outcome(
                "superseded", f"already cosigned size {learned} > {self.size}", witness_size=learned
            )
        return None

    def accept(self, content: bytes) -> WitnessOutcome:
        try:
            lines = signature_lines(self.text, content)
        except (MalformedNote, UnicodeDecodeError) as exc:
            return self.outcome("bad-cosignature", f"200 with a malformed reply: {exc}")
        except NoteError as exc:  # pragma: no cover - every parse error is MalformedNote
            return self.outcome("bad-cosignature", exc.message)
        found: Cosignature | None = None
        for line in lines:
            if not self.endpoint.key.matches(line):
                continue  # lines by keys this log does not know are ignored
            found = verify_cosignature(self.text, line, self.endpoint.key)
            if found is None or found.timestamp == 0:
                return self.outcome("bad-cosignature", "its cosignature does not verify")
        if found is None:
            return self.outcome("bad-cosignature", "200 without a line by the witness's key")
        self.tracked.size = self.size
        return self.outcome(
            "cosigned", f"cosigned size {self.size}", cosignature=found, witness_size=self.size
        )


def _reason(response: httpx.Response) -> str:
    return response.text.strip()[:200] or response.reason_phrase
