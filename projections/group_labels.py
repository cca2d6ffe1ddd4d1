"""Labels that say what separates comparison groups which look alike.

Most groups share their (benchmark, GPU, metric) with another: SOL-ExecBench stack v1.0
and v1.1, one workload's axes or another's. A label names each group by what its key is
made of (protocol, environment, workload, metric, by their manifests' titles), and, among
groups shown together, by what differs between them. Two manifests can share a title and still
differ (GPU MODE's runners "runner:B200" and "runner:NVIDIA" are both "KernelBot runner ·
NVIDIA B200"): such a part is named by its title and the fields in which its manifest differs
from the others of that title, so no two groups shown together read alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ledger.store.read_door import Rows
from projections.view_statements import STATEMENTS

# What a comparison key is made of that a person can read, in the order labels list it.
PARTS = ("protocol", "environment", "workload", "metric")
MANIFEST_PARTS = ("protocol", "environment", "workload")
MAX_FIELDS = 2  # fields named to tell apart manifests of one title


@dataclass(frozen=True)
class GroupLabel:
    key: str
    benchmark: str | None
    product: str | None
    runs: int
    parts: dict[str, str]  # part -> its readable name

    def lookalikes(self, others: Sequence[GroupLabel]) -> list[GroupLabel]:
        """The others with this group's benchmark and GPU: the ones a person confuses."""
        return [
            o
            for o in others
            if o.key != self.key and (o.benchmark, o.product) == (self.benchmark, self.product)
        ]

    def short_apart(self, others: Sequence[GroupLabel]) -> str:
        """A few words for a chart label: what differs in the first part that differs,
        without the leading words all the groups share ("v1.1" of "... stack v1.1")."""
        differing = [p for p in PARTS if any(o.parts.get(p) != self.parts.get(p) for o in others)]
        if not differing:
            return ""
        words = self.parts.get(differing[0], "").split(" ")
        theirs = [o.parts.get(differing[0], "").split(" ") for o in others]
        shared = 0
        while shared < len(words) - 1 and all(
            len(t) > shared and t[shared] == words[shared] for t in theirs
        ):
            shared += 1
        return " ".join(words[shared:])

    def separated_by(self, others: Sequence[GroupLabel]) -> str:
        """The parts in which this group differs from any of ``others`` (all when alone)."""
        differing = [
            p for p in PARTS if any(o.parts.get(p) != self.parts.get(p) for o in others)
        ] or list(PARTS)
        return " · ".join(f"{p} {self.parts.get(p, '?')}" for p in differing)


def _documents(rows: Rows, digests: set[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    ordered = sorted(d for d in digests if d)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        for digest, name, document in rows.run(STATEMENTS, "manifest_documents", digests=chunk):
            parsed = json.loads(document)
            metadata = parsed.setdefault("metadata", {})
            metadata.setdefault("title", name)
            found[str(digest)] = parsed
    return found


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    """A document's leaf values by dotted path (lists by index)."""
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = list(value.items())
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return {path: value}
    found: dict[str, Any] = {}
    for key, inner in items:
        found.update(_leaves(inner, f"{path}.{key}" if path else str(key)))
    return found


def _field_text(path: str, value: Any) -> str:
    return f"{path.rsplit('.', 1)[-1]} {value if value is not None else 'absent'}"


def distinguishing_names(documents: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each manifest's readable name (its title) among ``documents``; where several share a
    title, the title and the first fields (spec before metadata) in which each differs from
    the others of its title: "KernelBot runner · NVIDIA B200 · formFactor runner:NVIDIA"."""
    by_title: dict[str, list[str]] = {}
    for digest, document in documents.items():
        title = str(document["metadata"]["title"])
        by_title.setdefault(f"{document.get('kind')}\n{title}", []).append(digest)
    names: dict[str, str] = {}
    for kind_title, digests in by_title.items():
        title = kind_title.split("\n", 1)[1]
        if len(digests) == 1:
            names[digests[0]] = title
            continue
        leaves = {d: _leaves(documents[d]) for d in digests}
        paths = sorted({p for found in leaves.values() for p in found})
        differing = [p for p in paths if len({repr(leaves[d].get(p)) for d in digests}) > 1]
        # What the manifest says of the thing (spec) reads better than its name (metadata).
        differing = [p for p in differing if p.startswith("spec.")] or differing
        for d in digests:
            fields = [_field_text(p, leaves[d].get(p)) for p in differing[:MAX_FIELDS]]
            names[d] = " · ".join([title, *fields])
    return names


class _Member(NamedTuple):
    """A group's member as ``group_members`` selects it (``projections.view_queries``)."""

    comparison_key: str
    runs: int
    benchmark: str | None
    product: str | None
    protocol_digest: str | None
    environment_digest: str | None
    workload_digest: str | None
    metric: str
    statistic: str | None
    unit: str | None


def group_labels(rows: Rows, keys: Sequence[str]) -> list[GroupLabel]:
    """One label per key (in the order given), from one member of each group: every member
    shares what the key is made of."""
    if not keys:
        return []
    members = {
        str(m.comparison_key): m
        for m in map(_Member._make, rows.run(STATEMENTS, "group_members", keys=list(keys)))
    }
    titles = distinguishing_names(
        _documents(
            rows,
            {
                str(d)
                for r in members.values()
                for d in (r.protocol_digest, r.environment_digest, r.workload_digest)
                if d
            },
        )
    )
    labels = []
    for key in keys:
        r = members.get(key)
        if r is None:
            continue
        metric = r.metric if r.metric == "none" else f"{r.statistic} {r.metric} ({r.unit})"
        labels.append(
            GroupLabel(
                key=key,
                benchmark=r.benchmark,
                product=r.product,
                runs=int(r.runs),
                parts={
                    "protocol": titles.get(str(r.protocol_digest), str(r.protocol_digest)),
                    "environment": titles.get(str(r.environment_digest), str(r.environment_digest)),
                    "workload": titles.get(str(r.workload_digest), str(r.workload_digest)),
                    "metric": metric,
                },
            )
        )
    return labels
