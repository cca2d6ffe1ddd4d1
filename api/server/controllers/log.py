"""/v1/log, /v1/bundle, /v1/artifacts, /v1/trust-root: what offline verifiers need;
/v1/registry.jsonl and /v1/registry.bundle, the whole registry to mirror; and /checkpoint,
the C2SP monitoring path of the log's (cosigned) checkpoint."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Annotated, cast

from litestar import Controller, MediaType, Response, get
from litestar.params import PathParameter, QueryParameter
from litestar.response import Stream

from api.server.controllers.common import Service
from api.server.openapi_problems import refuses
from api.service.errors import (
    AmbiguousReferenceError,
    ArtifactError,
    ArtifactNotFound,
    BadQueryError,
    NoLogKeyError,
    NotFoundError,
)
from api.service.models.log import (
    Checkpoint,
    ConsistencyProof,
    InclusionProof,
    LogEntry,
    TrustRootDocument,
)
from domain.documents import MAX_SAFE_INTEGER

NDJSON = "application/x-ndjson"
NOTE = MediaType.TEXT  # Litestar adds "; charset=utf-8" to text/ types
# The checkpoint a registry export was read at: its size, root and signed note (base64: a
# note spans lines, a header may not).
CHECKPOINT_SIZE = "KernelIndex-Checkpoint-Size"
CHECKPOINT_ROOT = "KernelIndex-Checkpoint-Root"
CHECKPOINT_NOTE = "KernelIndex-Checkpoint-Note"


class LogController(Controller):
    path = "/v1"
    tags = ("log",)

    @get("/trust-root", sync_to_thread=True, summary="The trust root verifiers start from")
    def trust_root(self, service: Service) -> TrustRootDocument:
        return service.log.trust_root()

    @get(
        "/log/checkpoint",
        sync_to_thread=True,
        summary="Signed checkpoint (C2SP note)",
        opt=refuses(NoLogKeyError),
    )
    def checkpoint(self, service: Service) -> Checkpoint:
        return service.log.checkpoint()

    # Proofs for a leaf or size the tree does not have are refused as not found.
    @get(
        "/log/proofs/inclusion",
        sync_to_thread=True,
        summary="Inclusion proof of a leaf",
        opt=refuses(NotFoundError),
    )
    def inclusion(
        self,
        service: Service,
        leaf: Annotated[int, QueryParameter(ge=0, le=MAX_SAFE_INTEGER)],
        size: Annotated[int | None, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = None,
    ) -> InclusionProof:
        return service.log.inclusion(leaf, size)

    @get(
        "/log/proofs/consistency",
        sync_to_thread=True,
        summary="Consistency proof between sizes",
        opt=refuses(NotFoundError),
    )
    def consistency(
        self,
        service: Service,
        old: Annotated[int, QueryParameter(ge=0, le=MAX_SAFE_INTEGER)],
        new: Annotated[int | None, QueryParameter(ge=0, le=MAX_SAFE_INTEGER)] = None,
    ) -> ConsistencyProof:
        return service.log.consistency(old, new)

    @get("/log/entries", sync_to_thread=True, summary="Log leaves [start, end), at most 1000")
    def entries(
        self,
        service: Service,
        start: Annotated[int, QueryParameter(ge=0, le=MAX_SAFE_INTEGER)] = 0,
        end: Annotated[int | None, QueryParameter(ge=0, le=MAX_SAFE_INTEGER)] = None,
    ) -> list[LogEntry]:
        return service.log.entries(start, end)

    @get(
        "/bundle",
        sync_to_thread=True,
        media_type=NDJSON,
        summary="Self-contained bundle (JSON Lines) for `kernelindex verify`",
        opt=refuses(NotFoundError, AmbiguousReferenceError, BadQueryError),
    )
    def bundle(
        self,
        service: Service,
        run: Annotated[list[str] | None, QueryParameter(max_items=100)] = None,
        cohort: Annotated[str | None, QueryParameter(max_length=71)] = None,
        group: Annotated[
            bool,
            QueryParameter(
                description="With run: also every run of its comparison group and the claims "
                "(needed to prove a rank). false: the run's own history and its signers."
            ),
        ] = True,
        checkpoint: Annotated[
            list[int] | None,
            QueryParameter(
                max_items=8,
                description="Sizes of checkpoints you hold: the bundle proves it extends each.",
            ),
        ] = None,
    ) -> Response[str]:
        sizes = list(checkpoint or [])
        if any(not 0 <= s <= MAX_SAFE_INTEGER for s in sizes):
            raise BadQueryError("checkpoint= takes tree sizes (0 to 2^53 - 1)")
        text = service.log.bundle(run or [], cohort, group=group, held=sizes)
        return Response(
            text,
            media_type=NDJSON,
            headers={"Content-Disposition": 'attachment; filename="kernelindex.bundle"'},
        )

    @get(
        "/registry.jsonl",
        sync_to_thread=True,
        media_type=NDJSON,
        summary="Every run (JSON Lines, a run a line, as GET /v1/runs lists it), streamed",
        description="Read in one snapshot of the views; each line names the checkpoint it was "
        f"read at, whose signed note is the {CHECKPOINT_NOTE} header (base64). The bytes are "
        "those `kernelindex export --all --jsonl` writes.",
    )
    def registry_jsonl(self, service: Service) -> Response[str]:
        registry = service.log.registry()
        note = base64.b64encode(registry.note.encode("utf-8")).decode("ascii")
        return _text_stream(
            registry.chunks(),
            media_type=NDJSON,
            headers={
                "Content-Disposition": 'attachment; filename="registry.jsonl"',
                CHECKPOINT_SIZE: str(registry.checkpoint.size),
                CHECKPOINT_ROOT: registry.checkpoint.root_hash,
                CHECKPOINT_NOTE: note,
            },
        )

    @get(
        "/registry.bundle",
        sync_to_thread=True,
        media_type=NDJSON,
        summary="The whole log as one bundle for `kernelindex verify`, streamed",
        description="What `kernelindex export --all` writes: every event with its inclusion "
        "proof against one signed checkpoint, and the artifacts the runs name.",
        opt=refuses(NoLogKeyError),
    )
    def registry_bundle(self, service: Service) -> Response[str]:
        return _text_stream(
            service.log.registry_bundle(),
            media_type=NDJSON,
            headers={"Content-Disposition": 'attachment; filename="registry.bundle"'},
        )

    @get(
        "/artifacts/{digest:str}",
        sync_to_thread=True,
        summary="A stored artifact, re-hashed",
        # Unknown; or stored bytes that no longer match their digest (never served).
        opt=refuses(ArtifactNotFound, ArtifactError),
    )
    def artifact(
        self, service: Service, digest: Annotated[str, PathParameter(max_length=71)]
    ) -> Response[bytes]:
        stored = service.log.artifact(digest)
        return Response(
            stored.content,
            media_type=stored.media_type or "application/octet-stream",
            headers={"Digest": f"sha-256={digest}", "X-Artifact-Name": stored.name or ""},
        )


def _text_stream(
    chunks: Iterator[bytes], *, media_type: str, headers: dict[str, str]
) -> Response[str]:
    """A body streamed in pieces, declared as the text it is: the OpenAPI document then says
    its schema (a string of ``media_type``), which a bare ``Stream`` leaves empty."""
    return cast("Response[str]", Stream(chunks, media_type=media_type, headers=headers))


class MonitoringController(Controller):
    """What C2SP clients fetch by its spec's path (tlog-tiles' ``/checkpoint``): monitors,
    witnesses and auditors that know nothing of this API."""

    path = "/"
    tags = ("log",)

    @get(
        "/checkpoint",
        sync_to_thread=True,
        media_type=NOTE,
        summary="The newest cosigned checkpoint (C2SP signed note), else the log-signed one",
        opt=refuses(NoLogKeyError),
    )
    def checkpoint(self, service: Service) -> Response[str]:
        return Response(service.log.checkpoint_note(), media_type=NOTE)
