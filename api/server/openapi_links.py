"""OpenAPI links between the API's operations, for clients and for stateful testing.

A link says "a value in this reply is a parameter of that operation" (the runs list names run
digests the run record takes, a checkpoint's size bounds the proofs). Generators such as
schemathesis' stateful phase follow them, so they explore real runs, keys and groups instead
of random digests that can only answer 404.
"""

from __future__ import annotations

from litestar.openapi.spec import Link, OpenAPI, Operation

# (path, method, status) -> {link name: (target operation id, {parameter: expression})}
_LINKS: dict[tuple[str, str, str], dict[str, tuple[str, dict[str, str]]]] = {
    ("/v1/runs", "get", "200"): {
        "RunRecord": ("V1RunsDigestRecord", {"path.digest": "$response.body#/items/0/digest"}),
        "RunHistory": (
            "V1RunsDigestHistoryHistory",
            {"path.digest": "$response.body#/items/0/digest"},
        ),
        "RunBundle": ("V1BundleBundle", {"query.run": "$response.body#/items/0/digest"}),
        "RunLeaderboard": (
            "V1LeaderboardsKeyLeaderboard",
            {"path.key": "$response.body#/items/0/comparisonKey"},
        ),
        "CompareTwo": (
            "V1CompareCompare",
            {
                "query.a": "$response.body#/items/0/digest",
                "query.b": "$response.body#/items/1/digest",
            },
        ),
    },
    ("/v1/groups", "get", "200"): {
        "GroupLeaderboard": (
            "V1LeaderboardsKeyLeaderboard",
            {"path.key": "$response.body#/0/comparisonKey"},
        ),
        "GroupRuns": ("V1RunsListRuns", {"query.comparisonKey": "$response.body#/0/comparisonKey"}),
        "GroupBundle": ("V1BundleBundle", {"query.cohort": "$response.body#/0/comparisonKey"}),
    },
    ("/v1/keys", "get", "200"): {
        "Key": ("V1KeysKeyIdKey", {"path.key_id": "$response.body#/items/0/keyId"}),
        "KeyHistory": (
            "V1KeysKeyIdHistoryHistory",
            {"path.key_id": "$response.body#/items/0/keyId"},
        ),
    },
    ("/v1/log/checkpoint", "get", "200"): {
        "FirstLeafProof": (
            "V1LogProofsInclusionInclusion",
            {"query.leaf": "0", "query.size": "$response.body#/size"},
        ),
        "ConsistencyFromOne": (
            "V1LogProofsConsistencyConsistency",
            {"query.old": "1", "query.new": "$response.body#/size"},
        ),
        "AllEntries": (
            "V1LogEntriesEntries",
            {"query.start": "0", "query.end": "$response.body#/size"},
        ),
    },
    ("/v1/runs/{digest}", "get", "200"): {
        "History": ("V1RunsDigestHistoryHistory", {"path.digest": "$request.path.digest"}),
    },
    ("/v1/runs/{digest}/attestations", "post", "201"): {
        "HistoryAfterAttestation": (
            "V1RunsDigestHistoryHistory",
            {"path.digest": "$request.path.digest"},
        ),
    },
}


def _operations(schema: OpenAPI) -> dict[str, Operation]:
    found: dict[str, Operation] = {}
    for item in (schema.paths or {}).values():
        for method in ("get", "post", "put", "patch", "delete"):
            operation = getattr(item, method, None)
            if operation is not None and operation.operation_id:
                found[operation.operation_id] = operation
    return found


def add_links(schema: OpenAPI) -> None:
    """Attach the links to the generated document; a link to an operation or response that
    does not exist is an error here, not a silently dead link."""
    known = _operations(schema)
    for (path, method, status), links in _LINKS.items():
        item = (schema.paths or {}).get(path)
        operation = getattr(item, method, None) if item is not None else None
        if operation is None or status not in (operation.responses or {}):
            raise LookupError(f"OpenAPI links: no {method.upper()} {path} with a {status} reply")
        response = operation.responses[status]
        response_links: dict[str, Link] = {}
        for name, (target, parameters) in links.items():
            if target not in known:
                raise LookupError(f"OpenAPI link {name}: no operation {target}")
            response_links[name] = Link(operation_id=target, parameters=parameters)
        response.links = response_links
