"""Pod lifecycle with real sandboxes: image and credential failures, network volumes across rentals,
billing, and the fleet's capacity for 50 one-GPU pods."""

import concurrent.futures
from datetime import datetime
from typing import Any

import httpx
import pytest

from lium_emulator.catalogs.images import ImageConfig, image_catalog
from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import (
    SshKey,
    account_report,
    assert_error,
    create_template,
    delete_and_wait,
    feed,
    feed_node,
    rent,
    rent_body,
    rent_pod,
    splittable_node,
    ssh_run,
    wait_gone,
    wait_ssh_ready,
    wait_status,
    wait_until,
)


def _private_image() -> ImageConfig:
    return next(image for image in image_catalog() if image.private)


def _failure(client: httpx.Client, pod_id: str) -> dict[str, Any]:
    pod = wait_status(client, pod_id, "CREATION_FAILED")
    event: dict[str, Any] = pod["last_event"]
    assert (event["from_status"], event["to_status"]) == ("PENDING", "CREATION_FAILED")
    return event


def test_an_unknown_image_fails_creation_and_frees_the_gpu(account: httpx.Client) -> None:
    template = create_template(account, image="example.invalid/nothing:1.0")
    node = splittable_node(account, "A100-SXM4-80GB")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
    event = _failure(account, pod_id)
    assert event["reason"] == "image_pull_failed" and "example.invalid/nothing:1.0" in event["detail"]
    assert feed_node(account, node["id"])["available_gpu_count"] == node["available_gpu_count"]  # type: ignore[index]
    wait_gone(account, pod_id)
    kinds = [e["sub_event_type"] for e in account.get(f"/pods/{pod_id}/events").json()]
    assert "pod-create.failed" in kinds and kinds[-1] == "pod-lifecycle.status"


def test_a_private_image_needs_the_matching_credential(account: httpx.Client, ssh_key: SshKey) -> None:
    image = _private_image()
    node = splittable_node(account, "A100-SXM4-80GB")
    without = create_template(account, image=image.reference)
    wrong = account.post(
        "/docker-credentials/", json={"docker_username": "intruder", "docker_password": "guess"}
    ).json()
    with_wrong = create_template(account, image=image.reference, docker_credential_id=wrong["id"])
    right = account.post(
        "/docker-credentials/",
        json={"docker_username": image.registry_username, "docker_password": image.registry_password},
    ).json()
    with_right = create_template(account, image=image.reference, docker_credential_id=right["id"])

    failed = [rent_pod(account, node["id"], rent_body(t["id"])) for t in (without, with_wrong)]
    details = [_failure(account, pod_id)["detail"] for pod_id in failed]
    assert "no docker credential" in details[0] and "rejected" in details[1]
    assert all(image.registry_password not in d for d in details)

    pod_id = rent_pod(account, node["id"], rent_body(with_right["id"], ssh_key.public))
    pod = wait_ssh_ready(account, pod_id)
    assert ssh_run(pod, ssh_key, "echo private-ok").strip() == "private-ok"
    delete_and_wait(account, pod_id)
    # deleting the credential makes its templates unrentable
    assert account.delete(f"/docker-credentials/{right['id']}").status_code == 200
    assert_error(rent(account, node["id"], rent_body(with_right["id"])), 400, "template_invalid")
    for pod_id in failed:
        delete_and_wait(account, pod_id)


def test_a_volume_attaches_to_one_pod_and_keeps_its_data(account: httpx.Client, ssh_key: SshKey) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 4090")
    volume = account.post("/volumes", json={"name": "data"}).json()
    # user_public_key as a list, as Lium's SDK sends it (dstack sends one string)
    keys = [ssh_key.public, SshKey().public]
    first = rent_pod(
        account, node["id"], rent_body(template["id"], user_public_key=keys, volume_id=volume["id"])
    )
    pod = wait_ssh_ready(account, first)
    assert pod["volume"]["id"] == volume["id"] and pod["ssh_keys"] == keys
    ssh_run(pod, ssh_key, "echo persisted > /mnt/hello.txt")
    assert account.get(f"/volumes/{volume['id']}").json()["current_file_count"] == 1
    assert_error(
        rent(account, node["id"], rent_body(template["id"], volume_id=volume["id"])), 409, "volume_in_use"
    )
    assert_error(account.delete(f"/volumes/{volume['id']}"), 409, "volume_in_use")
    delete_and_wait(account, first)

    second = rent_pod(account, node["id"], rent_body(template["id"], ssh_key.public, volume_id=volume["id"]))
    pod = wait_ssh_ready(account, second)
    assert ssh_run(pod, ssh_key, "cat /mnt/hello.txt").strip() == "persisted"
    delete_and_wait(account, second)
    assert account.delete(f"/volumes/{volume['id']}").json() == {"success": True}
    assert account.get("/volumes").json() == []


def test_only_running_time_is_billed(emulator: RunningEmulator, account: httpx.Client) -> None:
    template = create_template(account)
    node = splittable_node(account, "H100 80GB HBM3")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
    wait_status(account, pod_id, "RUNNING")
    wait_until(lambda: account.get("/users/me").json()["balance"] < 1000, what="billing to start")
    delete_and_wait(account, pod_id)
    report = account_report(emulator, account)
    pod = report["pods"][0]
    assert pod["status"] == "DELETED"
    created, running, deleting = (
        datetime.fromisoformat(pod[k]) for k in ("created_at", "running_at", "deleting_at")
    )
    assert created < running < deleting
    # billed from RUNNING to the delete request: neither PENDING nor DELETING counts
    assert pod["billed_seconds"] == pytest.approx((deleting - running).total_seconds(), abs=1e-3)
    assert report["billed_pod_seconds"] == pod["billed_seconds"] > 0
    expected = 1000 - pod["price"] * pod["billed_seconds"] / 3600
    assert abs(report["balance_usd"] - expected) < 1e-4
    assert account.get("/users/me").json()["balance"] == report["balance_usd"], (
        "nothing billed after the delete"
    )


def test_fifty_one_gpu_pods_fit_the_fleet(emulator: RunningEmulator, account: httpx.Client) -> None:
    template = create_template(account)
    slots = [
        n["id"]
        for n in feed(account)
        if n["min_rentable_gpu_count"] == 1
        for _ in range(n["available_gpu_count"])
    ]
    assert len(slots) >= 50
    pod_ids = [rent_pod(account, node_id, rent_body(template["id"])) for node_id in slots[:50]]
    try:
        wait_until(
            lambda: sum(p["status"] == "RUNNING" for p in account.get("/pods").json()) == 50,
            timeout=60,
            what="50 pods RUNNING",
        )
        ports = [p["ports_mapping"]["22"] for p in account.get("/pods").json()]
        assert len(set(ports)) == 50, "every pod has its own SSH port"
    finally:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda pod_id: account.delete(f"/pods/{pod_id}"), pod_ids))
    wait_until(lambda: account.get("/pods").json() == [], timeout=60, what="all pods deleted")
    assert sum(n["available_gpu_count"] for n in feed(account) if n["min_rentable_gpu_count"] == 1) == len(
        slots
    )
