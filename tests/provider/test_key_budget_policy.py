"""``lium-tf plan-summary --within-key-budget`` on real plans: whether the key that will apply a plan can
afford it, read from Lium with a browser session, and a failure when that cannot be known."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import pytest

from tests.provider.test_plan_summary import run_summary
from tests.support.keys import key_stack, mint_key, session_token
from tests.support.lium import Account, pod_block, sleeping_template
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

POLICY_EXIT = 3
EIGHT_H100_FOR_AN_HOUR = sleeping_template("budget") + pod_block(
    "budget", 'gpu = "H100"\n  gpu_count = 8\n  termination_hours = 1'
)


def planned(tf: Terraform) -> str:
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    path = tf.workdir / "plan.json"
    path.write_text(tf.run("show", "-json", "plan.bin").stdout)
    return str(path)


def test_the_plan_must_fit_what_is_left_of_the_keys_budget(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    small, _ = mint_key(account, "small-ci", max_budget_usd=5.0)
    large, _ = mint_key(account, "large-ci", max_budget_usd=1000.0)
    tf = key_stack(make_terraform, large, EIGHT_H100_FOR_AN_HOUR)
    plan = planned(tf)
    env = {"LIUM_API_URL": account.emulator.api_url, "LIUM_SESSION_TOKEN": session_token(account)}

    fits = run_summary(plan, "--within-key-budget", env={**env, "LIUM_API_KEY": large.api_key})
    assert fits.returncode == 0, fits.stderr

    short = run_summary(plan, "--within-key-budget", env={**env, "LIUM_API_KEY": small.api_key})
    assert short.returncode == POLICY_EXIT, short.stderr
    said = short.stderr
    assert "within-key-budget: key 'small-ci' " in said and "max budget is $5.00 with $0.00 spent" in said, (
        said
    )
    cost = re.search(r"the pods can cost \$([0-9.,]+) in it", said)
    assert cost is not None and float(cost.group(1).replace(",", "")) > 5, said
    assert "within-key-budget" in short.stdout, "the comment shows the verdict too"


def test_without_a_session_the_policy_says_it_cannot_know(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    key, _ = mint_key(account, "unread-ci", max_budget_usd=1000.0)
    tf = key_stack(make_terraform, dataclasses.replace(account, api_key=key.api_key), EIGHT_H100_FOR_AN_HOUR)
    plan = planned(tf)
    result = run_summary(
        plan,
        "--within-key-budget",
        env={"LIUM_API_URL": account.emulator.api_url, "LIUM_API_KEY": key.api_key},
    )
    assert result.returncode == POLICY_EXIT
    assert "cannot know whether the key can afford the plans: LIUM_SESSION_TOKEN is not set" in result.stderr
