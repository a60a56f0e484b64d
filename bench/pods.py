"""Apply and destroy of N pods against the emulator, against the ideal set by its provisioning delay.

Terraform creates at most ``--parallelism`` P resources at once (its ``-parallelism``, 10 by default), and
each pod takes the emulator's provisioning delay D (PENDING → RUNNING) plus its SSH delay before it is
ready, so no provider can apply N pods faster than ceil(N / P) x (D + ssh delay); destroy likewise with
the DELETING delay. On top of that every run pays Terraform's fixed cost (its own start, three or four
provider starts, refresh, the template), measured in the same run as the apply/destroy of the stack with
no pods (N = 0). The script prints, for each N, wall time, the ideal (fixed cost + waves x delay) and
their ratio, how busy the machine's cores were meanwhile (a run near 100 % is bound by CPU, which the
emulator's sandboxes share with Terraform and the provider), the API requests per pod and rent calls per
pod as the emulator counted them (polling must not hammer an API that allows ~60 listings a minute;
concurrent creates must not collide on one executor), then each N's requests per route. The fixed cost
is the median of three rounds; ``--rounds`` takes medians for every N.

The emulator serves a generated catalog (``lium-emulator catalog``): ``--catalog-nodes`` nodes of
``--gpus-per-node`` RTX 3090 each (30 x 8 by default, room for 240 one-GPU pods).

Run from the repository root:
``.venv/bin/python -m bench.pods [--counts 0 1 10 50] [--parallelism 10] [--delay 5] [--rounds 1]``;
the fleet row is ``--counts 0 200 --parallelism 50``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from typing import Any

from bench.machine import busy_share
from bench.workspace import terraform, terraform_workspace, timed_terraform
from lium_emulator.catalogs.nodes import generate_fleet
from lium_emulator.launcher import launch
from tests.support.lium import PROVIDER_BLOCK, new_account, sleeping_template

TARGET_RATIO = 1.25  # apply and destroy against the ideal
TARGET_RENTS_PER_POD = 1.05
RENT_ROUTE = "POST /executors/{id}/rent"
STACK = (
    sleeping_template("bench")
    + """resource "lium_pod" "p" {
  count       = %d
  name        = "bench-${count.index}"
  template_id = lium_template.t.id
}
"""
)


def requests_by_route(report: dict[str, Any]) -> Counter[str]:
    return Counter(report["api_requests"])


def median_run(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The (seconds, busy share) of the run whose time is the median (the lower one of an even count)."""
    return sorted(runs)[(len(runs) - 1) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[0, 1, 10, 50])
    parser.add_argument("--delay", type=float, default=5.0, help="emulator PENDING seconds (D)")
    parser.add_argument("--ssh-delay", type=float, default=0.5)
    parser.add_argument("--deleting", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=1, help="apply/destroy rounds per N (median)")
    parser.add_argument("--parallelism", type=int, default=10, help="terraform -parallelism (P)")
    parser.add_argument("--catalog-nodes", type=int, default=30, help="nodes in the generated catalog")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    args = parser.parse_args()
    emulator_args = [
        "--pending-seconds",
        str(args.delay),
        "--ssh-delay-seconds",
        str(args.ssh_delay),
        "--deleting-seconds",
        str(args.deleting),
    ]
    parallel = f"-parallelism={args.parallelism}"
    with terraform_workspace("bench-pods-") as (base, workspace_env):
        catalog = base / "nodes.json"
        nodes = generate_fleet(args.catalog_nodes, args.gpus_per_node, "RTX 3090")
        catalog.write_text(json.dumps({"nodes": [node.model_dump(mode="json") for node in nodes]}))
        with launch([*emulator_args, "--nodes", str(catalog)]) as emulator:
            print(
                f"emulator delays: pending {args.delay}s, ssh {args.ssh_delay}s, deleting {args.deleting}s; "
                f"{args.catalog_nodes} nodes x {args.gpus_per_node} RTX 3090; terraform {parallel}"
            )
            print(
                f"{'N':>4} {'apply':>8} {'ideal':>7} {'ratio':>6} {'cpu':>5} "
                f"{'destroy':>8} {'ideal':>7} {'ratio':>6} {'cpu':>5} {'req/pod':>8} {'rents/pod':>9}"
            )
            fixed_apply = fixed_destroy = 0.0
            routes: dict[int, Counter[str]] = {}
            for count in args.counts:
                account = new_account(emulator, base / f"account-{count}")
                env = {**workspace_env, **account.env}
                workdir = base / f"stack-{count}"
                workdir.mkdir()
                (workdir / "main.tf").write_text(PROVIDER_BLOCK + STACK % count)
                terraform(workdir, env, "init", "-input=false")
                before = requests_by_route(account.report())
                # The fixed cost is small and noisy, and every ratio rests on it: take the median of three.
                rounds = args.rounds if count else max(args.rounds, 3)
                applies: list[tuple[float, float]] = []
                destroys: list[tuple[float, float]] = []
                for _ in range(rounds):
                    for command, runs in (("apply", applies), ("destroy", destroys)):
                        runs.append(
                            busy_share(
                                timed_terraform,
                                workdir,
                                env,
                                command,
                                "-auto-approve",
                                "-input=false",
                                parallel,
                            )
                        )
                (apply, apply_cpu), (destroy, destroy_cpu) = median_run(applies), median_run(destroys)
                used = requests_by_route(account.report()) - before
                used["GET /users/me"] -= 1  # the report's own
                routes[count] = used
                requests = used.total() / rounds
                if count == 0:
                    fixed_apply, fixed_destroy = apply, destroy
                    print(
                        f"{0:>4} {apply:>7.1f}s {'':>7} {'':>6} {destroy:>7.1f}s  "
                        "(fixed cost: Terraform, provider starts, template)"
                    )
                    continue
                waves = math.ceil(count / args.parallelism)
                ideal_apply = fixed_apply + waves * (args.delay + args.ssh_delay)
                ideal_destroy = fixed_destroy + waves * args.deleting
                print(
                    f"{count:>4} {apply:>7.1f}s {ideal_apply:>6.1f}s {apply / ideal_apply:>6.2f} {apply_cpu:>5.0%} "
                    f"{destroy:>7.1f}s {ideal_destroy:>6.1f}s {destroy / ideal_destroy:>6.2f} {destroy_cpu:>5.0%} "
                    f"{requests / count:>8.1f} {used[RENT_ROUTE] / rounds / count:>9.2f}"
                )
                leftover = account.live()
                assert not any(leftover.values()), f"benchmark left resources behind: {leftover}"
            print(
                f"target: apply and destroy at most {TARGET_RATIO}x ideal, "
                f"at most {TARGET_RENTS_PER_POD} rent calls per pod"
            )
            for count, used in routes.items():
                listed = ", ".join(f"{route} {n}" for route, n in sorted(used.items()) if n)
                print(f"N={count} requests by route (all rounds): {listed}")


if __name__ == "__main__":
    main()
