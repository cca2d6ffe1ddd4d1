"""Leaderboards' orders and labels, GPU names as typed, over the demo ledger on SQLite and
PostgreSQL: the JSON API, the page and the CLI's JSON read one service answer."""

from __future__ import annotations

from typing import Any

from served_app import Served
from test_api_reads import problem_of

from tests.cli_session import Cli


def _sol_group(served: Served) -> dict[str, Any]:
    groups = served.client.get("/v1/groups").json()
    key = next(g["comparisonKey"] for g in groups if g["runs"] == 3)
    board: dict[str, Any] = served.client.get(f"/v1/leaderboards/{key}").json()
    return board


def test_gpu_names_as_typed_and_what_they_cannot_mean(served: Served) -> None:
    c = served.client
    stored = c.get("/v1/groups", params={"gpu": "NVIDIA B200"}).json()
    assert stored
    for typed in ("B200", "b200", "nvidia b200", "blackwell", "sm_100"):
        assert c.get("/v1/groups", params={"gpu": typed}).json() == stored, typed
    body = problem_of(c.get("/v1/groups", params={"gpu": "tpu"}), 404, "not-found")
    assert "NVIDIA B200" in body["detail"]  # says which GPUs there are


def test_a_sol_board_has_the_sources_score_and_can_be_read_in_its_order(served: Served) -> None:
    c = served.client
    board = _sol_group(served)
    key = board["comparisonKey"]
    assert board["order"] == "rank" and board["perUser"] is False
    group = board["group"]
    assert group["source"] == "sol-execbench" and group["hasSolScore"] is True
    assert group["gpu"] == "NVIDIA B200" and group["parts"]["protocol"]
    scores = [e["solScore"] for e in board["entries"]]
    assert all(isinstance(s, float) and 0 < s <= 1 for s in scores)
    assert [e["place"] for e in board["entries"]] == [e["rank"] for e in board["entries"]]

    by_score = c.get(f"/v1/leaderboards/{key}", params={"order": "sol-score"}).json()
    assert by_score["order"] == "sol-score"
    shown = by_score["entries"]
    assert [e["solScore"] for e in shown] == sorted(scores, reverse=True)
    assert [e["place"] for e in shown] == [1, 2, 3]
    ranks = {e["run"]: e["rank"] for e in board["entries"]}
    assert {e["run"]: e["rank"] for e in shown} == ranks  # the rank stays the ledger's
    problem_of(
        c.get(f"/v1/leaderboards/{key}", params={"order": "fastest"}), 400, "malformed-request"
    )

    page = c.get(f"/leaderboards/{key}", params={"order": "sol-score"}).text
    assert '<th scope="col" class="num">SOL score</th>' in page
    assert '<th scope="col" class="num">Place</th>' in page
    assert "“Rank” stays the ledger's ranking" in page
    for e in shown:
        assert f"{e['solScore']:.4f}" in page


def test_best_per_user_keeps_one_run_a_user(served: Served) -> None:
    c = served.client
    board = _sol_group(served)
    key = board["comparisonKey"]
    authors = [e["author"] for e in board["entries"]]
    best = c.get(f"/v1/leaderboards/{key}", params={"perUser": "true"}).json()
    assert best["perUser"] is True
    named = [e["author"] for e in best["entries"]]
    assert len(named) == len(set(named)) == len(set(authors))
    assert best["total"] == len(best["entries"])
    for e, following in zip(best["entries"], best["entries"][1:], strict=False):
        assert e["gapToNext"] == following["value"] / e["value"]
    assert best["entries"][-1]["gapToNext"] is None
    page = c.get(f"/leaderboards/{key}", params={"perUser": "true"}).text
    assert "Each user's best run only" in page and "Next user" in page


def test_the_clis_json_is_the_apis_with_the_new_choices(served: Served) -> None:
    board = _sol_group(served)
    key = board["comparisonKey"]
    cli = Cli(served.home.path, served.home.db_url)
    for args, params in [
        (["--order", "sol-score"], {"order": "sol-score"}),
        (["--per-user"], {"perUser": "true"}),
    ]:
        printed = cli("leaderboard", key, *args, "--json").stdout
        assert printed.strip() == served.client.get(f"/v1/leaderboards/{key}", params=params).text
    table = cli("leaderboard", "--gpu", "b200").stdout
    assert key[:19] in table
    assert all(len(line) <= 80 for line in table.splitlines() if "█" in line or "reported" in line)


def test_runs_of_two_groups_compared_say_the_field_that_separates_them(served: Served) -> None:
    c = served.client
    groups = c.get("/v1/groups").json()
    tops = [
        c.get(f"/v1/leaderboards/{g['comparisonKey']}").json()["entries"][0]["run"] for g in groups
    ]
    assert len(tops) == 2
    both = ",".join(tops)
    compared = c.get("/v1/comparisons", params={"runs": both}).json()
    part = compared["notComparableBy"].split(" differs in ")[1]
    field = compared["notComparableField"]
    assert field.startswith(f"{part} (") and " ≠ " in field
    # The run that differs first, then the first run's value: as `compare a b` says a's first.
    two = c.get("/v1/compare", params={"a": tops[1], "b": tops[0]}).json()
    assert two["notComparableField"] == field
    assert field in c.get("/compare", params={"runs": both}).text.replace("&gt;", ">")
