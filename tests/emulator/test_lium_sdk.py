"""Lium's own SDK and CLI (``lium-io``, unchanged) against the emulator: node listing and its filters,
``/machines``, keyless browsing, quotes, deployment estimates, ``up`` without a template, ``ps``,
``exec``, pod logs, scheduled removal and ``rm``.

The SDK runs in this process with a ``Config`` pointing at the emulator; the CLI runs as a
subprocess with ``LIUM_BASE_URL``/``LIUM_API_KEY`` and a scratch ``HOME``. Both send their traffic
only to the emulator on loopback: the CLI's proxy variables point at a closed port for anything else.
"""

import json
import math
import threading
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lium.sdk import Config, Lium, LiumAuthError, LiumError, LiumNotFoundError
from lium.sdk.utils import extract_gpu_type

from lium_emulator.api.billing import billed_days
from lium_emulator.launcher import RunningEmulator, launch
from tests.emulator.sdk_user import SdkUser
from tests.emulator.testkit import (
    DEFAULT_KEY,
    FAST_TIMINGS,
    api_client,
    create_template,
    rent_body,
    rent_pod,
    splittable_node,
    wait_gone,
    wait_status,
    wait_until,
)

# the pending time of the module's emulator (started with FAST_TIMINGS)
PENDING_SECONDS = float(FAST_TIMINGS[FAST_TIMINGS.index("--pending-seconds") + 1])
# How far ahead the tests schedule removals they wait for: enough for the request to arrive on a busy
# machine before it falls due.
SOON = timedelta(seconds=3)
# A template whose PID 1 writes two lines, then prints whatever appears in /tmp/say: logs have
# something to show, and a test can make the container write more while it follows them.
TALKING_TEMPLATE = {
    "name": "talking",
    "docker_image": "python:3.11-slim",
    "docker_image_tag": "",
    "entrypoint": "/bin/sh",
    "startup_commands": (
        "-c 'echo hello-from-pid1; echo second-line >&2; "
        "while :; do if [ -f /tmp/say ]; then cat /tmp/say; rm -f /tmp/say; fi; sleep 0.1; done'"
    ),
    "internal_ports": [22],
    "volumes": ["/root"],
}


# --- listing ----------------------------------------------------------------------------------------


def test_ls_filters_by_gpu_type_count_and_cuda(user: SdkUser) -> None:
    rows = {row["id"]: row for row in user.http.get("/executors").json()}
    assert rows, "the fleet lists nodes"

    h100 = user.lium.ls(gpu_type="H100")
    expected_h100 = {i for i, r in rows.items() if extract_gpu_type(r["machine_name"]) == "H100"}
    assert expected_h100 and {e.id for e in h100} == expected_h100
    assert len(expected_h100) < len(rows), "other GPUs are filtered out, not listed"

    eight = user.lium.ls(gpu_count=8)
    assert {e.id for e in eight} == {i for i, r in rows.items() if r["gpu_count"] == 8}
    assert all(e.gpu_count == 8 for e in eight) and len(eight) < len(rows)

    both = user.lium.ls(gpu_type="H100", gpu_count=8)
    assert {e.id for e in both} == {i for i in expected_h100 if rows[i]["gpu_count"] == 8}

    cuda = user.lium.ls(min_cuda_version=12.6)
    assert cuda and all(e.max_cuda_version is not None and e.max_cuda_version >= 12.6 for e in cuda)
    assert {e.id for e in cuda} == {i for i, r in rows.items() if r["max_cuda_version"] >= 12.6}
    assert len(cuda) < len(rows)


def test_rent_by_gpu_type_and_count_picks_a_matching_node(user: SdkUser) -> None:
    """``rent(gpu_type, gpu_count)`` picks among the nodes the filtered listing returns (the emulator
    does not advertise ``rent_by_spec``, so the SDK picks client-side)."""
    rows = user.http.get("/executors").json()
    eight_h100 = [r for r in rows if extract_gpu_type(r["machine_name"]) == "H100" and r["gpu_count"] == 8]
    cheapest = min(
        eight_h100, key=lambda r: (r["price_per_gpu"], -r["effective_download_speed_mbps"], r["id"])
    )
    planned = user.lium.rent(gpu_type="H100", gpu_count=8, dry_run=True)
    assert planned.executor.id == cheapest["id"] and planned.pod is None

    rented = user.lium.rent(gpu_type="H100", gpu_count=8, name="eight-h100", ssh_keys=[user.public_key])
    assert rented.pod is not None and rented.executor.id == cheapest["id"]
    row = user.lium.pod(rented.pod["id"])
    assert row["gpu_count"] == "8" and extract_gpu_type(row["gpu_name"]) == "H100"


def test_executor_filters_on_the_wire(user: SdkUser) -> None:
    """The query parameters themselves, as the SDK sends them, filter on the server."""
    names = ["NVIDIA H200", "NVIDIA L40S"]
    listed = user.http.get("/executors", params={"machine_names": ",".join(names)}).json()
    assert listed and {r["machine_name"] for r in listed} == set(names)
    small = user.http.get("/executors", params={"gpu_count_gte": 2, "gpu_count_lte": 4}).json()
    assert small and all(2 <= r["gpu_count"] <= 4 for r in small)
    linked = user.http.get("/executors", params={"nvlink": "true"}).json()
    assert linked and all(r["nvlink"] is True for r in linked)
    bad = user.http.get("/executors", params={"gpu_count_gte": "many"})
    assert bad.status_code == 422
    assert bad.json()["validation_errors"][0]["field"] == "query -> gpu_count_gte"


def test_ls_within_a_radius(user: SdkUser) -> None:
    berlin = (52.52, 13.405)
    rows = user.http.get("/executors").json()
    in_berlin = {r["id"] for r in rows if r["location"]["city"] == "Berlin"}
    assert in_berlin
    near = user.lium.ls(lat=berlin[0], lon=berlin[1], max_distance_miles=1)
    assert {e.id for e in near} == in_berlin
    europe = user.lium.ls(lat=berlin[0], lon=berlin[1], max_distance_miles=1000)
    countries = {e.location["country_code"] for e in europe}
    assert in_berlin < {e.id for e in europe} and countries <= {"DE", "PL", "NL", "FI", "GB", "FR"}
    assert len(user.lium.ls(lat=berlin[0], lon=berlin[1])) == len(rows), "no radius, no filter"


def test_node_rows_carry_the_contract_fields(user: SdkUser) -> None:
    node = user.lium.ls(gpu_type="H200")[0]
    assert node.max_cuda_version is not None and node.driver_version
    assert node.reliability_score is not None and 0 <= node.reliability_score <= 100
    assert node.available_port_count is not None and node.available_port_count >= 3
    assert node.nvlink is True and node.link == "NVLink" and node.p2p is True
    assert node.whole_host_only is not None and node.available_gpu_count == node.gpu_count
    assert node.frequent_rent_failures is False and node.gpu_power_limited is False


def test_machines_name_every_gpu_of_the_fleet(user: SdkUser) -> None:
    machines = user.lium.gpu_types()
    assert machines == {r["machine_name"] for r in user.http.get("/executors").json()}
    assert {"H100", "H200", "RTX4090", "A100"} <= set(user.lium.gpu_short_types())


def test_browsing_without_a_key(user: SdkUser, emulator: RunningEmulator) -> None:
    anonymous = Lium(config=Config(api_key="", base_url=emulator.api_url))
    nodes = anonymous.ls(gpu_type="RTX4090")
    assert nodes and all(e.gpu_type == "RTX4090" for e in nodes)
    assert all(not e.ip for e in nodes), "a node's address goes only to signed-in callers"
    public = anonymous.templates()
    assert {t.id for t in public} == {
        t["id"] for t in user.http.get("/templates").json() if t["user_id"] is None
    }
    own = user.template({**TALKING_TEMPLATE, "name": "mine-only"})
    assert own["id"] not in {t.id for t in public}
    assert own["id"] in {t.id for t in user.lium.templates()}
    quote = anonymous.quote(nodes[0].id, hours=1, gpu_count=1)
    assert quote.rent_balance_required_usd is None and quote.total_usd == pytest.approx(quote.price_per_hour)
    with api_client(emulator, "") as keyless:
        assert keyless.get("/pods").status_code == 401, "account data still needs the key"
        assert keyless.get("/executors/default-docker-image").status_code == 401
    with pytest.raises(LiumAuthError):
        Lium(config=Config(api_key="not-a-key", base_url=emulator.api_url)).ls()


# --- quotes and estimates ---------------------------------------------------------------------------


def test_quote_prices_the_order_like_a_rent(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 4090")
    quote = user.lium.quote(node["id"], hours=3, gpu_count=2, volume_gb=50)
    assert quote.gpu_count == 2 and quote.hours == 3
    assert quote.price_per_hour == pytest.approx(node["price_per_gpu_hour"] * 2)
    assert quote.total_usd == pytest.approx(node["price_per_gpu_hour"] * 2 * 3)
    assert quote.pod_balance_floor_usd == pytest.approx(quote.price_per_hour / 4)
    assert quote.rent_balance_required_usd == pytest.approx(quote.pod_balance_floor_usd)
    assert [line.item for line in quote.lines] == ["compute", "volume", "backup", "egress"]
    assert quote.allocation is not None and quote.allocation["cpu_count"] >= 1

    default = user.lium.quote(node["id"], hours=1)
    assert default.gpu_count == node["available_gpu_count"], "no count quotes the free GPUs"
    with pytest.raises(LiumError, match="gpu_count must be between"):
        user.lium.quote(node["id"], hours=1, gpu_count=node["gpu_count"] + 1)
    with pytest.raises(LiumNotFoundError):
        user.lium.quote(str(uuid.uuid4()), hours=1)


def test_deployment_estimate(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 4090")
    template = user.template(TALKING_TEMPLATE)
    estimate = user.lium.get_deployment_estimate(node["id"], template["id"])
    assert estimate["estimated_seconds"] == math.ceil(PENDING_SECONDS)
    assert estimate["is_cached_template"] is True and estimate["is_slow_machine"] is False
    with pytest.raises(LiumNotFoundError):
        user.lium.get_deployment_estimate(node["id"], str(uuid.uuid4()))


# --- pods -------------------------------------------------------------------------------------------


def test_up_without_template_ps_exec_and_rm(user: SdkUser) -> None:
    node = splittable_node(user.http, "A100-SXM4-80GB")
    default_image = user.lium.get_default_images("A100", None)[0]
    pod = user.up(node["id"])
    assert pod.status == "RUNNING" and pod.ssh_cmd
    assert pod.template["docker_image"] == default_image["docker_image"]
    assert pod.template["docker_image_tag"] == default_image["docker_image_tag"]
    assert pod.id in {p.id for p in user.lium.ps()}

    result = user.lium.exec(pod, command="echo $((6 * 7)); hostname")
    assert result["exit_code"] == 0 and result["stdout"].splitlines()[0] == "42"

    user.lium.rm(pod)
    wait_gone(user.http, pod.id)
    assert pod.id not in {p.id for p in user.lium.ps()}


def test_logs_show_the_container_output(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 4090")
    pod = user.up(node["id"], user.template(TALKING_TEMPLATE)["id"])
    lines = wait_until(
        lambda: list(user.lium.logs(pod.id)) or None, timeout=20, what="the container's first lines"
    )
    assert lines == [b"hello-from-pid1", b"second-line"]
    assert list(user.lium.logs(pod.id, tail=1)) == [b"second-line"]

    followed: list[bytes] = []

    def follow() -> None:
        followed.extend(user.lium.logs(pod.id, tail=1, follow=True))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        wait_until(lambda: followed, timeout=20, what="the followed tail")
        said = user.lium.exec(pod, command="echo written-later > /tmp/say.new && mv /tmp/say.new /tmp/say")
        assert said["exit_code"] == 0, said
        wait_until(lambda: b"written-later" in followed, timeout=20, what="a line written while following")
    finally:
        user.lium.rm(pod)  # the stream ends once the pod stops running
        reader.join(timeout=20)
    assert not reader.is_alive()
    assert followed == [b"second-line", b"written-later"]
    with pytest.raises(LiumNotFoundError):
        list(user.lium.logs(str(uuid.uuid4())))


def test_logs_of_a_container_that_exited(user: SdkUser) -> None:
    """A pod whose PID 1 exits turns BROKEN; its last words stay readable until it is deleted."""
    template = user.template(
        {**TALKING_TEMPLATE, "name": "short-lived", "startup_commands": "-c 'echo last-words; exit 3'"}
    )
    pod_id = rent_pod(user.http, splittable_node(user.http, "RTX 4090")["id"], rent_body(template["id"]))
    wait_status(user.http, pod_id, "BROKEN")
    assert list(user.lium.logs(pod_id)) == [b"last-words"]
    assert list(user.lium.logs(pod_id, follow=True)) == [b"last-words"], "following a stopped pod ends"


def _statuses(user: SdkUser, pod_id: str) -> list[str]:
    return [
        e["to_status"] for e in user.lium.pod_events(pod_id) if e["sub_event_type"] == "pod-lifecycle.status"
    ]


def test_reboot_replaces_the_container_and_keeps_the_volume(user: SdkUser) -> None:
    pod = user.up(splittable_node(user.http, "RTX 5090")["id"], user.template(TALKING_TEMPLATE)["id"])
    marker = uuid.uuid4().hex
    user.lium.exec(pod, command=f"echo {marker} > /root/marker; echo gone > /tmp/scratch")

    answer = user.lium.reboot(pod)
    assert answer["id"] == pod.id and answer["status"] == "REBOOT_PENDING"
    assert answer["ssh_connect_cmd"] is None and answer["phase"]
    with pytest.raises(LiumError, match="cannot be rebooted"):
        user.lium.reboot(pod)
    rebooted = user.lium.wait_ready(pod, timeout=60)
    assert rebooted is not None and rebooted.status == "RUNNING" and rebooted.ssh_cmd != pod.ssh_cmd
    result = user.lium.exec(rebooted, command="cat /root/marker; test -e /tmp/scratch || echo fresh")
    assert result["stdout"].split() == [marker, "fresh"], "the local volume stays, the container is new"
    fresh_output = [b"hello-from-pid1", b"second-line"]  # the new container's, not the old one's too
    wait_until(
        lambda: list(user.lium.logs(pod.id)) == fresh_output, timeout=20, what="the new container's output"
    )
    assert _statuses(user, pod.id)[-3:] == ["RUNNING", "REBOOT_PENDING", "RUNNING"]


def test_switch_template_runs_the_new_template(user: SdkUser) -> None:
    pod = user.up(splittable_node(user.http, "RTX 5090")["id"])
    assert list(user.lium.logs(pod.id)) == []
    talking = user.template(TALKING_TEMPLATE)
    # The request Lium.switch_template sends; the SDK 0.32.0 method itself fails on any answer while
    # building its PodInfo (ExecutorInfo without ``ip``), so the route is driven directly.
    switched = user.http.put(f"/pods/{pod.id}/switch-template", json={"template_id": talking["id"]})
    assert switched.status_code == 200, switched.text
    assert switched.json()["status"] == "REBOOT_PENDING"
    assert switched.json()["template"]["id"] == talking["id"]
    ready = user.lium.wait_ready(pod, timeout=60)
    assert ready is not None and ready.template["id"] == talking["id"]
    wait_until(
        lambda: list(user.lium.logs(pod.id)) == [b"hello-from-pid1", b"second-line"],
        timeout=20,
        what="the new output",
    )
    assert "pod-switch-template.success" in {e["sub_event_type"] for e in user.lium.pod_events(pod.id)}
    unknown = user.http.put(f"/pods/{pod.id}/switch-template", json={"template_id": str(uuid.uuid4())})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "template_not_found"


def test_a_failed_reboot_is_billed_and_can_be_rebooted_again(user: SdkUser) -> None:
    pod = user.up(splittable_node(user.http, "RTX 5090")["id"])
    missing = user.template({**TALKING_TEMPLATE, "name": "missing-image", "docker_image": "nowhere/none:1"})
    switched = user.http.put(f"/pods/{pod.id}/switch-template", json={"template_id": missing["id"]})
    assert switched.status_code == 200, switched.text
    failed = wait_status(user.http, pod.id, "REBOOT_FAILED")
    assert failed["ssh_connect_cmd"] is None
    [event] = [e for e in user.lium.pod_events(pod.id) if e["sub_event_type"] == "pod-reboot.failed"]
    assert event["reason"] == "image_pull_failed" and "nowhere/none:1" in event["error"]
    balance = user.lium.balance()
    wait_until(lambda: user.lium.balance() < balance, timeout=20, what="REBOOT_FAILED to be billed")

    user.http.put(
        f"/pods/{pod.id}/switch-template", json={"template_id": user.template(TALKING_TEMPLATE)["id"]}
    )
    back = user.lium.wait_ready(pod, timeout=60)
    assert back is not None and back.status == "RUNNING"
    assert _statuses(user, pod.id)[-4:] == ["REBOOT_PENDING", "REBOOT_FAILED", "REBOOT_PENDING", "RUNNING"]


def _removal_events(user: SdkUser, pod_id: str) -> list[dict[str, Any]]:
    return [e for e in user.lium.pod_events(pod_id) if e.get("reason") == "scheduled_termination"]


def test_schedule_removal_set_cancel_and_fire(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 3090")
    pod = user.up(node["id"])
    later = datetime.now(UTC) + timedelta(hours=5)
    user.lium.schedule_termination(pod, termination_time=later.isoformat().replace("+00:00", "Z"))
    row = user.lium.pod(pod.id)
    assert datetime.fromisoformat(row["removal_scheduled_at"]) == later.replace(tzinfo=None)

    user.lium.cancel_scheduled_termination(pod)
    assert user.lium.pod(pod.id)["removal_scheduled_at"] is None
    with pytest.raises(LiumError, match="in the future"):
        user.lium.schedule_termination(pod, termination_time="2020-01-01T00:00:00Z")

    soon = datetime.now(UTC) + SOON  # a few seconds ahead, so the request arrives before it is due
    user.lium.schedule_termination(pod, termination_time=soon.isoformat())
    wait_gone(user.http, pod.id, timeout=20)
    deleting = [e for e in _removal_events(user, pod.id) if e["to_status"] == "DELETING"]
    assert len(deleting) == 1 and deleting[0]["actor"] is None
    removed_at = datetime.fromisoformat(deleting[0]["created_at"])
    assert removed_at >= soon.replace(tzinfo=None)


def test_cancelled_removal_does_not_fire(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 3090")
    pod = user.up(node["id"])
    soon = datetime.now(UTC) + SOON
    user.lium.schedule_termination(pod, termination_time=soon.isoformat())
    user.lium.cancel_scheduled_termination(pod)
    # A second pod's scheduled removal fires after the first one's would have: by then the first is
    # provably still there.
    witness = user.up(splittable_node(user.http, "RTX 3090")["id"])
    witness_due = max(soon, datetime.now(UTC)) + SOON
    user.lium.schedule_termination(witness, termination_time=witness_due.isoformat())
    wait_gone(user.http, witness.id, timeout=20)
    row = user.lium.pod(pod.id)
    assert row["status"] == "RUNNING" and row["removal_scheduled_at"] is None
    assert _removal_events(user, pod.id) == []


def test_termination_hours_schedule_the_removal_and_cancel_drops_them(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 5090")
    created = user.lium.up(
        executor_id=node["id"], name="ttl", ssh_keys=[user.public_key], gpu_count=1, termination_hours=2
    )
    assert isinstance(created, dict)
    pod = user.lium.wait_ready(created, timeout=60)
    assert pod is not None
    row = user.lium.pod(pod.id)
    created_at = datetime.fromisoformat(row["created_at"])
    scheduled = datetime.fromisoformat(row["removal_scheduled_at"])
    assert row["termination_hours"] == 2
    assert (
        created_at + timedelta(hours=2)
        <= scheduled
        <= datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2)
    )

    user.lium.cancel_scheduled_termination(pod)
    row = user.lium.pod(pod.id)
    assert row["removal_scheduled_at"] is None and row["termination_hours"] is None


@pytest.mark.sandbox  # starts an emulator of its own
def test_a_schedule_survives_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    args = (*FAST_TIMINGS, "--state-dir", str(tmp_path / "state"))
    with launch(args) as first, api_client(first, DEFAULT_KEY) as client:
        pod_id = rent_pod(
            client, splittable_node(client, "RTX 3090")["id"], rent_body(create_template(client)["id"])
        )
        wait_status(client, pod_id, "RUNNING")
        # far enough ahead that it falls due only after the restart below
        due = datetime.now(UTC) + timedelta(seconds=8)
        sdk = Lium(config=Config(api_key=DEFAULT_KEY, base_url=first.api_url))
        sdk.schedule_termination(pod_id, termination_time=due.isoformat())
        assert first.stop() == 0
    stopped = datetime.now(UTC).replace(tzinfo=None)
    with launch(args) as second, api_client(second, DEFAULT_KEY) as client:
        # Only the restarted emulator can remove the pod: the schedule was kept and re-armed.
        wait_gone(client, pod_id, timeout=30)
        events = client.get(f"/pods/{pod_id}/events").json()
    removal = [e for e in events if e["reason"] == "scheduled_termination" and e["to_status"] == "DELETING"]
    assert len(removal) == 1 and removal[0]["actor"] is None
    removed_at = datetime.fromisoformat(removal[0]["created_at"])
    assert removed_at >= stopped and removed_at >= due.replace(tzinfo=None)


def test_billing_statement_matches_the_balance(user: SdkUser) -> None:
    starting_balance = user.lium.balance()
    pod = user.up(splittable_node(user.http, "H200")["id"])
    assert user.lium.pod_feedback(pod, text="fast disk", rating=5)["success"] is True
    refused = user.http.post(f"/pods/{pod.id}/feedback", json={"rating": 9})  # the SDK checks it first
    assert refused.status_code == 422 and refused.json()["validation_errors"][0]["field"] == "body -> rating"
    user.lium.rm(pod)
    wait_gone(user.http, pod.id)

    statement = user.lium.billing_statement()
    [row] = statement["pods"]
    assert row["pod_id"] == pod.id and row["removed_at"] is not None and row["billed_seconds"] > 0
    assert row["total"] == pytest.approx(row["price"] * row["billed_seconds"] / 3600, abs=1e-6)
    assert statement["total"] == pytest.approx(starting_balance - user.lium.balance(), abs=1e-5)
    assert sum(day["amount"] for day in row["days"]) == pytest.approx(row["total"], abs=1e-5)
    future = (datetime.now(UTC).date() + timedelta(days=2)).isoformat()
    assert user.lium.billing_statement(start_day=future)["pods"] == []


def test_billed_days_split_at_utc_midnight() -> None:
    start = datetime(2026, 3, 1, 23, 0, 0)
    assert billed_days(start, start + timedelta(hours=26)) == [
        (date(2026, 3, 1), 3600.0),
        (date(2026, 3, 2), 86400.0),
        (date(2026, 3, 3), 3600.0),
    ]
    assert billed_days(start, start) == []


# --- the CLI ----------------------------------------------------------------------------------------


def test_cli_ls_up_ps_exec_logs_rm(user: SdkUser) -> None:
    listed = json.loads(user.cli("ls", "--gpu", "H100", "--format", "json"))
    assert listed and all("H100" in json.dumps(row) for row in listed)
    eight = json.loads(user.cli("ls", "--count", "8", "--format", "json"))
    rows = user.http.get("/executors").json()
    assert len(eight) == sum(1 for r in rows if r["gpu_count"] == 8)

    node = splittable_node(user.http, "L40S")
    user.cli("up", node["id"], "--count", "1", "--name", "cli-pod", "--yes", "--no-ssh")
    pods = json.loads(user.cli("ps", "--format", "json"))
    assert [p["name"] for p in pods] == ["cli-pod"]
    pod_id = user.http.get("/pods").json()[0]["id"]
    wait_until(lambda: user.lium.pod(pod_id)["ssh_connect_cmd"], timeout=20, what="SSH of the CLI's pod")

    assert user.cli("exec", "cli-pod", "echo cli-$((40 + 2))").strip().splitlines()[-1] == "cli-42"
    assert user.cli("logs", "cli-pod", "--tail", "5") == ""  # the default template's sleep prints nothing

    first_ssh = user.lium.pod(pod_id)["ssh_connect_cmd"]
    user.cli("reboot", "cli-pod")
    wait_until(
        lambda: user.lium.pod(pod_id)["ssh_connect_cmd"] not in (None, first_ssh),
        timeout=20,
        what="the rebooted pod",
    )
    assert user.cli("exec", "cli-pod", "echo back").strip().splitlines()[-1] == "back"

    before = datetime.now(UTC).replace(tzinfo=None)
    user.cli("rm", "cli-pod", "--in", "2h", "--yes")
    scheduled = datetime.fromisoformat(user.lium.pod(pod_id)["removal_scheduled_at"])
    assert (
        before + timedelta(hours=2)
        <= scheduled
        <= datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2)
    )
    assert "(1 total)" in user.cli("schedules", "list")
    user.cli("schedules", "rm", "1")
    assert user.lium.pod(pod_id)["removal_scheduled_at"] is None

    user.cli("rm", "cli-pod", "--yes")
    wait_gone(user.http, pod_id)
    history = json.loads(user.cli("billing", "history", "--format", "json"))
    assert [p["pod_id"] for p in history["pods"]] == [pod_id]


def test_cli_volumes_and_ssh_keys(user: SdkUser) -> None:
    user.cli("volumes", "new", "cli-data", "--desc", "from the CLI")
    [volume] = user.http.get("/volumes").json()
    assert volume["name"] == "cli-data" and volume["description"] == "from the CLI"
    assert "cli-data" in user.cli("volumes", "list")

    user.cli("ssh-keys", "sync")
    keys = user.http.get("/ssh-keys").json()
    assert [k["public_key"].split()[:2] for k in keys] == [user.public_key.split()[:2]]
    listed = user.cli("ssh-keys", "list")
    assert "(1 total)" in listed and keys[0]["name"] in listed


def test_cli_browses_templates_and_quotes_without_a_key(user: SdkUser) -> None:
    templates = json.loads(user.cli("templates", "--format", "json", api_key=""))
    public_ids = {t["id"] for t in user.http.get("/templates").json() if t["user_id"] is None}
    assert {t["id"] for t in templates} == public_ids
    node = splittable_node(user.http, "H200")
    quote = json.loads(
        user.cli("quote", node["id"], "--hours", "2", "--gpus", "1", "--format", "json", api_key="")
    )
    assert quote["price_per_hour"] == pytest.approx(node["price_per_gpu_hour"])
    assert quote["total_usd"] == pytest.approx(node["price_per_gpu_hour"] * 2)


def test_cli_cp_copies_pod_to_pod_over_the_advertised_address(user: SdkUser) -> None:
    node = splittable_node(user.http, "RTX 3090")
    source, destination = user.up(node["id"]), user.up(node["id"])
    payload = "pod-to-pod-" + uuid.uuid4().hex
    made = user.lium.exec(source, command=f"mkdir -p /root/out && echo {payload} > /root/out/data.txt")
    assert made["success"], made
    user.lium.exec(destination, command="true")  # pins the destination's host key, as `lium ssh` would
    user.cli("cp", f"{source.name}:/root/out/", f"{destination.name}:/root/in/")
    copied = user.lium.exec(destination, command="cat /root/in/data.txt")
    assert copied["stdout"].strip() == payload, copied
    # the transfer key was authorised for the copy only
    keys = user.lium.exec(destination, command="cat /root/.ssh/authorized_keys")
    assert "lium-cp-" not in keys["stdout"], keys
