"""Run and group references (issue 14): one resolution for the CLI, the pages and the API.

A sweep over the cohort: every run is found by its full digest, every prefix of it that is
unique (and no shorter one), its name, its external id and ``source#id``; a prefix two runs
share is refused with both candidates listed; a group by its key or any unique prefix.
"""

from __future__ import annotations

import json

import pytest
from projection_world import ALL_RUNS, GROUP, MANIFESTS, NAMES, RUN_21613, SEED, World

from api.service.boards import Boards
from api.service.freshness import Views
from api.service.runs import Runs
from ledger.application import Ledger
from ledger.errors import AmbiguousReferenceError, NotFoundError
from ledger.signing.authoring import ingestion_envelope


def resolve_run_in(ledger: Ledger, reference: str) -> str:
    """A run as every face resolves it (the service, over fresh views)."""
    return Runs(Views(ledger)).resolve(reference)


def resolve_group_in(ledger: Ledger, reference: str) -> str:
    views = Views(ledger)
    return Boards(views, Runs(views)).resolve(reference)


def _shortest_unique(run: str) -> int:
    hexes = [r[7:] for r in ALL_RUNS]
    mine = run[7:]
    return next(n for n in range(4, 65) if sum(h.startswith(mine[:n]) for h in hexes) == 1)


def test_every_run_is_found_by_each_of_its_names(cohort: World) -> None:
    for run in ALL_RUNS:
        external = NAMES[run].rsplit("-", 1)[-1]  # sol-submission-38823 -> 38823
        shortest = _shortest_unique(run)
        references = [
            run,
            run.upper(),
            run[7:],
            *(run[: 7 + n] for n in range(shortest, 65, 7)),
            run[7 : 7 + shortest],
            NAMES[run],
            external,
            f"sol-execbench#{external}",
            f"sol-execbench:{external}",
        ]
        for reference in references:
            assert resolve_run_in(cohort.ledger, reference) == run, reference


def test_a_shared_name_lists_its_candidates_and_a_miss_says_what_was_tried(
    cohort: World,
) -> None:
    copy = json.loads(json.dumps(MANIFESTS[SEED]))
    copy["run"]["metadata"]["name"] = "sol-submission-38823-rerun"
    copy["run"]["spec"]["observedAt"] = "2026-08-23T00:00:00.000Z"
    other = cohort.append(
        ingestion_envelope(copy, cohort.keys.ingester, now=cohort.clock.now)
    ).subject_digest
    with pytest.raises(AmbiguousReferenceError) as refused:
        resolve_run_in(cohort.ledger, "38823")  # both carry the source's id 38823
    for run, name in ((SEED, NAMES[SEED]), (other, "sol-submission-38823-rerun")):
        assert run[:19] in refused.value.message and name in refused.value.message
    assert resolve_run_in(cohort.ledger, "sol-submission-38823-rerun") == other
    for missing in ("sol-submission-1", "0000", "sha256:ffff", "gpumode#38823", "7e1"):
        with pytest.raises(NotFoundError, match="no run has"):
            resolve_run_in(cohort.ledger, missing)


def test_a_group_is_found_by_its_key_or_a_unique_prefix(cohort: World) -> None:
    for n in (4, 8, 20, 64):
        assert resolve_group_in(cohort.ledger, GROUP[: 7 + n]) == GROUP
    for missing in ("sha256:", "sha256:ab", "not-a-key", "sha256:" + "0" * 64):
        with pytest.raises(NotFoundError):
            resolve_group_in(cohort.ledger, missing)


def test_a_source_id_that_is_also_hex_names_its_run_not_a_digest_prefix(cohort: World) -> None:
    """`1234`-like ids are valid hex: a name or id is tried first, a prefix only after."""
    copy = json.loads(json.dumps(MANIFESTS[SEED]))
    hex_id = RUN_21613[7:11]  # RUN_21613's prefix, and a plausible source id
    copy["run"]["metadata"]["name"] = f"sol-submission-{hex_id}"
    copy["run"]["spec"]["sourceNative"]["externalId"] = hex_id
    copy["run"]["spec"]["observedAt"] = "2026-08-24T00:00:00.000Z"
    other = cohort.append(
        ingestion_envelope(copy, cohort.keys.ingester, now=cohort.clock.now)
    ).subject_digest
    assert resolve_run_in(cohort.ledger, hex_id) == other
    assert resolve_run_in(cohort.ledger, f"sha256:{hex_id}") == RUN_21613  # a prefix, said so
