"""``examples/hcl``, the quickstart stack in plain HCL, applied against the emulator and destroyed.

Only the provider's environment variables configure it (see the example's README), so this is exactly what
a user runs, with the emulator's URLs, from a copy without the committed lock file (the release's hashes,
not the checkout launcher's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.examples import initialised_example
from tests.support.lium import assert_nothing_left, instances, new_account
from tests.support.terraform import REPO, Terraform

pytestmark = pytest.mark.terraform

EXAMPLE = REPO / "examples" / "hcl"


def test_hcl_example_applies_and_destroys(
    emulator: RunningEmulator, make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    account = new_account(emulator, tmp_path)
    tf = initialised_example(EXAMPLE, make_terraform, account.env)
    estimate = summary_price_of_the_quickstart_pod(tf)
    tf.apply()

    outputs = {name: o["value"] for name, o in json.loads(tf.run("output", "-json").stdout).items()}
    (pod,) = instances(tf, "lium_pod")
    (runner,) = instances(tf, "lium_runner")
    assert (
        outputs["ssh"] == f"ssh -o UserKnownHostsFile=known_hosts -p {pod['ssh_port']} root@{pod['ssh_host']}"
    )
    assert outputs["known_hosts"] == f"[{pod['ssh_host']}]:{pod['ssh_port']} {pod['ssh_host_key']}"
    assert readme_ssh_works_without_a_terminal(tf, account.key_file).startswith("Python 3.")
    assert outputs["runner_port"] == pod["ports"]["10022"] == runner["runner_ssh_port"]
    assert outputs["price_per_hour"] == pod["price_per_hour"] > 0
    # The pod names no GPU: the summary's estimate was the cheapest offer, which is what create rented.
    assert estimate == pytest.approx(pod["price_per_hour"])
    assert runner["healthy"] is True and outputs["smoke_test"].splitlines()[-2:] == ["no-gpu", "42"]
    assert tf.plan_exitcode()[0] == 0

    tf.destroy()
    assert_nothing_left(account)
    assert tf.resources() == []


def summary_price_of_the_quickstart_pod(tf: Terraform) -> float:
    """Plan the example, check the PR summary prices its GPU-less pod as an estimate the policies judge."""
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    (tf.workdir / "plan.json").write_text(tf.run("show", "-json", "plan.bin").stdout)
    summary = [sys.executable, "-m", "lium_provider.cli", "plan-summary", str(tf.workdir / "plan.json")]
    env = {"PATH": "/usr/bin:/bin", "LIUM_API_URL": tf.env["LIUM_API_URL"]}

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*summary, *flags], capture_output=True, text=True, env=env, timeout=120)

    within = run("--max-hourly-total", "1000", "--format", "json")
    assert within.returncode == 0, within.stderr
    (pod,) = json.loads(within.stdout)["stacks"][0]["pods"]
    assert pod["price_estimate"] is True and pod["worst_case_price_basis"] == "dearest_offer"
    assert pod["worst_case_price_per_hour"] >= pod["price_per_hour_after"] > 0
    markdown = run().stdout
    assert "(some prices are estimates)" in markdown and "(estimate)" in markdown
    assert "?" not in markdown.split("| Pod |", 1)[1].splitlines()[2]

    over = run("--max-hourly-total", "0.01")
    assert over.returncode == 3
    assert "policy violated: max-hourly-total: the pods cost $" in over.stderr
    strict = run("--max-hourly-total", "1000", "--strict-prices")
    assert strict.returncode == 3
    assert "`lium_pod.quickstart`: the price is an estimate" in strict.stderr
    price: float = pod["price_per_hour_after"]
    return price


def readme_ssh_works_without_a_terminal(tf: Terraform, key_file: Path) -> str:
    """The README's SSH lines as written, run by bash with no terminal and no agent, the provider's key
    as the user's identity (an ``ssh`` first on ``PATH`` adds it: OpenSSH takes the home directory from
    the password database, not ``HOME``), the user's own known hosts never read: what the pod printed."""
    lines = [line.split("   #")[0] for line in (EXAMPLE / "README.md").read_text().splitlines()]
    ssh_lines = [line for line in lines if "output -raw known_hosts" in line or "output -raw ssh" in line]
    assert len(ssh_lines) == 2, ssh_lines
    bin_dir = tf.workdir / "user-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    options = f"-i {key_file} -o IdentitiesOnly=yes -o GlobalKnownHostsFile=/dev/null"
    wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh {options} "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, **tf.env}
    result = subprocess.run(
        ["bash", "-c", " && ".join(ssh_lines)],
        cwd=tf.workdir,
        env={**env, "PATH": f"{bin_dir}:{env['PATH']}", "SSH_AUTH_SOCK": ""},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal for ssh to ask on
    )
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split()[:2])
