"""What a change ends, whatever it costs: the running pods and clusters a plan destroys or replaces come
first in the summary, with their uptime and price, and ``--forbid-destroy`` / ``--max-destroyed`` fail
the job on them; every policy fails closed on what the plan does not know; and a comment too large for
one pull request keeps its headline, what it ends and every verdict, cutting only the details.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lium_provider.plan_summary.markdown import MAX_MARKDOWN_CHARS
from tests.support.lium import PROVIDER_BLOCK, Account, instances, sleeping_template
from tests.support.terraform import Terraform

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "provider/lium_provider/plan_summary/plan-summary.schema.json").read_text()
)
NO_FEED = {"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"}
POLICY_PREFIX = "lium-tf plan-summary: policy violated: "


def summary(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "plan-summary", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=120,
    )


def violations(result: subprocess.CompletedProcess[str]) -> list[str]:
    lines = result.stderr.splitlines()
    assert all(line.startswith(POLICY_PREFIX) for line in lines), result.stderr
    return [line.removeprefix(POLICY_PREFIX) for line in lines]


def running_pod(
    address: str, actions: list[str], hours: int | None = 24, status: str = "RUNNING"
) -> dict[str, Any]:
    """A ``resource_changes`` entry of a pod (``status``) started at 10:00, billed $0.50/h."""
    before = {
        "name": address.rsplit(".", 1)[-1],
        "gpu": "RTX 4090",
        "gpu_count": 1,
        "price_per_hour": 0.5,
        "status": status,
        "started_at": "2026-12-04T10:00:00Z",
        "termination_hours": hours,
    }
    later = None if actions == ["delete"] else dict(before)
    return {
        "address": address,
        "mode": "managed",
        "type": "lium_pod",
        "change": {"actions": actions, "before": before, "after": later, "after_unknown": {}},
    }


def plan_file(tmp_path: Path, *entries: dict[str, Any]) -> str:
    path = tmp_path / "plan.json"
    document = {
        "format_version": "1.2",
        "timestamp": "2026-12-04T13:12:00Z",
        "resource_changes": list(entries),
    }
    path.write_text(json.dumps(document))
    return str(path)


def test_what_a_plan_ends_comes_first_with_uptime_and_price_and_can_be_forbidden(tmp_path: Path) -> None:
    path = plan_file(
        tmp_path,
        running_pod("lium_pod.gone", ["delete"]),
        running_pod("lium_pod.kept", ["no-op"]),
        running_pod("lium_pod.dead", ["delete"], status="FAILED"),  # no work left on it to end
    )
    result = summary(path, env=NO_FEED)
    assert result.returncode == 0, result.stderr
    head = result.stdout.split("**Change:", 1)[0]
    assert "**Ends running work: 1 pod or cluster**" in head, "said before the money"
    assert "- `lium_pod.gone`: destroy, up 3 h 12 min, $0.50/h" in head
    assert "lium_pod.dead" not in head and "lium_pod.kept" not in head
    forbidden = summary(path, "--forbid-destroy", "--max-destroyed", "1", env=NO_FEED)
    assert forbidden.returncode == 3
    assert violations(forbidden) == [
        "forbid-destroy: the plan ends `lium_pod.gone` (destroy, up 3 h 12 min, $0.50/h)"
    ]
    document = json.loads(summary(path, "--format", "json", env=NO_FEED).stdout)
    jsonschema.validate(document, SCHEMA)
    assert document["ends_running"] == 1
    assert document["stacks"][0]["ends"] == [
        {
            "address": "lium_pod.gone",
            "type": "lium_pod",
            "action": "destroy",
            "uptime_seconds": 11520.0,
            "price_per_hour": 0.5,
        }
    ]


def test_max_destroyed_counts_destroys_and_replacements_not_forgotten_pods(tmp_path: Path) -> None:
    path = plan_file(
        tmp_path,
        running_pod("lium_pod.a", ["delete"]),
        running_pod("lium_pod.b", ["delete", "create"]),
        running_pod("lium_pod.c", ["forget"]),  # a `removed` block that keeps it running
    )
    assert summary(path, "--max-destroyed", "2", env=NO_FEED).returncode == 0
    over = summary(path, "--max-destroyed", "1", env=NO_FEED)
    (line,) = violations(over)
    assert line.startswith("max-destroyed: the plan ends 2 running pods or clusters, more than 1: ")
    assert "`lium_pod.a` (destroy" in line and "`lium_pod.b` (replace" in line and "lium_pod.c" not in line
    assert "- `max-destroyed` 1: **failed**" in over.stdout
    refused = summary(path, "--max-destroyed", "-1", env=NO_FEED)
    assert refused.returncode == 2 and "--max-destroyed" in refused.stderr


def test_require_termination_hours_fails_on_hours_known_only_after_apply(tmp_path: Path) -> None:
    entry = running_pod("lium_pod.p", ["update"], hours=None)
    entry["change"]["after_unknown"] = {"termination_hours": True}
    result = summary(plan_file(tmp_path, entry), "--require-termination-hours", env=NO_FEED)
    assert result.returncode == 3
    assert violations(result) == [
        "require-termination-hours: `lium_pod.p` `termination_hours` not known now, so it cannot be checked"
    ]


def test_a_comment_too_large_keeps_its_headline_what_it_ends_and_every_verdict(tmp_path: Path) -> None:
    entries = [running_pod(f"lium_pod.fleet[{i}]", ["no-op"]) for i in range(900)]
    entries.append(running_pod("lium_pod.unbounded", ["delete", "create"], hours=None))
    path = plan_file(tmp_path, *entries)
    result = summary(path, "--require-termination-hours", "--max-hourly-total", "1000", env=NO_FEED)
    text = result.stdout
    assert result.returncode == 3 and len(text) <= MAX_MARKDOWN_CHARS, len(text)
    assert text.startswith("### Lium plan: 0 to create, 0 to update, 1 to replace, 0 to destroy\n")
    assert "- `lium_pod.unbounded`: replace, up 3 h 12 min, $0.50/h" in text
    assert "#### Policies: 2 of 2 failed" in text  # the new pod's price is not known here: it fails closed
    assert "- `require-termination-hours`: **failed**" in text
    assert "- `max-hourly-total` $1,000.00: **failed**" in text
    cut = text.rsplit("**Cut:**", 1)
    assert len(cut) == 2 and "more lines of pod tables and changes" in cut[1], text[-500:]
    assert text.count("<details>") == text.count("</details>"), "a collapsed block left open"
    assert "<details>" not in cut[0].rsplit("\n\n", 1)[-1], "the cut is said outside any collapsed block"


@pytest.mark.terraform
def test_a_replaced_running_pod_is_named_whatever_the_price_and_forbid_destroy_fails(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    stack = (
        PROVIDER_BLOCK
        + sleeping_template("ends")
        + 'resource "lium_pod" "p" {\n  name = "p"\n  template_id = lium_template.t.id\n  gpu = "RTX 4090"\n}\n'
    )
    tf = make_terraform(stack, **account.env)
    tf.init()
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    tf.run("plan", "-input=false", "-no-color", "-replace=lium_pod.p", "-out=plan.bin")
    (tf.workdir / "plan.json").write_text(tf.run("show", "-json", "plan.bin").stdout)
    env = {"LIUM_API_URL": account.env["LIUM_API_URL"]}
    result = summary(str(tf.workdir / "plan.json"), "--forbid-destroy", env=env)
    assert result.returncode == 3, result.stderr
    price = f"${pod['price_per_hour']:.2f}/h"
    assert "- `lium_pod.p`: replace, up " in result.stdout and price in result.stdout
    (line,) = violations(result)
    assert line.startswith("forbid-destroy: the plan ends `lium_pod.p` (replace, up ") and line.endswith(
        f"{price})"
    )
    tf.destroy()


def test_a_deposed_pod_and_one_whose_switch_failed_are_still_work_a_plan_ends(tmp_path: Path) -> None:
    deposed = running_pod("lium_pod.web", ["delete"])  # create_before_destroy left the old pod, billed
    deposed["deposed"] = "5f9c308d"
    path = plan_file(tmp_path, deposed, running_pod("lium_pod.switched", ["delete"], status="REBOOT_FAILED"))
    result = summary(path, "--forbid-destroy", env=NO_FEED)
    assert result.returncode == 3, result.stdout
    ended = violations(result)
    assert len(ended) == 2 and any("lium_pod.web" in v for v in ended), ended
    assert any("lium_pod.switched" in v for v in ended), "a failed switch still holds its node"
    assert "before: $1.00/h" in result.stdout, "both are billed before the plan"


def test_an_errored_plan_is_refused_not_summarised(tmp_path: Path) -> None:
    path = Path(plan_file(tmp_path, running_pod("lium_pod.gone", ["delete"])))
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "errored": True, "applyable": False}))
    result = summary(str(path), "--max-destroyed", "5", env=NO_FEED)
    assert result.returncode == 1 and "incomplete" in result.stderr, result.stderr
    assert result.stdout == ""


def test_thousands_of_ended_pods_fit_a_comment_and_long_keys_stay_apart(tmp_path: Path) -> None:
    key = "us-east-" + "k" * 150
    pods = [running_pod(f'module.fleet.lium_pod.worker["{key}-{i:04d}"]', ["delete"]) for i in range(1500)]
    result = summary(plan_file(tmp_path, *pods), "--max-destroyed", "1", env=NO_FEED)
    assert result.returncode == 3
    assert len(result.stdout) <= MAX_MARKDOWN_CHARS and max(map(len, result.stdout.splitlines())) < 8000
    (line,) = violations(result)
    assert "and 1480 more" in line and len(line) < 8000, line[:300]
    assert '-0000"]`' in line and '-0001"]`' in line, "each named by the end of its key"
