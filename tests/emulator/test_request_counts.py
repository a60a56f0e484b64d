"""The inspection report counts each account's API requests per route, ids folded into ``{id}``."""

import httpx

from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import account_report, create_template


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
