"""Lium's own guardrails for teams, through real terraform and the emulator: a key's budget, a key that
sees only its own pods, a rotated key, and the workspace a key acts in.

Keys are minted as Lium's dashboard does, with a browser session (the emulator's admin route hands one
out) and ``POST /keys``. What is checked is what a team meets: a rent over a key's budget fails at once,
naming the budget, with nothing rented and nothing resent; two stacks on two ``own`` keys of one account
each see and touch only their own pods, from a fresh runner too; a stack run with a rotated key fails
clearly instead of re-renting its pods or forgetting them while they bill; a key of another workspace is
refused before anything is read.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import wait_until
from tests.support import http
from tests.support.catalogs import PRICEY_NODE, packaged_catalog, with_pricey_node, write_catalog
from tests.support.faults import fault_counters
from tests.support.forked_emulator import launch_forked
from tests.support.keys import RENTING_SCOPES, key_stack, mint_key, session_token
from tests.support.lium import (
    FAST_TIMINGS,
    Account,
    assert_nothing_left,
    instances,
    pod_block,
    sleeping_template,
)
from tests.support.procs import kill_machine, wait_for
from tests.support.terraform import Terraform, flat, reaped

pytestmark = pytest.mark.terraform


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEmulator]:
    """The module's emulator: the packaged catalog plus a node billed $1 a second, on which a key's budget
    runs out within seconds, checked by a quick billing tick."""
    catalog = write_catalog(tmp_path_factory.mktemp("catalog"), with_pricey_node(packaged_catalog()))
    with launch_forked([*FAST_TIMINGS, "--nodes", str(catalog), "--budget-tick-seconds", "0.2"]) as running:
        yield running


def with_env(tf: Terraform, **env: str) -> Terraform:
    """The same working directory run with ``env`` added."""
    return dataclasses.replace(tf, env={**tf.env, **env})


def listed_pod_ids(account: Account) -> set[str]:
    with account.api() as api:
        response = api.get("/pods")
        assert response.status_code == 200, response.text
        return {p["id"] for p in response.json()}


def live_pod_ids(account: Account) -> set[str]:
    return {p["id"] for p in account.live()["pods"]}


def test_a_rent_over_the_keys_budget_fails_naming_it_and_rents_nothing(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    capped, key_id = mint_key(account, "capped", max_budget_usd=1.0)
    body = sleeping_template("budget") + pod_block("budget", 'gpu = "H100"\n  gpu_count = 8')
    tf = key_stack(make_terraform, capped, body)

    failed = tf.apply(check=False)
    assert failed.returncode != 0, "an 8xH100 rent cannot fit a $1 budget"
    said = flat(failed.stderr)
    for part in ("lifetime (max) budget", "budget $1.00", "spent $0.00", "API_KEY_BUDGET_EXCEEDED"):
        assert part in said, said
    assert not account.live()["pods"], "nothing was rented"
    assert not instances(tf, "lium_pod"), "the state records no pod"
    with capped.api() as api:
        response = api.get(f"/keys/{key_id}/refusals")
    assert response.status_code == 200, response.text
    refusals = response.json()["refusals"]
    assert len(refusals) == 1, f"the refused rent was sent once, never resent: {refusals}"
    assert refusals[0]["window"] == "max"

    tf.destroy()
    assert_nothing_left(account)


def test_two_own_keys_each_see_and_touch_only_their_stacks_pods(
    make_terraform: Callable[..., Terraform], account: Account, tmp_path: Path
) -> None:
    alice, alice_id = mint_key(account, "ci-alice", pod_visibility="own")
    bob, bob_id = mint_key(account, "ci-bob", pod_visibility="own")
    body = sleeping_template("keys") + pod_block("keys")
    first = key_stack(make_terraform, alice, body)
    second = key_stack(make_terraform, bob, body)
    first.apply()
    second.apply()

    (pod_a,) = instances(first, "lium_pod")
    (pod_b,) = instances(second, "lium_pod")
    assert (pod_a["api_key_id"], pod_b["api_key_id"]) == (alice_id, bob_id)
    assert pod_a["workspace_id"] and pod_a["workspace_id"] == pod_b["workspace_id"]
    assert listed_pod_ids(alice) == {pod_a["id"]} and listed_pod_ids(bob) == {pod_b["id"]}
    assert first.plan_exitcode()[0] == 0 and second.plan_exitcode()[0] == 0

    # A fresh runner: the state from the backend, a new directory, no journal, no plugin cache.
    fresh_dir = tmp_path / "fresh-runner"
    shutil.copytree(first.workdir, fresh_dir, ignore=shutil.ignore_patterns(".terraform"))
    fresh = Terraform(fresh_dir, {**first.env, "LIUM_STATE_DIR": str(tmp_path / "fresh-state")})
    fresh.init()
    code, output = fresh.plan_exitcode()
    assert code == 0, output

    # The key named as its workspace: the personal one, by name or id.
    with alice.api() as api:
        workspace = api.get("/users/me").json()["workspace"]
    for named in (workspace["name"], workspace["id"]):
        assert with_env(fresh, LIUM_WORKSPACE=named).plan_exitcode()[0] == 0
    wrong = with_env(fresh, LIUM_WORKSPACE="Platform").run("plan", "-input=false", check=False)
    assert wrong.returncode != 0 and "The API key acts in another workspace" in flat(wrong.stderr)
    wrong_destroy = with_env(fresh, LIUM_WORKSPACE="Platform").destroy(check=False)
    assert wrong_destroy.returncode != 0 and live_pod_ids(account) == {pod_a["id"], pod_b["id"]}

    # Bob's key sweeping Alice's stack sees none of her pods, and deletes nothing her pod may use.
    sweep = [sys.executable, "-m", "lium_provider.cli", "sweep", "--stack", pod_a["stack_tag"]]
    env = {**os.environ, **bob.env}
    swept = subprocess.run([*sweep, "--delete"], env=env, capture_output=True, text=True, check=True)
    assert json.loads(swept.stdout)["pods"] == [] and "pod_visibility own" in swept.stderr
    assert len(account.live()["templates"]) == 2, "alice's template is kept"

    second.destroy()
    assert live_pod_ids(account) == {pod_a["id"]}, "bob's destroy touched only bob's pod"
    fresh.destroy()
    assert_nothing_left(account)


def test_a_rotated_own_key_neither_re_rents_nor_forgets_the_stacks_pods(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    old, old_id = mint_key(account, "ci-2026-11", pod_visibility="own")
    new, _ = mint_key(account, "ci-2026-12", pod_visibility="own")
    tf = key_stack(make_terraform, old, sleeping_template("rotated") + pod_block("rotated"))
    tf.apply()
    (pod,) = instances(tf, "lium_pod")

    tf.env["LIUM_API_KEY"] = new.api_key  # the rotation: the CI secret now holds the new key
    planned = tf.run("plan", "-input=false", check=False)
    said = flat(planned.stderr)
    assert planned.returncode != 0, planned.stdout
    assert f"Pod {pod['id']} is hidden from this API key" in said, said
    assert old_id in said and "ci-2026-12" in said, "the error names the key that rented it and this one"
    destroyed = tf.destroy(check=False)
    assert destroyed.returncode != 0, "a destroy that cannot see the pod does not report success"
    assert "is hidden from this API key" in flat(destroyed.stderr)
    assert live_pod_ids(account) == {pod["id"]}, "nothing was rented again and the pod still runs"
    assert [p["id"] for p in instances(tf, "lium_pod")] == [pod["id"]], "the state keeps the pod"

    tf.env["LIUM_API_KEY"] = old.api_key
    tf.destroy()
    assert_nothing_left(account)


def test_a_pod_lium_stopped_for_its_keys_budget_says_so_at_the_next_plan(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    budgeted, key_id = mint_key(account, "spender", max_budget_usd=5000.0)
    body = sleeping_template("spend") + pod_block("spend", f'executor_id = "{PRICEY_NODE}"')
    tf = key_stack(make_terraform, budgeted, body)
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    assert pod["api_key_id"] == key_id

    with http.client(
        base_url=account.emulator.api_url,
        headers={"Authorization": f"Bearer {session_token(account)}"},
        timeout=30,
    ) as session:  # the budget lowered below what the pod has already cost: Lium stops it
        assert session.patch(f"/keys/{key_id}", json={"max_budget_usd": 1}).status_code == 200

    def stopped() -> bool:
        return pod["id"] not in live_pod_ids(account)

    wait_until(stopped, timeout=30, what="Lium to stop the pod when the budget ran out")
    code, output = tf.plan_exitcode()
    assert code == 2, "the plan rents the pod again"
    assert f"Lium stopped pod {pod['id']}: its API key's budget ran out" in flat(output), output
    tf.destroy()
    assert_nothing_left(account)


def test_a_rotated_key_never_rents_again_what_a_killed_create_rented(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    old, old_id = mint_key(account, "ci-killed", pod_visibility="own")
    new, _ = mint_key(account, "ci-next", pod_visibility="own")
    tf = key_stack(make_terraform, old, sleeping_template("killed") + pod_block("killed"))
    seconds = 3.0  # the rent commits after the runner died: nothing on it could undo the rent
    held = {
        "name": "held",
        "method": "POST",
        "path": "/executors/*/rent",
        "kind": "latency",
        "seconds": seconds,
        "first": 1,
    }
    with (
        account.faults({"rules": [held]}),
        reaped(tf.start("apply", "-auto-approve", "-no-color")) as process,
    ):
        wait_for(
            lambda: fault_counters(account.emulator)["held"]["matched"] == 1,
            "the rent reaches Lium",
            60.0,
            process=process,
        )
        kill_machine(process, tf.workdir)  # the rent is on its way: only the machine's journal knows of it
    wait_until(lambda: live_pod_ids(account), timeout=seconds + 30, what="the held rent to commit")
    (rented,) = live_pod_ids(account)

    tf.env["LIUM_API_KEY"] = new.api_key  # the machine's next job runs with the rotated key
    failed = tf.apply(check=False)
    said = flat(failed.stderr)
    assert failed.returncode != 0 and "is hidden from this API key" in said, said
    assert old_id in said
    assert live_pod_ids(account) == {rented}, "nothing was rented beside the pod the killed create rented"

    tf.env["LIUM_API_KEY"] = old.api_key
    tf.apply()
    assert [p["id"] for p in instances(tf, "lium_pod")] == [rented], "the key that rented it adopts it"
    tf.destroy()
    assert_nothing_left(account)


def test_a_key_of_another_workspace_never_takes_the_stacks_template_for_gone(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    token = session_token(account)
    with http.client(
        base_url=account.emulator.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as session:
        team = session.post("/workspaces", json={"name": "Research"})
        assert team.status_code == 200, team.text
        minted = session.post(
            "/keys",
            json={"name": "research-ci", "scopes": RENTING_SCOPES},
            headers={"X-Lium-Workspace-Id": team.json()["id"]},
        )
        assert minted.status_code == 200, minted.text
    research = dataclasses.replace(account, api_key=minted.json()["key"])
    tf = key_stack(make_terraform, research, sleeping_template("team"))
    tf.apply()
    (template,) = instances(tf, "lium_template")
    assert template["workspace_id"] == team.json()["id"]

    personal = with_env(tf, LIUM_API_KEY=account.api_key)  # the account's first key acts in its personal one
    planned = personal.run("plan", "-input=false", check=False)
    assert planned.returncode != 0 and f"lium_template {template['id']} is hidden" in flat(planned.stderr)
    destroyed = personal.destroy(check=False)
    assert destroyed.returncode != 0 and [t["id"] for t in instances(tf, "lium_template")] == [template["id"]]
    with research.api() as api:
        assert api.get(f"/templates/{template['id']}").status_code == 200, "the template is still there"

    tf.destroy()
    with research.api() as api:
        assert api.get(f"/templates/{template['id']}").status_code == 404
