"""``lium_api_key`` through real terraform and the emulator: a platform stack mints a budgeted key with a
browser session, a pipeline's stack runs with it and meets its budget, the budget changes in place, the
secret stays out of plan output and logs (or, with ``pgp_key``, out of the state), and destroy revokes it.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.emulator.testkit import wait_until
from tests.support import http
from tests.support.faults import fault_counters
from tests.support.keys import key_stack, session_token
from tests.support.lium import (
    PROVIDER_BLOCK,
    Account,
    assert_nothing_left,
    instances,
    pod_block,
    sleeping_template,
)
from tests.support.procs import kill_machine, wait_for
from tests.support.terraform import Terraform, flat, reaped

pytestmark = pytest.mark.terraform

KEY = """
variable "max_budget" {
  type = number
}
variable "pgp_key" {
  type    = string
  default = null
}
resource "lium_api_key" "ci" {
  name           = "pipeline-ci"
  scopes         = ["read", "rent", "manage"]
  pod_visibility = "own"
  max_budget_usd = var.max_budget
  pgp_key        = var.pgp_key
}
output "secret" {
  value     = lium_api_key.ci.secret
  sensitive = true
}
"""


def platform_stack(make_terraform: Callable[..., Terraform], account: Account) -> Terraform:
    """A stack with the account's session token: the platform team's, which mints keys."""
    tf = make_terraform(PROVIDER_BLOCK + KEY, **account.env, LIUM_SESSION_TOKEN=session_token(account))
    tf.init()
    return tf


def key_row(account: Account, tf: Terraform, key_id: str) -> httpx.Response:
    return http.get(
        f"{account.emulator.api_url}/keys/{key_id}",
        headers={"Authorization": f"Bearer {tf.env['LIUM_SESSION_TOKEN']}"},
        timeout=30,
    )


def test_a_platform_stack_mints_a_budgeted_key_a_pipeline_runs_with(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    platform = platform_stack(make_terraform, account)
    platform.env["TF_VAR_max_budget"] = "1"
    platform.env["TF_LOG_PROVIDER"] = "trace"
    applied = platform.apply()
    (key,) = instances(platform, "lium_api_key")
    secret = key["secret"]
    assert (
        secret and key["encrypted_secret"] is None and key["lium_name"].startswith("pipeline-ci.lium-stacks-")
    )
    assert (key["scopes"], key["pod_visibility"], key["max_budget_usd"]) == (
        ["read", "rent", "manage"],
        "own",
        1.0,
    )
    assert secret not in applied.stdout + applied.stderr, "the secret is in no plan output or log"
    row = key_row(account, platform, key["id"]).json()
    assert row["max_budget_usd"] == 1 and "key" not in row

    # The pipeline's stack, run with the minted key, meets the key's budget at the rent.
    pipeline = key_stack(
        make_terraform,
        dataclasses.replace(account, api_key=secret),
        sleeping_template("pipeline") + pod_block("pipeline", 'gpu = "H100"\n  gpu_count = 8'),
    )
    failed = pipeline.apply(check=False)
    assert failed.returncode != 0 and "API_KEY_BUDGET_EXCEEDED" in flat(failed.stderr)
    assert not account.live()["pods"], "nothing was rented"
    pipeline.destroy()

    platform.env["TF_VAR_max_budget"] = "2"
    code, plan = platform.plan_exitcode()
    assert code == 2 and "updated in-place" in plan and "replace" not in plan and secret not in plan
    platform.apply()
    assert key_row(account, platform, key["id"]).json()["max_budget_usd"] == 2
    assert instances(platform, "lium_api_key")[0]["secret"] == secret, "the secret survives an update"

    platform.destroy()
    assert key_row(account, platform, key["id"]).status_code == 404, "destroy revokes the key"
    with http.client(base_url=account.emulator.api_url, headers={"X-API-KEY": secret}, timeout=30) as api:
        assert api.get("/users/me").status_code == 401, "a revoked key works no more"
    assert_nothing_left(account)


@contextlib.contextmanager
def gpg_agent_stopped(home: Path) -> Iterator[None]:
    """The gpg-agent that gpg starts for the keyring in ``home`` is stopped when the block ends."""
    try:
        yield
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)


def test_with_a_pgp_key_only_the_encrypted_secret_is_in_state(
    make_terraform: Callable[..., Terraform], account: Account, tmp_path: Path
) -> None:
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    with gpg_agent_stopped(home):
        gpg = [
            "gpg",
            "--homedir",
            str(home),
            "--batch",
            "--quiet",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ]
        subprocess.run(
            [*gpg, "--quick-gen-key", "ops@example.test", "default", "default", "never"], check=True
        )
        exported = subprocess.run(
            [*gpg, "--export", "ops@example.test"], check=True, capture_output=True
        ).stdout

        platform = platform_stack(make_terraform, account)
        platform.env.update({"TF_VAR_max_budget": "5", "TF_VAR_pgp_key": base64.b64encode(exported).decode()})
        platform.apply()
        (key,) = instances(platform, "lium_api_key")
        assert key["secret"] is None and key["encrypted_secret"]
        secret = subprocess.run(
            [*gpg, "--decrypt"],
            input=base64.b64decode(key["encrypted_secret"]),
            check=True,
            capture_output=True,
        ).stdout.decode()
        state_text = (platform.workdir / "terraform.tfstate").read_text()
        assert secret not in state_text, "the state holds no readable secret"
        with http.client(base_url=account.emulator.api_url, headers={"X-API-KEY": secret}, timeout=30) as api:
            assert api.get("/users/me").json()["api_key_id"] == key["id"], "the decrypted secret is the key"

        platform.destroy()
        assert key_row(account, platform, key["id"]).status_code == 404


def test_a_destroy_without_a_session_token_fails_and_keeps_the_key(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    platform = platform_stack(make_terraform, account)
    platform.env["TF_VAR_max_budget"] = "3"
    platform.apply()
    (key,) = instances(platform, "lium_api_key")
    token = platform.env.pop("LIUM_SESSION_TOKEN")
    failed = platform.destroy(check=False)
    assert failed.returncode != 0 and "LIUM_SESSION_TOKEN" in flat(failed.stderr)
    assert [k["id"] for k in instances(platform, "lium_api_key")] == [key["id"]], "the state keeps the key"
    platform.env["LIUM_SESSION_TOKEN"] = token
    assert key_row(account, platform, key["id"]).status_code == 200, "the key still exists"
    platform.destroy()
    assert key_row(account, platform, key["id"]).status_code == 404


def test_a_key_a_killed_create_minted_is_revoked_never_adopted(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    platform = platform_stack(make_terraform, account)
    platform.env["TF_VAR_max_budget"] = "4"
    held = {"name": "held", "method": "POST", "path": "/keys", "kind": "latency", "seconds": 2.0, "first": 1}
    with (
        account.faults({"rules": [held]}),
        reaped(platform.start("apply", "-auto-approve", "-no-color")) as process,
    ):
        wait_for(
            lambda: fault_counters(account.emulator)["held"]["matched"] == 1,
            "the key's mint reaches Lium",
            60.0,
            process=process,
        )
        kill_machine(process, platform.workdir)  # Lium mints the key; nobody keeps its secret

    def minted() -> list[dict[str, Any]]:
        rows = http.get(
            f"{account.emulator.api_url}/keys",
            headers={"Authorization": f"Bearer {platform.env['LIUM_SESSION_TOKEN']}"},
            timeout=30,
        ).json()
        return [r for r in rows if r["name"].startswith("pipeline-ci.")]

    wait_until(minted, timeout=30, what="the held mint to commit")
    (lost,) = minted()
    # The state is empty, so a destroy would call no provider: the sweep lists the lost key by its tag.
    tag = lost["name"].rsplit("lium-stacks-", 1)[1]
    sweep = subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "sweep", "--stack", tag],
        env={**platform.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert [k["id"] for k in json.loads(sweep.stdout)["api_keys"]] == [lost["id"]], sweep.stdout
    applied = platform.apply()
    assert f"Revoked API key {lost['id']}" in flat(applied.stdout), applied.stdout
    (key,) = instances(platform, "lium_api_key")
    assert key["id"] != lost["id"] and [r["id"] for r in minted()] == [key["id"]], "never adopted, revoked"
    platform.destroy()
    assert minted() == []


NAMED_KEYS = """
variable "names" {
  type = list(string)
}
variable "scopes" {
  type    = list(string)
  default = ["rent", "read"]
}
variable "workspace" {
  type    = string
  default = null
}
resource "lium_api_key" "k" {
  count     = length(var.names)
  name      = var.names[count.index]
  scopes    = var.scopes
  workspace = var.workspace
}
"""


def test_a_keys_name_scopes_and_workspace_are_checked_at_plan_and_a_kept_key_is_never_revoked(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    token = session_token(account)
    platform = make_terraform(PROVIDER_BLOCK + NAMED_KEYS, **account.env, LIUM_SESSION_TOKEN=token)
    platform.init()

    def refused(variables: dict[str, str], said: str) -> None:
        before = [k["id"] for k in keys()]
        platform.env.update(variables)
        result = platform.run("plan", "-input=false", "-no-color", check=False)
        assert result.returncode == 1 and said in flat(result.stderr), result.stderr
        assert [k["id"] for k in keys()] == before, "a refused plan mints or revokes nothing"

    def keys() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = http.get(
            f"{account.emulator.api_url}/keys", headers={"Authorization": f"Bearer {token}"}, timeout=30
        ).json()
        return rows

    refused(
        {"TF_VAR_names": '["ci"]', "TF_VAR_scopes": '["read", "read"]'}, "scopes names read more than once"
    )
    refused(
        {"TF_VAR_scopes": '["rent", "read"]', "TF_VAR_workspace": "nowhere"}, "No single workspace 'nowhere'"
    )
    platform.env.pop("TF_VAR_workspace")

    platform.apply()
    (kept,) = instances(platform, "lium_api_key")
    assert kept["scopes"] == ["rent", "read"], "the configuration's order is kept"
    assert platform.plan_exitcode()[0] == 0, "no change after apply"

    # A second instance of the same name would find the first key by it and revoke it: refused at plan.
    refused({"TF_VAR_names": '["ci", "ci"]'}, "would share")

    # The same workspace by its id, in upper case: the key stays, nothing is minted.
    (personal,) = [
        w
        for w in http.get(
            f"{account.emulator.api_url}/workspaces", headers={"Authorization": f"Bearer {token}"}, timeout=30
        ).json()
        if w["is_personal"]
    ]
    platform.env.update({"TF_VAR_names": '["ci"]', "TF_VAR_workspace": personal["id"].upper()})
    code, plan = platform.plan_exitcode()
    assert code == 2 and "updated in-place" in plan and "replace" not in plan, plan

    platform.env["LIUM_SESSION_TOKEN"] = "expired-session-token"
    failed = platform.destroy(check=False)
    assert failed.returncode != 0 and "LIUM_SESSION_TOKEN" in flat(failed.stderr), failed.stderr
    assert "check the API key" not in flat(failed.stderr), "a session's refusal names the session"
    assert "Lium rejected the browser session" in flat(failed.stderr), failed.stderr
    platform.env["LIUM_SESSION_TOKEN"] = token
    platform.destroy()
    assert not [k for k in keys() if k["name"].startswith("ci.")], "destroy revokes the key"


TEAM_KEY = """
variable "workspace" {
  type = string
}
variable "budget" {
  type = number
}
resource "lium_api_key" "k" {
  name           = "research"
  workspace      = var.workspace
  max_budget_usd = var.budget
}
"""


def test_a_key_of_a_team_workspace_is_read_changed_and_revoked_in_it(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    token = session_token(account)
    session = {"Authorization": f"Bearer {token}"}
    team = http.post(
        f"{account.emulator.api_url}/workspaces", json={"name": "Research"}, headers=session, timeout=30
    )
    assert team.status_code == 200, team.text
    in_team = {**session, "X-Lium-Workspace-Id": team.json()["id"]}
    platform = make_terraform(PROVIDER_BLOCK + TEAM_KEY, **account.env, LIUM_SESSION_TOKEN=token)
    platform.env.update({"TF_VAR_workspace": "research", "TF_VAR_budget": "5"})
    platform.init()
    platform.apply()
    (key,) = instances(platform, "lium_api_key")
    assert key["workspace_id"] == team.json()["id"]
    assert platform.plan_exitcode()[0] == 0, "the key is read in its workspace, not taken for revoked"

    platform.env["TF_VAR_budget"] = "7"
    platform.apply()
    row = http.get(f"{account.emulator.api_url}/keys/{key['id']}", headers=in_team, timeout=30)
    assert row.status_code == 200 and row.json()["max_budget_usd"] == 7, row.text
    assert [k["id"] for k in instances(platform, "lium_api_key")] == [key["id"]], "changed in place"

    platform.destroy()
    gone = http.get(f"{account.emulator.api_url}/keys/{key['id']}", headers=in_team, timeout=30)
    assert gone.status_code == 404, "destroy revoked it in its workspace"
