"""A SOL-ExecBench ``Solution`` → ``ImplementationRevision``, its source pinned by digest.

``spec.source`` names **the whole solution document in canonical JSON** (RFC 8785) as one
artifact, ``fileName "solution.json"``: it holds every source file (``sources: [{path,
content}]``) *and* the build spec (entry point, languages, compile options, dependencies),
which is exactly what the SOL-ExecBench evaluator consumes, so a rerun writes it back and runs
it. One canonical bundle also settles multi-file solutions (``cuda_cpp-rmsnorm`` has three
files). Each source file is carried as an artifact of its own as well (name = its path), for
people to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.canonical import canonical_json
from domain.importers.names import MAX_DESCRIPTION, MAX_TITLE, clip
from domain.importers.records import Artifact
from domain.importers.sol_execbench.fields import (
    JsonObject,
    SolFormatError,
    json_object,
    optional_string,
    required_string,
)
from domain.importers.sol_execbench.operation import arguments
from domain.importers.sol_execbench.values import kebab
from domain.importers.sol_execbench.vocabulary import (
    CPP_LANGUAGES,
    map_dtype,
    map_hardware,
    map_language,
)
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.kinds import API_VERSION

SOLUTION_FILE_NAME: Final = "solution.json"

_MEDIA_TYPES: Final[Mapping[str, str]] = {
    ".py": "text/x-python",
    ".cu": "text/x-cuda",
    ".cuh": "text/x-cuda",
    ".cpp": "text/x-c++src",
    ".cc": "text/x-c++src",
    ".cxx": "text/x-c++src",
    ".h": "text/x-c",
    ".hpp": "text/x-c++hdr",
    ".c": "text/x-c",
}


def _media_type(path: str) -> str:
    suffix = path[path.rfind(".") :].lower() if "." in path else ""
    return _MEDIA_TYPES.get(suffix, "text/plain")


def _sources(solution: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """``(path, content)`` of every source file; paths relative, each once."""
    raw = solution.get("sources")
    if not isinstance(raw, list) or not raw:
        raise SolFormatError(f"{where}: 'sources' must be a non-empty array")
    files: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        source = json_object(item, f"{where}: sources[{index}]")
        path = required_string(source, "path", f"{where}: sources[{index}]")
        content = source.get("content")
        if not isinstance(content, str):
            raise SolFormatError(f"{where}: sources[{index}] 'content' must be a string")
        parts = path.replace("\\", "/").split("/")
        if path.startswith("/") or ".." in parts or "" in parts:
            raise SolFormatError(f"{where}: source path {path!r} must be relative, without '..'")
        if path in seen:
            raise SolFormatError(f"{where}: source path {path!r} appears twice")
        seen.add(path)
        files.append((path, content))
    return files


@dataclass(frozen=True)
class MappedSolution:
    """A solution's implementation manifest and the artifacts that pin its source."""

    name: str
    implementation: JsonObject
    implementation_digest: str
    bundle: Artifact  # canonical JSON of the whole solution; spec.source.contentDigest names it
    files: tuple[Artifact, ...]  # each source file on its own, for reading
    definition: Artifact | None = None  # the definition it was mapped onto, as published

    @property
    def artifacts(self) -> tuple[Artifact, ...]:
        return (self.bundle, *self.files, *((self.definition,) if self.definition else ()))


def _language(build: Mapping[str, Any], where: str) -> str:
    languages = build.get("languages")
    if isinstance(languages, list) and languages and isinstance(languages[0], str):
        return languages[0]
    return required_string(build, "language", f"{where}: spec")  # older solutions state one


def _metadata(solution: Mapping[str, Any], name: str, where: str) -> JsonObject:
    metadata: JsonObject = {"name": kebab(name) or "solution", "title": clip(name, MAX_TITLE)}
    description = optional_string(solution, "description", where)
    if description:
        metadata["description"] = clip(description, MAX_DESCRIPTION)
    author = optional_string(solution, "author", where)
    if author:
        metadata["authors"] = [{"name": clip(author, MAX_TITLE)}]
    return metadata


def implementation_from_solution(
    solution: Mapping[str, Any], definition: Mapping[str, Any], operation_digest: str
) -> MappedSolution:
    """A SOL Solution → ``ImplementationRevision`` with its source pinned by digest."""
    name = required_string(solution, "name", "solution")
    where = f"solution '{name}'"
    definition_name = required_string(definition, "name", "definition")
    solves = required_string(solution, "definition", where)
    if solves != definition_name:
        raise SolFormatError(f"{where} solves '{solves}', not this folder's '{definition_name}'")
    build = json_object(solution.get("spec"), f"{where}: 'spec'")
    language = _language(build, where)
    entry_point = required_string(build, "entry_point", f"{where}: spec")
    path, _, symbol = entry_point.partition("::")
    files = _sources(solution, where)
    if path not in {p for p, _ in files}:
        raise SolFormatError(f"{where}: entry point file {path!r} is not among its sources")
    binding = build.get("binding")
    callable_: JsonObject = {"language": map_language(language), "path": path}
    if symbol:
        callable_["symbol"] = symbol
    if binding == "torch" or (binding is None and language in CPP_LANGUAGES):
        callable_["interface"] = "pytorch"
    targets = build.get("target_hardware")
    products = [
        map_hardware(t)
        for t in (targets if isinstance(targets, list) else [])
        if isinstance(t, str) and t.upper() != "LOCAL"
    ]
    dtypes = sorted({map_dtype(a.dtype) for a in arguments(definition, "inputs")})
    bundle_bytes = canonical_json(solution)
    bundle = Artifact(
        bundle_bytes, "application/json", f"{kebab(name) or 'solution'}.solution.json"
    )
    manifest: JsonObject = {
        "apiVersion": API_VERSION,
        "kind": "ImplementationRevision",
        "metadata": _metadata(solution, name, where),
        "spec": {
            "projectRevision": {},
            "operation": {"specDigest": operation_digest},
            "callable": callable_,
            "support": {
                "hardwareArchitectures": sorted({p.architecture for p in products}) or ["unknown"],
                "productsTested": sorted({p.product for p in products}),
                "dtypes": dtypes,
            },
            "source": {
                "contentDigest": bundle.digest,
                "fileName": SOLUTION_FILE_NAME,
                "sizeBytes": len(bundle_bytes),
            },
            "licensing": {},
        },
    }
    return MappedSolution(
        name=name,
        implementation=manifest,
        implementation_digest=manifest_digest(manifest),
        bundle=bundle,
        files=tuple(Artifact(c.encode("utf-8"), _media_type(p), p) for p, c in files),
    )
