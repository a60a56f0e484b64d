"""Hostile pods and users cannot exhaust the emulator's open files or memory through its relays and
its API: many pods holding every connection they may open to the emulator, pods sending bodies they
never finish, templates of thousands of ports leave it serving the host and starting pods
(docs/emulator.md, "Pod networking")."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx
import paramiko
import pytest

from lium_emulator.api.edge import MAX_BODY_BYTES, POD_BODY_BYTES
from lium_emulator.catalogs.images import CLUSTER_IMAGE_REPOSITORY
from lium_emulator.launcher import RunningEmulator, launch
from lium_emulator.sandbox.portforward import MAX_CONNECTIONS_PER_POD, pods_connection_budget
from tests.emulator.testkit import (
    FAST_TIMINGS,
    SshKey,
    assert_error,
    create_template,
    dstack_template,
    new_account,
    rent_body,
    rent_pod,
    splittable_node,
    ssh_target,
    wait_ssh_ready,
    wait_status,
)
from tests.support import http

pytestmark = pytest.mark.sandbox  # every test here starts an emulator with pods

# The emulator's open-files limit in these tests: low enough that a few pods holding their whole
# share of connections (three descriptors each: the pod's end, the host's end, the server's) would
# use up every one.
OPEN_FILES = 2048
CONSOLE_SCRIPT = Path(sys.executable).with_name("lium-emulator")
FLOODERS = 5
# Inside a pod: COUNT connections to the emulator at 127.0.0.1:PORT, each with a request it never
# finishes (so the server keeps it); prints how many the relay kept open, then holds them
# until its standard input closes.
FLOOD = """
import json, select, socket, sys, time
held = []
deadline = time.monotonic() + 60
for _ in range(COUNT):
    if time.monotonic() > deadline:
        break
    try:
        sock = socket.create_connection(("127.0.0.1", PORT), timeout=2)
        sock.sendall(b"GET /api/version HTTP/1.1\\r\\nHost: x\\r\\n")
        held.append(sock)
    except OSError:
        pass
# The relay takes connections in order: once a last one is answered (or refused), it has decided on
# every earlier one, and those it refused are closed. The server never answers an unfinished request,
# so a held connection that is readable was closed.
with socket.create_connection(("127.0.0.1", PORT), timeout=30) as last:
    last.sendall(b"GET /_emulator/health HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
    try:
        while last.recv(65536):
            pass
    except OSError:
        pass
closed, _, _ = select.select(held, [], [], 0)
print(json.dumps(len(held) - len(closed)), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def low_open_files_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Emulators launched in the test start with OPEN_FILES as their hard open-files limit (``launch``
    runs ``sys.executable``; this process cannot lower its own hard limit and raise it back)."""
    wrapper = tmp_path / "python-low-nofile"
    wrapper.write_text(f'#!/bin/sh\nexec prlimit --nofile={OPEN_FILES}:{OPEN_FILES} {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(wrapper))


def root_shell(pod: dict[str, object], key: SshKey) -> paramiko.SSHClient:
    host, port = ssh_target(pod)
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(host, port=port, username="root", pkey=key.pkey, allow_agent=False, look_for_keys=False)
    return client


def open_files(emulator: RunningEmulator) -> int:
    return len(os.listdir(f"/proc/{emulator.process.pid}/fd"))


@pytest.mark.usefixtures("low_open_files_limit")
def test_pods_holding_every_connection_they_may_open_leave_the_emulator_serving() -> None:
    key = SshKey()
    emulator = launch(FAST_TIMINGS)
    try:
        with ExitStack() as floods:
            port = httpx.URL(emulator.root_url).port
            _, client = new_account(emulator)
            floods.enter_context(client)
            template = create_template(client)
            node = splittable_node(client, "RTX 4090")
            code = FLOOD.replace("COUNT", str(MAX_CONNECTIONS_PER_POD - 6)).replace("PORT", str(port))

            def rent_and_flood() -> tuple[dict[str, object], int]:
                row = wait_ssh_ready(
                    client, rent_pod(client, node["id"], rent_body(template["id"], key.public))
                )
                shell = floods.enter_context(root_shell(row, key))
                channel = shell.get_transport().open_session(timeout=30)  # type: ignore[union-attr]
                floods.callback(channel.close)
                channel.exec_command(f"python3 -c {shlex.quote(code)}")
                with channel.makefile("r") as output:
                    return row, int(json.loads(output.readline()))

            # Pods flood one after another, each while it is the newest: the first ones hold far more
            # than what is left of their part once the later ones start.
            flooded = [rent_and_flood() for _ in range(FLOODERS)]
            held = [count for _, count in flooded]
            # The emulator still serves the host, and lets the host into the flooding pods.
            assert open_files(emulator) < OPEN_FILES // 2
            with http.client(base_url=emulator.root_url, timeout=10) as host:
                assert host.get("/_emulator/health").json()["status"] == "ok"
            with root_shell(flooded[0][0], key) as shell:
                _, stdout, _ = shell.exec_command("echo served", timeout=30)
                assert stdout.read() == b"served\n"
            # A pod started after all of them still opens its fair part, and is served.
            late, late_held = rent_and_flood()
            with root_shell(late, key) as shell:
                _, stdout, _ = shell.exec_command("echo served", timeout=30)
                assert stdout.read() == b"served\n"
            # Each pod got at least its fair part of what pods may open together as it flooded.
            budget = pods_connection_budget(OPEN_FILES)
            assert all(count >= budget // (index + 1) for index, count in enumerate(held)), held
            assert late_held >= budget // (FLOODERS + 1), (held, late_held)
            assert sum(held) > budget  # the pods did take more than the budget before the late one came
            assert open_files(emulator) < OPEN_FILES // 2
    finally:
        assert emulator.stop() == 0


def test_a_pod_publishing_more_ports_than_the_emulator_can_hold_fails_alone(
    tmp_path: Path, low_open_files_limit: None
) -> None:
    # A catalog whose nodes offer nearly as many ports as the emulator has open files: the API lets a
    # template of that many ports through, the emulator must not.
    generated = subprocess.run(
        [CONSOLE_SCRIPT, "catalog", "--count", "1", "--gpus-per-node", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    catalog = json.loads(generated.stdout)
    for entry in catalog["nodes"]:
        entry["port_count"] = OPEN_FILES
    nodes_file = tmp_path / "nodes.json"
    nodes_file.write_text(json.dumps(catalog))
    key = SshKey()
    emulator = launch([*FAST_TIMINGS, "--nodes", str(nodes_file)])
    try:
        _, client = new_account(emulator)
        with client:
            node = catalog["nodes"][0]["id"]
            many = create_template(client, internal_ports=list(range(20000, 20000 + OPEN_FILES - 200)))
            greedy = rent_pod(client, node, rent_body(many["id"], key.public))
            failure = wait_status(client, greedy, "CREATION_FAILED")["last_event"]
            assert failure["reason"] == "sandbox_error", failure
            assert "open-files limit" in failure["detail"], failure
            # Nothing of it is left, and the next pod starts and serves.
            template = create_template(client)
            row = wait_ssh_ready(client, rent_pod(client, node, rent_body(template["id"], key.public)))
            with root_shell(row, key) as shell:
                _, stdout, _ = shell.exec_command("echo served", timeout=30)
                assert stdout.read() == b"served\n"
            assert open_files(emulator) < OPEN_FILES // 8
    finally:
        assert emulator.stop() == 0


def free_ports(client: httpx.Client, node_id: str) -> int:
    (row,) = [r for r in client.get("/executors").json() if r["id"] == node_id]
    count: int = row["specs"]["available_port_count"]
    return count


def publishing(count: int) -> list[int]:
    """Internal ports of a template whose pods publish ``count`` ports (22 and these)."""
    return [22, *range(20000, 20000 + count - 1)]


def test_a_template_needs_a_free_port_of_its_node_for_every_port(
    emulator: RunningEmulator, make_account: Callable[..., httpx.Client]
) -> None:
    client = make_account()
    node = splittable_node(client, "RTX 4090")["id"]
    free = free_ports(client, node)
    small = create_template(client, internal_ports=publishing(2))
    # A pod may take every free port of its node, and then the node has none for another.
    holder = rent_pod(client, node, rent_body(create_template(client, internal_ports=publishing(free))["id"]))
    assert free_ports(client, node) == 0
    assert_error(
        client.post(f"/executors/{node}/rent", json=rent_body(small["id"])), 400, "node_ports_unavailable"
    )
    # A template switch gets back the ports the pod holds, and no more.
    wait_status(client, holder, "RUNNING")
    wider = create_template(client, internal_ports=publishing(free + 1))
    switched = client.put(f"/pods/{holder}/switch-template", json={"template_id": wider["id"]})
    assert_error(switched, 400, "node_ports_unavailable")
    assert client.put(f"/pods/{holder}/switch-template", json={"template_id": small["id"]}).status_code == 200
    # Each member of a cluster needs the ports on its own node.
    (offer, *_) = client.get("/executors/infiniband-clusters").json()
    members = [row["id"] for row in offer["nodes"][:2]]
    most = max(free_ports(client, member) for member in members)
    wide = create_template(client, image=CLUSTER_IMAGE_REPOSITORY, internal_ports=publishing(most + 1))
    cluster = client.post(
        "/executors/cluster/rent",
        json={"pod_name": "wide", "template_id": wide["id"], "executor_uuids": members},
    )
    assert_error(cluster, 400, "node_ports_unavailable")
    assert not [pod for pod in client.get("/pods").json() if pod["cluster_id"]]


# Inside a pod: COUNT requests to the emulator, each declaring a body just under the limit and sending
# SENT bytes of it, never the rest; prints how many the emulator answered (refused) once at least
# REFUSED are, or at the deadline, then holds the others until its standard input closes.
HOLD_BODIES = """
import json, select, socket, sys, time
held = []
for _ in range(COUNT):
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    sock.sendall(b"POST /api/templates HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: LENGTH\\r\\n\\r\\n")
    try:
        sock.sendall(b"a" * SENT)
    except OSError:
        pass  # refused (and closed) before it was all sent
    held.append(sock)
deadline = time.monotonic() + 30
while True:
    answered, _, _ = select.select(held, [], [], 0.1)
    if len(answered) >= REFUSED or time.monotonic() > deadline:
        break
print(json.dumps(len(answered)), flush=True)
sys.stdin.read()
"""


def test_bodies_pods_never_finish_hold_a_bounded_share_of_the_emulators_memory(
    emulator: RunningEmulator, make_account: Callable[..., httpx.Client]
) -> None:
    key = SshKey()
    client = make_account()
    template = create_template(client)
    node = splittable_node(client, "RTX 4090")["id"]
    row = wait_ssh_ready(client, rent_pod(client, node, rent_body(template["id"], key.public)))
    sent, count = 3 * 1024 * 1024, 40
    refused = count - POD_BODY_BYTES // sent  # only as many as fit in the pods' share are held
    code = (
        HOLD_BODIES.replace("COUNT", str(count))
        .replace("PORT", str(httpx.URL(emulator.root_url).port))
        .replace("LENGTH", str(MAX_BODY_BYTES))
        .replace("SENT", str(sent))
        .replace("REFUSED", str(refused))
    )
    with root_shell(row, key) as shell:
        channel = shell.get_transport().open_session(timeout=30)  # type: ignore[union-attr]
        channel.exec_command(f"python3 -c {shlex.quote(code)}")
        with channel.makefile("r") as output:
            answered = json.loads(output.readline())
        assert answered >= refused, answered
        # Meanwhile the host's requests are not held to the pods' share.
        environment = {"BLOB": "x" * (1024 * 1024)}
        created = client.post("/templates", json=dstack_template("while-held", environment=environment))
        assert created.status_code == 200, created.text[:200]
        channel.close()
