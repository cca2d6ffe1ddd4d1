"""Reading a stored artifact on a page: is it text, which lines to show, which files it holds.

Pure functions over an artifact's bytes and media type (no database, no markup): the pages
controller reads the artifact (re-hashed by the store) and the templates write what these
return, escaped by Jinja's autoescape. Nothing here builds HTML, so nothing here can let a
kernel's ``</script>`` or ``<`` through unescaped.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from api.service.log import StoredArtifact

# What one artifact page renders inline, at most; the rest is a download away. 512 KiB of
# source is far more than a kernel, and keeps a page a browser renders without stalling.
MAX_INLINE_BYTES = 512 * 1024
MAX_INLINE_LINES = 10_000
# The run page's preview of its implementation source: the head of the file, collapsed.
PREVIEW_LINES = 40
PREVIEW_BYTES = 16 * 1024

# Media types that are text though not text/*: JSON and its kin, and the scripting languages
# registries spell as application/*. The +json/+xml/+yaml suffixes (RFC 6839) are text too.
TEXT_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/jsonl",
        "application/x-ndjson",
        "application/x-python",
        "application/x-python-code",
        "application/javascript",
        "application/x-sh",
        "application/x-shellscript",
        "application/toml",
        "application/yaml",
        "application/x-yaml",
        "application/xml",
        "application/sql",
        "application/x-tex",
    }
)
TEXT_SUFFIXES = ("+json", "+xml", "+yaml")
# Indented for reading only when the stored JSON is one line (canonical or minified JSON):
# a file its author laid out keeps the author's lines.
JSON_MEDIA_TYPES = frozenset({"application/json"})

LANGUAGES: dict[str, str] = {
    "text/x-cuda": "CUDA",
    "text/x-c++src": "C++",
    "text/x-c++hdr": "C++ header",
    "text/x-c": "C",
    "text/x-python": "Python",
    "application/x-python": "Python",
    "text/markdown": "Markdown",
    "text/plain": "Plain text",
    "application/json": "JSON",
}
# Used when a media type says nothing more specific than text/plain (solution files, logs).
SUFFIX_LANGUAGES: dict[str, str] = {
    ".cu": "CUDA",
    ".cuh": "CUDA",
    ".cpp": "C++",
    ".cc": "C++",
    ".cxx": "C++",
    ".hpp": "C++ header",
    ".h": "C",
    ".c": "C",
    ".py": "Python",
    ".json": "JSON",
    ".md": "Markdown",
}

# One JSON token: a string (with its escapes), a structural character, or a bare scalar.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)


def base_media_type(media_type: str | None) -> str:
    return (media_type or "").split(";", 1)[0].strip().lower()


def is_text_media_type(media_type: str | None) -> bool:
    """Whether the stored media type says text; the bytes must still decode (:func:`decode`)."""
    base = base_media_type(media_type)
    return base.startswith("text/") or base in TEXT_MEDIA_TYPES or base.endswith(TEXT_SUFFIXES)


def is_json_media_type(media_type: str | None) -> bool:
    base = base_media_type(media_type)
    return base in JSON_MEDIA_TYPES or base.endswith("+json")


def decode(content: bytes) -> str | None:
    """The content as text, or None when it is not UTF-8 or holds NUL bytes (a binary file
    labelled as text reads as noise, so it is offered as a download only)."""
    if b"\x00" in content:
        return None
    try:
        return content.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None


def language_of(media_type: str | None, name: str | None) -> str | None:
    """A person's name for the language ("CUDA", "Python"), from the media type or the name."""
    found = LANGUAGES.get(base_media_type(media_type))
    if found not in (None, "Plain text"):
        return found
    lower = (name or "").lower()
    dot = lower.rfind(".")
    return SUFFIX_LANGUAGES.get(lower[dot:] if dot >= 0 else "", found)


def language_class(language: str | None) -> str:
    """The HTML convention for a code block's language (class="language-cuda")."""
    slug = re.sub(r"[^a-z0-9]+", "-", (language or "plain text").lower()).strip("-")
    return f"language-{slug or 'text'}"


def size_text(size: int) -> str:
    """6.3 KiB (6,421 bytes): the unit a person reads, and the exact count."""
    exact = f"{size:,} byte{'' if size == 1 else 's'}"
    if size < 1024:
        return exact
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit} ({exact})"
    return exact  # pragma: no cover - the loop always returns


def indent_json(text: str, step: str = "  ") -> str:
    """Valid one-line JSON laid out one member per line. Token by token, never re-serialised:
    every string, number and key is exactly as stored (a parse and dump could round a number
    or drop a duplicate key, and the page would then show bytes the digest does not cover)."""
    out: list[str] = []
    depth = 0
    parts = [m.group() for m in _JSON_TOKEN.finditer(text)]
    for index, part in enumerate(parts):
        following = parts[index + 1] if index + 1 < len(parts) else ""
        if part in ("{", "["):
            if following in ("}", "]"):  # an empty container stays {} or []
                out.append(part)
                continue
            depth += 1
            out.append(part + "\n" + step * depth)
        elif part in ("}", "]"):
            previous = parts[index - 1] if index else ""
            if previous in ("{", "["):
                out.append(part)
                continue
            depth -= 1
            out.append("\n" + step * depth + part)
        elif part == ",":
            out.append(",\n" + step * depth)
        elif part == ":":
            out.append(": ")
        else:
            out.append(part)
    return "".join(out)


@dataclass(frozen=True)
class Excerpt:
    """The head of a text, line by line, within a line and byte budget."""

    lines: tuple[str, ...]
    total_lines: int
    shown_bytes: int
    total_bytes: int
    cut: bool  # some of the text is not shown (lines left out, or one line shortened)


def excerpt(text: str, max_lines: int, max_bytes: int) -> Excerpt:
    """The first lines of ``text`` that fit both budgets. Lines are split on "\\n" only (as
    editors number them; a CRLF file loses its "\\r"s). A first line longer than the whole
    byte budget (minified code) is shown shortened rather than not at all."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line opens no new one
    total_bytes = len(text.encode("utf-8"))
    shown: list[str] = []
    used = 0
    shortened = False
    for line in lines[:max_lines]:
        size = len(line.encode("utf-8")) + 1
        if used + size > max_bytes:
            if not shown:
                head = line.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
                shown.append(head.removesuffix("\r"))
                used = len(head.encode("utf-8"))
                shortened = True
            break
        shown.append(line.removesuffix("\r"))
        used += size
    return Excerpt(
        lines=tuple(shown),
        total_lines=len(lines),
        shown_bytes=min(used, total_bytes),
        total_bytes=total_bytes,
        cut=shortened or len(shown) < len(lines),
    )


@dataclass(frozen=True)
class SourceFile:
    """A text to read: an artifact's own content, or one file of a solution bundle."""

    path: str
    language: str | None
    digest: str  # of its bytes: for a bundle's file, the artifact an importer kept it as
    size: int
    excerpt: Excerpt


@dataclass(frozen=True)
class ArtifactView:
    """What an artifact page shows of the content: its lines, or why it shows none."""

    reason: str | None  # why it is not shown inline, in a sentence; None when it is
    language: str | None
    excerpt: Excerpt | None
    indented: bool  # one-line JSON laid out for reading (tokens as stored)
    files: tuple[SourceFile, ...]  # a solution bundle's files, each readable on its own
    files_not_shown: int = 0  # the bundle's files past the page's budget (named by count)


def read_text(stored: StoredArtifact) -> tuple[str | None, str | None]:
    """(the content as text, None) when the media type says text and the bytes are UTF-8;
    else (None, why not, in a sentence)."""
    if not is_text_media_type(stored.media_type):
        return None, (
            f"Its media type, {stored.media_type or 'unstated'}, is not text, so its content "
            "is not shown here."
        )
    text = decode(stored.content)
    if text is None:
        return None, "Its bytes are not UTF-8 text, so its content is not shown here."
    return text, None


def solution_files(stored: StoredArtifact, text: str) -> list[tuple[str, str]]:
    """A solution bundle's (path, content) pairs: SOL-ExecBench and FlashInfer-Bench keep a
    solution as JSON with its files inline, where each file reads as one escaped string."""
    if not is_json_media_type(stored.media_type):
        return []
    try:
        document = json.loads(text)
    except ValueError:
        return []
    sources = document.get("sources") if isinstance(document, dict) else None
    if not isinstance(sources, list):
        return []
    found = [
        (s["path"], s["content"])
        for s in sources
        if isinstance(s, dict)
        and isinstance(s.get("path"), str)
        and isinstance(s.get("content"), str)
    ]
    return found if len(found) == len(sources) else []


def _file(path: str, content: str, max_lines: int, max_bytes: int) -> SourceFile:
    data = content.encode("utf-8")
    return SourceFile(
        path=path,
        language=language_of(None, path),
        digest="sha256:" + hashlib.sha256(data).hexdigest(),
        size=len(data),
        excerpt=excerpt(content, max_lines, max_bytes),
    )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def artifact_view(
    stored: StoredArtifact,
    max_lines: int = MAX_INLINE_LINES,
    max_bytes: int = MAX_INLINE_BYTES,
) -> ArtifactView:
    """How a page shows ``stored``: text only when the media type says so and the bytes are
    UTF-8; one-line JSON indented; a solution bundle's files listed, each as its own text.
    One budget covers the whole page: the bundle's files first, in order, then the stored
    text with what is left (at least a line, so the cut is said rather than silent)."""
    language = language_of(stored.media_type, stored.name)
    text, reason = read_text(stored)
    if text is None:
        return ArtifactView(reason, language, None, False, ())
    files: list[SourceFile] = []
    not_shown = 0
    lines_left, bytes_left = max_lines, max_bytes
    for path, content in solution_files(stored, text):
        if lines_left <= 0 or bytes_left <= 0:
            not_shown += 1  # the budget is the page's, however many files a bundle has
            continue
        file = _file(path, content, lines_left, bytes_left)
        files.append(file)
        lines_left -= len(file.excerpt.lines)
        bytes_left -= file.excerpt.shown_bytes
    indented = (
        is_json_media_type(stored.media_type)
        and "\n" not in text.rstrip("\n")
        and len(stored.content) <= max_bytes
        and _is_json(text)
    )
    if indented:
        text = indent_json(text)
    shown = excerpt(text, max(lines_left, 1), max(bytes_left, 1))
    return ArtifactView(None, language, shown, indented, tuple(files), not_shown)


def source_preview(
    stored: StoredArtifact,
    entry_path: str | None,
    max_lines: int = PREVIEW_LINES,
    max_bytes: int = PREVIEW_BYTES,
) -> SourceFile | None:
    """The head of what a run's implementation source runs: the artifact's own text, or for
    a solution bundle the file its callable names (else its first file). None: not text."""
    text, _ = read_text(stored)
    if text is None:
        return None
    files = solution_files(stored, text)
    for path, content in files:
        if path == entry_path:
            return _file(path, content, max_lines, max_bytes)
    if files:
        return _file(*files[0], max_lines, max_bytes)
    return SourceFile(
        path=stored.name or "source",
        language=language_of(stored.media_type, stored.name),
        digest=stored.digest,
        size=len(stored.content),
        excerpt=excerpt(text, max_lines, max_bytes),
    )
