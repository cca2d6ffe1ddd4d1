"""The client reads a bundle line by line as the verifier does: lines end at "\\n" only.

The export writes JSON with the characters str.splitlines also breaks at (U+2028, U+2029,
U+0085) unescaped inside strings, e.g. an artifact's file name; split there, an honest
bundle read through ``kernelindex history --remote`` failed (found by an attack review)."""

from __future__ import annotations

import json

import httpx

from api.client import LedgerClient


def test_a_bundle_line_holding_a_line_separator_stays_one_line() -> None:
    records = [
        {"type": "header", "name": "results\u2028trace.json"},
        {"type": "artifact", "name": "a\u2029b\x85c"},
    ]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"content-type": "application/x-ndjson"})

    with LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client:
        lines = client.run_bundle("sha256:" + "a" * 64, [])
    assert [json.loads(line) for line in lines] == records
