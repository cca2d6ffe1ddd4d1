"""C2SP tlog-policy: parsing (every malformed policy refused with its line and reason) and
the quorum rule, checked against a recursive evaluator written here from the spec's words,
over real cosignatures."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.proofs.signed_note import verifier_key_string
from ledger.signing.keys import SigningKey
from ledger.witness.cosignature import CosignerKey, add_signature_lines, sign_cosignature
from ledger.witness.policy import (
    Policy,
    PolicyError,
    format_policy,
    parse_policy,
    quorum_met,
)
from tests.witness.witness_logs import ToyLog

KEYS = [SigningKey.generate() for _ in range(8)]
LOG = ToyLog.grown("example.org/log", 5)
NOTE = LOG.note()
TEXT = NOTE[: NOTE.rindex("\n\n") + 1]


def wkey(i: int, name: str | None = None) -> str:
    return CosignerKey.from_public_key(name or f"w{i}.example", KEYS[i].public.raw).key_string()


def cosign(i: int, name: str | None = None, at: int = 1700000000) -> str:
    line = sign_cosignature(TEXT, name or f"w{i}.example", KEYS[i].private_key(), at).line()
    return line


def with_lines(*lines: str) -> str:
    return NOTE + "".join(lines)


# --------------------------------------------------------------------------------------------
# Examples


SPEC_EXAMPLE = f"""\
# The example of c2sp.org/tlog-policy, with keys.
log {LOG.vkey}

witness X1 {wkey(0)}
witness X2 {wkey(1)}
witness X3 {wkey(2)}
group X-witnesses 2 X1 X2 X3

witness Y1 {wkey(3)}
\twitness  Y2\t{wkey(4)}  https://y2.example/witness
witness Y3 {wkey(5)}
group Y-witnesses any Y1 Y2 Y3

group X-and-Y all X-witnesses Y-witnesses
quorum X-and-Y
"""


def test_the_specs_example_needs_two_x_witnesses_and_one_y_witness() -> None:
    policy = parse_policy(SPEC_EXAMPLE)
    assert [w.name for w in policy.witnesses] == ["X1", "X2", "X3", "Y1", "Y2", "Y3"]
    assert policy.witnesses[4].url == "https://y2.example/witness"
    assert [(g.name, g.threshold) for g in policy.groups] == [
        ("X-witnesses", 2),
        ("Y-witnesses", 1),
        ("X-and-Y", 2),
    ]
    met = quorum_met(policy, with_lines(cosign(0), cosign(2), cosign(4)))
    assert met.met and met.code == "quorum-met"
    assert met.log == LOG.origin and met.checkpoint is not None and met.checkpoint.size == 5
    assert met.cosigned == ("X1", "X3", "Y2")
    assert met.groups == ("X-witnesses", "Y-witnesses", "X-and-Y")
    assert met.timestamps == {"X1": 1700000000, "X3": 1700000000, "Y2": 1700000000}
    short = quorum_met(policy, with_lines(cosign(0), cosign(3), cosign(4), cosign(5)))
    assert not short.met and short.code == "quorum-not-met"
    assert short.groups == ("Y-witnesses",)
    assert "quorum 'X-and-Y' not met" in short.reason


def test_a_witnesss_repeated_lines_count_once() -> None:
    policy = parse_policy(
        f"log {LOG.vkey}\nwitness a {wkey(0)}\nwitness b {wkey(1)}\ngroup two 2 a b\nquorum two\n"
    )
    twice = quorum_met(policy, with_lines(cosign(0), cosign(0, at=1700000009)))
    assert not twice.met and twice.cosigned == ("a",)
    assert twice.timestamps == {"a": 1700000009}


def test_quorum_none_needs_only_the_log_signature() -> None:
    policy = parse_policy(f"log {LOG.vkey}\nquorum none\n")
    assert quorum_met(policy, NOTE).met
    other = ToyLog.grown(LOG.origin, 5)  # same origin, another key
    refused = quorum_met(policy, other.note())
    assert (refused.met, refused.code) == (False, "unverified-checkpoint")


def test_a_policy_without_logs_needs_the_log_key_from_the_caller() -> None:
    policy = parse_policy(f"witness a {wkey(0)}\nquorum a\n")
    assert quorum_met(policy, with_lines(cosign(0))).code == "no-log-key"
    verdict = quorum_met(policy, with_lines(cosign(0)), log_keys=[LOG.key_verifier()])
    assert verdict.met


def test_bad_notes_get_a_named_verdict() -> None:
    policy = parse_policy(f"log {LOG.vkey}\nwitness a {wkey(0)}\nquorum a\n")
    line = cosign(0, at=5)
    blob = line.split(" ")[2].rstrip("\n")
    raw = bytearray(base64.b64decode(blob))
    raw[11] ^= 1  # the timestamp's last byte: the signature no longer covers it
    tampered = line.replace(blob, base64.b64encode(bytes(raw)).decode())
    verdict = quorum_met(policy, with_lines(tampered))
    assert (verdict.met, verdict.code) == (False, "invalid-cosignature")
    assert "witness 'a'" in verdict.reason
    assert quorum_met(policy, "not a note").code == "malformed-note"
    log_sig_broken = NOTE[:-5] + ("A" if NOTE[-5] != "A" else "B") + NOTE[-4:]
    assert quorum_met(policy, log_sig_broken).code in ("invalid-log-signature", "malformed-note")


# --------------------------------------------------------------------------------------------
# Malformed policies


V0, V1 = wkey(0), wkey(1)
SAME_KEY_OTHER_NAME = wkey(0, "elsewhere.example")
SAME_LOG_KEY_OTHER_NAME = verifier_key_string("x.example", LOG.key.public.raw)
MALFORMED = [
    ("", "no quorum line"),
    ("# only a comment\n", "no quorum line"),
    (f"witness a {V0}\nquorum a\nquorum a\n", "line 3: a policy has exactly one quorum line"),
    ("quorum a\n", "line 1: quorum 'a' is not defined above"),
    (f"witness none {V0}\nquorum none\n", "line 1: 'none' is predefined"),
    (f"witness a {V0}\nwitness a {V1}\nquorum a\n", "line 2: name 'a' is already defined"),
    (f"witness a {V0}\nwitness b {SAME_KEY_OTHER_NAME}\nquorum a\n", "same public key"),
    (
        f"log {LOG.vkey}\nlog {SAME_LOG_KEY_OTHER_NAME}\nquorum none\n",
        "line 2: log key x.example repeats the public key",
    ),
    (f"witness a {V0}\ngroup g 1 b\nquorum g\n", "line 2: group 'g': member 'b' is not defined"),
    (f"group g any b\nwitness b {V0}\nquorum g\n", "line 1: group 'g': member 'b'"),
    (f"witness a {V0}\ngroup g 2 a\nquorum g\n", "threshold 2 exceeds its 1 members"),
    (f"witness a {V0}\ngroup g 0 a\nquorum g\n", "threshold must be all, any or 1..n"),
    (f"witness a {V0}\ngroup g 01 a\nquorum g\n", "threshold must be all, any or 1..n"),
    (f"witness a {V0}\ngroup g any a a\nquorum g\n", "member 'a' is listed twice"),
    (f"witness a {V0}\ngroup g any none\nquorum g\n", "'none' cannot be a group member"),
    (f"witness a {V0}\ngroup g any\nquorum g\n", "expected 'group <name>"),
    (f"witness a {V0}\ngroup a any a\nquorum a\n", "name 'a' is already defined"),
    ("frobnicate x\nquorum none\n", "line 1: unknown keyword 'frobnicate'"),
    (f"witness a {LOG.vkey}\nquorum a\n", "0x04"),
    (f"log {V0}\nquorum none\n", "0x01"),
    ("witness a\nquorum a\n", "expected 'witness <name> <vkey> [<url>]'"),
    (f"log {LOG.vkey} url extra\nquorum none\n", "expected 'log <vkey> [<url>]'"),
    ("quorum\n", "expected 'quorum <name>'"),
    (f"witness a {V0}\r\nquorum a\r\n", "line 1: control character"),
    (f"witness a {V0}\nquorum a\x00\n", "line 2: control character"),
    (f"witness a {V0[:-2]}\nquorum a\n", "line 1: witness 'a' key"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_policies_are_refused_saying_where_and_why(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text)
    assert message in str(raised.value)
    assert raised.value.code == "malformed-policy"


def test_names_are_opaque_octets() -> None:
    kelvin = "\u212a".encode()
    policy = parse_policy(
        b"witness K " + V0.encode() + b"\nwitness " + kelvin + b" " + V1.encode() + b"\nquorum K\n"
    )
    assert len(policy.witnesses) == 2
    latin1 = parse_policy(b"witness \xe9 " + V0.encode() + b"\nquorum \xe9\n")  # not UTF-8
    assert latin1.quorum == latin1.witnesses[0].name


# --------------------------------------------------------------------------------------------
# Properties


@dataclass(frozen=True)
class Drawn:
    policy: Policy
    cosigned: frozenset[int]  # indexes of witnesses whose cosignatures are on the note


@st.composite
def policies(draw: st.DrawFn) -> Drawn:
    count = draw(st.integers(1, 6))
    order = draw(st.permutations(range(len(KEYS))))[:count]
    lines = [f"log {LOG.vkey}"] + [f"witness n{i} {wkey(k)}" for i, k in enumerate(order)]
    names = [f"n{i}" for i in range(count)]
    for g in range(draw(st.integers(0, 4))):
        members = draw(st.lists(st.sampled_from(names), min_size=1, max_size=5, unique=True))
        rule = draw(st.sampled_from(["all", "any", *map(str, range(1, len(members) + 1))]))
        lines.append(f"group g{g} {rule} {' '.join(members)}")
        names.append(f"g{g}")
    lines.append(f"quorum {draw(st.sampled_from([*names, 'none']))}")
    cosigned = draw(st.frozensets(st.sampled_from(range(count))))
    return Drawn(parse_policy("\n".join(lines) + "\n"), cosigned)


def by_the_spec(policy: Policy, name: str, cosigned: set[str]) -> bool:
    """'A group is considered to witness a checkpoint if and only if at least k of its n
    members have witnessed that checkpoint'; for a witness, witnessing is cosigning."""
    if name == "none":
        return True
    groups = {g.name: g for g in policy.groups}
    if name not in groups:
        return name in cosigned
    group = groups[name]
    return sum(by_the_spec(policy, m, cosigned) for m in group.members) >= group.threshold


def cosigned_note(drawn: Drawn, repeat: int = 1) -> str:
    lines = []
    for i in sorted(drawn.cosigned):
        w = drawn.policy.witnesses[i]
        k = next(j for j in range(len(KEYS)) if KEYS[j].public.raw == w.key.public_key)
        lines += [cosign(k, w.key.name)] * repeat
    return with_lines(*lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies())
def test_the_quorum_rule_is_the_specs(drawn: Drawn) -> None:
    policy = drawn.policy
    names = {policy.witnesses[i].name for i in drawn.cosigned}
    verdict = quorum_met(policy, cosigned_note(drawn))
    assert verdict.met == by_the_spec(policy, policy.quorum, names)
    assert set(verdict.cosigned) == names
    assert set(verdict.groups) == {
        g.name for g in policy.groups if by_the_spec(policy, g.name, names)
    }
    # Repeated lines and lines by keys the policy does not know change nothing.
    stranger = cosign(7, "stranger.example")
    again = quorum_met(policy, add_signature_lines(cosigned_note(drawn), []) + stranger)
    assert (again.met, again.cosigned) == (verdict.met, verdict.cosigned)


@settings(max_examples=60, deadline=None)
@given(
    policies(), st.lists(st.sampled_from(["", "# a comment", "  \t", "\t# indented"]), max_size=4)
)
def test_a_formatted_policy_parses_back_to_itself(drawn: Drawn, noise: list[str]) -> None:
    text = format_policy(drawn.policy)
    assert parse_policy(text) == drawn.policy
    lines = text.splitlines()
    for i, extra in enumerate(noise):
        lines.insert(i * 2 % (len(lines) + 1), extra)
    spaced = "\n".join(" \t".join(line.split(" ")) for line in lines) + "\n"
    assert parse_policy(spaced) == drawn.policy


@settings(max_examples=40, deadline=None)
@given(policies(), st.data())
def test_more_cosignatures_never_lose_a_quorum(drawn: Drawn, data: st.DataObject) -> None:
    extra = data.draw(st.frozensets(st.sampled_from(range(len(drawn.policy.witnesses)))))
    more = Drawn(drawn.policy, drawn.cosigned | extra)
    if quorum_met(drawn.policy, cosigned_note(drawn)).met:
        assert quorum_met(more.policy, cosigned_note(more)).met
