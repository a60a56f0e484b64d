"""Notebook servers (docs/lium-api.md#notebooks) through Lium's own CLI and SDK: ``lium up --jupyter``
and ``lium update --jupyter`` install one, the pod row carries its URL, the URL answers as a notebook
server's API root does behind its token, a wrong port is refused, a port already taken in the pod
fails with Lium's ``jupyter_error``, and a new container has no notebook."""

import json

import httpx

from lium_emulator.services.notebooks import NOTEBOOK_VERSION
from tests.emulator.sdk_user import SdkUser
from tests.emulator.testkit import splittable_node, wait_until

# 8888 first after 22: `lium up --jupyter` installs on the first internal port other than 22.
NOTEBOOK_TEMPLATE = {
    "name": "notebook",
    "docker_image": "python:3.11-slim",
    "docker_image_tag": "",
    "entrypoint": "/bin/sh",
    "startup_commands": "-c 'exec sleep infinity'",
    "internal_ports": [22, 8888, 9000],
    "volumes": ["/root"],
}


def row(user: SdkUser, pod_id: str) -> dict[str, object]:
    found: dict[str, object] = user.http.get(f"/pods/{pod_id}").json()
    return found


def test_up_and_update_install_a_notebook_whose_url_answers_behind_its_token(user: SdkUser) -> None:
    template = user.template(NOTEBOOK_TEMPLATE)
    node = splittable_node(user.http, "L40S")
    said = user.cli(
        "up", node["id"], "--count", "1", "--name", "nb", "-t", template["id"], "--jupyter", "--yes", "--no-ssh",
        timeout=180,
    )  # fmt: skip
    assert "NOT installed" not in said, said
    (pod,) = user.http.get("/pods").json()
    first = row(user, pod["id"])
    assert first["jupyter_installation_status"] == "SUCCESS", first
    url = str(first["jupyter_url"])
    base, token = url.split("/?token=")
    assert base == f"http://127.0.0.1:{pod['ports_mapping']['8888']}" and len(token) >= 32
    assert httpx.get(f"{base}/api", params={"token": token}, timeout=10).json() == {
        "version": NOTEBOOK_VERSION
    }
    assert (
        httpx.get(f"{base}/api", headers={"Authorization": f"token {token}"}, timeout=10).status_code == 200
    )
    assert httpx.get(f"{base}/api", timeout=10).status_code == 403, "no token, no notebook"
    assert httpx.get(f"{base}/api", params={"token": "x" * len(token)}, timeout=10).status_code == 403

    # Another port of the pod, through `lium update`; the same port again fails: it is taken in the pod.
    updated = user.cli("update", "nb", "--jupyter", "9000", timeout=180)
    second = row(user, pod["id"])
    assert second["jupyter_installation_status"] == "SUCCESS" and str(second["jupyter_url"]) in updated
    assert f":{pod['ports_mapping']['9000']}/" in str(second["jupyter_url"])
    (info,) = [p for p in user.lium.ps() if p.id == pod["id"]]
    user.lium.install_jupyter(info, jupyter_internal_port=9000)
    failed = wait_until(
        lambda: (r := row(user, pod["id"]))["jupyter_installation_status"] == "FAILED" and r,
        timeout=30,
        what="the install on a taken port to fail",
    )
    assert "in use" in str(failed["jupyter_error"]) and failed["jupyter_url"] is None

    # A new container has no notebook.
    user.http.post(f"/pods/{pod['id']}/reboot", json={})
    assert row(user, pod["id"])["jupyter_installation_status"] is None


def test_a_wrong_port_is_refused_and_a_pod_row_change_meanwhile_keeps_the_install(user: SdkUser) -> None:
    template = user.template({**NOTEBOOK_TEMPLATE, "name": "nb-refused"})
    pod = user.up(splittable_node(user.http, "L40S")["id"], template["id"])
    for port in (22, 7777):  # the pod's sshd, a port it does not publish
        refused = user.http.post(f"/pods/{pod.id}/install-jupyter", json={"jupyter_internal_port": port})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_jupyter_port" and "8888" in error["message"], json.dumps(error)
    assert row(user, pod.id)["jupyter_installation_status"] is None

    # The row changes for another reason while the server starts: the install still ends, and says so.
    assert user.lium.install_jupyter(pod, jupyter_internal_port=8888)["success"] is True
    removal = user.http.post(
        f"/pods/{pod.id}/schedule-removal", json={"removal_scheduled_at": "2099-01-01T00:00:00Z"}
    )
    assert removal.status_code == 200, removal.text
    done = wait_until(
        lambda: (r := row(user, pod.id))["jupyter_installation_status"] != "IN_PROGRESS" and r,
        timeout=30,
        what="the install to end",
    )
    assert done["jupyter_installation_status"] == "SUCCESS", done
