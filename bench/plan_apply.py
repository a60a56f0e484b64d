"""`terraform plan` and `apply` of N resources: our Python bridge against Terraform's built-in
`terraform_data` and the Go `hashicorp/null` provider, measured side by side in one run.

Each round runs, for every implementation in turn, `plan` on an empty state, then `apply` (create N),
then an untimed `destroy`; the medians over the rounds are compared as ratios ours/null and
ours/terraform_data. Our resource is the bridge's test resource (`bridgetest_thing`, a JSON file per
object), which like `null_resource` does no remote work, so the numbers measure the plugin path.

Run from the repository root: ``.venv/bin/python -m bench.plan_apply [--counts 1 20 100] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.null_provider import write_fs_mirror
from tests.support.terraform import install_test_providers, write_cli_config

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


def terraform(workdir: Path, env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        ["terraform", *args],
        cwd=workdir,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return time.perf_counter() - started


def prepare(base: Path, count: int, env: dict[str, str]) -> dict[str, Path]:
    dirs = {}
    for name, template in CONFIGS.items():
        workdir = base / f"{name}-{count}"
        workdir.mkdir()
        (workdir / "main.tf").write_text(template.format(n=count, store=base / f"store-{count}"))
        terraform(workdir, env, "init", "-input=false")
        dirs[name] = workdir
    return dirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-plan-apply-") as scratch:
        base = Path(scratch)
        plugins = base / "plugins"
        install_test_providers(plugins)
        write_fs_mirror(plugins)
        rc = write_cli_config(base / "terraformrc", plugins)
        env = {
            **os.environ,
            "TF_CLI_CONFIG_FILE": str(rc),
            "CHECKPOINT_DISABLE": "1",
            "TF_IN_AUTOMATION": "1",
        }
        print(
            f"{'N':>4} {'op':<6} {'terraform_data':>15} {'go_null':>9} {'ours':>9} {'ours/null':>10} {'ours/tf_data':>13}"
        )
        worst = 0.0
        for count in args.counts:
            dirs = prepare(base, count, env)
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for name, workdir in dirs.items():
                    times.setdefault((name, "plan"), []).append(
                        terraform(workdir, env, "plan", "-input=false")
                    )
                    times.setdefault((name, "apply"), []).append(
                        terraform(workdir, env, "apply", "-auto-approve", "-input=false")
                    )
                    terraform(workdir, env, "destroy", "-auto-approve", "-input=false")
            for op in ("plan", "apply"):
                med = {name: statistics.median(times[(name, op)]) for name in dirs}
                ratio_null = med["ours"] / med["go_null"]
                worst = max(worst, ratio_null)
                print(
                    f"{count:>4} {op:<6} {med['terraform_data'] * 1000:>13.0f}ms {med['go_null'] * 1000:>7.0f}ms "
                    f"{med['ours'] * 1000:>7.0f}ms {ratio_null:>10.2f} {med['ours'] / med['terraform_data']:>13.2f}"
                )
        print(f"worst ours/go_null ratio: {worst:.2f} (target <= {TARGET_RATIO})")


if __name__ == "__main__":
    main()
