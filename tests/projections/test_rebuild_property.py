"""Properties of the projections over random event sequences (hypothesis, SQLite), plus one
fixed sequence on both backends:

* the incrementally maintained views (caught up after every write, in small batches, or
  lagging behind) equal a rebuild from the events, table digest for table digest;
* attestations and lifecycle events never change an evidence level: the same sequence without
  them gives the same levels, and every level is caused by an ingestion or an accepted rerun;
* ranks are a deterministic function of the events: two ledgers fed the same envelopes in
  different interleavings across runs have equal rank tables (and equal runs views, but for
  log positions), and rebuilding twice gives identical digests.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from projection_world import (
    B200,
    BASE_TIME,
    CLAIMED,
    RUN_15149,
    RUN_21613,
    RUN_36818,
    SEED,
    SM100,
    Clock,
    Job,
    Keys,
    World,
    gpu,
)
from sqlalchemy import select

from domain.errors import DomainError
from projections.records import Arrival, record_history, record_row
from projections.tables import records, runs
from projections.view_rows import rank_entry

RUNS = (SEED, RUN_21613, RUN_36818, RUN_15149)
KEYS = Keys.generate(agents=2)
NOW = BASE_TIME + timedelta(hours=1)
NEUTRAL = {"attest", "retract", "supersede"}  # the events that must not move a level

# --- operations ---------------------------------------------------------------------------------

Op = tuple[Any, ...]

attest = st.tuples(
    st.just("attest"), st.sampled_from(["reproduced", "could_not_reproduce", "note"])
)
retract = st.tuples(st.just("retract"))
supersede = st.tuples(st.just("supersede"), st.integers(0, len(RUNS) - 1))
request = st.tuples(st.just("request"), st.sampled_from([SM100, SM100, "sm_90"]))
outcome = st.sampled_from(["correct", "correct", "correct", "incorrect", "slow", "wrong-arch"])
agent_and_gpu = (st.integers(0, 1), st.integers(1, 3))
# A result alone answers the run's latest open job (or, with none open, a job never requested).
result = st.tuples(st.just("result"), outcome, *agent_and_gpu)
# A request and its result: two events of the run, which other runs' events may separate.
rerun = st.tuples(
    st.just("rerun"), st.sampled_from([SM100, SM100, SM100, "sm_90"]), outcome, *agent_and_gpu
)
run_script = st.lists(
    st.one_of(rerun, attest, rerun, retract, rerun, supersede, request, result),
    min_size=1,
    max_size=5,
)


def steps_of(op: Op) -> int:
    return len(_expand(op))


@dataclass(frozen=True)
class Step:
    run: int
    kind: str
    envelope: dict[str, Any]


def _det_uuid(*parts: object) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(repr(parts).encode()).digest()[:16], version=4))


def build_steps(builder: World, scripts: Sequence[Sequence[Op]]) -> list[list[Step]]:
    """Each run's envelopes, in that run's order: its ingestion, then its script. A result
    answers the run's latest unanswered job (or a job never requested when there is none)."""
    out: list[list[Step]] = []
    for r, script in enumerate(scripts):
        steps = [Step(r, "ingest", builder.ingest_envelope(RUNS[r]))]
        open_jobs: list[Job] = []
        for i, scripted in enumerate(script):
            for op in _expand(scripted):
                steps.append(_step(builder, r, i, op, open_jobs))
        out.append(steps)
    return out


def _expand(op: Op) -> list[Op]:
    """A rerun is a request, the agent's claim, then its result."""
    if op[0] == "rerun":
        return [("request", op[1]), ("claim", op[3], op[4]), ("result", *op[2:])]
    if op[0] == "result":
        return [("claim", op[2], op[3]), op]
    return [op]


def _step(builder: World, r: int, i: int, op: Op, open_jobs: list[Job]) -> Step:
    run, kind = RUNS[r], op[0]
    if kind == "attest":
        return Step(r, kind, builder.attest_envelope(run, f"run {r} op {i}", op[1]))
    if kind == "retract":
        return Step(r, kind, builder.lifecycle_envelope(run, "retract"))
    if kind == "supersede":
        return Step(
            r, kind, builder.lifecycle_envelope(run, "supersede", superseded_by=RUNS[op[1]])
        )
    if kind == "request":
        job, envelope = builder.request_envelope(
            run,
            product=B200 if op[1] == SM100 else "NVIDIA H100",
            architecture=op[1],
            job_id=_det_uuid(r, i),
            nonce=hashlib.sha256(f"nonce {r} {i}".encode()).hexdigest(),
        )
        open_jobs.append(job)
        return Step(r, kind, envelope)
    job = open_jobs[-1] if open_jobs else Job(run, _det_uuid(r, i, "none"), "e" * 64, B200, SM100)
    if kind == "claim":  # on the job's hardware, with the GPU the result will name
        device = {
            "product": job.product,
            "architecture": job.architecture,
            "gpuUuidHash": gpu(op[2]),
            "backend": "cuda",
        }
        return Step(r, kind, builder.claim_envelope(job, KEYS.agents[op[1]], device))
    _, outcome, agent, gpu_n = op
    options: dict[str, Any] = {"gpu_hash": gpu(gpu_n)}
    if outcome == "incorrect":
        options["correct"] = False
    elif outcome == "slow":
        options["ns"] = round(1.3 * CLAIMED[run])
    elif outcome == "wrong-arch":
        options["architecture"] = "sm_90" if job.architecture == SM100 else SM100
    envelope = builder.result_envelope(job, KEYS.agents[agent], claim=False, **options)
    if outcome != "wrong-arch" and open_jobs:
        open_jobs.pop()  # answered (a wrong-architecture result is refused: the job stays open)
    return Step(r, kind, envelope)


def interleave(steps: list[list[Step]], order: Sequence[int]) -> list[Step]:
    """Merge the runs' step lists, taking the next step of run ``order[k]`` at step k (each
    run's own order is kept: an interleaving across runs)."""
    cursors = [iter(s) for s in steps]
    merged = [next(cursors[r]) for r in order]
    assert all(next(c, None) is None for c in cursors)
    return merged


def feed(
    world: World, steps: Sequence[Step], after_each: Callable[[int], None] | None = None
) -> list[tuple[int, str, str]]:
    """Append every envelope; (run, kind, outcome) per step."""
    outcomes = []
    for k, step in enumerate(steps):
        try:
            receipt = world.append(step.envelope)
            outcome = "duplicate" if receipt.duplicate else receipt.event
        except DomainError as exc:
            outcome = "refused:" + exc.code
        outcomes.append((step.run, step.kind, outcome))
        if after_each is not None:
            after_each(k)
    return outcomes


def per_run(outcomes: Sequence[tuple[int, str, str]]) -> dict[int, list[tuple[str, str]]]:
    by_run: dict[int, list[tuple[str, str]]] = {}
    for run, kind, outcome in outcomes:
        by_run.setdefault(run, []).append((kind, outcome))
    return by_run


def assert_records_are_the_history(world: World) -> None:
    """The records view the fold keeps is the pure rule (``record_history``) applied to
    each group's runs as the runs view holds them now."""
    with world.ledger.store.transaction(commit=False) as session:
        groups: dict[str, list[Arrival]] = {}
        for row in session.execute(
            select(runs).where(runs.c.comparison_key.is_not(None))
        ).mappings():
            arrival = Arrival(
                int(row["ingested_position"]),
                rank_entry(row),
                row["observed_at"],
                str(row["ingested_at"]),
            )
            groups.setdefault(str(row["comparison_key"]), []).append(arrival)
        expected = sorted(
            (
                record_row(key, r)
                for key, arrivals in groups.items()
                for r in record_history(arrivals)
            ),
            key=lambda r: (r["comparison_key"], r["position"]),
        )
        stored = [
            dict(r)
            for r in session.execute(
                select(records).order_by(records.c.comparison_key, records.c.position)
            ).mappings()
        ]
    assert stored == expected, "the records view is not the history of the runs view"


def assert_rebuild_equals_incremental(world: World) -> dict[str, str]:
    runner = world.runner()
    runner.catch_up()
    assert_records_are_the_history(world)
    incremental = runner.table_digests()
    runner.rebuild()
    rebuilt = runner.table_digests()
    assert rebuilt == incremental, "rebuild differs from the incrementally maintained views"
    runner.rebuild(batch=2)
    assert runner.table_digests() == rebuilt, "rebuilding twice differs"
    return rebuilt


def assert_levels_caused_by_ingestion_or_rerun(world: World) -> None:
    with world.ledger.store.transaction(commit=False) as session:
        causes = [int(c) for c in session.execute(select(runs.c.evidence_caused_by)).scalars()]
        events = world.runner()._events
        topics = {
            int(i): str(t).rsplit(":", 1)[-1]
            for i, t in session.execute(
                select(events.id, events.topic).where(events.id.in_(causes))
            )
        }
    assert {topics[c] for c in causes} <= {"Run.Ingested", "Run.RerunRecorded"}


def check_sequence(
    worlds: Callable[[], Iterator[World]],
    scripts: Sequence[Sequence[Op]],
    first: Sequence[int],
    second: Sequence[int],
    batches: Sequence[tuple[int, int | None]],
) -> dict[str, str]:
    """A: ``first`` interleaving, caught up after each step with ``batches[k]`` (batch size,
    max batches); B: ``second`` interleaving, caught up at the end; C: ``first`` without the
    attestations and lifecycle events."""
    source = worlds()
    a, b, c = next(source), next(source), next(source)
    steps = build_steps(a, scripts)

    def step_a(k: int) -> None:
        size, most = batches[k % len(batches)]
        a.runner().catch_up(batch=size, max_batches=most)

    seq_a = interleave(steps, first)
    out_a = feed(a, seq_a, step_a)
    out_b = feed(b, interleave(steps, second))
    out_c = feed(c, [s for s in seq_a if s.kind not in NEUTRAL])
    assert per_run(out_a) == per_run(out_b), "admission must not depend on other runs' events"
    assert [o for o in out_a if o[1] not in NEUTRAL] == out_c

    rebuilt_a = assert_rebuild_equals_incremental(a)
    assert_rebuild_equals_incremental(b)
    assert_rebuild_equals_incremental(c)
    # Deterministic ranks: equal rank tables whatever the interleaving across runs.
    views_a, views_b = a.position_free_views(), b.position_free_views()
    assert views_a["ranks"] == views_b["ranks"]
    assert views_a["runs"] == views_b["runs"]
    # Attestations and lifecycle events never move a level.
    assert a.levels() == c.levels()
    assert_levels_caused_by_ingestion_or_rerun(a)
    assert rebuilt_a == a.views()
    for world in (a, b, c):
        assert_run_state_is_the_runs_own(world)
    return a.levels()


def assert_run_state_is_the_runs_own(world: World) -> None:
    """What a run reads as without its attestations (``Ledger.run_state``: agents' polls,
    attest, intake, imports) is what the whole run's replay says."""
    for digest in RUNS:
        run, state = world.ledger.run(digest), world.ledger.run_state(digest)
        if run is None or state is None:
            assert run is None and state is None
            continue
        assert (state.run_digest, state.run_name) == (run.run_digest, run.run_name)
        assert (state.retracted, state.superseded_by) == (run.retracted, run.superseded_by)
        assert state.jobs == run.jobs
        assert state.manifests() == run.manifests()


@contextmanager
def sqlite_worlds(folder: Path) -> Iterator[Callable[[], Iterator[World]]]:
    made: list[World] = []

    def worlds() -> Iterator[World]:
        for n in range(3):
            w = World.create(f"sqlite:///{folder / f'ledger-{n}.db'}", KEYS, Clock(NOW))
            made.append(w)
            yield w

    try:
        yield worlds
    finally:
        for w in made:
            w.close()


@st.composite
def sequences(draw: st.DrawFn) -> tuple[Any, ...]:
    scripts = draw(st.lists(run_script, min_size=len(RUNS), max_size=len(RUNS)))
    lengths = [1 + sum(steps_of(op) for op in s) for s in scripts]
    multiset = [r for r, n in enumerate(lengths) for _ in range(n)]
    first = draw(st.permutations(multiset))
    second = draw(st.permutations(multiset))
    batches = draw(
        st.lists(
            st.tuples(st.integers(1, 4), st.sampled_from([None, None, 1])), min_size=1, max_size=5
        )
    )
    return scripts, first, second, batches


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sequences())
def test_random_sequences_rebuild_equals_incremental_and_ranks_are_deterministic(
    sequence: tuple[Any, ...],
) -> None:
    scripts, first, second, batches = sequence
    with tempfile.TemporaryDirectory() as folder, sqlite_worlds(Path(folder)) as worlds:
        levels = check_sequence(worlds, scripts, first, second, batches)
    for level in sorted(set(levels.values())):
        event(f"a run ends {level}")
    event(f"{sum(len(s) for s in scripts) // 5 * 5}+ operations")


# --- one fixed sequence, on both backends ------------------------------------------------------

FIXED_SCRIPTS: list[list[Op]] = [
    # SEED: verified, then replicated, then refuted, then a slow rerun, attested throughout.
    [
        ("attest", "reproduced"),
        ("request", SM100),
        ("result", "correct", 0, 1),
        ("request", SM100),
        ("result", "wrong-arch", 1, 2),
        ("result", "correct", 1, 2),
        ("attest", "could_not_reproduce"),
        ("request", SM100),
        ("result", "incorrect", 0, 1),
        ("request", SM100),
        ("result", "slow", 1, 3),
    ],
    # 21613: verified, then retracted (keeps its level, leaves the ranking).
    [("request", SM100), ("result", "correct", 1, 1), ("retract",), ("retract",)],
    # 36818: a rerun on other hardware, a result for a job never requested, superseded.
    [
        ("request", "sm_90"),
        ("result", "correct", 0, 1),
        ("result", "correct", 0, 1),
        ("supersede", 0),
    ],
    # 15149: verified in a group of its own.
    [("request", SM100), ("result", "correct", 0, 2), ("attest", "note")],
]


def test_fixed_sequence_on_both_backends(db_url: str, tmp_path: Path) -> None:
    """A on the backend under test (caught up after every write, batch 1); B and C on SQLite:
    the views agree across backends too."""
    made: list[World] = []

    def worlds() -> Iterator[World]:
        for url in (db_url, f"sqlite:///{tmp_path / 'b.db'}", f"sqlite:///{tmp_path / 'c.db'}"):
            w = World.create(url, KEYS, Clock(NOW))
            made.append(w)
            yield w

    lengths = [1 + sum(steps_of(op) for op in s) for s in FIXED_SCRIPTS]
    run_by_run = [r for r, n in enumerate(lengths) for _ in range(n)]
    round_robin = [r for k in range(max(lengths)) for r, n in enumerate(lengths) if k < n]
    try:
        check_sequence(worlds, FIXED_SCRIPTS, round_robin, run_by_run, [(1, None), (3, 1)])
        a = made[0]
        assert a.levels() == {
            SEED: "reported",  # the slow rerun after the refutation returns it to its initial level
            RUN_21613: "verified",
            RUN_36818: "reported",
            RUN_15149: "verified",
        }
        assert a.row(RUN_21613).retracted is True
        assert a.board() == [(SEED, 1, 1)]
    finally:
        for w in made:
            w.close()
