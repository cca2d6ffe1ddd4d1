"""The documentation as a reader meets it: links that lead somewhere, the reference tables that
name what the code names, the set-up command CI runs, and no reference to files outside the
repository (issue 33)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ruamel.yaml import YAML

from ledger.verification_report import Check
from ledger.verify import EXIT_CODES

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# [text](target) outside code spans; images too. Absolute URLs are not ours to check.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens."""
    ids: set[str] = set()
    in_fence = False
    for line in page.read_text("utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and (heading := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).lower())
            ids.add(text.replace(" ", "-"))
    return ids


def without_code(text: str) -> str:
    """The prose of a page: fenced blocks and code spans removed (their brackets are code)."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def test_every_relative_link_leads_to_a_file_and_heading_that_exist() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(without_code(page.read_text("utf-8"))):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []


def test_the_verification_page_names_every_check_and_exit_code() -> None:
    """docs/verification.md is written by hand: it must list every check, and every verdict's
    exit code, as `verify --help` does."""
    text = (REPO / "docs" / "verification.md").read_text("utf-8")
    missing = [str(c) for c in Check if f"| `{c}` |" not in text]
    assert missing == [], f"the check table lacks {missing}"
    for outcome, code in EXIT_CODES.items():
        assert f"**{outcome} {code}**" in text


def test_the_readmes_test_command_is_the_one_ci_runs() -> None:
    """Set-up command 2 is what .ci/run runs: the README must say it byte for byte."""
    command = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]' && pytest"
    assert command in (REPO / ".ci" / "run").read_text("utf-8")
    assert f"```sh\n{command}\n```" in (REPO / "README.md").read_text("utf-8")


_TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".ini", ".html", ".txt"}
_TEXT_NAMES = {"Dockerfile", ".dockerignore", ".gitignore", "run"}


def project_texts() -> list[Path]:
    """The project's own text files: tracked or new, never what .gitignore keeps out (virtual
    environments, build folders, caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    paths = [REPO / name for name in listed.split("\0") if name]
    return [
        p for p in paths if p.is_file() and (p.suffix in _TEXT_SUFFIXES or p.name in _TEXT_NAMES)
    ]


def test_nothing_refers_to_a_design_outside_the_repository() -> None:
    """The design notes live in docs/design.md; a clone holds everything it cites."""
    outside = ("../" + "shared", "shared/" + "DESIGN.md")  # split, so this file is no hit
    hits = [
        f"{path.relative_to(REPO)}:{n}"
        for path in project_texts()
        for n, line in enumerate(path.read_text("utf-8", "replace").splitlines(), 1)
        if any(needle in line for needle in outside)
    ]
    assert hits == []


def test_one_image_name_in_the_dockerfile_compose_and_the_docs() -> None:
    compose = YAML(typ="safe").load((REPO / "compose.yaml").read_text("utf-8"))
    image = compose["x-kernelindex"]["image"]
    text = "\n".join(p.read_text("utf-8") for p in [REPO / "Dockerfile", *PAGES])
    built = re.findall(r"docker build -t (\S+)", text)
    # `docker run [-p X] [-v X] IMAGE ...`: every option the docs use takes one value.
    run = [m[-1] for m in re.findall(r"docker run((?: -{1,2}[a-z]+ \S+)*) (\S+)", text)]
    assert built and run
    assert set(built) | set(run) == {image}
