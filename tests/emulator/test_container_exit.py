"""A pod whose container's main process exits becomes BROKEN and stops billing."""

import httpx

from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import (
    account_report,
    create_template,
    rent_body,
    rent_pod,
    splittable_node,
    wait_until,
)


def test_exited_entrypoint_makes_the_pod_broken(emulator: RunningEmulator, account: httpx.Client) -> None:
    template = create_template(account, entrypoint="/bin/sh", startup_commands="-c 'exit 3'")
    node = splittable_node(account, "RTX 3090")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
    broken = wait_until(
        lambda: (row := account.get(f"/pods/{pod_id}").json()) and row["status"] == "BROKEN" and row,
        what="the pod to become BROKEN",
    )
    assert broken["ssh_connect_cmd"] is None
    events = account.get("/users/me/events", params={"pod_id": pod_id}).json()
    assert any(e["to_status"] == "BROKEN" and e["reason"] == "container_exited" for e in events)
    report = next(p for p in account_report(emulator, account)["pods"] if p["id"] == pod_id)
    first = report["billed_seconds"]
    wait_until(lambda: account.get("/pods").status_code == 200, what="another request")
    again = next(p for p in account_report(emulator, account)["pods"] if p["id"] == pod_id)["billed_seconds"]
    assert again == first, "a BROKEN pod is not billed"
    assert account.delete(f"/pods/{pod_id}").status_code == 200
