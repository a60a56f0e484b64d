"""``lium_cluster`` through real Terraform against the emulator: a two-node cluster whose members reach
each other on the overlay, destroy, a create killed with its ``terraform``, import, and the offers data
source."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lium_emulator.catalogs.nodes import Catalog
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances, ssh_run
from tests.support.procs import kill_provider_and_server, providers_in, wait_for
from tests.support.terraform import Terraform, interrupt, kill_group, reaped

pytestmark = pytest.mark.terraform

CLUSTER = """
resource "lium_cluster" "c" {
  name       = "%s"
  node_count = 2
%s}
"""
# The last member's sshd answers long after the rent: the create is still waiting when terraform dies.
LATE_SSH = {
    "seed": 3,
    "rules": [
        {"method": "POST", "path": "/executors/cluster/rent", "kind": "ssh_late", "seconds": 6, "first": 1}
    ],
}
OFFERS = """
data "lium_cluster_offers" "all" {}
output "fabrics" { value = data.lium_cluster_offers.all.offers[*].fabric_id }
output "free" { value = [for o in data.lium_cluster_offers.all.offers : length(o.free_nodes)] }
"""
WAIT_SECONDS = 60.0
CATALOG = Catalog.load(None)
BANNER_PROBE = (
    "python3 -c \"import socket; s = socket.create_connection(('%s', 22), timeout=10); "
    'print(s.recv(64).decode().strip())"'
)


def live_members(account: Account) -> list[dict[str, Any]]:
    return [p for p in account.live()["pods"] if p.get("cluster_id")]


def member_as_pod(node: dict[str, Any]) -> dict[str, Any]:
    """A member in the shape :func:`ssh_run` takes (a pod's state)."""
    return {key: node[key] for key in ("ssh_host", "ssh_port", "ssh_host_key")}


def test_a_two_node_cluster_applies_its_members_meet_on_the_overlay_and_destroy_leaves_nothing(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % ("train", 'gpu = "H100"\n'))
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    assert cluster["status"] == "RUNNING" and cluster["price_per_hour"] > 0
    assert cluster["fabric_id"] == "ib-sjc-h100-01", "the only fabric of H100 nodes"
    node0, node1 = cluster["nodes"]
    assert [node0["node_index"], node1["node_index"]] == [0, 1]
    assert [node0["overlay_ip"], node1["overlay_ip"]] == ["10.42.0.1", "10.42.0.2"]
    assert all(n["ssh_host_key"].startswith("ssh-") for n in (node0, node1))
    banner = ssh_run(account, member_as_pod(node0), BANNER_PROBE % node1["overlay_ip"])
    assert banner.startswith("SSH-2.0-"), banner
    code, plan = tf.plan_exitcode()
    assert code == 0, plan
    # in place: the removal moves on every member; a filter field replaces the whole cluster
    tf.write(PROVIDER_BLOCK + CLUSTER % ("train", 'gpu = "H100"\n  termination_hours = 5\n'))
    code, plan = tf.plan_exitcode()
    assert code == 2 and "1 to change, 0 to destroy" in plan, plan
    tf.apply()
    (moved,) = instances(tf, "lium_cluster")
    assert moved["id"] == cluster["id"] and moved["removal_scheduled_at"] is not None
    with account.api() as api:
        removals = {api.get(f"/pods/{n['pod_id']}").json()["removal_scheduled_at"] for n in cluster["nodes"]}
    assert len(removals) == 1 and None not in removals, removals
    tf.write(PROVIDER_BLOCK + CLUSTER % ("train", 'gpu = "H100"\n  termination_hours = 5\n  spot = true\n'))
    code, plan = tf.plan_exitcode()
    assert code == 2 and "# forces replacement" in plan and "spot" in plan, plan
    tf.write(PROVIDER_BLOCK + CLUSTER % ("train", 'gpu = "H100"\n  termination_hours = 5\n'))
    # two of the H100 fabric's three nodes are rented: it no longer offers a cluster
    offers = stack(OFFERS)
    offers.apply()
    outputs = offers.show_json()["values"]["outputs"]
    assert outputs["fabrics"]["value"] == ["roce-iad-a100-01"]
    assert outputs["free"]["value"] == [2]
    tf.destroy()
    assert_nothing_left(account)


def test_a_cluster_no_fabric_can_take_now_is_refused_at_plan_naming_what_was_searched_for(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % ("nowhere", '  gpu = "H100"\n  spot = true\n'))
    failed = tf.run("plan", "-input=false", "-no-color", check=False)
    assert failed.returncode == 1, failed.stdout
    said = " ".join(failed.stderr.replace("│", " ").split())  # Terraform wraps the detail
    assert "No Lium fabric has enough free nodes for the cluster" in said
    assert 'with gpu = "H100", spot = true.' in said, "the error says what was searched for"
    assert "Fabrics on offer:" in said
    assert_nothing_left(account)


def test_a_node_count_no_fabric_has_fails_the_plan_of_its_replacement(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    """Raising a running cluster's ``node_count`` beyond every fabric replaces it: the plan fails, even
    counting the nodes the running cluster would free, instead of destroying it before the apply fails."""
    tf = stack(CLUSTER % ("grow", ""))
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    tf.write(PROVIDER_BLOCK + (CLUSTER % ("grow", "")).replace("node_count = 2", "node_count = 4"))
    failed = tf.run("plan", "-input=false", "-no-color", check=False)
    assert failed.returncode == 1, failed.stdout
    assert "No Lium fabric has enough free nodes for the cluster" in failed.stderr
    running = sorted(p["id"] for p in account.live()["pods"] if p["status"] == "RUNNING")
    assert running == sorted(n["pod_id"] for n in cluster["nodes"]), "the refused plan touched the cluster"
    tf.write(PROVIDER_BLOCK + CLUSTER % ("grow", ""))
    tf.destroy()
    assert_nothing_left(account)


def test_import_by_cluster_id_then_plan_shows_no_change(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    def one_stack() -> Terraform:  # two checkouts of one stack: its identity is set, not derived
        tf = make_terraform(PROVIDER_BLOCK + CLUSTER % ("imported", ""), **account.env, LIUM_STACK="clusters")
        tf.init()
        return tf

    tf = one_stack()
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    other = one_stack()
    other.run("import", "-no-color", "lium_cluster.c", cluster["id"])
    (imported,) = instances(other, "lium_cluster")
    assert [n["pod_id"] for n in imported["nodes"]] == [n["pod_id"] for n in cluster["nodes"]]
    assert imported["template_id"] == cluster["template_id"] and imported["lium_name"] == cluster["lium_name"]
    assert imported["name"] == "imported" and imported["node_count"] == 2
    code, plan = other.plan_exitcode()
    assert code == 0, plan
    other.run("state", "rm", "lium_cluster.c")
    tf.destroy()
    assert_nothing_left(account)


def test_terraform_killed_during_create_then_destroy_leaves_nothing(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % ("killed", ""))
    with account.faults(LATE_SSH), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(
            lambda: len(live_members(account)) == 2, "both members are rented", WAIT_SECONDS, process=process
        )
        os.kill(process.pid, signal.SIGKILL)  # a CI timeout: the provider sees its peer go
        process.wait(timeout=WAIT_SECONDS)
    assert process.returncode != 0
    # the orphaned provider removes the cluster Terraform can no longer record, before it exits
    wait_for(lambda: live_members(account) == [], "the killed run removes its cluster", WAIT_SECONDS)
    wait_for(lambda: providers_in(tf.workdir) == [], "the killed run's provider exits", WAIT_SECONDS)
    tf.destroy()
    assert_nothing_left(account)


def test_a_fresh_runner_adopts_the_cluster_a_killed_machine_rented(
    make_terraform: Callable[..., Terraform], account: Account, tmp_path: Path
) -> None:
    body = PROVIDER_BLOCK + CLUSTER % ("adopted", "")

    def runner(name: str, zygote: str) -> Terraform:  # a new CI runner: its own checkout, HOME and journal
        home = tmp_path / name
        home.mkdir()
        env = {
            **account.env,
            "HOME": str(home),
            "LIUM_STATE_DIR": str(home / "state"),
            "LIUM_STACK": "fleet",
            "TFBRIDGE_ZYGOTE": zygote,
        }
        tf = make_terraform(body, **env)
        tf.init()
        return tf

    first = runner("runner-1", "0")  # the whole machine dies: server and launcher are found and killed
    with account.faults(LATE_SSH), reaped(first.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(
            lambda: len(live_members(account)) == 2, "both members are rented", WAIT_SECONDS, process=process
        )
        kill_provider_and_server(process.pid)  # nothing is left to undo the rental
        kill_group(process)
        process.wait(timeout=WAIT_SECONDS)
    rented = {p["id"] for p in live_members(account)}
    assert len(rented) == 2
    # The fresh runner's providers start warm (the default): adopting does not depend on how they start,
    # and a cold start repeats the provider's imports (~0.8 s of CPU) for each of its processes.
    second = runner("runner-2", "1")
    second.apply()
    (cluster,) = instances(second, "lium_cluster")
    assert {n["pod_id"] for n in cluster["nodes"]} == rented, "the fresh runner rented a second cluster"
    assert second.plan_exitcode()[0] == 0
    second.destroy()
    assert_nothing_left(account)


def test_plan_summary_prices_a_new_cluster_as_whole_nodes(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % ("priced", '  gpu = "A100"\n  termination_hours = 3\n'))
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    (tf.workdir / "plan.json").write_text(tf.run("show", "-json", "plan.bin").stdout)
    summary = [sys.executable, "-m", "lium_provider.cli", "plan-summary", str(tf.workdir / "plan.json")]
    env = {"PATH": "/usr/bin:/bin", "LIUM_API_URL": tf.env["LIUM_API_URL"]}
    done = subprocess.run(
        [*summary, "--format", "json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (cluster,) = json.loads(done.stdout)["stacks"][0]["pods"]
    # members are alike whole nodes: two of the 8-GPU A100 nodes (the RoCE fabric's among them)
    a100 = [n for n in CATALOG.nodes.values() if n.gpu_model.startswith("A100") and n.gpu_count == 8]
    whole_a100 = sorted(n.price_per_gpu_hour * n.gpu_count for n in a100)
    fabric = [n.price_per_gpu_hour * n.gpu_count for n in a100 if n.fabric_id == "roce-iad-a100-01"]
    assert cluster["price_estimate"] is True and cluster["gpu_count"] == "2 x any"
    assert cluster["price_per_hour_after"] == pytest.approx(sum(whole_a100[:2]))
    assert cluster["worst_case_price_per_hour"] == pytest.approx(sum(whole_a100[-2:]))
    assert cluster["worst_case_price_per_hour"] >= sum(fabric)
    bounded = subprocess.run(
        [*summary, "--max-hourly-total", "1"], capture_output=True, text=True, env=env, timeout=120
    )
    assert bounded.returncode == 3, bounded.stdout + bounded.stderr
    assert_nothing_left(account)


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "drop_after_commit", "first": 1},  # rented, answer lost: found by its members' name
        {"kind": "status", "status": 503, "first": 1},  # not executed: the same key rents it once
        {"kind": "status", "status": 502, "after_commit": True, "first": 1},  # rented, then an error
        # another renter took a chosen node: the offers are read again and other free nodes rented
        {"kind": "node_unavailable", "first": 1},
    ],
    ids=["dropped-answer", "refused-503", "error-after-commit", "node-taken"],
)
def test_an_uncertain_or_refused_rental_ends_with_exactly_one_cluster(
    stack: Callable[[str], Terraform], account: Account, rule: dict[str, Any]
) -> None:
    tf = stack(CLUSTER % ("uncertain", ""))
    plan = {"rules": [{"method": "POST", "path": "/executors/cluster/rent", **rule}]}
    with account.faults(plan):
        tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    assert cluster["status"] == "RUNNING"
    clusters = {p.get("cluster_id") for p in account.report()["pods"] if p.get("cluster_id")}
    assert clusters == {cluster["id"]}, "a second cluster was rented"
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)


def test_ctrl_c_during_create_keeps_the_cluster_tracked_and_destroy_removes_it(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % ("interrupted", ""))
    with account.faults(LATE_SSH), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(
            lambda: len(live_members(account)) == 2, "both members are rented", WAIT_SECONDS, process=process
        )
        interrupt(process)
        process.wait(timeout=WAIT_SECONDS)
    assert process.returncode != 0
    (tracked,) = instances(tf, "lium_cluster")  # recorded (tainted) though the wait was cut short
    assert {n["pod_id"] for n in tracked["nodes"]} == {p["id"] for p in live_members(account)}
    tf.destroy()
    assert_nothing_left(account)


def test_the_plan_summary_prices_a_cluster_at_what_its_apply_bills(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    """Priced from Lium's fabrics as ``lium_cluster`` places it (the key the PR job has), the summary's
    estimate of the clusters guide's unfiltered two-node cluster is what the apply then bills; without a
    key it says the fabrics were not read."""
    tf = stack(CLUSTER % ("priced", ""))
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    (tf.workdir / "plan.json").write_text(tf.run("show", "-json", "plan.bin").stdout)

    def summarized(env: dict[str, str]) -> dict[str, Any]:
        result = subprocess.run(
            [sys.executable, "-m", "lium_provider.cli", "plan-summary", "--format", "json", "plan.json"],
            cwd=tf.workdir,
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        (pod,) = json.loads(result.stdout)["stacks"][0]["pods"]
        return dict(pod)

    priced = summarized({"LIUM_API_URL": account.env["LIUM_API_URL"], "LIUM_API_KEY": account.api_key})
    assert "what create rents now, fabric" in priced["price_basis_markdown"], priced
    unread = summarized({"LIUM_API_URL": account.env["LIUM_API_URL"]})
    assert "Lium's fabrics not read" in unread["price_basis_markdown"], unread
    tf.run("apply", "-input=false", "-no-color", "plan.bin")
    (cluster,) = instances(tf, "lium_cluster")
    assert priced["price_per_hour_after"] == pytest.approx(cluster["price_per_hour"])
    tf.destroy()
    assert_nothing_left(account)
