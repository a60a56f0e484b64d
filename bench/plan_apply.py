"""`terraform plan` and `apply` of N resources: our Python bridge against Terraform's built-in
`terraform_data` and the Go `hashicorp/null` provider, measured side by side in one run.

Each round runs, for every implementation in turn, `plan` on an empty state, then `apply` (create N),
then an untimed `destroy`; the medians over the rounds are compared as ratios ours/null and
ours/terraform_data. Our resource is the bridge's test resource (`bridgetest_thing`, a JSON file per
object), which like `null_resource` does no remote work, so the numbers measure the plugin path. It
runs twice: as Terraform runs it (through the launcher and its warm zygote, see tfbridge/serving/zygote.py)
and cold (``TFBRIDGE_ZYGOTE=0``: a fresh Python process per start). Every contender gets one
unmeasured plan first, which warms the page cache alike for all and leaves our zygote running.

With ``--packaged DIR`` (an unpacked ``terraform-provider-lium_*.zip`` of ``make release``) the bridge test
resource also runs on that self-contained provider's interpreter and libraries (warm and cold), the way
Terraform runs the packaged Lium provider.

Run from the repository root: ``.venv/bin/python -m bench.plan_apply [--counts 1 20 100] [--rounds 5]
[--packaged DIR]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench.null_provider import write_fs_mirror
from bench.workspace import terraform, terraform_workspace, timed_terraform
from tests.support.terraform import REPO
from tfbridge.serving.install import write_launcher

TARGET_RATIO = 1.5

CONFIGS = {
    "terraform_data": 'resource "terraform_data" "r" {{\n  count = {n}\n  input = "x-${{count.index}}"\n}}\n',
    "go_null": (
        'terraform {{\n  required_providers {{\n    null = {{ source = "hashicorp/null", version = "2.1.2" }}\n  }}\n}}\n'
        'resource "null_resource" "r" {{\n  count = {n}\n  triggers = {{ i = "x-${{count.index}}" }}\n}}\n'
    ),
    "ours": (
        'terraform {{\n  required_providers {{\n    bridgetest = {{ source = "lium-stacks/bridgetest" }}\n  }}\n}}\n'
        'provider "bridgetest" {{\n  store_dir = "{store}"\n}}\n'
        'resource "bridgetest_thing" "r" {{\n  count = {n}\n  name = "x-${{count.index}}"\n}}\n'
    ),
}
PACKAGED_SOURCE = "lium-stacks/bridgetestpackaged"
CONFIGS["packaged"] = CONFIGS["ours"].replace('"lium-stacks/bridgetest"', f'"{PACKAGED_SOURCE}"')


# Our provider twice: as Terraform runs it (each start forked from the warm zygote the first start
# left behind, see tfbridge/serving/zygote.py) and with the zygote turned off (every start a cold Python start).
COLD = {"TFBRIDGE_ZYGOTE": "0"}
CONTENDERS: dict[str, tuple[str, dict[str, str]]] = {
    "terraform_data": ("terraform_data", {}),
    "go_null": ("go_null", {}),
    "ours": ("ours", {}),
    "ours_cold": ("ours", COLD),
}


PACKAGED_CONTENDERS: dict[str, tuple[str, dict[str, str]]] = {
    "packaged": ("packaged", {}),
    "packaged_cold": ("packaged", COLD),
}


def install_packaged(plugins: Path, bundle: Path) -> None:
    """The bridge test provider served by the packaged provider's own interpreter and tfbridge."""
    (python,) = (bundle / "python" / "bin").glob("python3.*")
    (launch,) = (bundle / "python" / "lib").glob("python3.*/site-packages/tfbridge/serving/launch.py")
    serve = REPO / "tests" / "tfbridge" / "serve_bridgetest.py"
    write_launcher(plugins, PACKAGED_SOURCE, "0.0.1", [str(python), "-I", "-S", str(launch), str(serve)])


def prepare(
    base: Path, count: int, env: dict[str, str], contenders: dict[str, tuple[str, dict[str, str]]]
) -> dict[str, tuple[Path, dict[str, str]]]:
    """A working directory and environment per contender, initialised and warmed by one plan."""
    prepared = {}
    for name, (config, extra_env) in contenders.items():
        workdir = base / f"{name}-{count}"
        workdir.mkdir()
        (workdir / "main.tf").write_text(CONFIGS[config].format(n=count, store=workdir / "store"))
        contender_env = {**env, **extra_env}
        terraform(workdir, contender_env, "init", "-input=false")
        # Unmeasured: warms the page cache for every contender alike (and starts our zygote).
        terraform(workdir, contender_env, "plan", "-input=false")
        prepared[name] = (workdir, contender_env)
    return prepared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--packaged", type=Path, help="an unpacked terraform-provider-lium_*.zip")
    args = parser.parse_args()
    contenders = {**CONTENDERS, **(PACKAGED_CONTENDERS if args.packaged else {})}
    with terraform_workspace("bench-plan-apply-") as (base, env):
        write_fs_mirror(base / "plugins")
        if args.packaged:
            install_packaged(base / "plugins", args.packaged.absolute())
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        print(
            f"{'N':>4} {'op':<6} {'terraform_data':>15} {'go_null':>9} {'ours':>9} {'ours_cold':>10} "
            f"{'ours/null':>10} {'cold/null':>10}"
            + (f" {'packaged':>9} {'pkg_cold':>9} {'pkg/null':>9}" if args.packaged else "")
        )
        worst = 0.0
        for count in args.counts:
            prepared = prepare(base, count, env, contenders)
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for name, (workdir, contender_env) in prepared.items():
                    times.setdefault((name, "plan"), []).append(
                        timed_terraform(workdir, contender_env, "plan", "-input=false")
                    )
                    times.setdefault((name, "apply"), []).append(
                        timed_terraform(workdir, contender_env, "apply", "-auto-approve", "-input=false")
                    )
                    terraform(workdir, contender_env, "destroy", "-auto-approve", "-input=false")
            for op in ("plan", "apply"):
                med = {name: statistics.median(times[(name, op)]) for name in prepared}
                ratio_null = med["ours"] / med["go_null"]
                worst = max(worst, ratio_null)
                print(
                    f"{count:>4} {op:<6} {med['terraform_data'] * 1000:>13.0f}ms {med['go_null'] * 1000:>7.0f}ms "
                    f"{med['ours'] * 1000:>7.0f}ms {med['ours_cold'] * 1000:>8.0f}ms "
                    f"{ratio_null:>10.2f} {med['ours_cold'] / med['go_null']:>10.2f}"
                    + (
                        f" {med['packaged'] * 1000:>7.0f}ms {med['packaged_cold'] * 1000:>7.0f}ms "
                        f"{med['packaged'] / med['go_null']:>9.2f}"
                        if args.packaged
                        else ""
                    )
                )
        print(f"worst ours/go_null ratio: {worst:.2f} (target <= {TARGET_RATIO})")


if __name__ == "__main__":
    main()
