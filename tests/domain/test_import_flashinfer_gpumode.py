"""FlashInfer-Bench trace and GPU MODE KernelBot mappers (issue 3, item 3).

The fixtures map deterministically, every record's manifest set validates, and wherever the
KernelIndex catalog export holds the same result our digests and comparison keys equal its
(the catalog values are pinned below, taken from ``catalog-2026-08-16-0022af0b``). Malformed
input gives a rejection with a reason while the other records still come out.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from domain.canonical import canonical_json
from domain.comparison import comparison_key
from domain.importers.catalog_form import js_round, latency_ns, utc_millis
from domain.importers.flashinfer_trace import PROTOCOL, map_flashinfer_trace
from domain.importers.gpumode import EVAL_PROTOCOL, KNOWN_PROBLEMS, map_gpumode, parse_leaderboards
from domain.importers.gpumode.case import parse_case_spec
from domain.importers.records import ImportRecord, Rejection, Skipped
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set

CATALOG_REVISION = "da915083d4c7c5e61aa3005e3d17ae488e0fc71c"  # flashinfer-trace commit

# Catalog facts for the FlashInfer baseline traces in the fixture (solution
# flashinfer_wrapper_74a870 on fused_add_rmsnorm_h2048), keyed by workload uuid prefix:
# (run digest, comparison key, workload digest).
FLASHINFER_CATALOG = {
    "906efdc6": (
        "sha256:3415d6d944b99ec302fdeff8e83a3cdaa5ab1bdf56f3cba6d0da2514fe348ea9",
        "sha256:78598469f9a31306480b1ceab43991bd99a95b837a309d2bc7bda80ba703dcf6",
        "sha256:da6158f061b76f71c74e65da2aef0c8d5581fbd74b5dc3bb87721cff79c091e8",
    ),
    "1526086b": (
        "sha256:d859f42cde5ef44a439a67f775a18b462e744b0bd22dff7fe7117dc6c89192fe",
        "sha256:b2af1c1df443aefdc6145b25930529470c9b62d6a63a3fba531f6d48d11f387b",
        "sha256:e0ada6b8ffef65f081f33d57fe87836e1fbbb8cadfba6dd8ca4af0c219ab76f1",
    ),
    "78c9b621": (
        "sha256:966c4508d27cd7c4e7e1f4911780f3067f8e978fffee5907269b0d9373b1e35c",
        "sha256:2c4aca3a84d36c561c0dca8eab8fa9f2874b0408e999c868c87544f417123cbf",
        "sha256:0742fd3bcb491a15872537268ab1bfdaa4ef3963313dba3837da68e311b17dd6",
    ),
}
FLASHINFER_PROTOCOL = "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095"
FLASHINFER_ENVIRONMENT = "sha256:f4292a8be127b7230cd3995c1d605fb6c644e2c2f94566e1d28cc1be766ca5d5"
FLASHINFER_IMPLEMENTATION = (
    "sha256:79278567a15eac7d7c781ebcfa7d8e307243a6e86e9efe02f3bf209e944419b2"
)
FLASHINFER_OPERATION = "sha256:b28db409e15dc71e859a5c34624d6914398788b9ba4a89f2b79a826b3ab1da7e"

# Catalog facts for KernelBot submission 30771 (amd-fp8-mm): benchmark →
# (run digest, comparison key, workload digest). The fixture row has no code, so our
# implementation digest differs from the catalog's (which pins submission.py, 27,900 bytes).
GPUMODE_CATALOG = {
    "amd-fp8-mm/0": (
        "sha256:512fa51038fbf34502296213bc0ad7240699eac3007b88ced78b4a6a87819eb8",
        "sha256:3017ab1685c55880993d93da4cefbdef8f6c2ccb7ac88e2ee4ec3792496aa279",
        "sha256:77311ba07b5660366a97d74c666691e85081f02f0d038b6e8ac15f6a06824417",
    ),
    "amd-fp8-mm/1": (
        "sha256:dbc33bb47e775a76f856979981df43f35d5c67a45f7c5b7de905743c13918345",
        "sha256:49679ed4b957586acddb8e981281230454b9e8f96376aee03fd192a3fcd6327a",
        "sha256:123a5920d4d1c9c68205516418cb0cabff835fa28c7f0d139b48e8dbc1406b14",
    ),
    "amd-fp8-mm/2": (
        "sha256:e258bc2f02c8fcc0a3abfb0e2d48f96a7d4bd3d4aa3dd43f4f918a2fdcac6242",
        "sha256:b559cfe1984d58dfc1ef12a72ccb03b981d9f9b6f1a559733de5986a8b4c209f",
        "sha256:9dd2ad9c824cf0d20653fa48dd02bb5dc5c216194de84601587527079bc2e3d8",
    ),
}
GPUMODE_CATALOG_IMPLEMENTATION = (
    "sha256:92212fa7e2e33710325696778c691274911c213f73be61ad5b064a6340a8e8af"
)
GPUMODE_PROTOCOL = "sha256:7c66da4b5866502eb10444a7ba013d0f6bdf1620c55847945008cad2fbf98aec"
GPUMODE_MI300X = "sha256:f722892449ed976f3e21b12df8b92b34573fc232883fec6a2f3da399a00abdd5"
GPUMODE_OPERATIONS = {
    "amd-fp8-mm": "sha256:a1fd649f9f2b6ba31de4df12c0a0ab056b8b0ae31b99a42b207f338d0aaf653d",
    "amd-mixture-of-experts": (
        "sha256:2b7121e52772718df45725b1fca36a4a4539b263ba8941c35d6495e318e8e121"
    ),
    "amd-mla-decode": "sha256:20ac3fb4dadfdba68f9fc12571cfccc9ec7fbde5c6f38f99d2415ebc903aafbe",
}


# --- helpers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flashinfer_files(shared: Path) -> dict[str, bytes]:
    folder = shared / "fixtures" / "flashinfer-trace"
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def gpumode_dir(shared: Path) -> Path:
    return shared / "fixtures" / "gpumode"


def _split(
    results: list[ImportRecord | Rejection],
) -> tuple[list[ImportRecord], list[Rejection]]:
    records = [r for r in results if isinstance(r, ImportRecord)]
    rejections = [r for r in results if isinstance(r, Rejection)]
    assert len(records) + len(rejections) == len(results)
    return records, rejections


def _comparable(record: ImportRecord) -> tuple[Any, ...]:
    return (
        record.source,
        record.external_id,
        json.dumps(record.manifests, sort_keys=True),
        record.snapshot,
        record.artifacts,
    )


def _trace_lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"\n".join(json.dumps(line).encode() for line in lines) + b"\n"


# --- shared helpers ----------------------------------------------------------------------------


def test_javascript_rounding_and_millisecond_times() -> None:
    assert js_round(77716.5) == 77717  # Python's round() would give 77716
    assert js_round(2.4999999999999996) == 2
    assert js_round(0.49999999999999994) == 0
    assert latency_ns(0.007666674151122668) == 7667
    assert utc_millis("2025-10-21T13:37:42.930971", "t") == "2025-10-21T13:37:42.930Z"
    assert utc_millis("2025-10-21T15:37:42+02:00", "t") == "2025-10-21T13:37:42.000Z"


# --- FlashInfer-Bench --------------------------------------------------------------------------


def test_flashinfer_fixture_maps_every_trace(flashinfer_files: dict[str, bytes]) -> None:
    records, rejections = _split(list(map_flashinfer_trace(flashinfer_files)))
    assert rejections == []
    assert len(records) == 5  # 3 baseline traces + 2 agent-authored ones
    assert len({r.external_id for r in records}) == 5
    for record in records:
        assert record.source == "flashinfer-bench"
        checked = check_manifest_set(record.manifests)
        assert set(checked.digests) == {
            "run",
            "protocol",
            "environment",
            "implementation",
            "workload",
        }
        run_spec = record.manifests["run"]["spec"]
        assert run_spec["sourceNative"]["source"] == "flashinfer-bench"
        assert run_spec["status"] == "passed"
        # The snapshot is the canonical JSON of the trace line the run came from.
        assert json.loads(record.snapshot.content)["solution"] in record.external_id
        assert record.snapshot.content == canonical_json(json.loads(record.snapshot.content))
        # The implementation's source is kept as an artifact, by digest.
        source = record.manifests["implementation"]["spec"]["source"]
        assert source["contentDigest"] in {a.digest for a in record.artifacts}


def test_flashinfer_mapping_is_deterministic(flashinfer_files: dict[str, bytes]) -> None:
    first = [
        _comparable(r)
        for r in map_flashinfer_trace(flashinfer_files)
        if isinstance(r, ImportRecord)
    ]
    reordered = dict(reversed(list(flashinfer_files.items())))
    second = [
        _comparable(r) for r in map_flashinfer_trace(reordered) if isinstance(r, ImportRecord)
    ]
    assert first == second


def test_flashinfer_baselines_equal_the_catalog(flashinfer_files: dict[str, bytes]) -> None:
    """With the dataset commit the catalog pins, the baseline runs are the catalog's runs."""
    records, _ = _split(
        list(map_flashinfer_trace(flashinfer_files, dataset_revision=CATALOG_REVISION))
    )
    agreed = 0
    for record in records:
        manifests = record.manifests
        digests = {role: manifest_digest(m) for role, m in manifests.items()}
        assert digests["protocol"] == FLASHINFER_PROTOCOL
        assert digests["environment"] == FLASHINFER_ENVIRONMENT
        assert manifests["workload"]["spec"]["operationSpecDigest"] == FLASHINFER_OPERATION
        uuid = manifests["workload"]["metadata"]["name"].rsplit("-", 1)[-1]
        run_digest, key, workload_digest = FLASHINFER_CATALOG[uuid]
        assert digests["workload"] == workload_digest  # same workload for every solution
        assert comparison_key(manifests["run"], manifests["workload"]) == key
        if "flashinfer_wrapper_74a870" in record.external_id:
            assert digests["implementation"] == FLASHINFER_IMPLEMENTATION
            assert digests["run"] == run_digest
            agreed += 1
        else:  # agent-authored: not in the catalog, but labelled with its author
            assert manifests["implementation"]["metadata"]["authors"] == [
                {"name": "claude-opus-4-1-20250805"}
            ]
    assert agreed == 3


def test_flashinfer_without_revision_still_validates(flashinfer_files: dict[str, bytes]) -> None:
    records, _ = _split(list(map_flashinfer_trace(flashinfer_files)))
    revision = records[0].manifests["implementation"]["spec"]["projectRevision"]
    assert revision == {
        "repository": "https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace"
    }
    assert manifest_digest(PROTOCOL) == FLASHINFER_PROTOCOL


def _malformed_traces(files: dict[str, bytes]) -> dict[str, bytes]:
    good = _trace_lines(files["trace.jsonl"])
    negative = copy.deepcopy(good[0])
    negative["evaluation"]["performance"]["latency_ms"] = -0.5
    unknown_status = copy.deepcopy(good[0])
    unknown_status["evaluation"]["status"] = "MOSTLY_PASSED"
    missing = copy.deepcopy(good[0])
    del missing["evaluation"]["timestamp"]
    no_workload = copy.deepcopy(good[0])
    del no_workload["workload"]
    unknown_solution = copy.deepcopy(good[0])
    unknown_solution["solution"] = "nobody_123"
    lines = [json.dumps(x).encode() for x in (negative, unknown_status, missing, no_workload)]
    lines.append(json.dumps(good[1]).encode()[:80])  # truncated JSON
    lines.append(json.dumps(unknown_solution).encode())
    lines.append(json.dumps(good[1]).encode())  # still fine
    bad = dict(files)
    bad["trace.jsonl"] = b"\n".join(lines) + b"\n"
    return bad


def test_flashinfer_malformed_traces_are_rejected_with_reasons(
    flashinfer_files: dict[str, bytes],
) -> None:
    records, rejections = _split(list(map_flashinfer_trace(_malformed_traces(flashinfer_files))))
    reasons = [r.reason for r in rejections]
    assert len(rejections) == 6, reasons
    assert "latency_ms must be positive" in reasons[0]
    assert "'MOSTLY_PASSED' is not a FlashInfer-Bench status" in reasons[1]
    assert "timestamp" in reasons[2]
    assert "trace.workload is missing" in reasons[3]
    assert "malformed JSON" in reasons[4]
    assert "solution 'nobody_123' is not among the files" in reasons[5]
    assert all(r.reason.startswith("trace.jsonl#") for r in rejections)
    # The good line of the broken file and both agent traces still come out.
    assert len(records) == 3


def test_flashinfer_truncated_definition_rejects_its_traces_only(
    flashinfer_files: dict[str, bytes],
) -> None:
    files = dict(flashinfer_files)
    files["definition.json"] = files["definition.json"][:200]
    records, rejections = _split(list(map_flashinfer_trace(files)))
    assert records == []
    assert rejections[0].reason.startswith("definition.json: malformed JSON")
    assert len(rejections) == 6  # the file, then each of the 5 traces that needs it
    assert all(
        "'fused_add_rmsnorm_h2048' is not among the files" in r.reason for r in rejections[1:]
    )


def test_flashinfer_failed_evaluation_and_logs(flashinfer_files: dict[str, bytes]) -> None:
    line = _trace_lines(flashinfer_files["trace.jsonl"])[0]
    line["evaluation"].update(
        {"status": "RUNTIME_ERROR", "correctness": None, "performance": None, "log": "boom\n"}
    )
    files = {**flashinfer_files, "trace.jsonl": _jsonl([line])}
    records, rejections = _split(list(map_flashinfer_trace(files)))
    assert rejections == []
    failed = next(r for r in records if "flashinfer_wrapper" in r.external_id)
    spec = failed.manifests["run"]["spec"]
    assert spec["status"] == "runtime_error"
    assert "timing" not in spec and "correctness" not in spec
    assert spec["sourceNative"] == {
        "source": "flashinfer-bench",
        "benchmark": "fused_add_rmsnorm_h2048",
    }
    log = next(a for a in failed.artifacts if a.name == "log")
    assert log.content == b"boom\n"
    assert spec["evidence"]["logs"]["digest"] == log.digest


def test_flashinfer_passed_without_performance_is_rejected(
    flashinfer_files: dict[str, bytes],
) -> None:
    line = _trace_lines(flashinfer_files["trace.jsonl"])[0]
    line["evaluation"]["performance"] = None
    files = {"definition.json": flashinfer_files["definition.json"]}
    files |= {"solution.json": flashinfer_files["solution.json"], "t.jsonl": _jsonl([line])}
    results = list(map_flashinfer_trace(files))
    assert len(results) == 1 and isinstance(results[0], Rejection)
    assert "must report performance" in results[0].reason


# --- GPU MODE KernelBot ------------------------------------------------------------------------


def test_known_problems_are_the_catalog_operations() -> None:
    for leaderboard, digest in GPUMODE_OPERATIONS.items():
        assert manifest_digest(KNOWN_PROBLEMS[leaderboard].operation) == digest
    assert manifest_digest(EVAL_PROTOCOL) == GPUMODE_PROTOCOL


def test_gpumode_fixture_maps_every_case(gpumode_dir: Path) -> None:
    leaderboards = parse_leaderboards((gpumode_dir / "leaderboards.json").read_bytes())
    assert sorted(b.name for b in leaderboards.values()) == sorted(GPUMODE_OPERATIONS)
    data = (gpumode_dir / "fp8-mm-top.json").read_bytes()
    results = list(map_gpumode(data, "fp8-mm-top.json", leaderboards=leaderboards))
    records, rejections = _split(results)
    assert rejections == []
    assert len(records) == 6  # two submissions × three benchmark cases
    assert len({r.external_id for r in records}) == 6
    for record in records:
        assert record.source == "gpumode-kernelbot"
        check_manifest_set(record.manifests)
        assert record.snapshot.content == canonical_json(json.loads(record.snapshot.content))
    # Deterministic, and the leaderboard table only adds context.
    again = list(map_gpumode(data, "fp8-mm-top.json"))
    assert [r.manifests for r in again if isinstance(r, ImportRecord)] == [
        r.manifests for r in records
    ]
    # The leaderboard listing describes no results, and says so row by row (issue 14).
    mapped = list(map_gpumode((gpumode_dir / "leaderboards.json").read_bytes(), "lb.json"))
    listing = [s for s in mapped if isinstance(s, Skipped)]
    assert len(listing) == len(mapped)
    assert [s.external_id for s in listing] == [f"leaderboard/{i}" for i in sorted(leaderboards)]
    assert all("is a leaderboard, not a submission result" in s.reason for s in listing)
    [empty] = map_gpumode(b'{"rows": []}', "empty.json")
    assert (
        isinstance(empty, Skipped)
        and empty.reason == "empty.json: no rows, so there is no run to import"
    )


def test_gpumode_agrees_with_the_catalog(gpumode_dir: Path) -> None:
    data = (gpumode_dir / "fp8-mm-top.json").read_bytes()
    records, _ = _split(list(map_gpumode(data, "fp8-mm-top.json")))
    agreed = 0
    for record in records:
        manifests = record.manifests
        spec = manifests["run"]["spec"]
        assert manifest_digest(manifests["protocol"]) == GPUMODE_PROTOCOL
        assert manifest_digest(manifests["environment"]) == GPUMODE_MI300X
        if spec["sourceNative"]["externalId"] != "submission/30771":
            continue  # 30786 is not in the catalog
        run_digest, key, workload_digest = GPUMODE_CATALOG[spec["sourceNative"]["benchmark"]]
        assert manifest_digest(manifests["workload"]) == workload_digest
        assert comparison_key(manifests["run"], manifests["workload"]) == key
        # Everything in the run but the implementation reference equals the catalog's run.
        assert manifest_digest(manifests["run"]) != run_digest
        with_catalog_code = copy.deepcopy(manifests["run"])
        with_catalog_code["spec"]["implementationDigest"] = GPUMODE_CATALOG_IMPLEMENTATION
        assert manifest_digest(with_catalog_code) == run_digest
        agreed += 1
    assert agreed == 3


def test_gpumode_case_run_shape(gpumode_dir: Path) -> None:
    data = (gpumode_dir / "fp8-mm-top.json").read_bytes()
    record = next(r for r in map_gpumode(data, "fp8-mm-top.json") if isinstance(r, ImportRecord))
    spec = record.manifests["run"]["spec"]
    assert spec["timing"] == {
        "latencyNs": {"mean": 79544, "minimum": 77737, "maximum": 84790},
        "primaryStatistic": "mean",
        "samples": 100,
    }
    assert spec["observedAt"] == "2025-06-02T19:14:36.811Z"
    assert spec["sourceNative"]["metrics"] == {
        "mean_ns": 79544.11,
        "best_ns": 77737,
        "leaderboard_score_s": 0.0001033188475318776,
    }
    assert record.manifests["workload"]["spec"]["tensors"]["b_scale"]["shape"] == [12, 56]
    assert record.external_id == (
        "submission/30771#amd-fp8-mm/0@gpumode-kernelbot-amd-instinct-mi300x"
    )


def _rows(gpumode_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((gpumode_dir / "fp8-mm-top.json").read_bytes())
    return document


def test_gpumode_malformed_rows_are_rejected_with_reasons(gpumode_dir: Path) -> None:
    document = _rows(gpumode_dir)
    good = document["rows"][0]
    # (field path, new value or None to delete), one broken row each
    changes: list[tuple[tuple[str, ...], object]] = [
        (("submission_time",), None),
        (("run_result", "benchmark.1.mean"), "-5.0"),
        (("run_passed",), False),
        (("run_mode",), "script"),
        (("leaderboard_id",), 12345),
        (("run_result", "benchmark.2.spec"), "k = 7"),
    ]
    variants: list[dict[str, Any]] = []
    for path, value in changes:
        item = copy.deepcopy(good)
        target = item["row"]
        for key in path[:-1]:
            target = target[key]
        if value is None:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        variants.append(item)
    document["rows"] = [*variants, good]
    results = list(map_gpumode(json.dumps(document).encode(), "bad.json"))
    records, rejections = _split(results)
    reasons = [r.reason for r in rejections]
    assert "submission_time must be a non-empty string" in reasons[0]
    assert "benchmark.1.mean must be positive" in reasons[1]
    assert "run_passed is false" in reasons[2]
    assert "run_mode 'script' is not a ranked leaderboard run" in reasons[3]
    assert "leaderboard 12345 is unknown" in reasons[4]
    assert "'k = 7' is not 'name: value'" in reasons[5]
    assert len(rejections) == 6
    # Per-case problems reject that case only: 2 + 2 good cases from the broken rows, 3 from
    # the untouched one.
    assert len(records) == 7
    assert all(r.external_id == "submission/30771" for r in rejections if "case" not in r.reason)


def test_gpumode_truncated_document_is_one_rejection(gpumode_dir: Path) -> None:
    data = (gpumode_dir / "fp8-mm-top.json").read_bytes()[:500]
    results = list(map_gpumode(data, "fp8-mm-top.json"))
    assert len(results) == 1 and isinstance(results[0], Rejection)
    assert "malformed JSON" in results[0].reason


def test_gpumode_code_pins_the_implementation(gpumode_dir: Path) -> None:
    document = _rows(gpumode_dir)
    document["rows"] = document["rows"][:1]
    document["rows"][0]["row"]["code"] = "def custom_kernel(data):\n    return data\n"
    records, _ = _split(list(map_gpumode(json.dumps(document).encode(), "x.json")))
    source = records[0].manifests["implementation"]["spec"]["source"]
    code = next(a for a in records[0].artifacts if a.name == "submission.py")
    assert source == {
        "fileName": "submission.py",
        "sizeBytes": len(code.content),
        "contentDigest": code.digest,
    }
    # A truncated cell would pin the wrong bytes: it is not used.
    document["rows"][0]["truncated_cells"] = ["code"]
    records, _ = _split(list(map_gpumode(json.dumps(document).encode(), "x.json")))
    assert "source" not in records[0].manifests["implementation"]["spec"]


def test_case_spec_parsing() -> None:
    assert parse_case_spec("k: 7168; m: 1024; n: 1536; seed: 8135", "s") == {
        "k": 7168,
        "m": 1024,
        "n": 1536,
        "seed": 8135,
    }
