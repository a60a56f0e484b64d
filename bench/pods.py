"""Apply and destroy of N pods against the emulator, against the ideal set by its provisioning delay.

Terraform creates at most `parallelism` (10) resources at once, and each pod takes the emulator's
provisioning delay D (PENDING → RUNNING) plus its SSH delay before it is ready, so no provider can apply
N pods faster than ceil(N / 10) x (D + ssh delay); destroy likewise with the DELETING delay. On top of
that every run pays Terraform's fixed cost (its own start, three or four provider starts, refresh, the
template), measured in the same run as the apply/destroy of the stack with no pods (N = 0). The script
prints, for each N, wall time, the ideal (fixed cost + waves x delay) and their ratio, and the API
requests per pod as the emulator counted them (polling must not hammer an API that allows ~60
listings a minute). The fixed cost is the median of three rounds; ``--rounds`` takes medians for
every N.

Run from the repository root: ``.venv/bin/python -m bench.pods [--counts 0 1 10 50] [--delay 5] [--rounds 1]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
from typing import Any

from bench.workspace import terraform, terraform_workspace, timed_terraform
from lium_emulator.launcher import launch
from tests.support.lium import PROVIDER_BLOCK, new_account, sleeping_template

PARALLELISM = 10
TARGET_RATIO = 1.15
STACK = (
    sleeping_template("bench")
    + """resource "lium_pod" "p" {
  count       = %d
  name        = "bench-${count.index}"
  template_id = lium_template.t.id
}
"""
)


def requests_total(report: dict[str, Any]) -> int:
    return sum(report["api_requests"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[0, 1, 10, 50])
    parser.add_argument("--delay", type=float, default=5.0, help="emulator PENDING seconds (D)")
    parser.add_argument("--ssh-delay", type=float, default=0.5)
    parser.add_argument("--deleting", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=1, help="apply/destroy rounds per N (median)")
    args = parser.parse_args()
    timings = [
        "--pending-seconds",
        str(args.delay),
        "--ssh-delay-seconds",
        str(args.ssh_delay),
        "--deleting-seconds",
        str(args.deleting),
    ]
    with terraform_workspace("bench-pods-") as (base, workspace_env), launch(timings) as emulator:
        print(f"emulator delays: pending {args.delay}s, ssh {args.ssh_delay}s, deleting {args.deleting}s")
        print(
            f"{'N':>4} {'apply':>8} {'ideal':>7} {'ratio':>6} {'destroy':>8} {'ideal':>7} {'ratio':>6} {'req/pod':>8}"
        )
        fixed_apply = fixed_destroy = 0.0
        for count in args.counts:
            account = new_account(emulator, base / f"account-{count}")
            env = {**workspace_env, **account.env}
            workdir = base / f"stack-{count}"
            workdir.mkdir()
            (workdir / "main.tf").write_text(PROVIDER_BLOCK + STACK % count)
            terraform(workdir, env, "init", "-input=false")
            before = requests_total(account.report())
            # The fixed cost is small and noisy, and every ratio rests on it: take the median of three.
            rounds = args.rounds if count else max(args.rounds, 3)
            applies, destroys = [], []
            for _ in range(rounds):
                applies.append(timed_terraform(workdir, env, "apply", "-auto-approve", "-input=false"))
                destroys.append(timed_terraform(workdir, env, "destroy", "-auto-approve", "-input=false"))
            apply, destroy = statistics.median(applies), statistics.median(destroys)
            requests = (
                requests_total(account.report()) - before - 1
            ) / rounds  # minus the report's /users/me
            if count == 0:
                fixed_apply, fixed_destroy = apply, destroy
                print(
                    f"{0:>4} {apply:>7.1f}s {'':>7} {'':>6} {destroy:>7.1f}s  (fixed cost: Terraform, provider starts, template)"
                )
                continue
            waves = math.ceil(count / PARALLELISM)
            ideal_apply = fixed_apply + waves * (args.delay + args.ssh_delay)
            ideal_destroy = fixed_destroy + waves * args.deleting
            print(
                f"{count:>4} {apply:>7.1f}s {ideal_apply:>6.1f}s {apply / ideal_apply:>6.2f} "
                f"{destroy:>7.1f}s {ideal_destroy:>6.1f}s {destroy / ideal_destroy:>6.2f} {requests / count:>8.1f}"
            )
            leftover = account.live()
            assert not any(leftover.values()), f"benchmark left resources behind: {leftover}"
        print(f"target: apply and destroy at most {TARGET_RATIO}x ideal")


if __name__ == "__main__":
    main()
