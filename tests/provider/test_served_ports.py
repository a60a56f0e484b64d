"""What a pod serves: ``wait_for_ports`` holds the apply until the service answers inside the pod, and a
cluster's nodes publish their ports as a pod does.

Through real terraform and the emulator: a server that starts seconds after the container answers once
the apply returns; a port nothing ever listens on fails the apply naming it and the container's last
lines, with the pod kept (tainted); a served port on a cluster node answers at its ``ports`` address,
and a key in the cluster's ``authorized_keys`` logs in to every node.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import http
from tests.support.lium import Account, assert_nothing_left, instances, ssh_keypair, ssh_run
from tests.support.terraform import Terraform, flat

pytestmark = pytest.mark.terraform

# The container says it started, then serves HTTP on 8000 five seconds later.
LATE_SERVER = (
    "-c 'echo starting the model server; (sleep 5; exec python3 -m http.server 8000) & exec sleep infinity'"
)
TEMPLATE = f"""
resource "lium_template" "t" {{
  name             = "served"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "{LATE_SERVER}"
  internal_ports   = [22, 10022, 8000]
}}
"""
POD = """
resource "lium_pod" "p" {
  name           = "served"
  template_id    = lium_template.t.id
  wait_for_ports = [%s]
  %s
}
"""
ANSWERS_NOW = (
    "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8000), timeout=1); print('answers')\""
)


def test_the_apply_waits_until_the_served_port_answers_inside_the_pod(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE + POD % ("8000", ""))
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    # Right after the apply (the server starts 5 s after the container): it answers, so the apply waited.
    assert ssh_run(account, pod, ANSWERS_NOW).strip() == "answers"
    assert pod["wait_for_ports"] == [8000]
    tf.destroy()
    assert_nothing_left(account)


def test_a_port_that_never_answers_fails_naming_it_and_keeps_the_pod_tainted(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE + POD % ("8001", 'timeouts {\n    create = "15s"\n  }'))
    failed = tf.apply(check=False)
    said = flat(failed.stdout + failed.stderr)
    assert failed.returncode == 1
    assert "Port 8001 of pod" in said and "never answered" in said, said
    assert "starting the model server" in said, "the container's last lines are shown"
    state = tf.state_file()
    (pod,) = [r for r in state["resources"] if r["type"] == "lium_pod"]
    assert pod["instances"][0]["status"] == "tainted", json.dumps(pod)[:500]
    tf.destroy()
    assert_nothing_left(account)


CLUSTER = """
resource "lium_template" "c" {
  name             = "served-cluster"
  image            = "daturaai/lium-cluster:1.2.0"
  entrypoint       = "/bin/sh"
  startup_commands = "-c '(exec python3 -m http.server 8000) & exec sleep infinity'"
  internal_ports   = [22, 10022, 8000]
}
resource "lium_cluster" "c" {
  name            = "served"
  node_count      = 2
  template_id     = lium_template.c.id
  wait_for_ports  = [8000]
  authorized_keys = ["%s"]
}
"""


def test_a_cluster_node_serves_its_port_at_its_ports_address_and_lets_a_teammate_in(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    teammate = ssh_keypair(tmp_path / "teammate")
    tf = stack(CLUSTER % Path(f"{teammate}.pub").read_text().strip())
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    for node in cluster["nodes"]:
        external = node["ports"]["8000"]
        response = http.get(f"http://{node['ssh_host']}:{external}/", timeout=10)
        assert response.status_code == 200, node
        assert ssh_run(account, node, "id -u", key_file=teammate).strip() == "0", node
    tf.destroy()
    assert_nothing_left(account)


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "serving.md"


def test_the_serving_guides_snippets_apply_together_and_let_a_teammate_in(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    """The guide's HCL blocks pasted one after another, as its text says, with a teammate's key given
    for its variable: the server answers at its URL when the apply returns, and the teammate logs in."""
    snippets = [block.split("```")[0] for block in GUIDE.read_text().split("```hcl\n")[1:]]
    teammate = ssh_keypair(tmp_path / "teammate")
    tf = stack("\n".join(snippets))
    tf.env["TF_VAR_team_keys"] = json.dumps({"ci": Path(f"{teammate}.pub").read_text().strip()})
    tf.apply()
    outputs = json.loads(tf.run("output", "-json").stdout)
    assert http.get(outputs["server_url"]["value"], timeout=10).status_code == 200
    (pod,) = instances(tf, "lium_pod")
    assert ssh_run(account, pod, "id -u", key_file=teammate).strip() == "0"
    assert outputs["server_known_hosts"]["value"] == pod["known_hosts"]
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)
