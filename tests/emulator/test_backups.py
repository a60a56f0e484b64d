"""Pod backups (docs/lium-api.md#backups) through Lium's own CLI and SDK: a schedule set with ``lium bk
set``, a backup now and a scheduled one (the emulator's schedule clock moved on, no sleeping), their logs,
a restore into a running pod and into a new pod at its rent, ``lium bk rm``; a pod's hostile files
(a link to the host's secrets, a file over the store's cap) leave the host's files and disk alone."""

import json
import secrets
from collections.abc import Iterator

import httpx
import pytest
from lium.sdk import PodInfo

from lium_emulator.launcher import RunningEmulator
from tests.emulator.sdk_user import SdkUser
from tests.emulator.testkit import FAST_TIMINGS, api_client, rent_body, splittable_node, wait_until
from tests.support.forked_emulator import launch_forked

MAX_MIB = 1  # the store's cap of one backup in this module's emulator
TEMPLATE = {
    "name": "checkpoints",
    "docker_image": "python:3.11-slim",
    "docker_image_tag": "",
    "entrypoint": "/bin/sh",
    "startup_commands": "-c 'exec sleep infinity'",
    "internal_ports": [22],
    "volumes": ["/root"],
}


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    running = launch_forked((*FAST_TIMINGS, "--backup-max-mib", str(MAX_MIB)))
    try:
        yield running
    finally:
        assert running.stop() == 0


def run_due(emulator: RunningEmulator, after_hours: float) -> dict[str, object]:
    """The backups the schedules start ``after_hours`` of their hours from now, once finished."""
    answer = httpx.post(
        f"{emulator.root_url}/_emulator/backups/run-due",
        params={"after_hours": after_hours},
        headers=emulator.admin_headers,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    ran: dict[str, object] = answer.json()
    return ran


def pod_of(user: SdkUser, template_id: str, **rent: object) -> PodInfo:
    return user.up(splittable_node(user.http, "L40S")["id"], template_id, **rent)


def finished(user: SdkUser, pod: PodInfo, count: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = wait_until(
        lambda: (
            (r := user.http.get(f"/backup-logs/pod/{pod.id}").json()["items"])
            and len(r) == count
            and all(x["status"] in ("COMPLETED", "FAILED") for x in r)
            and r
        ),
        timeout=60,
        what=f"{count} finished backups",
    )
    return rows


def restored(user: SdkUser, pod: PodInfo) -> dict[str, object]:
    row: dict[str, object] = wait_until(
        lambda: (
            (r := user.http.get(f"/pods/{pod.id}/restore-logs").json()["items"])
            and r[0]["status"] in ("COMPLETED", "FAILED")
            and r[0]
        ),
        timeout=60,
        what="the restore to finish",
    )
    return row


def test_a_scheduled_backup_restores_into_a_new_pod_and_goes_with_its_schedule(
    user: SdkUser, emulator: RunningEmulator
) -> None:
    template = user.template(TEMPLATE)
    pod = pod_of(user, template["id"])
    shown = user.cli("bk", "show", pod.id)
    assert "/root" in shown, "a pod rented with enable_backups (the SDK's default) is backed up by default"
    weights = secrets.token_hex(8)
    user.cli("exec", pod.id, f"mkdir -p /root/ckpt && echo {weights} > /root/ckpt/model.txt")
    user.cli("bk", "set", pod.id, "--path", "/root/ckpt", "--every", "2h", "--keep", "1d", "--yes")
    config = user.http.get(f"/backup-configs/pod/{pod.id}").json()
    assert (config["backup_path"], config["backup_frequency_hours"], config["retention_days"]) == (
        "/root/ckpt",
        2,
        1,
    )

    user.cli("bk", "now", pod.id, "--name", "by-hand")
    assert run_due(emulator, 1)["started"] == [], "not due within one of its two hours"
    scheduled = run_due(emulator, 2)
    assert len(scheduled["started"]) == 1 and set(scheduled["statuses"].values()) == {"COMPLETED"}  # type: ignore[union-attr,attr-defined]
    backups = finished(user, pod, 2)
    assert {b["status"] for b in backups} == {"COMPLETED"} and all(b["total_bytes"] for b in backups)
    logs = user.cli("bk", "logs", pod.id)
    assert str(backups[0]["id"])[:8] in logs and "COMPLETED" in logs

    # Into a running pod, and into a new pod at its rent.
    latest = str(backups[0]["id"])
    user.cli("bk", "restore", pod.id, "--id", latest, "--to", "/root/again", "--yes")
    assert restored(user, pod)["status"] == "COMPLETED"
    assert user.cli("exec", pod.id, "cat /root/again/model.txt").strip().splitlines()[-1] == weights
    fresh = pod_of(
        user, template["id"], backup_id=latest, restore_path="/root/restored", enable_backups=False
    )
    assert restored(user, fresh)["status"] == "COMPLETED"
    assert "COMPLETED" in user.cli("bk", "restore-logs", fresh.id)
    assert user.cli("exec", fresh.id, "cat /root/restored/model.txt").strip().splitlines()[-1] == weights
    assert user.http.get(f"/backup-configs/pod/{fresh.id}").status_code == 404, "enable_backups false: none"

    # A restore only into a new or empty directory.
    user.http.post(f"/pods/{fresh.id}/restore", json={"backup_id": latest, "restore_path": "/root/restored"})
    assert restored(user, fresh)["status"] == "FAILED"

    # Expired copies are deleted; `bk rm` deletes the schedule with the rest.
    run_due(emulator, 24 * 2)
    kept = user.http.get(f"/backup-logs/{latest}").json()
    assert kept["deletion_state"] == "deleted", "older than its retention"
    user.cli("bk", "rm", pod.id, "--yes")
    assert user.http.get(f"/backup-configs/pod/{pod.id}").status_code == 404
    refused = user.http.post(
        f"/pods/{fresh.id}/restore", json={"backup_id": latest, "restore_path": "/root/x"}
    )
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "backup_not_found"


def test_a_pods_links_and_oversized_files_stay_in_the_pod(user: SdkUser, emulator: RunningEmulator) -> None:
    template = user.template({**TEMPLATE, "name": "hostile"})
    pod = pod_of(user, template["id"], enable_backups=False)
    user.cli(
        "exec", pod.id,
        "mkdir -p /root/evil && ln -s /etc/shadow /root/evil/shadow && ln -s / /root/evil/root && echo small > /root/evil/ok",
    )  # fmt: skip
    user.lium.backup_create(pod, path="/root/evil", frequency_hours=6, retention_days=1)
    user.lium.backup_now(pod, name="links")
    (linked,) = finished(user, pod, 1)
    assert linked["status"] == "COMPLETED" and int(str(linked["total_bytes"])) < 64 * 1024, "links, not files"
    user.lium.restore(pod, backup_id=str(linked["id"]), restore_path="/root/copy")
    assert restored(user, pod)["status"] == "COMPLETED"
    said = user.cli("exec", pod.id, "readlink /root/copy/shadow /root/copy/root; cat /root/copy/ok").split()
    assert said[-3:] == ["/etc/shadow", "/", "small"], "the links came back as links, inside the pod"

    user.cli("exec", pod.id, f"head -c {2 * MAX_MIB * 1024 * 1024} /dev/urandom > /root/evil/big")
    user.lium.backup_now(pod, name="too-big")
    too_big = next(r for r in finished(user, pod, 2) if r["name"] == "too-big")
    assert too_big["status"] == "FAILED" and "larger than" in str(too_big["error_message"])
    user.cli("exec", pod.id, "rm /root/evil/big")
    user.lium.backup_now(pod, name="after")
    after = next(r for r in finished(user, pod, 3) if r["name"] == "after")
    assert after["status"] == "COMPLETED", "the refused copy took none of the workspace's room"
    # A pod's own `tar` that never ends holds only its own copy: one at a time per pod, and a cancel ends it.
    user.cli(
        "exec",
        pod.id,
        "printf '#!/bin/sh\\nexec sleep 1000\\n' > /usr/local/bin/tar && chmod +x /usr/local/bin/tar",
    )
    hung = user.http.post(f"/pods/{pod.id}/backup", json={"name": "hung"}).json()["backup_log_id"]
    second = user.http.post(f"/pods/{pod.id}/backup", json={"name": "second"})
    assert second.status_code == 409 and second.json()["error"]["code"] == "backup_in_progress", second.text
    assert user.http.post(f"/backup-logs/{hung}/cancel").status_code == 200
    user.cli("exec", pod.id, "rm /usr/local/bin/tar")
    freed = wait_until(
        lambda: (
            (r := user.http.post(f"/pods/{pod.id}/backup", json={"name": "freed"})).status_code == 200 and r
        ),
        timeout=30,
        what="the cancelled copy to end",
    )
    assert freed.json()["status"] in ("PENDING", "IN_PROGRESS", "COMPLETED")

    # A key that sees only its own pods restores no backup of a pod it cannot see.
    me = user.http.get("/users/me").json()
    token = httpx.post(
        f"{emulator.root_url}/_emulator/accounts/{me['id']}/session-token",
        headers=emulator.admin_headers,
        timeout=30,
    ).json()["token"]
    own = httpx.post(
        f"{emulator.api_url}/keys",
        json={"name": "own", "scopes": ["read", "rent", "manage"], "pod_visibility": "own"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ).json()["key"]
    with api_client(emulator, own) as mine:
        body = rent_body(
            template["id"], user.public_key, backup_log_id=linked["id"], restore_path="/root/stolen"
        )
        refused = mine.post(f"/executors/{splittable_node(mine, 'L40S')['id']}/rent", json=body)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "backup_not_found", (
            refused.text
        )

    config = user.lium.backup_config(pod)
    assert config is not None
    user.lium.backup_delete(config.id)
    gone = user.http.get(f"/backup-logs/{linked['id']}").json()
    assert gone["deletion_state"] == "deleted", "the copies go with their schedule"
    assert json.loads(user.cli("ps", "--format", "json")), "the pod itself is untouched"
