"""Time from a pod turning RUNNING to its dstack runner answering the healthcheck, against the lower bound.

A pod's sshd answers only ``--ssh-delay`` seconds after the pod turned RUNNING (the emulator models Lium's
separate SSH bootstrap), and nothing can start the runner before that: the delay is the lower bound. Each
round applies a template, a pod and a ``lium_runner`` (no smoke test) with real Terraform against the
emulator, then destroys them (untimed). RUNNING comes from the emulator's record of the pod; the moments
the pod and the runner were done come from ``terraform apply -json`` (the runner's create returns once
the healthcheck answered through the SSH tunnel). Overhead = RUNNING→healthy minus the lower bound.

Run from the repository root: ``.venv/bin/python -m bench.runner_bootstrap [--rounds 3] [--ssh-delay 1.0]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.workspace import terraform, terraform_workspace
from lium_emulator.launcher import launch
from tests.support.lium import PROVIDER_BLOCK, new_account, sleeping_template

STACK = (
    sleeping_template("bench")
    + """resource "lium_pod" "p" {
  name        = "bench-%d"
  template_id = lium_template.t.id
}
resource "lium_runner" "r" {
  pod_id       = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
}
"""
)


@dataclass(frozen=True)
class Round:
    running_to_pod_done: float
    runner_create: float
    running_to_healthy: float


def utc(text: str) -> datetime:
    """Aware UTC from ISO 8601 (Terraform writes an offset; the emulator writes naive UTC)."""
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def completions(json_lines: str) -> dict[tuple[str, str], datetime]:
    """``(address, "apply_start" | "apply_complete") -> when`` from ``terraform apply -json``."""
    moments = {}
    for line in json_lines.splitlines():
        message = json.loads(line)
        if message.get("type") in ("apply_start", "apply_complete"):
            address = message["hook"]["resource"]["addr"]
            moments[(address, message["type"])] = utc(message["@timestamp"])
    return moments


def one_round(workdir: Path, env: dict[str, str], running_at: Callable[[], datetime], index: int) -> Round:
    (workdir / "main.tf").write_text(PROVIDER_BLOCK + STACK % index)
    moments = completions(terraform(workdir, env, "apply", "-auto-approve", "-input=false", "-json"))
    running = running_at()
    pod_done = moments[("lium_pod.p", "apply_complete")]
    runner_start = moments[("lium_runner.r", "apply_start")]
    runner_done = moments[("lium_runner.r", "apply_complete")]
    terraform(workdir, env, "destroy", "-auto-approve", "-input=false")
    return Round(
        running_to_pod_done=(pod_done - running).total_seconds(),
        runner_create=(runner_done - runner_start).total_seconds(),
        running_to_healthy=(runner_done - running).total_seconds(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--ssh-delay", type=float, default=1.0, help="emulator: RUNNING until sshd answers, s"
    )
    args = parser.parse_args()
    timings = [
        "--pending-seconds",
        "0.3",
        "--ssh-delay-seconds",
        str(args.ssh_delay),
        "--deleting-seconds",
        "0.2",
    ]
    with terraform_workspace("bench-runner-") as (base, workspace_env), launch(timings) as emulator:
        account = new_account(emulator, base / "account")
        env = {**workspace_env, **account.env}
        workdir = base / "stack"
        workdir.mkdir()
        (workdir / "main.tf").write_text(PROVIDER_BLOCK + STACK % 0)
        terraform(workdir, env, "init", "-input=false")

        def running_at() -> datetime:
            (pod,) = [p for p in account.report()["pods"] if p["status"] == "RUNNING"]
            return utc(pod["running_at"])

        print(f"lower bound (emulator SSH delay after RUNNING): {args.ssh_delay:.2f} s")
        print(
            f"{'round':>5} {'RUNNING→pod done':>17} {'runner create':>14} {'RUNNING→healthy':>16} {'overhead':>9}"
        )
        rounds = []
        for index in range(args.rounds):
            measured = one_round(workdir, env, running_at, index)
            rounds.append(measured)
            print(
                f"{index + 1:>5} {measured.running_to_pod_done:>15.2f} s {measured.runner_create:>12.2f} s "
                f"{measured.running_to_healthy:>14.2f} s {measured.running_to_healthy - args.ssh_delay:>7.2f} s"
            )
        healthy = statistics.median(r.running_to_healthy for r in rounds)
        create = statistics.median(r.runner_create for r in rounds)
        print(
            f"median: RUNNING→healthy {healthy:.2f} s, overhead over the lower bound {healthy - args.ssh_delay:.2f} s "
            f"(the runner's create alone {create:.2f} s)"
        )


if __name__ == "__main__":
    main()
