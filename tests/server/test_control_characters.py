"""A path or query holding a control character (NUL above all: PostgreSQL refuses it in text,
a 500 once it reached a query) or bytes that are not UTF-8 (a lone surrogate's encoding) is
refused as malformed by every route, on both databases; and the OpenAPI document states the
same rule as the pattern of every string parameter, so what it lets a client generate is
exactly what the edge admits (schemathesis' default run, test_api_schemathesis.py)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served_app import Served

from api.server.openapi_document import CONTROL_FREE_FORMATS
from api.server.request_text import PARAMETER_PATTERN
from tests.server.test_api_reads import problem_of

_PARAM = re.compile(r"\{[^}]+\}")
# NUL, a lone surrogate's UTF-8 form, other C0 controls (tab and newline among them), DEL,
# a C1 control (NEL).
BAD = ("%00", "%ED%A0%80", "%01", "%09", "%0A", "%1F", "%7F", "%C2%85")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _get_routes(served: Served) -> dict[str, set[str]]:
    """Each GET route's path template, with the query parameters it documents (its
    handler's, for pages), and 'gpu' and 'q' besides."""
    doc = served.client.get("/schema/openapi.json").json()
    routes: dict[str, set[str]] = {}
    for route in served.app.routes:
        if "GET" not in getattr(route, "methods", set()) or route.path.startswith("/schema"):
            continue
        names = routes.setdefault(route.path, {"gpu", "q"})
        documented = doc["paths"].get(re.sub(r":[a-z]+\}", "}", route.path), {}).get("get")
        if documented is not None:
            names |= {p["name"] for p in documented.get("parameters", []) if p["in"] == "query"}
        else:
            for handler in getattr(route, "route_handlers", ()):
                names |= set(handler.parsed_fn_signature.parameters) - {"request", "service"}
    return routes


def _refused(reply: Any) -> None:
    assert reply.status_code == 400, (reply.request.url, reply.status_code, reply.text[:300])
    if reply.headers["content-type"].startswith("text/html"):
        assert "malformed-request" in reply.text
        assert "control character U+" in reply.text or "not UTF-8" in reply.text
    else:
        body = problem_of(reply, 400, "malformed-request")
        assert "control character U+" in body["detail"] or "not UTF-8" in body["detail"]


def test_every_get_route_refuses_control_characters_and_stray_bytes(served: Served) -> None:
    c = served.client
    size = c.get("/v1/log/checkpoint").json()["size"]
    routes = _get_routes(served)
    assert "/v1/runs" in routes and "/search" in routes and "/gpus/{name:str}" in routes
    assert {"gpu", "source", "benchmark"} <= routes["/v1/runs"]
    for path, names in sorted(routes.items()):
        plain = _PARAM.sub("abcd", path)
        for bad in BAD:
            for name in sorted(names):
                _refused(c.get(f"{plain}?{name}=a{bad}b"))
            if _PARAM.search(path):
                _refused(c.get(_PARAM.sub(f"a{bad}b", path)))
    # What the issue found: a NUL in a filter was a 500 on PostgreSQL.
    body = problem_of(c.get("/v1/runs?gpu=%00"), 400, "malformed-request")
    assert body["detail"].startswith("the query holds the control character U+0000")
    # A write's path too, before its body is read.
    problem_of(c.post("/v1/keys/a%00b/revocations", content=b"{}"), 400, "malformed-request")
    # Nothing was written, and the same routes answer without the bad characters.
    assert c.get("/v1/log/checkpoint").json()["size"] == size
    assert c.get("/v1/runs?gpu=B200").status_code == 200
    assert c.get("/search?q=rms%C3%A9norm%20").status_code == 200


def _string_parameters(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for p in operation.get("parameters", []):
                schema = p["schema"]
                arms = [schema, *schema.get("oneOf", [])]
                if any(a.get("type") == "string" for a in arms):
                    found.append((f"{method} {path}", p["name"], schema))
    return found


def test_the_document_states_the_rule_on_every_string_parameter(served: Served) -> None:
    doc = served.client.get("/schema/openapi.json").json()
    found = _string_parameters(doc)
    assert len(found) >= 30
    narrower = set()
    for where, name, schema in found:
        if schema.get("format") in CONTROL_FREE_FORMATS:  # a URI has no control character
            assert "pattern" not in schema, (where, name)
            continue
        assert "pattern" in schema or "enum" in schema, (where, name, schema)
        if "pattern" in schema and schema["pattern"] != PARAMETER_PATTERN:
            narrower.add(schema["pattern"])
    # The parameters with a pattern of their own (digests, formats) admit no control
    # character either: they name each character they allow.
    assert narrower and all(_CONTROL.search(p) is None and "." not in p for p in narrower)
    assert any(s.get("format") == "uri" for _, _, s in found)
    assert any(n == "gpu" and s.get("pattern") == PARAMETER_PATTERN for _, n, s in found)
    # Every operation documents the refusal.
    for item in doc["paths"].values():
        for operation in item.values():
            assert "400" in operation["responses"], operation["operationId"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(codec="utf-8"), max_size=12))
def _the_edge_answers_as_the_pattern_says(served: Served, text: str) -> None:
    reply = served.client.get(f"/v1/search/suggest?q={quote(text, safe='')}")
    if re.fullmatch(PARAMETER_PATTERN, text):
        assert reply.status_code == 200, (text, reply.text[:200])
    else:
        problem_of(reply, 400, "malformed-request")


def test_the_edge_admits_exactly_what_the_documented_pattern_matches(served: Served) -> None:
    doc = served.client.get("/schema/openapi.json").json()
    (q,) = [p for p in doc["paths"]["/v1/search/suggest"]["get"]["parameters"] if p["name"] == "q"]
    assert q["schema"]["pattern"] == PARAMETER_PATTERN
    _the_edge_answers_as_the_pattern_says(served)
