"""``--state-dir``: accounts, templates, credentials, volumes and pods survive a restart; RUNNING pods come
back as fresh sandboxes, also after the emulator was killed (its leftover sandboxes are cleaned up)."""

import signal
from pathlib import Path

import pytest

from lium_emulator.launcher import launch
from tests.emulator.testkit import (
    DEFAULT_KEY,
    FAST_TIMINGS,
    SshKey,
    api_client,
    create_template,
    delete_and_wait,
    get_pod,
    rent_body,
    rent_pod,
    splittable_node,
    ssh_run,
    wait_ssh_ready,
)

pytestmark = pytest.mark.sandbox  # every test here starts pod sandboxes or an emulator


def test_state_survives_a_graceful_restart(tmp_path: Path, ssh_key: SshKey) -> None:
    args = [*FAST_TIMINGS, "--state-dir", str(tmp_path / "state")]
    with launch(args) as first, api_client(first, DEFAULT_KEY) as client:
        user_id = client.get("/users/me").json()["id"]
        template = create_template(client)
        credential = client.post(
            "/docker-credentials/", json={"docker_username": "u", "docker_password": "p"}
        ).json()
        volume = client.post("/volumes", json={"name": "kept"}).json()
        node = splittable_node(client, "RTX 3090")
        gone = rent_pod(client, node["id"], rent_body(template["id"]))
        delete_and_wait(client, gone)
        pod_id = rent_pod(
            client, node["id"], rent_body(template["id"], ssh_key.public, volume_id=volume["id"])
        )
        pod = wait_ssh_ready(client, pod_id)
        ssh_run(pod, ssh_key, "echo before > /mnt/mark")
        assert first.stop() == 0

    with launch(args) as second, api_client(second, DEFAULT_KEY) as client:
        assert client.get("/users/me").json()["id"] == user_id
        assert client.get(f"/templates/{template['id']}").json()["name"] == template["name"]
        assert [c["id"] for c in client.get("/docker-credentials/").json()] == [credential["id"]]
        assert client.get(f"/volumes/{volume['id']}").json()["attached_pod_id"] == pod_id
        assert get_pod(client, gone) is None
        pod = wait_ssh_ready(client, pod_id)
        assert ssh_run(pod, ssh_key, "cat /mnt/mark").strip() == "before"
        kinds = [e["sub_event_type"] for e in client.get(f"/pods/{pod_id}/events").json()]
        assert "pod-host-reboot-recovery.recovered" in kinds
        feed = client.get("/public/v1/nodes").json()["nodes"]
        assert (
            next(n for n in feed if n["id"] == node["id"])["available_gpu_count"]
            == node["available_gpu_count"] - 1
        )
        delete_and_wait(client, pod_id)
        assert second.stop() == 0


def test_a_killed_emulator_is_cleaned_up_on_restart(tmp_path: Path, ssh_key: SshKey) -> None:
    args = [*FAST_TIMINGS, "--state-dir", str(tmp_path / "state")]
    first = launch(args)
    try:
        with api_client(first, DEFAULT_KEY) as client:
            template = create_template(client)
            node = splittable_node(client, "RTX 4090")
            pod_id = rent_pod(client, node["id"], rent_body(template["id"], ssh_key.public))
            wait_ssh_ready(client, pod_id)
    finally:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()

    # Its watchdog, or else this start, reaps the killed emulator's sandbox (test_emulator_death.py).
    with launch(args) as second, api_client(second, DEFAULT_KEY) as client:
        pod = wait_ssh_ready(client, pod_id)
        assert ssh_run(pod, ssh_key, "echo recovered").strip() == "recovered"
        delete_and_wait(client, pod_id)
        assert second.stop() == 0
