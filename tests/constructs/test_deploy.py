"""The examples deployed for real against one emulator: cdktf and cdktn CLI deploy/destroy, Python + Terraform.

After every test the emulator account must be empty: no pod, template, credential or volume left.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lium_emulator.catalogs.images import image_catalog
from lium_emulator.launcher import RunningEmulator
from tests.constructs.apps import CDK_VERSIONS, CdktfApp, state_resources, synth
from tests.support.forked_emulator import launch_forked
from tests.support.lium import FAST_TIMINGS, Account, assert_nothing_left, name_in_state, new_account, ssh_run
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    with launch_forked(FAST_TIMINGS) as running:
        yield running


@pytest.fixture
def account(emulator: RunningEmulator, tmp_path: Path) -> Account:
    return new_account(emulator, tmp_path / "account")


@pytest.fixture
def deploy_env(account: Account, terraform_env: dict[str, str]) -> dict[str, str]:
    return {**terraform_env, **account.env}


def terraform_outputs(tf: Terraform) -> dict[str, Any]:
    return {name: output["value"] for name, output in json.loads(tf.run("output", "-json").stdout).items()}


@pytest.mark.parametrize("cli", ["cdktf", "cdktn"])
def test_quickstart_deploys_and_destroys_with_the_cdk_cli(
    cli: str, account: Account, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    """The same app, deployed by the cdktf CLI (synthesizing with cdktf) or the cdktn CLI (on Node 22,
    synthesizing with cdktn): the same stack, reachable, destroyed to an empty account."""
    app = CdktfApp("quickstart", tmp_path / "app", deploy_env, cli=cli)
    outputs = app.deploy()["quickstart"]
    synthesized = json.loads(
        (tmp_path / "app" / "cdktf.out" / "stacks" / "quickstart" / "cdk.tf.json").read_text()
    )
    assert synthesized["//"]["metadata"]["version"] == CDK_VERSIONS[cli]
    (pod,) = state_resources(app.state_file, "lium_pod")
    (runner,) = state_resources(app.state_file, "lium_runner")
    assert [name_in_state(p["pod_name"]) for p in account.live()["pods"]] == ["quickstart-0"]
    assert outputs["ssh_commands"] == [
        f"ssh -o UserKnownHostsFile=known_hosts -p {pod['ssh_port']} root@{pod['ssh_host']}"
    ]
    assert (
        outputs["known_hosts"]
        == pod["known_hosts"]
        == f"[{pod['ssh_host']}]:{pod['ssh_port']} {pod['ssh_host_key']}"
    )
    assert outputs["runner_ports"] == [runner["runner_ssh_port"]]
    assert runner["healthy"] is True
    assert outputs["price_per_hour"] == [pod["price_per_hour"]]
    assert outputs["stack_price_per_hour"] == pod["price_per_hour"] > 0
    assert "hello from" in outputs["smoke_test_outputs"][0]
    # The printed SSH command reaches the pod, whose PID 1 is the stack's keep-alive entrypoint.
    assert ssh_run(account, pod, "tr '\\0' ' ' < /proc/1/cmdline").split() == ["sleep", "infinity"]

    app.destroy()
    assert_nothing_left(account)
    assert account.report()["billed_pod_seconds"] > 0


def test_fleet_of_three_deploys_and_is_destroyed_from_where_its_project_moved_with_the_cdktf_cli(
    account: Account, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    app = CdktfApp("fleet", tmp_path / "app", deploy_env)
    outputs = app.deploy()["fleet"]
    pods = sorted(state_resources(app.state_file, "lium_pod"), key=lambda p: p["name"])
    runners = state_resources(app.state_file, "lium_runner")
    assert [p["name"] for p in pods] == ["fleet-0", "fleet-1", "fleet-2"]
    assert len({p["id"] for p in pods}) == 3
    assert all(p["status"] == "RUNNING" for p in pods)
    assert sorted(r["pod_id"] for r in runners) == sorted(p["id"] for p in pods)
    assert all(r["healthy"] is True for r in runners)
    assert sorted(outputs["runner_ports"]) == sorted(r["runner_ssh_port"] for r in runners)
    assert outputs["stack_price_per_hour"] == pytest.approx(sum(outputs["price_per_hour"]))
    assert len(account.live()["templates"]) == 3, "one private template per pod"

    # The project moves after the deploy (a renamed or re-cloned checkout): it is the same stack, and its
    # destroy from the new place leaves nothing.
    shutil.move(app.workdir, tmp_path / "moved-app")
    moved = dataclasses.replace(app, workdir=tmp_path / "moved-app")
    moved.destroy()
    assert_nothing_left(account)


def test_volume_data_survives_into_the_next_rental(
    account: Account, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    def rental(number: int) -> tuple[Terraform, dict[str, Any]]:
        stack = synth("volume", tmp_path / "app", env={**account.env, "LIUM_VOLUME_RENTAL": str(number)})
        tf = Terraform(stack, deploy_env)
        tf.init()
        tf.apply()
        return tf, terraform_outputs(tf)

    tf, first = rental(1)
    state_file = tmp_path / "app" / "terraform.volume.tfstate"
    (pod,) = state_resources(state_file, "lium_pod")
    (volume,) = state_resources(state_file, "lium_volume")
    assert pod["volume_id"] == volume["id"]
    assert first["smoke_test_outputs"] == ["written in rental 1"]
    assert ssh_run(account, pod, "cat /mnt/proof.txt").strip() == "written in rental 1"

    tf, second = rental(2)  # rental 2's smoke test fails the apply unless the proof is on the volume
    (second_pod,) = state_resources(state_file, "lium_pod")
    assert second_pod["id"] != pod["id"] and second_pod["name"] == "volume-rental-2-0"
    assert state_resources(state_file, "lium_volume")[0]["id"] == volume["id"]
    assert second["smoke_test_outputs"] == ["written in rental 1"]
    assert ssh_run(account, second_pod, "cat /mnt/proof.txt").strip() == "written in rental 1"

    tf.destroy()
    assert_nothing_left(account)


def test_private_registry_with_cdk_terrain(
    account: Account, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    private = next(image for image in image_catalog() if image.private)
    password = private.registry_password or ""
    stack = synth("private-registry", tmp_path / "app", cdk="cdktn", env=account.env)
    tf = Terraform(stack, {**deploy_env, "TF_VAR_registry_password": password})
    tf.init()
    tf.apply()
    outputs = terraform_outputs(tf)
    state_file = tmp_path / "app" / "terraform.private-registry.tfstate"
    (pod,) = state_resources(state_file, "lium_pod")
    assert pod["status"] == "RUNNING"
    assert outputs["smoke_test_outputs"] == ["TRAINER_HOME=/workspace"]
    assert len(account.live()["docker_credentials"]) == 1
    for text in (state_file.read_text(), (stack / "cdk.tf.json").read_text()):
        assert password not in text

    tf.destroy()
    assert_nothing_left(account)


def test_private_registry_destroy_without_the_password_fails_at_once(
    account: Account, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    """The documented setting: with ``TF_INPUT=0`` and no ``TF_VAR_registry_password``, ``cdktf destroy``
    stops with Terraform's missing-variable error instead of waiting at a prompt for the password."""
    app = CdktfApp("private-registry", tmp_path / "app", {**deploy_env, "TF_INPUT": "0"})
    result = app.run("destroy", "--auto-approve", check=False, timeout=180)
    assert result.returncode != 0
    assert "No value for required variable" in result.stdout + result.stderr
    assert "registry_password" in result.stdout + result.stderr


def test_gpu_stack_of_two_nodes_runs_a_collective_through_its_runners(
    account: Account, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    """``GpuStack(nodes=2)``: one cluster, a runner per node with the rendezvous in its environment, and a
    smoke test that is an all-reduce across the nodes; ``cdktf destroy`` leaves an empty account."""
    app = CdktfApp("distributed", tmp_path / "app", deploy_env)
    outputs = app.deploy()["distributed"]
    (cluster,) = state_resources(app.state_file, "lium_cluster")
    runners = state_resources(app.state_file, "lium_runner")
    nodes = cluster["nodes"]
    assert sorted(r["pod_id"] for r in runners) == sorted(n["pod_id"] for n in nodes)
    assert all(r["healthy"] is True for r in runners)
    assert outputs["world_size"] == 2 and outputs["rendezvous_port"] == 29500
    assert outputs["rendezvous_address"] == nodes[0]["overlay_ip"] == "10.42.0.1"
    assert outputs["ssh_commands"] == [
        f"ssh -o UserKnownHostsFile=known_hosts -p {n['ssh_port']} root@{n['ssh_host']}" for n in nodes
    ]
    assert outputs["known_hosts"].splitlines() == [n["known_hosts"] for n in nodes]
    assert outputs["stack_price_per_hour"] == pytest.approx(cluster["price_per_hour"])
    for rank, printed in enumerate(outputs["smoke_test_outputs"]):
        assert f"all-reduce ok on rank {rank} of 2: tcp sum 5;" in printed, printed
    # Its run_command output, as printed, runs a job on both nodes with their ranks.
    ran = subprocess.run(
        f"{outputs['run_command']} 'echo rank=$NODE_RANK of $WORLD_SIZE'",
        shell=True,
        cwd=app.workdir,
        env={
            **os.environ,
            **deploy_env,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(ran.stdout.splitlines()) == ["[node 0] rank=0 of 2", "[node 1] rank=1 of 2"], ran.stdout

    app.destroy()
    assert_nothing_left(account)
