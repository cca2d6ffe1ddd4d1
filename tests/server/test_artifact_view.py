"""The inline source view: a stored artifact's text on its own page, and the run page's link
and preview. What a person reads: the code, escaped; a binary offered as a download only; a
cut said in words; 404/400 pages for digests that name nothing; a damaged artifact refused.
On SQLite and PostgreSQL (the demo ledger behind the app, plus one run with a CUDA source)."""

from __future__ import annotations

import copy
import hashlib
import html
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from served_app import Served
from sqlalchemy import update
from test_pages import Page, check_markup, get_page

from api.server.pages.source import (
    MAX_INLINE_BYTES,
    MAX_INLINE_LINES,
    artifact_view,
    excerpt,
    indent_json,
)
from domain.canonical import canonical_json
from domain.importers.records import Artifact, ImportRecord
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set
from ledger.importing import Importer
from ledger.store.artifacts import ArtifactStore, StoredArtifact, artifacts

COHORT = Path(__file__).resolve().parents[2] / "api" / "demo_data" / "sol-056-cohort.json"
# A kernel whose text would break out of the page if it were not escaped.
KERNEL = (
    "// fused rmsnorm </script><script>alert('x')</script> & <b>bold</b>\n"
    "#include <cuda_runtime.h>\n"
    "template <typename T> __global__ void rmsnorm(T* out, const T* in, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    '  if (i < n && in[i] > 0) { out[i] = in[i]; }  // "quoted"\n'
    "}\n"
) + "".join(f"// line {n}\n" for n in range(7, 61))  # 60 lines: more than the preview


@dataclass(frozen=True)
class Stored:
    run: str  # a run whose implementation source is KERNEL, stored
    kernel: str
    snapshot: str
    binary: str
    latin1: str
    big: str
    bundle: str
    bundle_file: str


def _put(served: Served, content: bytes, media_type: str, name: str) -> str:
    return ArtifactStore(served.ledger.store).put(Artifact(content, media_type, name))


@pytest.fixture
def stored(served: Served) -> Stored:
    """The demo ledger, plus a run imported with its CUDA source kept by digest, and a few
    artifacts of other kinds stored beside it."""
    manifests = copy.deepcopy(json.loads(COHORT.read_text("utf-8"))["cohort"][0])
    kernel = Artifact(KERNEL.encode("utf-8"), "text/x-cuda", "kernel.cu")
    implementation = manifests["implementation"]
    implementation["metadata"]["name"] = "av-rmsnorm-kernel"
    implementation["spec"]["callable"] = {"language": "cuda", "path": "kernel.cu"}
    implementation["spec"]["source"] = {
        "contentDigest": kernel.digest,
        "fileName": "kernel.cu",
        "sizeBytes": len(kernel.content),
    }
    run = manifests["run"]
    run["metadata"]["name"] = "av-submission-1"
    run["spec"]["sourceNative"]["externalId"] = "av-1"
    run["spec"]["implementationDigest"] = manifest_digest(implementation)
    snapshot = Artifact(canonical_json(run), "application/json", "row-av-1.json")
    importer = Importer(served.ledger, served.home.key("ingester"), served.home.key("admin"))
    summary = importer.run(
        [
            ImportRecord(
                source="sol-execbench",
                external_id="av-1",
                manifests=manifests,
                snapshot=snapshot,
                artifacts=(kernel,),
            )
        ]
    )
    assert summary.new == 1, summary
    big = "".join(f"x = {n}  # a long generated file\n" for n in range(1, 12_001))
    file = "__global__ void k() { /* a < b */ }\n"
    bundle = json.dumps(
        {"name": "k", "sources": [{"path": "k.cu", "content": file}]}, separators=(",", ":")
    )
    return Stored(
        run=check_manifest_set(manifests).run_digest,
        kernel=kernel.digest,
        snapshot=snapshot.digest,
        binary=_put(served, bytes(range(256)) * 4, "application/octet-stream", "kernel.cubin"),
        latin1=_put(served, "naïve café\n".encode("latin-1"), "text/plain", "notes.txt"),
        big=_put(served, big.encode(), "text/x-python", "generated.py"),
        bundle=_put(served, bundle.encode(), "application/json", "k.solution.json"),
        bundle_file=_put(served, file.encode(), "text/x-cuda", "k.cu"),
    )


def code_of(page: Page) -> list[str]:
    """The text of each source block (the line spans joined), as a person reads it."""
    return [p for p in page.pre if p]


# ------------------------------------------------------------------------------ the page


def test_a_text_artifact_shows_its_source_escaped_with_its_facts(
    served: Served, stored: Stored
) -> None:
    text, page = get_page(served, f"/artifacts/{stored.kernel}")
    check_markup(text, page)
    assert page.headings[0] == (1, "kernel.cu")
    assert "text/x-cuda" in text and "CUDA" in text
    assert stored.kernel in text
    assert f"{len(KERNEL.encode()):,} bytes" in text
    # Every line, exactly as stored, in one block: the hostile text reads as text.
    assert KERNEL in code_of(page)
    assert "<script>alert" not in text and "</script><script>" not in text
    assert "&lt;/script&gt;&lt;script&gt;alert(" in text
    assert "&lt;cuda_runtime.h&gt;" in text
    assert text.count('<span class="line"') == KERNEL.count("\n")
    assert 'id="L60"' in text  # each line can be linked to
    download = page.links_of("download-link")
    assert [a["href"] for a in download] == [f"/v1/artifacts/{stored.kernel}"]
    raw = served.client.get(download[0]["href"])
    assert raw.status_code == 200 and raw.content == KERNEL.encode()
    assert "Cut:" not in text


def test_one_line_json_is_laid_out_for_reading_with_every_token_as_stored(
    served: Served, stored: Stored
) -> None:
    text, page = get_page(served, f"/artifacts/{stored.snapshot}")
    check_markup(text, page)
    assert "laid out here one member per line" in text
    shown = code_of(page)[0]
    stored_json = served.client.get(f"/v1/artifacts/{stored.snapshot}").text
    assert "\n" not in stored_json and shown.count("\n") > 10
    assert json.loads(shown) == json.loads(stored_json)
    assert "".join(shown.split()) == "".join(stored_json.split())  # same tokens, same order


def test_a_solution_bundle_shows_each_of_its_files(served: Served, stored: Stored) -> None:
    text, page = get_page(served, f"/artifacts/{stored.bundle}")
    check_markup(text, page)
    assert (2, "Source files in this solution") in page.headings
    assert "__global__ void k() { /* a < b */ }\n" in code_of(page)
    assert [a["href"] for a in page.links_of("file-link")] == [f"/artifacts/{stored.bundle_file}"]


@pytest.mark.parametrize(
    ("which", "says"),
    [
        ("binary", "Its media type, application/octet-stream, is not text"),
        ("latin1", "Its bytes are not UTF-8 text"),
    ],
)
def test_a_binary_or_non_utf8_artifact_gets_a_sentence_and_the_download_only(
    served: Served, stored: Stored, which: str, says: str
) -> None:
    digest = getattr(stored, which)
    text, page = get_page(served, f"/artifacts/{digest}")
    check_markup(text, page)
    assert says in text
    assert 'class="source"' not in text and '<span class="line"' not in text
    assert [a["href"] for a in page.links_of("download-link")] == [f"/v1/artifacts/{digest}"]


def test_a_long_artifact_is_cut_and_the_page_says_so(served: Served, stored: Stored) -> None:
    text, page = get_page(served, f"/artifacts/{stored.big}")
    check_markup(text, page)
    assert text.count('<span class="line"') == MAX_INLINE_LINES
    notice = f"Cut: this view shows {MAX_INLINE_LINES:,} of 12,000 lines"
    assert notice in text
    assert "x = 10000  # a long" in text and "x = 10001  #" not in text
    assert page.links_of("download-link")


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/artifacts/sha256:" + "3" * 64, 404, "no artifact sha256:" + "3" * 64),
        ("/artifacts/sha256:12345", 400, "is not an artifact digest"),
        ("/artifacts/not-a-digest", 400, "is not an artifact digest"),
        ("/artifacts/sha256:" + "a" * 80, 400, "digest"),
    ],
)
def test_a_digest_that_names_no_artifact_is_an_error_page(
    served: Served, path: str, status: int, says: str
) -> None:
    text, page = get_page(served, path, status)
    check_markup(text, page)
    assert str(status) in page.headings[0][1]
    assert says in html.unescape(text)


def test_a_damaged_artifact_is_refused_with_a_clear_page_on_both_pages(
    served: Served, stored: Stored
) -> None:
    with served.ledger.store.transaction(commit=True) as session:
        session.execute(
            update(artifacts)
            .where(artifacts.c.digest == stored.kernel)
            .values(content=b"__global__ void tampered() {}\n")
        )
    text, page = get_page(served, f"/artifacts/{stored.kernel}", 422)
    check_markup(text, page)
    assert page.headings[0] == (1, "422 · The stored artifact is damaged")
    assert "hashes differently" in text and "tampered" not in text
    # The run record still reads; its preview says why it is missing, and shows nothing.
    text, page = get_page(served, f"/runs/{stored.run}")
    assert "The implementation source is not shown" in text and "tampered" not in text


# -------------------------------------------------------------------------- the run page


def test_the_run_page_links_each_stored_text_artifact_and_previews_its_source(
    served: Served, stored: Stored
) -> None:
    text, page = get_page(served, f"/runs/{stored.run}")
    check_markup(text, page)
    views = [a["href"] for a in page.links_of("view-source-link")]
    # The snapshot and the source, each once in the table; the preview links the source too.
    assert views == [
        f"/artifacts/{stored.snapshot}",
        f"/artifacts/{stored.kernel}",
        f"/artifacts/{stored.kernel}",
    ]
    assert [a["text"] for a in page.links_of("view-source-link")][:2] == ["View source"] * 2
    # The Download links stay.
    downloads = [a["href"] for a in page.links if a["href"].startswith("/v1/artifacts/")]
    assert downloads == [f"/v1/artifacts/{stored.snapshot}", f"/v1/artifacts/{stored.kernel}"]
    # The first 40 lines, collapsed, escaped; the rest a link away.
    assert '<details class="source-preview">' in text
    assert "Show source: kernel.cu (CUDA), the first 40 of 60 lines" in text
    head = "".join(KERNEL.splitlines(keepends=True)[:40])
    assert head in code_of(page)
    assert "// line 41" not in text
    assert "<script>alert" not in text
    # Each row says what the file is.
    assert "<code>kernel.cu</code>" in text


def test_a_run_without_stored_artifacts_has_no_view_link_or_preview(served: Served) -> None:
    text, page = get_page(served, f"/runs/{served.seed}")
    assert not page.links_of("view-source-link")
    assert "source-preview" not in text


def test_a_stored_binary_source_gets_no_view_link(served: Served, stored: Stored) -> None:
    # The source's row relabelled as a binary (its bytes, and so its digest, unchanged): the
    # run page decides from the media type, so no View link and no preview; Download stays.
    with served.ledger.store.transaction(commit=True) as session:
        session.execute(
            update(artifacts)
            .where(artifacts.c.digest == stored.kernel)
            .values(media_type="application/octet-stream")
        )
    text, page = get_page(served, f"/runs/{stored.run}")
    assert [a["href"] for a in page.links_of("view-source-link")] == [
        f"/artifacts/{stored.snapshot}"
    ]
    assert "source-preview" not in text
    assert f'href="/v1/artifacts/{stored.kernel}"' in text


# ----------------------------------------------------------------------- the pure parts


def test_excerpts_and_indentation() -> None:
    assert excerpt("a\r\nb\n", 10, 100).lines == ("a", "b")
    one = excerpt("x" * 100, 10, 8)
    assert one.lines == ("x" * 8,) and one.cut
    assert excerpt("é" * 10, 10, 3).lines == ("é",)  # never half a character
    shown = indent_json('{"a":[1,2.50,{}],"s":"x,y:{\\"}","e":[]}')
    assert shown.splitlines()[2] == "    1,"
    assert '"s": "x,y:{\\"}"' in shown and "2.50" in shown and '"e": []' in shown


def test_a_bundle_of_many_files_stays_within_the_pages_budget() -> None:
    """The cut is the page's: a bundle of 30,000 one-line files shows at most the page's
    lines and says how many files it left to the download."""
    sources = [{"path": f"k{i}.cu", "content": f"// {i}\n"} for i in range(30_000)]
    content = json.dumps({"sources": sources}).encode()
    stored = StoredArtifact(
        "sha256:" + hashlib.sha256(content).hexdigest(), "application/json", "bundle", content
    )
    view = artifact_view(stored)
    shown = sum(len(f.excerpt.lines) for f in view.files)
    assert len(view.files) + view.files_not_shown == 30_000
    assert shown <= MAX_INLINE_LINES and view.files_not_shown >= 30_000 - MAX_INLINE_LINES
    assert sum(f.excerpt.shown_bytes for f in view.files) <= MAX_INLINE_BYTES
