"""The HTTP bench's pooled phases (``benchmarks.http.load.pooled``): the suite's echo anchor is
two rounds pooled, and its rate must keep one phase's definition, 201s over wall time, over
all of them (not a mean of the rounds' rates, which would weigh a short round like a long one).
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.http.cpu import CpuWindow
from benchmarks.http.load import LoadResult, Reply, load_summary, pooled
from benchmarks.http.workload import Planned

_PLANNED = Planned(0, 0, "/x", b"{}", {}, "sha256:0")

_reply = st.builds(
    lambda status, seconds, timed: Reply(_PLANNED, status, seconds, b"{}", timed),
    st.sampled_from([201, 201, 201, 409, 0]),
    st.floats(min_value=1e-4, max_value=0.5),
    st.booleans(),
)


@st.composite
def _phase(draw: st.DrawFn) -> LoadResult:
    cpu = CpuWindow([])
    cpu.server_s = draw(st.floats(min_value=0, max_value=5))
    cpu.client_s = draw(st.floats(min_value=0, max_value=1))
    cpu.machine_busy = draw(st.floats(min_value=0, max_value=1))
    replies = draw(st.lists(_reply, min_size=1, max_size=40))
    return LoadResult(replies, draw(st.floats(min_value=0.01, max_value=10)), cpu)


@settings(max_examples=200, deadline=None)
@given(st.lists(_phase(), min_size=1, max_size=4))
def test_pooled_rate_is_all_201s_over_all_walls(phases: list[LoadResult]) -> None:
    pool = load_summary(pooled(phases))
    timed = [r for p in phases for r in p.replies if r.timed]
    ok = [r for r in timed if r.status == 201]
    wall = sum(p.wall for p in phases)
    assert pool["requests"] == len(timed)
    assert pool["acknowledged"] == len(ok)
    assert pool["perSecond"] == round(len(ok) / wall, 1)
    assert pool["latencyMs"] == load_summary(LoadResult(timed, 1.0, CpuWindow([])))["latencyMs"]
    assert pool["statuses"] == {
        s: sum(load_summary(p)["statuses"].get(s, 0) for p in phases) for s in pool["statuses"]
    }
    busy = sum(p.cpu.machine_busy * p.wall for p in phases) / wall
    assert math.isclose(pooled(phases).cpu.machine_busy, busy, rel_tol=1e-9, abs_tol=1e-12)
    for part in ("server_s", "client_s", "database_s"):  # every CPU sum, not one round's
        assert math.isclose(
            getattr(pooled(phases).cpu, part),
            sum(getattr(p.cpu, part) for p in phases),
            abs_tol=1e-9,
        )
    # a status any round saw is in the pool (a dropped one would not be checked above)
    assert set(pool["statuses"]) == {s for p in phases for s in load_summary(p)["statuses"]}


@given(_phase())
def test_one_phase_pooled_is_that_phase(phase: LoadResult) -> None:
    alone, pool = load_summary(phase), load_summary(pooled([phase]))
    for key in ("requests", "warmupRequests", "acknowledged", "seconds", "perSecond"):
        assert pool[key] == alone[key]
    assert pool["latencyMs"] == alone["latencyMs"]
    assert pool["statuses"] == alone["statuses"]


def test_pooled_is_not_a_mean_of_rates() -> None:
    """A 1 s round of 100 and a 3 s round of 900 pool to 250/s, not (100 + 300) / 2 = 200/s."""

    def phase(n: int, wall: float) -> LoadResult:
        return LoadResult([Reply(_PLANNED, 201, 0.01, b"", True)] * n, wall, CpuWindow([]))

    assert load_summary(pooled([phase(100, 1.0), phase(900, 3.0)]))["perSecond"] == 250.0
