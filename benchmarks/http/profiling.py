"""Where the serve-child's CPU goes (``bench_http --profile-server DIR``): cProfile, timed in
thread-CPU seconds (what each function costs, whatever else a shared machine runs), of the
worker's event-loop thread and of its views folder's attempts; in the writer process, of
``commit_group``, with each committed group's size; and every thread's CPU seconds from
``/proc`` (``--thread-cpu DIR``: those and the group sizes alone, without the profilers'
own cost). Files in DIR: ``worker-PID.prof``, ``views-PID.prof``, ``writer-PID.prof``,
``worker-PID-threads.json`` (from the app's startup to its shutdown),
``writer-PID-threads.json`` (from its first group to its last 20th) and ``writer-PID-groups.json``.

    python -m pstats DIR/worker-PID.prof    # then: sort tottime, stats 40
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.http.config import PROFILE_VAR, THREAD_CPU_ONLY_VAR

# The writer's files are rewritten every this many groups: it may be stopped at any time.
WRITER_DUMP_EVERY = 20
WRITER_DUMP_SECONDS = 0.5


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process by name and id (``/proc``: user +
    system clock ticks), and of the whole process (``process``: ended threads too)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()  # utime, stime: fields 14, 15 of stat
            out[f"{thread.name}-{thread.native_id}"] = (int(fields[11]) + int(fields[12])) / ticks
    times = os.times()
    out["process"] = times.user + times.system
    # Context switches: voluntary (it blocked: a lock, a sleep, I/O) and not (preempted).
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.endswith("ctxt_switches") or "ctxt_switches:" in line:
            name, value = line.split(":")
            out[name] = float(value)
    return out


def _profiler() -> cProfile.Profile | None:
    if os.environ.get(THREAD_CPU_ONLY_VAR):
        return None
    return cProfile.Profile(time.thread_time)


def profile_worker(app: Any) -> None:
    """In a serve-child worker (``PROFILE_VAR`` names the folder): its event-loop thread
    and its views folder's attempts profiled from the app's startup to its shutdown."""
    folder = Path(os.environ[PROFILE_VAR])
    loop = _profiler()
    folds = _profile_folds() if loop is not None else None
    if loop is not None:
        # A lambda: Litestar inspects a hook's signature, and a builtin method has none.
        app.on_startup.append(lambda: loop.enable())  # noqa: PLW0108
    started: dict[str, float] = {}
    app.on_startup.append(lambda: started.update(thread_cpu()))

    def dump() -> None:
        if loop is not None:
            loop.disable()
            loop.dump_stats(folder / f"worker-{os.getpid()}.prof")
        if folds is not None:
            folds.dump_stats(folder / f"views-{os.getpid()}.prof")
        spent = {k: round(v - started.get(k, 0.0), 3) for k, v in thread_cpu().items()}
        (folder / f"worker-{os.getpid()}-threads.json").write_text(json.dumps(spent))

    app.on_shutdown.insert(0, dump)  # before the service's shutdown ends its threads


def _profile_folds() -> cProfile.Profile:
    """The views folder's attempts run on a thread of their own: a profiler of their own."""
    from projections.folder import ViewsFolder  # noqa: PLC0415

    folds = cProfile.Profile(time.thread_time)
    attempt = ViewsFolder._attempt

    def profiled(self: ViewsFolder) -> Any:
        folds.enable()
        try:
            return attempt(self)
        finally:
            folds.disable()

    ViewsFolder._attempt = profiled  # type: ignore[method-assign]
    return folds


def profile_writer() -> None:
    """``WriterProcess``' ``log_setup`` (it runs first in the writer process): its
    ``commit_group`` wrapped, each group's size and time noted. The files are written off
    the committing thread: with ``--profile-server`` every ``WRITER_DUMP_EVERY`` groups
    (the profile's dump needs the profiler stopped), else (``--thread-cpu`` alone, inside a
    judged run) by a daemon thread every ``WRITER_DUMP_SECONDS``, so a group's replies never
    wait for a /proc read or a file write."""
    from ledger import writer_process  # noqa: PLC0415

    folder = Path(os.environ[PROFILE_VAR])
    profile = _profiler()
    # The name the serving thread calls it by, looked up at each call: replaced below.
    commit = writer_process.commit_group  # type: ignore[attr-defined]
    sizes: list[int] = []
    spent = [0.0, 0.0]  # commit_group's wall and thread-CPU seconds, all groups
    first: dict[str, float] = {}  # at the first group: the writer's start-up is not counted

    def dump() -> None:
        covered = list(sizes)  # the groups the CPU read next covers (a little under, at most)
        used = {k: round(v - first.get(k, 0.0), 3) for k, v in thread_cpu().items()}
        used["commitGroupWall"], used["commitGroupCpu"] = spent
        (folder / f"writer-{os.getpid()}-groups.json").write_text(json.dumps(covered))
        (folder / f"writer-{os.getpid()}-threads.json").write_text(json.dumps(used))

    def dump_every_while() -> None:
        while True:
            time.sleep(WRITER_DUMP_SECONDS)
            if sizes:
                dump()

    def profiled(ledger: Any, envelopes: list[object]) -> Any:
        if not sizes:
            first.update(thread_cpu())
        sizes.append(len(envelopes))
        if profile is not None:
            profile.enable()
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return commit(ledger, envelopes)
        finally:
            spent[0] += time.perf_counter() - wall
            spent[1] += time.thread_time() - cpu
            if profile is not None:
                profile.disable()
                if len(sizes) % WRITER_DUMP_EVERY == 0:
                    profile.dump_stats(folder / f"writer-{os.getpid()}.prof")
                    dump()

    if profile is None:
        threading.Thread(target=dump_every_while, name="bench-dump", daemon=True).start()
    writer_process.commit_group = profiled  # type: ignore[attr-defined]


def summary(folder: Path, requests: int) -> dict[str, Any]:
    """What ``--thread-cpu`` / ``--profile-server`` left in ``folder``, per request served
    (warm-up included: ``requests``): each worker thread's and process's CPU ms; the writer
    process's per request its dumped groups held (from its first group to its last dump,
    which may miss the last half second's groups: dividing by every request served would
    understate it), and the groups it committed."""
    per = 1000.0 / max(1, requests)
    out: dict[str, Any] = {"requests": requests, "workers": [], "writers": []}
    for path in sorted(folder.glob("worker-*-threads.json")):
        threads = json.loads(path.read_text())
        out["workers"].append({k: round(v * per, 3) for k, v in threads.items()})
    for path in sorted(folder.glob("writer-*-groups.json")):
        sizes = json.loads(path.read_text())
        threads_path = path.with_name(path.name.replace("-groups", "-threads"))
        threads = json.loads(threads_path.read_text()) if threads_path.exists() else {}
        per_covered = 1000.0 / max(1, sum(sizes))
        out["writers"].append(
            {
                "groups": len(sizes),
                "meanGroup": round(sum(sizes) / max(1, len(sizes)), 2),
                "groupsOfOne": sizes.count(1),
                "cpuMsPerRequest": {k: round(v * per_covered, 3) for k, v in threads.items()},
            }
        )
    return out
