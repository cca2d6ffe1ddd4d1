"""Signed ingestion, one process, SQLite file (docs/design.md §13).

Target (issue 36): ingestion through the ledger, groups of 32, at ≥ 0.3 (stretch 0.35) × the
rate of bare one-core Ed25519 verification of the same envelopes, with the manifest memo
cold. Measured in one run:

- the envelopes: ``--envelopes`` distinct BenchmarkRun ingestions (``benchmarks.generate``'s
  synthetic manifests), signed by the ledger's ingester key before any clock starts;
- the anchor: those envelopes' signatures verified with ``cryptography`` on one core, key
  object and PAE bytes prepared up front (``bench_verify.ed25519_rate``);
- ``Ledger.append`` of one envelope per call (one commit each) on a fresh ledger home's SQLite
  file, and ``Ledger.append_many`` in groups of ``--group`` (one commit per group) on the
  rest: ingestions/s of each, and its ratio to the anchor; both on wall time and on the
  thread's CPU time (``time.thread_time``), with the load average before and after;
- the manifest memo cold (``warm_shared_manifests``): signing the envelopes in this process
  filled ``domain.manifests.canonical_form``'s memo with their run manifests, which a
  server receiving envelopes signed elsewhere never has; it is emptied before each timed
  mode and holds only the manifests every run shares, as on a server up for a while;
- the server layout, informational: the same kind of envelopes through a writer process
  (as ``kernelindex serve`` runs on SQLite) with ``--group`` in flight, and the writer's CPU
  per envelope, two ways in one run: the worker (this thread) parsing the envelope and its
  statement and the writer doing the rest, as before issue 36's "checks where the cores
  are"; and the worker running every stateless check (``ledger.admission_checks``: predicate,
  manifests, Ed25519 against the key book's bytes) and the writer taking its verdict;
- the heap as the product's one-process ingestion has it: ``kernelindex`` (``api.cli.main``)
  freezes its start-up heap before a command runs, so its collector never walks what start-up
  loaded; here start-up also made the thousands of signed fixtures, and without freezing
  them the collector's full passes walk them inside the timed modes (one of ~50 ms in a
  1,000-envelope ``append_many``: the bench's own objects, not the ledger's work). So
  everything made before the clocks start is frozen as the CLI freezes it, and its young
  collections come every 10,000 allocations as the CLI's do (``ledger.long_lived``); both
  undone afterwards; ``--no-freeze`` measures a library user's heap instead (unfrozen,
  CPython's default thresholds);
- where an envelope's time goes, per envelope on one core: envelope parse, statement
  (JSON + schema), the manifest set check (digests of every manifest; memo cold, and warm
  for reference), Ed25519, and what is left for the store (aggregate load, INSERT, log
  sequencing, proofs, COMMIT).

    python -m benchmarks.bench_ingest                  # 1,000 envelopes per mode
    python -m benchmarks.bench_ingest --envelopes 100  # quicker
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import shutil
import time
import uuid
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from rich.console import Console

from benchmarks import steadiness
from benchmarks.bench_verify import Work, ed25519_rates, forget_manifest_digests
from benchmarks.generate import load_seed, synthetic_manifests
from benchmarks.suite import Clocks, Context, FigureResult, Row, at_least, fmt, load_text
from domain.manifests.manifest_set import check_manifest_set
from domain.statements import parse_statement
from ledger.admission_checks import KnownKeys, check_stateless
from ledger.checked_wire import decode_request, encode_request
from ledger.group_commit import commit_group
from ledger.home import LedgerHome
from ledger.logged_event import LoggedEvent
from ledger.long_lived import freeze_long_lived, settled_thresholds
from ledger.remote_writer import RemoteWriter
from ledger.signing.authoring import ingestion_envelope
from ledger.signing.dsse import pae, parse_envelope
from ledger.signing.keys import SigningKey
from ledger.writer_process import WriterProcess, _answer

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
# Issue 36: of one-core Ed25519 over the same envelopes, groups of 32, memo cold.
TARGET = 0.3
STRETCH = 0.35
# Issue 36, server layout: the writer process's own rate, of one-core Ed25519.
WRITER_BOUND_TARGET = 0.5
FIGURE = "ingest"


def signed_ingestions(key: SigningKey, count: int, first: int = 0) -> list[dict[str, Any]]:
    """``count`` distinct ingestion envelopes signed by ``key`` (runs ``first`` onwards)."""
    seed = load_seed()
    return [
        ingestion_envelope(synthetic_manifests(seed, i), key) for i in range(first, first + count)
    ]


def signature_work(envelopes: list[dict[str, Any]], key: SigningKey) -> Work:
    """(key object, signature, PAE bytes) of each envelope, prepared up front."""
    public = Ed25519PublicKey.from_public_bytes(key.public.raw)
    work: Work = []
    for raw in envelopes:
        envelope = parse_envelope(raw)
        work.append(
            (public, envelope.signatures[0][1], pae(envelope.payload_type, envelope.payload))
        )
    return work


def _per_envelope_us(fn: Any, items: list[Any]) -> tuple[float, float]:
    """(wall, thread-CPU) µs per item of ``fn(item)`` over ``items``."""
    with Clocks() as clocks:
        for item in items:
            fn(item)
    count = max(len(items), 1)
    return round(clocks.wall / count * 1e6, 1), round(clocks.cpu / count * 1e6, 1)


def warm_shared_manifests(count: int) -> None:
    """Empty the manifest-digest memo, then validate once the manifests every run shares
    (protocol, environment, implementation, workload) through a run no envelope carries:
    what a server that has been up a while holds, and no more (see
    ``bench_verify.forget_manifest_digests``)."""
    forget_manifest_digests()
    check_manifest_set(synthetic_manifests(load_seed(), count + 1_000_000))


def stage_costs(envelopes: list[dict[str, Any]], work: Work) -> dict[str, dict[str, float]]:
    """µs per envelope (wall, thread-CPU) of the admission steps that do not touch the
    store, one core; the manifest set with the memo cold (as a server receiving the
    envelopes meets their run manifests) and warm (as the signer's process would)."""
    parsed = [parse_envelope(e) for e in envelopes]
    statements = [p.statement() for p in parsed]

    def verify(item: tuple[Ed25519PublicKey, bytes, bytes]) -> None:
        item[0].verify(item[1], item[2])

    def manifest_set(s: Any) -> None:
        check_manifest_set(s.predicate["manifests"])

    stages: dict[str, tuple[float, float]] = {
        "parseEnvelope": _per_envelope_us(parse_envelope, envelopes),
        # The validation itself: an envelope keeps its statement once validated.
        "statement": _per_envelope_us(lambda p: parse_statement(p.statement_json()), parsed),
    }
    warm_shared_manifests(len(envelopes))
    stages["checkManifestSet"] = _per_envelope_us(manifest_set, statements)  # cold
    stages["checkManifestSetWarmMemo"] = _per_envelope_us(manifest_set, statements)
    stages["ed25519"] = _per_envelope_us(verify, work)
    return {name: {"wall": wall, "threadCpu": cpu} for name, (wall, cpu) in stages.items()}


ADMISSION = ("parseEnvelope", "statement", "checkManifestSet", "ed25519")


def _process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_layout(
    folder: Path,
    db_url: str,
    envelopes: list[dict[str, Any]],
    window: int,
    *,
    worker_checks: bool,
) -> dict[str, Any]:
    """Ingestion as ``kernelindex serve`` does it on SQLite: a writer process (spawned, so
    its manifest memo starts cold) admits what the workers hand it over its socket, in
    groups. Here one client keeps ``window`` envelopes in flight, as that many clients
    would, and does a worker's part of each (``worker_checks``: every stateless check, as
    the service does now; else the envelope and statement parse, as it did before); wall
    rate, this thread's CPU (the worker's part) and the writer process's CPU."""
    writer = WriterProcess(folder, db_url).start()
    try:
        client = RemoteWriter(writer.address, writer.key)
        ledger = LedgerHome.at(folder, db_url).open(read_only=True)
        keys = KnownKeys(ledger.key_states)

        def worker(raw: dict[str, Any]) -> object:
            if worker_checks:
                return check_stateless(raw, keys)
            envelope = parse_envelope(raw)
            envelope.statement()
            return envelope

        try:
            for raw in envelopes[:window]:  # connected and warm
                client.append(worker(raw))
            timed = envelopes[window:]
            warm_shared_manifests(len(envelopes))  # the worker's memo as a server's
            writer_cpu0 = _process_cpu_s(writer.pid)
            with Clocks() as clocks:
                for first in range(0, len(timed), window):
                    # A window's worth checked, then sent together: as that many clients'
                    # requests reach the writer together from several workers (sent as each
                    # is checked, one thread's pace would cut the writer's groups short).
                    items = [worker(raw) for raw in timed[first : first + window]]
                    replies = [client.submit(item) for item in items]
                    for reply in replies:
                        reply.result(timeout=120)
            writer_cpu = _process_cpu_s(writer.pid) - writer_cpu0
        finally:
            client.close()
            ledger.close()
    finally:
        writer.stop()
    found = clocks.json(len(timed))
    found["workerChecks"] = worker_checks
    found["window"] = window
    found["envelopes"] = len(timed)
    found["writerProcessCpuSeconds"] = round(writer_cpu, 4)
    found["writerCpuMicrosPerEnvelope"] = round(writer_cpu / max(len(timed), 1) * 1e6, 1)
    return found


def writer_work(
    ledger: Any, envelopes: list[dict[str, Any]], group: int, *, worker_checks: bool
) -> dict[str, Any]:
    """The writer process's own work per envelope when it is the bottleneck (requests wait,
    so each group is full): a group's requests decoded as its socket delivers them
    (``ledger.checked_wire``), ``commit_group``, its answers pickled; on this thread, timed
    apart from the worker's part (each envelope prepared and encoded first, as
    ``server_layout``'s worker does), under the writer process's collector thresholds
    (``ledger.long_lived.settled_thresholds``)."""
    keys = KnownKeys(ledger.key_states)

    def worker(raw: dict[str, Any]) -> bytes:
        if worker_checks:
            return encode_request(0, check_stateless(raw, keys))
        envelope = parse_envelope(raw)
        envelope.statement()
        return encode_request(0, envelope)

    warm_shared_manifests(len(envelopes))
    with Clocks() as worker_clocks:
        messages = [worker(raw) for raw in envelopes]
    refused: list[object] = []
    thresholds = gc.get_threshold()
    gc.set_threshold(*settled_thresholds())  # the writer process's collector, while timed
    try:
        with Clocks() as clocks:
            for first in range(0, len(messages), group):
                requests = [decode_request(m) for m in messages[first : first + group]]
                results = commit_group(ledger, [envelope for _, envelope in requests])
                answers = [(n, *_answer(r)) for (n, _), r in zip(requests, results, strict=True)]
                ForkingPickler.dumps(answers)
                refused += [r for r in results if not isinstance(r, LoggedEvent)]
    finally:
        gc.set_threshold(*thresholds)
    if refused:
        raise SystemExit(f"the writer refused {refused[0]!r}")
    found = clocks.json(len(envelopes))
    found["workerChecks"] = worker_checks
    found["workerThreadCpuMicrosPerEnvelope"] = round(
        worker_clocks.cpu / max(len(envelopes), 1) * 1e6, 1
    )
    return found


def _settle_as_kernelindex() -> tuple[int, int, int]:
    """The heap as a ``kernelindex`` command runs with it (``api.cli.main``): everything made
    so far frozen, young collections every 10,000 allocations. Returns the thresholds to put
    back."""
    before = gc.get_threshold()
    freeze_long_lived()
    gc.set_threshold(*settled_thresholds())
    return before


def measure(
    count: int, group: int, console: Console, step: Any = None, freeze: bool = True
) -> dict[str, Any]:
    """The figure's numbers: see the module doc. A fresh ledger home under ``.cache``,
    removed afterwards."""
    say = step or (lambda _text: None)
    folder = CACHE / f"ingest-{uuid.uuid4().hex[:8]}"
    warm = max(5, count // 20)
    total = 2 * count + warm
    layout_count = count + group  # each server layout's: a window to warm up, then timed
    settled: tuple[int, int, int] | None = None  # the thresholds to put back, if settled
    try:
        home = LedgerHome.at(folder, f"sqlite:///{folder / 'ledger.db'}")
        ledger = home.initialise(origin="bench.kernelindex/ingest")
        ingester = home.key("ingester")
        say(f"signing {total + layout_count} ingestion envelopes")
        started = time.perf_counter()
        envelopes = signed_ingestions(ingester, total)
        signing_s = time.perf_counter() - started
        for_server = signed_ingestions(ingester, 2 * layout_count, first=total)
        warmup, single, grouped = (
            envelopes[:warm],
            envelopes[warm : warm + count],
            envelopes[warm + count :],
        )
        say("anchor: bare Ed25519 verification of the same envelopes")
        work = signature_work(single + grouped, ingester)
        ed25519 = ed25519_rates(work)
        say("where an envelope's time goes")
        stages = stage_costs(single[:200], work[:200])
        # Signing filled the memo with these very run manifests: a server receiving them
        # has never seen them (the memo cold), only the manifests every run shares.
        warm_shared_manifests(total)
        settled = _settle_as_kernelindex() if freeze else None
        for raw in warmup:
            ledger.append(raw)
        say(f"Ledger.append x {count}")
        with Clocks() as append_clocks:
            for raw in single:
                ledger.append(raw)
        say(f"Ledger.append_many, groups of {group}, x {count}")
        refused = 0
        warm_shared_manifests(total)
        with Clocks() as many_clocks:
            for first in range(0, len(grouped), group):
                results = ledger.append_many(grouped[first : first + group])
                refused += sum(1 for r in results if not hasattr(r, "position"))
        if refused:
            raise SystemExit(f"{refused} ingestions were refused by append_many")
        say(f"the writer's own work, groups of {group}, x {count}, writer checks / worker checks")
        spare = signed_ingestions(ingester, 2 * count, first=total + 2 * layout_count)
        writer_alone, writer_fed = (
            writer_work(ledger, spare[:count], group, worker_checks=False),
            writer_work(ledger, spare[count:], group, worker_checks=True),
        )
        # The anchor again: did the machine keep one speed through the timed modes?
        ed25519_after = ed25519_rates(work, seconds=1.0)
        events = int(ledger.store.last_position())
        ledger.close()
        say(f"server layout: writer process, {group} in flight, x {count}, writer checks")
        before = server_layout(
            folder, home.db_url, for_server[:layout_count], group, worker_checks=False
        )
        say(f"server layout: writer process, {group} in flight, x {count}, worker checks")
        layout = server_layout(
            folder, home.db_url, for_server[layout_count:], group, worker_checks=True
        )
    finally:
        if settled is not None:
            gc.unfreeze()
            gc.set_threshold(*settled)
        shutil.rmtree(folder, ignore_errors=True)
    append = append_clocks.json(count)
    many = many_clocks.json(count)

    def rest(clock: str, per_second: float) -> float:
        return round(1e6 / per_second - sum(stages[n][clock] for n in ADMISSION), 1)

    return {
        "envelopes": count,
        "group": group,
        "warmup": warm,
        "manifestMemo": "cold: emptied after signing, shared manifests warmed once",
        "heap": "start-up frozen, young GC every 10,000, as kernelindex runs"
        if freeze
        else "unfrozen, default GC thresholds (--no-freeze)",
        "signingSeconds": round(signing_s, 2),
        "ed25519PerSecond": round(ed25519["wall"], 1),
        "ed25519PerThreadCpuSecond": round(ed25519["cpu"], 1),
        "ed25519LoadAverage": [ed25519["loadBefore"], ed25519["loadAfter"]],
        # A ratio in one run assumes one speed throughout it: the anchor again after the
        # timed modes says whether the machine kept it (1.0: it did).
        "ed25519AfterPerThreadCpuSecond": round(ed25519_after["cpu"], 1),
        "anchorDrift": steadiness.drift(ed25519["cpu"], ed25519_after["cpu"]),
        "ed25519AfterPerSecond": round(ed25519_after["wall"], 1),
        "anchorWallDrift": steadiness.drift(ed25519["wall"], ed25519_after["wall"]),
        "append": append,
        "appendMany": many,
        "ratioAppend": round(append["perSecond"] / ed25519["wall"], 4),
        "ratioAppendMany": round(many["perSecond"] / ed25519["wall"], 4),
        "ratioAppendManyThreadCpu": round(many["perThreadCpuSecond"] / ed25519["cpu"], 4),
        "target": TARGET,
        "stretch": STRETCH,
        "stagesMicrosecondsPerEnvelope": {
            **stages,
            "restOfAppend": {
                "wall": rest("wall", append["perSecond"]),
                "threadCpu": rest("threadCpu", append["perThreadCpuSecond"]),
            },
            "restOfAppendMany": {
                "wall": rest("wall", many["perSecond"]),
                "threadCpu": rest("threadCpu", many["perThreadCpuSecond"]),
            },
        },
        "eventsInLedger": events,
        "serverLayout": layout,
        "ratioServerLayout": round(layout["perSecond"] / ed25519["wall"], 4),
        "serverLayoutWriterChecks": before,
        # What the writer could take, saturated: one core's worth of its own work.
        "writerWork": writer_fed,
        "writerWorkWriterChecks": writer_alone,
        "ratioWriterBound": round(writer_fed["perThreadCpuSecond"] / ed25519["cpu"], 4),
        "ratioWriterBoundWriterChecks": round(
            writer_alone["perThreadCpuSecond"] / ed25519["cpu"], 4
        ),
    }


def figure(ctx: Context) -> FigureResult:
    count = 100 if ctx.quick else 1000
    m = measure(count, 32, ctx.console, ctx.step)
    ed, ed_cpu = m["ed25519PerSecond"], m["ed25519PerThreadCpuSecond"]
    # Both judged rows stand on the one-core anchor, measured again after the timed modes:
    # its thread-CPU rate (the host's speed) for both, its wall rate for the wall ratio too.
    cpu_drift = {"ed25519ThreadCpu": m["anchorDrift"]}
    wall_drift = {**cpu_drift, "ed25519Wall": m["anchorWallDrift"]}
    rows: list[Row] = []
    # The target is on groups (what an import and the HTTP writer do); one envelope per
    # commit is shown for scale: its latency has its own target, beside a bare eventsourcing
    # append in the growth figure. Judged on wall time (what a user waits for, COMMIT's
    # fsync included); thread-CPU beside it, which other work on the machine hardly moves.
    for key, label, judged in (
        ("append", "Ledger.append, 1 per commit", False),
        ("appendMany", "append_many, 32 per commit", True),
    ):
        rate = m[key]["perSecond"]
        ratio = rate / ed
        ok, to_target = at_least(ratio, TARGET)
        loads = m[key]["loadAverage"]
        row = Row(
            FIGURE,
            f"signed ingestion/s, {label}, memo cold",
            f"{fmt(rate)}/s",
            f"Ed25519 {fmt(ed)}/s",
            ratio,
            note=f"load {load_text(loads['before'], loads['after'])}",
        )
        if judged:
            row.target = f"ratio ≥ {TARGET} (stretch {STRETCH})"
            row.passed, row.to_target = ok, to_target
            row.note = f"stretch {'met' if ratio >= STRETCH else 'not met'}; {row.note}"
            steadiness.judge(row, wall_drift)
        rows.append(row)
        cpu_rate = m[key]["perThreadCpuSecond"]
        rows.append(
            Row(
                FIGURE,
                "  same, per thread-CPU second",
                f"{fmt(cpu_rate)}/s",
                f"Ed25519 {fmt(ed_cpu)}/s",
                cpu_rate / ed_cpu,
            )
        )
    for key, how in (("serverLayoutWriterChecks", "writer checks"), ("serverLayout", "")):
        layout = m[key]
        worker_us = layout["threadCpuSeconds"] / layout["envelopes"] * 1e6
        rows.append(
            Row(
                FIGURE,
                f"ingestion, server layout: writer process, {m['group']} in flight"
                f"{', ' + how if how else ', checks in the worker'}",
                f"{fmt(layout['perSecond'])}/s",
                f"Ed25519 {fmt(ed)}/s",
                layout["perSecond"] / ed,
                note=f"informational; writer process CPU "
                f"{layout['writerCpuMicrosPerEnvelope']:.0f} µs per envelope, worker thread "
                f"{worker_us:.0f} µs; load {load_text(*layout['loadAverage'].values())}",
            )
        )
    writer_rate = m["writerWork"]["perThreadCpuSecond"]
    alone_us = 1e6 / m["writerWorkWriterChecks"]["perThreadCpuSecond"]
    bound_ok, bound_to_target = at_least(m["ratioWriterBound"], WRITER_BOUND_TARGET)
    bound = Row(
        FIGURE,
        "  writer-bound rate (the writer's own work, full groups of 32), checks in the worker",
        f"{fmt(writer_rate)}/s",
        f"Ed25519 {fmt(ed_cpu)}/s (thread-CPU)",
        m["ratioWriterBound"],
        target=f"ratio ≥ {WRITER_BOUND_TARGET}",
        passed=bound_ok,
        to_target=bound_to_target,
        note=f"{1e6 / writer_rate:.0f} µs per envelope (worker "
        f"{m['writerWork']['workerThreadCpuMicrosPerEnvelope']:.0f} µs); writer checks: "
        f"{alone_us:.0f} µs, ratio {m['ratioWriterBoundWriterChecks']:.3f}",
    )
    rows.append(steadiness.judge(bound, cpu_drift))
    # Thread-CPU, not wall: on a busy machine a stage's wall time is mostly waiting its turn.
    s = {name: v["threadCpu"] for name, v in m["stagesMicrosecondsPerEnvelope"].items()}
    why = (
        f"per envelope (thread-CPU): Ed25519 {s['ed25519']:.0f} µs, parse "
        f"{s['parseEnvelope']:.0f} µs, statement {s['statement']:.0f} µs, manifest-set check, "
        f"memo cold {s['checkManifestSet']:.0f} µs (warm {s['checkManifestSetWarmMemo']:.0f}), "
        f"the rest of append_many in groups of 32 (key versions, INSERT, log sequencing, "
        f"proofs, COMMIT, admission's other field work) {s['restOfAppendMany']:.0f} µs: "
        f"the plumbing around the signature, not the signature, sets the rate"
    )
    return FigureResult(
        FIGURE,
        f"signed ingestion, one process, SQLite file ({count} envelopes per mode)",
        rows,
        m,
        why=why,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="signed ingestion against bare Ed25519")
    parser.add_argument("--envelopes", type=int, default=1000, help="per mode")
    parser.add_argument("--group", type=int, default=32, help="append_many group size")
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="leave the start-up heap and fixtures to the collector (a library user's heap)",
    )
    args = parser.parse_args(argv)
    console = Console()
    m = measure(args.envelopes, args.group, console, console.print, freeze=not args.no_freeze)
    console.print_json(data=m)


if __name__ == "__main__":
    main()
