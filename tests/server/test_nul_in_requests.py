"""A NUL character in a request's path or query is refused as malformed by every route, on
both databases (PostgreSQL refuses NUL in text: it was a 500 where one reached a query)."""

from __future__ import annotations

import re

from served_app import Served

from tests.server.test_api_reads import problem_of

_PARAM = re.compile(r"\{[^}]+\}")


def _get_paths(served: Served) -> list[str]:
    paths = set()
    for route in served.app.routes:
        if "GET" in getattr(route, "methods", set()) and not route.path.startswith("/schema"):
            paths.add(route.path)
    return sorted(paths)


def test_every_get_route_refuses_a_nul_in_its_query_or_path(served: Served) -> None:
    c = served.client
    paths = _get_paths(served)
    assert "/v1/runs" in paths and "/search" in paths and "/gpus/{name:str}" in paths
    for path in paths:
        plain = _PARAM.sub("abcd", path)
        problem_of(c.get(f"{plain}?gpu=%00&q=a%00b"), 400, "malformed-request")
        if _PARAM.search(path):
            reply = c.get(_PARAM.sub("a%00b", path))
            assert reply.status_code == 400, (path, reply.status_code, reply.text[:200])
    # And nothing else changed: the same routes answer without the NUL.
    assert c.get("/v1/runs?gpu=B200").status_code == 200
