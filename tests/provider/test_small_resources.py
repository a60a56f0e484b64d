"""Templates, Docker credentials, volumes and account SSH keys: import, in-place update, out-of-band
delete, destroy."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

PASSWORD_VARIABLE = """
variable "password" {
  type      = string
  sensitive = true
  ephemeral = true
}
"""


def template(environment: str) -> str:
    return f"""
resource "lium_template" "r" {{
  name        = "small-template"
  image       = "python:3.11-slim"
  environment = {{ STAGE = "{environment}" }}
}}
"""


def credential(username: str) -> str:
    return (
        PASSWORD_VARIABLE
        + f"""
resource "lium_docker_credential" "r" {{
  username            = "{username}"
  password_wo         = var.password
  password_wo_version = 1
}}
"""
    )


def volume(description: str) -> str:
    return f"""
resource "lium_volume" "r" {{
  name        = "small-volume"
  description = "{description}"
}}
"""


def ssh_key(owner: str) -> str:
    return f"""
resource "lium_ssh_key" "r" {{
  name       = "small-key"
  public_key = "{public_key(owner)}"
}}
"""


def public_key(owner: str) -> str:
    """An OpenSSH public key line of a key derived from ``owner`` (the same key for the same owner)."""
    seed = hashlib.sha256(owner.encode()).digest()
    key = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode() + f" {owner}"


CASES: dict[str, tuple[Callable[[str], str], str, str, str]] = {
    # type: (config for a value, the API collection, first value, second value)
    "lium_template": (template, "templates", "one", "two"),
    "lium_docker_credential": (credential, "docker-credentials", "robot-one", "robot-two"),
    "lium_volume": (volume, "volumes", "first", "second"),
    "lium_ssh_key": (ssh_key, "ssh-keys", "alice", "bob"),
}


@pytest.mark.parametrize("type_name", list(CASES))
def test_lifecycle(stack: Callable[[str], Terraform], account: Account, type_name: str) -> None:
    config, collection, first, second = CASES[type_name]
    tf = stack(config(first))
    tf.env |= {"TF_VAR_password": "registry-secret-1", "LIUM_STACK": "lifecycle"}
    tf.apply()
    (created,) = instances(tf, type_name)
    assert tf.plan_exitcode()[0] == 0

    # In place: the id stays.
    tf.write(PROVIDER_BLOCK + config(second))
    code, plan = tf.plan_exitcode()
    assert code == 2 and "1 to change" in plan, plan
    tf.apply()
    (updated,) = instances(tf, type_name)
    assert updated["id"] == created["id"]

    # Import into a second working directory of the same stack (a lost state): the plan afterwards is empty.
    other = stack(config(second))
    other.env |= {"TF_VAR_password": "registry-secret-1", "LIUM_STACK": "lifecycle"}
    other.run("import", "-no-color", f"{type_name}.r", created["id"])
    (imported,) = instances(other, type_name)
    assert imported["id"] == created["id"]
    if (
        type_name != "lium_docker_credential"
    ):  # a credential's password cannot be read back: it plans a rotation
        assert other.plan_exitcode()[0] == 0
    other.run("state", "rm", f"{type_name}.r")

    # Deleted behind Terraform's back: the next apply creates it again.
    with account.api() as api:
        response = api.delete(f"/{collection}/{created['id']}")
        assert response.status_code in (200, 204), response.text
    code, plan = tf.plan_exitcode()
    assert code == 2 and "will be created" in plan
    tf.apply()
    (recreated,) = instances(tf, type_name)
    assert recreated["id"] != created["id"]
    tf.destroy()
    assert_nothing_left(account)
