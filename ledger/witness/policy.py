"""C2SP transparency-log policies (https://c2sp.org/tlog-policy) and the quorum rule.

A policy names the logs a checkpoint may be signed by, the witnesses that may cosign it, and
the quorum: a witness, a group (``group <name> all|any|<k> <member>...``, members defined on
earlier lines) or ``none``. :func:`parse_policy` refuses anything the format does not allow,
saying which line and why; :func:`quorum_met` checks a checkpoint note against a policy and
says which witnesses and groups counted. Pure functions, no I/O.

Each underlying key counts once: two log lines, or two witness lines, wrapping the same public
key are refused (a ``cosignature/v1`` does not commit to the witness's name, so one key under
two names would otherwise be two votes), and a witness's repeated signature lines are one
cosignature.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from domain.errors import DomainError
from ledger.proofs.errors import CodedError
from ledger.proofs.signed_note import (
    Checkpoint,
    InvalidSignature,
    MalformedCheckpoint,
    MalformedNote,
    NoteError,
    UnverifiedNote,
    Verifier,
    open_checkpoint,
    parse_verifier_key,
    split_note,
)
from ledger.witness.cosignature import (
    CosignerKey,
    parse_cosigner_key,
    verify_cosignature,
)

__all__ = [
    "NONE",
    "Policy",
    "PolicyError",
    "PolicyFileError",
    "PolicyGroup",
    "PolicyLog",
    "PolicyWitness",
    "QuorumVerdict",
    "format_policy",
    "meets_quorum",
    "parse_policy",
    "quorum_met",
    "read_policy_file",
    "satisfied_names",
]

NONE = "none"
"""The predefined name of the empty quorum (no cosignature needed)."""

# Only tab and newline among the control characters; DEL is not allowed either.
_FORBIDDEN = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
_SPACE = re.compile(r"[ \t]+")
_THRESHOLD = re.compile(r"[1-9][0-9]{0,8}")


class PolicyError(CodedError, ValueError):
    """A policy file is malformed; the message names the line and the reason."""

    code = "malformed-policy"


class PolicyFileError(DomainError):
    """A policy file the caller named cannot be read, or is not a policy (a refusal the
    command line reports as such)."""

    code = "bad-witness-policy"


def read_policy_file(path: Path) -> Policy:
    """The policy in the file at ``path``; :class:`PolicyFileError` saying why not."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise PolicyFileError(f"cannot read the witness policy {path}: {exc.strerror}") from None
    try:
        return parse_policy(text)
    except PolicyError as exc:
        raise PolicyFileError(f"{path}: {exc.message}") from None


@dataclass(frozen=True, slots=True)
class PolicyLog:
    key: Verifier
    url: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyWitness:
    name: str
    key: CosignerKey
    url: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyGroup:
    name: str
    threshold: int
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed policy. Groups are in definition order, so each one's members precede it."""

    logs: tuple[PolicyLog, ...]
    witnesses: tuple[PolicyWitness, ...]
    groups: tuple[PolicyGroup, ...]
    quorum: str


# --------------------------------------------------------------------------------------------
# Parsing


@dataclass
class _Builder:
    logs: list[PolicyLog] = field(default_factory=list)
    witnesses: list[PolicyWitness] = field(default_factory=list)
    groups: list[PolicyGroup] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    log_keys: set[bytes] = field(default_factory=set)
    witness_keys: dict[bytes, str] = field(default_factory=dict)
    quorum: str | None = None


def _error(number: int, message: str) -> PolicyError:
    return PolicyError(f"policy line {number}: {message}")


def _decode(policy: str | bytes) -> str:
    raw = policy.encode("utf-8", "surrogateescape") if isinstance(policy, str) else policy
    bad = _FORBIDDEN.search(raw)
    if bad:
        number = raw.count(b"\n", 0, bad.start()) + 1
        raise _error(number, f"control character {bad.group()!r} (only tab and newline allowed)")
    # Octets with the high bit set are opaque: names compare byte for byte.
    return raw.decode("utf-8", "surrogateescape")


def parse_policy(policy: str | bytes) -> Policy:
    """Parse a tlog-policy file; raise :class:`PolicyError` naming the line and the reason."""
    built = _Builder()
    for number, line in enumerate(_decode(policy).split("\n"), start=1):
        tokens = [t for t in _SPACE.split(line) if t]
        if not tokens or tokens[0].startswith("#"):
            continue
        keyword, args = tokens[0], tokens[1:]
        if keyword == "log":
            _parse_log(built, number, args)
        elif keyword == "witness":
            _parse_witness(built, number, args)
        elif keyword == "group":
            _parse_group(built, number, args)
        elif keyword == "quorum":
            _parse_quorum(built, number, args)
        else:
            raise _error(number, f"unknown keyword {keyword!r} (log, witness, group, quorum)")
    if built.quorum is None:
        raise PolicyError("policy has no quorum line (use 'quorum none' for no witnesses)")
    return Policy(tuple(built.logs), tuple(built.witnesses), tuple(built.groups), built.quorum)


def _vkey(number: int, text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _error(number, f"{what} key is not valid UTF-8") from None
    return text


def _parse_log(built: _Builder, number: int, args: list[str]) -> None:
    if len(args) not in (1, 2):
        raise _error(number, "expected 'log <vkey> [<url>]'")
    try:
        key = parse_verifier_key(_vkey(number, args[0], "log"))
    except NoteError as exc:
        raise _error(number, f"log key: {exc.message}") from None
    if key.public_key in built.log_keys:
        raise _error(number, f"log key {key.name} repeats the public key of an earlier log")
    built.log_keys.add(key.public_key)
    built.logs.append(PolicyLog(key, args[1] if len(args) == 2 else None))


def _define(built: _Builder, number: int, name: str) -> None:
    if name == NONE:
        raise _error(number, "'none' is predefined and cannot be defined")
    if name in built.names:
        raise _error(number, f"name {name!r} is already defined")
    built.names.add(name)


def _parse_witness(built: _Builder, number: int, args: list[str]) -> None:
    if len(args) not in (2, 3):
        raise _error(number, "expected 'witness <name> <vkey> [<url>]'")
    name = args[0]
    try:
        key = parse_cosigner_key(_vkey(number, args[1], "witness"))
    except NoteError as exc:
        raise _error(number, f"witness {name!r} key: {exc.message}") from None
    other = built.witness_keys.get(key.public_key)
    if other is not None:
        raise _error(number, f"witness {name!r} has the same public key as witness {other!r}")
    _define(built, number, name)
    built.witness_keys[key.public_key] = name
    built.witnesses.append(PolicyWitness(name, key, args[2] if len(args) == 3 else None))


def _parse_group(built: _Builder, number: int, args: list[str]) -> None:
    if len(args) < 3:
        raise _error(number, "expected 'group <name> all|any|<k> <member>...'")
    name, rule, members = args[0], args[1], args[2:]
    seen: set[str] = set()
    for member in members:
        if member == NONE:
            raise _error(number, f"group {name!r}: 'none' cannot be a group member")
        if member not in built.names:
            raise _error(number, f"group {name!r}: member {member!r} is not defined above")
        if member in seen:
            raise _error(number, f"group {name!r}: member {member!r} is listed twice")
        seen.add(member)
    if rule == "all":
        threshold = len(members)
    elif rule == "any":
        threshold = 1
    elif _THRESHOLD.fullmatch(rule):
        threshold = int(rule)
        if threshold > len(members):
            raise _error(
                number, f"group {name!r}: threshold {threshold} exceeds its {len(members)} members"
            )
    else:
        raise _error(number, f"group {name!r}: threshold must be all, any or 1..n, got {rule!r}")
    _define(built, number, name)
    built.groups.append(PolicyGroup(name, threshold, tuple(members)))


def _parse_quorum(built: _Builder, number: int, args: list[str]) -> None:
    if len(args) != 1:
        raise _error(number, "expected 'quorum <name>'")
    if built.quorum is not None:
        raise _error(number, "a policy has exactly one quorum line")
    if args[0] != NONE and args[0] not in built.names:
        raise _error(number, f"quorum {args[0]!r} is not defined above")
    built.quorum = args[0]


def format_policy(policy: Policy) -> str:
    """The policy as a tlog-policy file (logs, witnesses, groups, then the quorum)."""
    lines = [" ".join(filter(None, ("log", p.key.key_string(), p.url))) for p in policy.logs]
    lines += [
        " ".join(filter(None, ("witness", w.name, w.key.key_string(), w.url)))
        for w in policy.witnesses
    ]
    for g in policy.groups:
        rule = "all" if g.threshold == len(g.members) else str(g.threshold)
        lines.append(" ".join(("group", g.name, rule, *g.members)))
    lines.append(f"quorum {policy.quorum}")
    return "".join(line + "\n" for line in lines)


# --------------------------------------------------------------------------------------------
# The quorum rule


def satisfied_names(policy: Policy, cosigned: Iterable[str]) -> frozenset[str]:
    """The witness and group names that have witnessed, given the witnesses that cosigned:
    a group has when at least its threshold of members have (groups in definition order, so
    each member is decided before the group)."""
    done = set(cosigned) & {w.name for w in policy.witnesses}
    for group in policy.groups:
        if sum(member in done for member in group.members) >= group.threshold:
            done.add(group.name)
    return frozenset(done)


def meets_quorum(policy: Policy, cosigners: Iterable[tuple[str, bytes]]) -> bool:
    """Whether cosignatures already verified, by these keys (name, key id), meet the quorum."""
    keys = set(cosigners)
    names = [w.name for w in policy.witnesses if (w.key.name, w.key.key_id) in keys]
    return policy.quorum == NONE or policy.quorum in satisfied_names(policy, names)


@dataclass(frozen=True, slots=True)
class QuorumVerdict:
    """Whether a checkpoint note meets a policy, and what counted.

    ``code`` is ``quorum-met`` or why not: ``quorum-not-met``, ``no-log-key`` (the policy
    names no log and none was given), ``unverified-checkpoint`` (no signature by a policy
    log), ``invalid-log-signature``, ``invalid-cosignature`` (a policy witness's line that
    does not verify rejects the note, as signed-note says) or ``malformed-note``.
    """

    met: bool
    code: str
    reason: str
    quorum: str
    checkpoint: Checkpoint | None = None
    log: str | None = None
    cosigned: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    timestamps: Mapping[str, int] = field(default_factory=dict)


def _refused(policy: Policy, code: str, reason: str) -> QuorumVerdict:
    return QuorumVerdict(False, code, reason, policy.quorum)


def quorum_met(
    policy: Policy, checkpoint_note: str | bytes, log_keys: Iterable[Verifier] = ()
) -> QuorumVerdict:
    """Check a signed checkpoint against ``policy``: signed by one of its logs (or of
    ``log_keys``, for a caller that knows the log from elsewhere) and cosigned by the quorum.
    Never raises for a bad note: the verdict says what was wrong."""
    logs = [p.key for p in policy.logs] + list(log_keys)
    if not logs:
        return _refused(policy, "no-log-key", "the policy names no log and no log key was given")
    try:
        checkpoint, verified = open_checkpoint(checkpoint_note, logs)
        _, lines = split_note(checkpoint_note)
    except (MalformedNote, MalformedCheckpoint) as exc:
        return _refused(policy, "malformed-note", exc.message)
    except UnverifiedNote as exc:
        return _refused(policy, "unverified-checkpoint", exc.message)
    except InvalidSignature as exc:
        return _refused(policy, "invalid-log-signature", exc.message)
    log_name = verified.signatures[0].name
    cosigned: list[str] = []
    timestamps: dict[str, int] = {}
    for witness in policy.witnesses:
        for line in (s for s in lines if witness.key.matches(s)):
            found = verify_cosignature(verified.text, line, witness.key)
            if found is None:
                reason = f"the cosignature by witness {witness.name!r} does not verify"
                return _refused(policy, "invalid-cosignature", reason)
            if witness.name not in timestamps:
                cosigned.append(witness.name)
            timestamps[witness.name] = max(found.timestamp, timestamps.get(witness.name, 0))
    done = satisfied_names(policy, cosigned)
    groups = tuple(g.name for g in policy.groups if g.name in done)
    met = policy.quorum == NONE or policy.quorum in done
    counted = ", ".join(cosigned) or "no witness"
    reason = (
        f"quorum {policy.quorum!r} met (cosigned by {counted})"
        if met
        else f"quorum {policy.quorum!r} not met: cosigned by {counted}"
    )
    return QuorumVerdict(
        met,
        "quorum-met" if met else "quorum-not-met",
        reason,
        policy.quorum,
        checkpoint,
        log_name,
        tuple(cosigned),
        groups,
        timestamps,
    )
