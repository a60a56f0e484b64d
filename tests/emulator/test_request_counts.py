"""The inspection report counts each account's API requests per route, ids folded into ``{id}``."""

from collections.abc import Callable

import httpx

from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import account_report, create_template, resources


def test_requests_are_counted_per_account_and_route(emulator: RunningEmulator, account: httpx.Client) -> None:
    template = create_template(account)
    for _ in range(3):
        assert account.get(f"/templates/{template['id']}").status_code == 200
    assert account.get("/pods").status_code == 200
    counts = account_report(emulator, account)["api_requests"]
    assert counts["GET /templates/{id}"] == 3
    assert counts["POST /templates"] == 1
    assert counts["GET /pods"] == 1
    # The report's own lookup of /users/me is counted too, but nothing of another account is.
    assert set(counts) <= {"GET /templates/{id}", "POST /templates", "GET /pods", "GET /users/me"}


def test_the_report_of_one_account_holds_only_that_account(
    emulator: RunningEmulator, make_account: Callable[..., httpx.Client]
) -> None:
    first, second = make_account(), make_account()
    create_template(first)
    ids = [client.get("/users/me").json()["id"] for client in (first, second)]
    everyone = {a["user_id"] for a in resources(emulator)["accounts"]}
    assert set(ids) <= everyone
    (only,) = resources(emulator, ids[1])["accounts"]
    assert only["user_id"] == ids[1] and only["templates"] == []
    assert resources(emulator, "no-such-user")["accounts"] == []
    assert resources(emulator, ids[1])["nodes"] == resources(emulator)["nodes"]
