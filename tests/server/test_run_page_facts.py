"""Issue 34 on the demo ledger and small data: the run page's three times, its identity, the
commands it offers with the run's own values, the source's published measurements, constant
case axes stated once, and HEAD on every GET."""

from __future__ import annotations

import re
from pathlib import Path

from api.service.models import to_builtins
from api.service.models.runs import PrimaryMeasurement
from api.service.run_facts import own_latency_ns, reported_measurements, take_part
from api.service.run_record import workload_section
from tests.served_app import Served

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
TEMPLATES = Path(__file__).resolve().parents[2] / "api" / "server" / "pages" / "templates"


def test_the_run_page_and_its_json_say_published_admitted_and_observed_apart(
    served: Served,
) -> None:
    record = served.client.get(f"/v1/runs/{SEED}").json()
    facts = record["provenance"]
    assert facts["source"] == "sol-execbench" and facts["sourceName"] == "NVIDIA SOL-ExecBench"
    # The seed is ingested from its manifests alone: no publication time is signed for it.
    assert facts["publishedAt"] is None
    assert facts["admittedAt"] == record["ingestedAt"]
    assert facts["observedAt"] == "2026-08-22T11:05:31.586Z"
    text = served.client.get(f"/runs/{SEED}").text
    assert "NVIDIA SOL-ExecBench states no publication date" in text
    assert f'<time datetime="{facts["admittedAt"]}">{facts["admittedAt"]}</time>' in text
    assert '<time datetime="2026-08-22T11:05:31.586Z">' in text
    assert "Published " + facts["admittedAt"][:10] not in text


def test_the_seeds_identity_comes_from_its_source_record_marked_so(served: Served) -> None:
    identity = served.client.get(f"/v1/runs/{SEED}").json()["identity"]
    assert (identity["implementation"], identity["project"], identity["revision"]) == (
        "Geometric",
        "Geometric",
        "submission-38823",
    )
    assert identity["statedBy"] == "the run's source record"
    text = served.client.get(f"/runs/{SEED}").text
    assert '<dd class="implementation-name">Geometric <span class="muted stated-by">' in text
    assert "(from the run&#39;s source record)" in text
    # Compare with #1: the implementation fields the record states are shown, the rest are
    # "not held" rather than a bare "absent".
    rows = re.findall(
        r"<tr><th scope=\"row\" class=\"long\"><code>(.*?)</code></th>\s*<td[^>]*>(.*?)</td>", text
    )
    shown = dict(rows)
    assert shown["implementation.spec.projectRevision.version"].startswith("submission-38823 ")
    assert shown["implementation.metadata.authors[0].name"].startswith("Geometric ")
    assert "not held" in shown["implementation.kind"]
    assert not any(cell.endswith('"muted">absent</span>') for cell in shown.values())


def test_the_reproduction_command_attests_the_runs_own_latency(served: Served) -> None:
    record = served.client.get(f"/v1/runs/{SEED}").json()
    part = record["takePart"]
    assert part["observedNs"] == 1750693 and part["observed"] == "1.751 ms"
    assert f"kernelindex attest {SEED} --type reproduced" in part["attest"]
    assert "--observed-ns 1750693 " in part["attest"]
    text = served.client.get(f"/runs/{SEED}").text
    assert (
        f'<pre class="command attest-command">{part["attest"].replace(chr(34), "&#34;")}</pre>'
        in text
    )
    assert "1750000" not in text


def test_a_49_5_microsecond_run_attests_49_5_microseconds_and_a_run_without_latency_none() -> None:
    primary = PrimaryMeasurement(
        metric="latency", statistic="mean", unit="ns", value=49500, latency_ns=49500
    )
    part = take_part("sha256:" + "a" * 64, own_latency_ns(primary, {}), "https://ki.example")
    assert part.observed == "49.50 µs" and "--observed-ns 49500 " in part.attest
    assert part.attest.endswith("--server https://ki.example")
    score = PrimaryMeasurement(
        metric="score", statistic="geomean", unit="s", value=1e-5, latency_ns=None
    )
    # Not a latency, but the source timed it: the latency at its primary statistic.
    timed = {"primaryStatistic": "mean", "latencyNs": {"mean": 79544}}
    assert own_latency_ns(score, timed) == 79544
    bare = take_part("sha256:" + "a" * 64, own_latency_ns(score, {}), "")
    assert bare.observed_ns is None and "--observed-ns" not in bare.attest
    assert bare.attest.endswith("--server URL")


def test_no_template_hard_codes_a_number_into_a_command() -> None:
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text("utf-8")
        for command in re.findall(r"kernelindex [^<\n]*", text):
            assert not re.search(r"--[a-z-]+ [0-9]", command), (template.name, command)


def test_the_sources_published_measurements_are_listed_with_their_samples() -> None:
    spec = {
        "measurements": [
            {
                "metric": "latency",
                "statistic": "std",
                "unit": "ns",
                "value": 1107.44,
                "sampleCount": 100,
            },
            {"metric": "latency", "statistic": "mean", "unit": "ns", "value": True},
            "not a measurement",
        ]
    }
    found = [to_builtins(m) for m in reported_measurements(spec)]
    assert found == [
        {
            "metric": "latency",
            "statistic": "std",
            "value": 1107.44,
            "unit": "ns",
            "sampleCount": 100,
        },
        {
            "metric": "latency",
            "statistic": "mean",
            "value": None,
            "unit": "ns",
            "sampleCount": None,
        },
    ]
    assert reported_measurements({}) == []


def test_axes_with_one_value_on_every_case_are_factored_out() -> None:
    suite = {
        "kind": "WorkloadSuite",
        "spec": {
            "cases": [
                {"externalId": "a", "axes": {"h": 4096, "n": 1, "flag": True}},
                {"externalId": "b", "axes": {"h": 4096.0, "n": 2, "flag": 1}},
                {"externalId": "c", "axes": {"h": 4096, "n": 3}},
            ]
        },
    }
    section = to_builtins(workload_section(None, suite))
    assert section["axes"] == ["h", "n", "flag"]
    # 4096 == 4096.0 is one value; true is not 1, and a case without the axis differs.
    assert section["constants"] == {"h": 4096}
    empty = {"kind": "WorkloadSuite", "spec": {"cases": []}}
    assert to_builtins(workload_section(None, empty))["constants"] == {}
    single = {"kind": "WorkloadCase", "spec": {"axes": {"k": 7168, "m": 6144}}}
    assert to_builtins(workload_section(None, single))["constants"] == {"k": 7168, "m": 6144}


def test_head_answers_every_get_with_its_headers_and_no_body(served: Served) -> None:
    for path in (f"/runs/{SEED}", f"/v1/runs/{SEED}", "/", "/static/style.css"):
        got = served.client.get(path)
        head = served.client.head(path)
        assert (head.status_code, got.status_code) == (200, 200), path
        assert head.content == b"" and got.content, path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.headers["content-length"] == str(len(got.content)), path
    assert served.client.head("/runs/sha256:" + "f" * 64).status_code == 404
    # A path with no GET answers HEAD as it answers GET: 405.
    assert served.client.get(f"/v1/runs/{SEED}/attestations").status_code == 405
    assert served.client.head(f"/v1/runs/{SEED}/attestations").status_code == 405
