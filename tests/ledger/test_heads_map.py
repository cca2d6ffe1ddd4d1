"""The heads map (ledger/proofs/heads_map.py): a root opens to one value per key.

Properties over any set of heads: every key's proof leads from its value to the root, and
from no other value, key or root; an absent key is provable as absent and not as present;
the root depends on every head (any change to any head changes it) and not on the order the
heads were set in; a map updated commit by commit has the root of one built at once."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.proofs.heads_map import (
    EMPTY,
    HeadsMap,
    MapProof,
    heads_leaf_data,
    parse_heads_leaf,
    root_from_proof,
)

keys = st.binary(min_size=32, max_size=32)
values = st.binary(min_size=0, max_size=12)
maps = st.dictionaries(keys, values, min_size=0, max_size=40)
# Keys that share long prefixes, so paths run deep and subtrees hold two keys apart.
near = st.lists(st.integers(0, 255), min_size=1, max_size=24, unique=True).map(
    lambda tails: {bytes(31) + bytes([t]): bytes([t]) for t in tails}
)


def _build(items: dict[bytes, bytes]) -> HeadsMap:
    built = HeadsMap()
    built.update(items.items())
    return built


@settings(max_examples=150, deadline=None)
@given(st.one_of(maps, near))
def test_every_head_proves_against_the_root_and_no_other_value_does(
    items: dict[bytes, bytes],
) -> None:
    heads = _build(items)
    root = heads.root()
    for key, value in items.items():
        proof = heads.prove(key)
        assert root_from_proof(key, value, proof) == root
        assert root_from_proof(key, value + b"x", proof) != root
        assert root_from_proof(key, None, proof) != root
        assert MapProof.from_json(proof.to_json()) == proof
        other = hashlib.sha256(key).digest()
        if other not in items:
            assert root_from_proof(other, value, proof) != root


@settings(max_examples=150, deadline=None)
@given(st.one_of(maps, near), keys)
def test_an_absent_key_is_provable_absent_and_never_present(
    items: dict[bytes, bytes], absent: bytes
) -> None:
    items.pop(absent, None)
    heads = _build(items)
    proof = heads.prove(absent)
    assert root_from_proof(absent, None, proof) == heads.root()
    for value in (b"", b"1 0", *items.values()):
        assert root_from_proof(absent, value, proof) != heads.root()


@settings(max_examples=150, deadline=None)
@given(st.one_of(maps, near).filter(bool), st.data())
def test_any_change_to_any_head_changes_the_root_and_breaks_its_proof(
    items: dict[bytes, bytes], data: st.DataObject
) -> None:
    heads = _build(items)
    before = heads.root()
    key = data.draw(st.sampled_from(sorted(items)))
    old_proof = heads.prove(key)
    changed = data.draw(values.filter(lambda v: v != items[key]))
    heads.update([(key, changed)])
    after = heads.root()
    assert after != before
    assert root_from_proof(key, changed, old_proof) != before  # the old root: not this head
    assert root_from_proof(key, changed, heads.prove(key)) == after
    assert after == _build(items | {key: changed}).root()  # cached nodes were forgotten


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(maps, near), min_size=1, max_size=6))
def test_commit_by_commit_is_the_map_built_at_once_in_any_order(
    commits: list[dict[bytes, bytes]],
) -> None:
    grown = HeadsMap()
    final: dict[bytes, bytes] = {}
    for commit in commits:
        grown.update(commit.items())
        grown.root()  # caches nodes that the next commit must forget where it changes them
        final |= commit
    assert grown.root() == _build(final).root()
    assert grown.root() == HeadsMap(dict(reversed(list(final.items())))).root()
    assert len(grown) == len(final)


def test_the_empty_map_and_a_single_head() -> None:
    empty = HeadsMap()
    key = bytes(range(32))
    assert empty.root() == EMPTY
    assert root_from_proof(key, None, empty.prove(key)) == EMPTY
    one = _build({key: b"1 0"})
    assert one.prove(key) == MapProof(())
    assert root_from_proof(key, b"1 0", MapProof(())) == one.root() != EMPTY


@settings(deadline=None)
@given(st.text(min_size=1, max_size=30).filter(lambda o: "\n" not in o), st.integers(0, 2**62))
def test_a_heads_leaf_reads_back_and_is_never_an_events_leaf_data(origin: str, size: int) -> None:
    root = hashlib.sha256(origin.encode()).digest()
    data = heads_leaf_data(origin, size, root)
    assert parse_heads_leaf(data) == (origin, size, root)
    assert not data.startswith(b"{")  # an event's leaf data is canonical JSON
    assert parse_heads_leaf(data.replace(b"\n", b"\n\n", 1)) is None
