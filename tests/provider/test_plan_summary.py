"""``lium-tf plan-summary`` on real plans: real terraform against the emulator, priced from its live feed.

Expected prices are computed here straight from the emulator's raw feed (price per GPU times count over the
nodes that can take the order now), independently of the provider's offer code the summary uses.
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

from lium_emulator.launcher import RunningEmulator
from lium_provider.plan_summary import OfferBook, summarize
from tests.support import http
from tests.support.lium import PROVIDER_BLOCK, Account
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

SECRET_TOKEN = "plan-summary-secret-7c1e"
STACK = """
variable "token" {
  type      = string
  sensitive = true
}
resource "lium_template" "t" {
  name             = "summary"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
  environment      = { STAGE = "%(stage)s", TOKEN = var.token }
}
resource "lium_pod" "a" {
  name        = "%(name_a)s"
  template_id = lium_template.t.id
  gpu         = "RTX 4090"
}
resource "lium_pod" "b" {
  name        = "pinned"
  template_id = lium_template.t.id
  executor_id = "%(executor_b)s"
}
%(extra)s
"""
POD_C = """
resource "lium_pod" "c" {
  name        = "pair"
  template_id = lium_template.t.id
  gpu         = "RTX 4090"
  gpu_count   = 2
}
"""
# A one-GPU RTX 4090 node of the packaged catalog that is not the cheapest: pod b pins it by executor_id.
PINNED_EXECUTOR = "b46e889b-7a41-5bdd-a827-3dcbf1926d07"


def stack(stage: str = "one", name_a: str = "alpha", extra: str = "") -> str:
    return PROVIDER_BLOCK + STACK % {
        "stage": stage,
        "name_a": name_a,
        "executor_b": PINNED_EXECUTOR,
        "extra": extra,
    }


def feed_nodes(emulator: RunningEmulator) -> list[dict[str, Any]]:
    response = http.get(f"{emulator.api_url}/public/v1/nodes", timeout=30)
    response.raise_for_status()
    nodes: list[dict[str, Any]] = response.json()["nodes"]
    return nodes


def cheapest(nodes: list[dict[str, Any]], gpu_model: str, count: int) -> tuple[str, float]:
    """(node id, pod price) of the cheapest node that rents ``count`` GPUs of ``gpu_model`` now."""
    prices = [
        (round(n["price_per_gpu_hour"] * count, 6), n["id"])
        for n in nodes
        if n["gpu_model"] == gpu_model and n["min_rentable_gpu_count"] <= count <= n["available_gpu_count"]
    ]
    price, node_id = min(prices)
    return node_id, price


def node_price(nodes: list[dict[str, Any]], node_id: str, count: int) -> float:
    (node,) = [n for n in nodes if n["id"] == node_id]
    return round(float(node["price_per_gpu_hour"]) * count, 6)


def run_summary(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "plan-summary", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=120,
    )


def summarize_plan(tf: Terraform, *plan_args: str) -> tuple[str, str]:
    """``terraform plan -out`` + ``show -json`` + ``lium-tf plan-summary``: (plan JSON text, Markdown)."""
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin", *plan_args)
    plan_json = tf.run("show", "-json", "plan.bin").stdout
    (tf.workdir / "plan.json").write_text(plan_json)
    result = run_summary(str(tf.workdir / "plan.json"), env={"LIUM_API_URL": tf.env["LIUM_API_URL"]})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return plan_json, result.stdout


def pod_rows(markdown: str) -> dict[str, dict[str, str]]:
    """The pod table, by address: column title → cell text."""
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split(" | ")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        row = dict(zip(header, cells, strict=True))
        rows[row["Pod"].strip("`")] = row
    return rows


def sections(markdown: str) -> dict[str, list[str]]:
    """Change sections (``#### Create (2)``) → the addresses listed under each."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in markdown.splitlines():
        if line.startswith("#### "):
            title = line.removeprefix("#### ").rsplit(" (", 1)[0]
            current = found.setdefault(title, [])
        elif line.startswith("- `") and current is not None:
            current.append(line.removeprefix("- `").split("`", 1)[0])
    return found


def cost_line(per_hour: float) -> str:
    return f"**GPU cost after apply: ${per_hour:,.2f}/h · ${per_hour * 730:,.2f}/month**"


@pytest.fixture
def make_stack(make_terraform: Callable[..., Terraform], account: Account) -> Callable[[str], Terraform]:
    def make(main_tf: str) -> Terraform:
        tf = make_terraform(main_tf, **account.env, TF_VAR_token=SECRET_TOKEN)
        tf.init()
        return tf

    return make


def test_summaries_of_create_update_replace_and_destroy(
    make_stack: Callable[[str], Terraform], account: Account, emulator: RunningEmulator
) -> None:
    tf = make_stack(stack())

    # Create: every pod at today's offer (the cheapest match, or the pinned executor's price).
    plan_json, summary = summarize_plan(tf)
    nodes = feed_nodes(emulator)
    executor_a, price_a = cheapest(nodes, "RTX 4090", 1)
    price_b = node_price(nodes, PINNED_EXECUTOR, 1)
    assert executor_a != PINNED_EXECUTOR and price_a < price_b
    assert summary.startswith("### Lium plan: 3 to create, 0 to update, 0 to replace, 0 to destroy\n")
    assert cost_line(price_a + price_b) in summary
    rows = pod_rows(summary)
    assert set(rows) == {"lium_pod.a", "lium_pod.b"}
    assert rows["lium_pod.a"]["Action"] == "create" and rows["lium_pod.a"]["Name"] == "`alpha`"
    assert rows["lium_pod.a"]["GPU"] == "`RTX 4090`" and rows["lium_pod.a"]["GPUs"] == "`1`"
    assert rows["lium_pod.a"]["USD/h"] == f"${price_a:.2f}"
    assert f"executor `{executor_a}`" in rows["lium_pod.a"]["Price"]
    assert rows["lium_pod.b"]["USD/h"] == f"${price_b:.2f}"
    assert rows["lium_pod.b"]["Price"].startswith(f"executor `{PINNED_EXECUTOR}` now")
    assert sections(summary) == {"Create": ["lium_pod.a", "lium_pod.b", "lium_template.t"]}
    assert SECRET_TOKEN in plan_json and SECRET_TOKEN not in summary

    tf.apply()
    state_prices = {
        r["name"]: r["instances"][0]["attributes"]["price_per_hour"]
        for r in tf.resources()
        if r["type"] == "lium_pod"
    }
    assert state_prices == {"a": price_a, "b": price_b}

    # Update: the template's environment changes in place; both pods are kept at their billed price,
    # even though the pinned executor has no free GPU left to offer now.
    assert not [n for n in feed_nodes(emulator) if n["id"] == PINNED_EXECUTOR]
    tf.write(stack(stage="two"))
    plan_json, summary = summarize_plan(tf)
    assert summary.startswith("### Lium plan: 0 to create, 1 to update, 0 to replace, 0 to destroy\n")
    assert cost_line(price_a + price_b) in summary
    rows = pod_rows(summary)
    assert [rows[a]["Action"] for a in ("lium_pod.a", "lium_pod.b")] == ["keep", "keep"]
    assert (
        rows["lium_pod.b"]["USD/h"] == f"${price_b:.2f}" and rows["lium_pod.b"]["Price"] == "current rental"
    )
    assert sections(summary) == {"Update in place": ["lium_template.t"]}
    environment_line = next(line for line in summary.splitlines() if "`environment`" in line)
    assert '"STAGE" = "one"' in environment_line and '"STAGE" = "two"' in environment_line
    assert environment_line.count("(sensitive value)") == 2
    assert SECRET_TOKEN in plan_json and SECRET_TOKEN not in summary

    # Replace (pod a renamed) and create (a two-GPU pod): both priced at today's cheapest offer.
    tf.write(stack(name_a="alpha-2", extra=POD_C))
    _, summary = summarize_plan(tf)
    nodes = feed_nodes(emulator)
    _, price_a_now = cheapest(nodes, "RTX 4090", 1)
    executor_c, price_c = cheapest(nodes, "RTX 4090", 2)
    assert price_c != 2 * price_a_now, "the two-GPU pod must be priced from a two-GPU offer"
    assert summary.startswith("### Lium plan: 1 to create, 0 to update, 1 to replace, 0 to destroy\n")
    assert cost_line(price_a_now + price_b + price_c) in summary
    assert f"before: ${price_a + price_b:.2f}/h" in summary
    rows = pod_rows(summary)
    assert rows["lium_pod.a"]["Action"] == "replace" and rows["lium_pod.a"]["Name"] == "`alpha-2`"
    assert rows["lium_pod.a"]["USD/h"] == f"${price_a_now:.2f}"
    assert rows["lium_pod.a"]["Price"].endswith(f"; was ${price_a:.2f}/h")
    assert rows["lium_pod.c"]["GPUs"] == "`2`" and rows["lium_pod.c"]["USD/h"] == f"${price_c:.2f}"
    assert f"executor `{executor_c}`" in rows["lium_pod.c"]["Price"]
    assert sections(summary) == {"Create": ["lium_pod.c"], "Replace": ["lium_pod.a"]}
    assert '  - `name`: `"alpha"` → `"alpha-2"` (forces replacement)' in summary.splitlines()

    # Destroy: nothing is left to pay for; the pods' last prices are shown struck through.
    tf.write(stack())
    _, summary = summarize_plan(tf, "-destroy")
    assert summary.startswith("### Lium plan: 0 to create, 0 to update, 0 to replace, 3 to destroy\n")
    assert cost_line(0.0) in summary and f"before: ${price_a + price_b:.2f}/h" in summary
    rows = pod_rows(summary)
    assert rows["lium_pod.a"]["Action"] == "destroy" and rows["lium_pod.a"]["USD/h"] == f"~~${price_a:.2f}~~"
    assert sections(summary) == {"Destroy": ["lium_pod.a", "lium_pod.b", "lium_template.t"]}

    tf.destroy()
    assert account.live()["pods"] == []


def test_feed_url_flag_env_and_stdin(
    make_stack: Callable[[str], Terraform], account: Account, emulator: RunningEmulator
) -> None:
    tf = make_stack(stack())
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    plan_json = tf.run("show", "-json", "plan.bin").stdout
    _, price_a = cheapest(feed_nodes(emulator), "RTX 4090", 1)
    feed = f"{emulator.api_url}/public/v1/nodes"
    missing = f"{emulator.api_url}/public/v1/no-such-feed"

    # Derived from LIUM_API_URL, plan read from standard input.
    derived = run_summary("-", env={"LIUM_API_URL": emulator.api_url}, stdin=plan_json)
    assert derived.returncode == 0 and pod_rows(derived.stdout)["lium_pod.a"]["USD/h"] == f"${price_a:.2f}"

    # LIUM_NODES_FEED_URL wins over LIUM_API_URL: a feed that 404s leaves new pods unpriced, with a warning.
    broken = run_summary(
        "-", env={"LIUM_API_URL": emulator.api_url, "LIUM_NODES_FEED_URL": missing}, stdin=plan_json
    )
    assert broken.returncode == 0
    assert "**Warning:** prices of new pods are unknown: the nodes feed could not be read" in broken.stdout
    assert pod_rows(broken.stdout)["lium_pod.a"]["USD/h"] == "?"
    assert "**GPU cost after apply: at least $0.00/h" in broken.stdout

    # --nodes-feed-url wins over both.
    flagged = run_summary(
        "-",
        "--nodes-feed-url",
        feed,
        env={"LIUM_NODES_FEED_URL": missing, "LIUM_API_URL": missing},
        stdin=plan_json,
    )
    assert flagged.returncode == 0 and pod_rows(flagged.stdout)["lium_pod.a"]["USD/h"] == f"${price_a:.2f}"
    assert account.live()["pods"] == [], "planning must not rent anything"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("", "not JSON"),
        ("{not json", "not JSON"),
        ('["a list"]', "not a Terraform JSON document"),
        ('{"format_version": "1.0", "values": {}}', "this is a state, not a plan"),
        ('{"format_version": "2.0", "resource_changes": []}', "unsupported plan format_version '2.0'"),
        (
            '{"format_version": "1.2", "resource_changes": [{"change": {"actions": "create"}}]}',
            "resource_changes[0]",
        ),
    ],
)
def test_unreadable_input_fails_with_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "plan.json"
    if content is not None:
        path.write_text(content)
    result = run_summary(str(path), env={"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"})
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("lium-tf plan-summary: ")
    assert message in result.stderr
    if content:
        assert content not in result.stderr, "the input itself is never echoed"


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (
            b"PK\x03\x04 a saved plan",
            "standard input is a saved Terraform plan, not its JSON: run `terraform show -json",
        ),
        (
            b'{"@level":"info","@message":"Terraform 1.11.4"}\n{"@level":"info","@message":"Plan: 1 to add"}\n',
            "this is the log stream of `terraform plan -json`, not a plan",
        ),
        (
            b'{"@level":"info","@message":"Terraform 1.11.4"}\n',
            "this is the log stream of `terraform plan -json`",
        ),
    ],
)
def test_common_wrong_inputs_on_stdin_say_what_to_pass(stdin: bytes, message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "plan-summary", "-"],
        input=stdin,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"},
        timeout=120,
    )
    assert result.returncode == 1 and result.stdout == b""
    assert message in result.stderr.decode(), result.stderr


def test_unreadable_stdin_fails_with_one_line() -> None:
    result = run_summary("-", env={}, stdin="terraform plan output, not JSON")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "lium-tf plan-summary: not JSON (line 1, column 1: Expecting value)\n"


def test_hostile_strings_sensitive_parts_and_reasons() -> None:
    """A hand-written plan with what real plans rarely show at once: nothing leaks out of a code span."""
    kept_pod = {
        "name": "x` | **bold** <!--",
        "gpu": "RTX 4090",
        "gpu_count": 1,
        "price_per_hour": 0.5,
        "ports": {"22": 2222},
    }
    plan = {
        "format_version": "1.2",
        "resource_changes": [
            {
                "address": "lium_pod.kept",
                "mode": "managed",
                "type": "lium_pod",
                "change": {"actions": ["no-op"], "before": kept_pod, "after": kept_pod, "after_unknown": {}},
            },
            {
                "address": "lium_template.t",
                "mode": "managed",
                "type": "lium_template",
                "action_reason": "replace_because_tainted",
                "change": {
                    "actions": ["delete", "create"],
                    "before": {"environment": {"A": "1", "KEY": "hunter2"}, "ports": [1, 2]},
                    "after": {"environment": {"A": "2", "KEY": "hunter3"}, "ports": [1]},
                    "after_unknown": {"ports": [False, True], "id": True},
                    "before_sensitive": {"environment": {"KEY": True}},
                    "after_sensitive": {"environment": {"KEY": True}},
                },
            },
            {
                "address": 'lium_volume.v["a|b"]',
                "mode": "managed",
                "type": "lium_volume",
                "change": {
                    "actions": ["update"],
                    "before": {"name": "old", "secret": "s3cr3t"},
                    "after": {"name": "new", "secret": "s3cr3t-2"},
                    "after_unknown": {},
                    "before_sensitive": {"secret": True},
                    "after_sensitive": {"secret": True},
                },
            },
            {
                "address": "data.lium_offers.o",
                "mode": "data",
                "type": "lium_offers",
                "change": {"actions": ["read"]},
            },
        ],
    }
    summary = summarize(json.dumps(plan), OfferBook("http://127.0.0.1:9/never-fetched"))
    for secret in ("hunter2", "hunter3", "s3cr3t"):
        assert secret not in summary
    assert summary.startswith("### Lium plan: 0 to create, 1 to update, 1 to replace, 0 to destroy\n")
    assert "**GPU cost after apply: $0.50/h · $365.00/month**" in summary
    (row,) = [line for line in summary.splitlines() if line.startswith("| `lium_pod.kept`")]
    assert "| ``x` \\| **bold** <!--`` |" in row and row.count(" | ") == 7
    assert "- `lium_template.t` (tainted)" in summary.splitlines()
    assert (
        '  - `environment`: `{"A" = "1", "KEY" = (sensitive value)}` → `{"A" = "2", "KEY" = (sensitive value)}`'
        in (summary.splitlines())
    )
    assert "  - `ports`: `[1, 2]` → `[1, (known after apply)]`" in summary.splitlines()
    assert "  - `secret`: `(sensitive value)` → `(sensitive value)`" in summary.splitlines()
    assert '- `lium_volume.v["a\\|b"]`' in summary.splitlines()
    assert "data.lium_offers" not in summary


# -- worst case, headline, policies, JSON: hand-written plans that carry `termination_hours` -------------

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "provider/lium_provider/plan_summary/plan-summary.schema.json").read_text()
)


def pod_entry(
    address: str, actions: list[str], before: dict[str, Any] | None, after: dict[str, Any] | None
) -> Any:
    """One ``resource_changes`` entry of a ``lium_pod``, as ``terraform show -json`` writes it."""
    return {
        "address": address,
        "mode": "managed",
        "type": "lium_pod",
        "change": {"actions": actions, "before": before, "after": after, "after_unknown": {}},
    }


def kept(address: str, price: float, hours: int | None = None) -> Any:
    values = {"name": address.split(".")[-1], "gpu": "RTX 4090", "gpu_count": 1, "price_per_hour": price}
    if hours is not None:
        values["termination_hours"] = hours
    return pod_entry(address, ["no-op"], values, values)


def created(address: str, hours: int | None = None) -> Any:
    """A new pod pinned to :data:`PINNED_EXECUTOR`: priced at that node's offer in the emulator's feed."""
    after = {"name": "new", "gpu_count": 1, "executor_id": PINNED_EXECUTOR, "termination_hours": hours}
    return pod_entry(address, ["create"], None, after)


def plan_document(*entries: Any) -> str:
    return json.dumps({"format_version": "1.2", "resource_changes": list(entries)})


def write_plan(tmp_path: Path, name: str, *entries: Any) -> str:
    path = tmp_path / name
    path.write_text(plan_document(*entries))
    return str(path)


def test_worst_case_until_removal_per_pod_and_in_total(tmp_path: Path) -> None:
    unused_feed = {"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"}
    bounded = write_plan(tmp_path, "bounded.json", kept("lium_pod.a", 0.5, 24), kept("lium_pod.b", 1.0, 10))
    result = run_summary(bounded, env=unused_feed)
    assert result.returncode == 0, result.stderr
    assert "**Worst case until Lium removes the pods: $22.00**\n" in result.stdout
    rows = pod_rows(result.stdout)
    assert rows["lium_pod.a"]["Until removal"] == "$12.00 (24 h)"
    assert rows["lium_pod.b"]["Until removal"] == "$10.00 (10 h)"

    # A pod without termination_hours runs until someone deletes it: its spend, and the total, are unbounded.
    unbounded = write_plan(tmp_path, "unbounded.json", kept("lium_pod.a", 0.5, 24), kept("lium_pod.b", 1.0))
    result = run_summary(unbounded, "--format", "json", env=unused_feed)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    spend = document["cost"]["worst_case_spend"]
    assert spend == {"usd": None, "bounded": False, "unbounded_pods": ["lium_pod.b"], "unknown_pods": []}
    pods = {p["address"]: p for p in document["stacks"][0]["pods"]}
    assert pods["lium_pod.a"]["worst_case_spend_usd"] == 12.0 and pods["lium_pod.a"]["lifetime"] == "bounded"
    assert (
        pods["lium_pod.b"]["worst_case_spend_usd"] is None and pods["lium_pod.b"]["lifetime"] == "unbounded"
    )
    markdown = run_summary(unbounded, env=unused_feed).stdout
    assert (
        "**Worst case until Lium removes the pods: unbounded** (1 pod has no `termination_hours`)" in markdown
    )
    assert pod_rows(markdown)["lium_pod.b"]["Until removal"] == "unbounded"


def test_headline_gives_the_change_and_its_percentage(tmp_path: Path) -> None:
    destroyed_values = {"name": "d", "gpu": "RTX 4090", "gpu_count": 1, "price_per_hour": 0.25}
    path = write_plan(
        tmp_path,
        "plan.json",
        kept("lium_pod.a", 0.5),
        pod_entry("lium_pod.d", ["delete"], destroyed_values, None),
    )
    result = run_summary(path, env={"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"})
    assert result.returncode == 0, result.stderr
    assert "**Change: -$0.25/h (-33.3%) · -$182.50/month**\n" in result.stdout
    assert (
        "**GPU cost after apply: $0.50/h · $365.00/month** (730 h a month; before: $0.75/h)" in result.stdout
    )
    # The per-resource changes are collapsed.
    assert "<details>\n<summary>Changes (1)</summary>\n\n#### Destroy (1)\n\n- `lium_pod.d`" in result.stdout
    document = json.loads(run_summary(path, "--format", "json", env={}).stdout)
    jsonschema.validate(document, SCHEMA)
    assert document["cost"]["hourly_change_usd"] == pytest.approx(-0.25)
    assert document["cost"]["hourly_change_percent"] == pytest.approx(-100 / 3)
    assert document["cost"]["monthly_change_usd"] == pytest.approx(-182.5)


def test_several_plans_give_one_table_per_stack(tmp_path: Path, emulator: RunningEmulator) -> None:
    price = node_price(feed_nodes(emulator), PINNED_EXECUTOR, 1)
    first = write_plan(tmp_path, "first.json", kept("lium_pod.a", 0.5, 24))
    second = write_plan(tmp_path, "second.json", created("lium_pod.new", 10))
    env = {"LIUM_API_URL": emulator.api_url}
    result = run_summary(first, second, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "### Lium plan: 2 stacks, 1 to create, 0 to update, 0 to replace, 0 to destroy\n"
    )
    assert f"**Change: +${price:.2f}/h (+{price / 0.5 * 100:.1f}%)" in result.stdout
    assert f"#### Stack `{first}`: 0 to create" in result.stdout
    assert f"#### Stack `{second}`: 1 to create" in result.stdout
    assert result.stdout.count("| Pod | Name | Action |") == 2
    document = json.loads(run_summary(first, second, "--format", "json", env=env).stdout)
    jsonschema.validate(document, SCHEMA)
    assert [s["name"] for s in document["stacks"]] == [first, second]
    assert document["cost"]["hourly_after"] == {
        "usd": pytest.approx(0.5 + price),
        "unknown_pods": 0,
        "estimated_pods": 0,
    }
    assert document["cost"]["worst_case_spend"]["usd"] == pytest.approx(12 + 10 * price)
    assert document["stacks"][1]["changes"] == [
        {
            "address": "lium_pod.new",
            "type": "lium_pod",
            "action": "create",
            "actions": ["create"],
            "deposed": None,
            "importing": False,
            "reason": None,
        }
    ]


@pytest.fixture
def policy_plan(tmp_path: Path, emulator: RunningEmulator) -> tuple[str, float, dict[str, str]]:
    """A plan keeping ``a`` ($0.50/h, 24 h) and ``b`` ($1/h, no hours), creating ``new`` (10 h); new's price."""
    path = write_plan(
        tmp_path,
        "plan.json",
        kept("lium_pod.a", 0.5, 24),
        kept("lium_pod.b", 1.0),
        created("lium_pod.new", 10),
    )
    return path, node_price(feed_nodes(emulator), PINNED_EXECUTOR, 1), {"LIUM_API_URL": emulator.api_url}


def violations(result: subprocess.CompletedProcess[str]) -> list[str]:
    prefix = "lium-tf plan-summary: policy violated: "
    lines = result.stderr.splitlines()
    assert all(line.startswith(prefix) for line in lines), result.stderr
    return [line.removeprefix(prefix) for line in lines]


def test_hourly_policies_fail_above_their_limit_and_pass_at_it(
    policy_plan: tuple[str, float, dict[str, str]],
) -> None:
    path, price, env = policy_plan
    at_limit = run_summary(
        path, "--max-hourly-increase", f"{price}", "--max-hourly-total", f"{1.5 + price}", env=env
    )
    assert at_limit.returncode == 0 and at_limit.stderr == ""
    assert "#### Policies: all passed" in at_limit.stdout

    over = run_summary(
        path, "--max-hourly-increase", f"{price - 0.01}", "--max-hourly-total", f"${1.49 + price}", env=env
    )
    assert over.returncode == 3
    increase, hourly_total = violations(over)
    assert increase.startswith(f"max-hourly-increase: the plan adds ${price:.2f}/h, more than")
    assert increase.endswith(f": `lium_pod.new` +${price:.2f}/h")
    assert hourly_total.startswith(f"max-hourly-total: the pods cost ${1.5 + price:.2f}/h after apply")
    assert "`lium_pod.a` $0.50/h" in hourly_total and "`lium_pod.b` $1.00/h" in hourly_total
    # The summary is still printed, with the verdicts.
    assert over.stdout.startswith("### Lium plan: 1 to create")
    assert "#### Policies: 2 of 2 failed" in over.stdout and increase in over.stdout


def test_spend_policies_name_each_unbounded_pod(
    policy_plan: tuple[str, float, dict[str, str]], tmp_path: Path
) -> None:
    path, price, env = policy_plan
    result = run_summary(path, "--max-spend", "1000", "--require-termination-hours", env=env)
    assert result.returncode == 3
    assert violations(result) == [
        "max-spend: `lium_pod.b` has no `termination_hours`: its spend is unbounded",
        "require-termination-hours: `lium_pod.b` has no `termination_hours`",
    ]

    # Without b every pod is bounded: the worst case is 24 h of a and 10 h of new.
    bounded = write_plan(tmp_path, "bounded.json", kept("lium_pod.a", 0.5, 24), created("lium_pod.new", 10))
    worst = 12 + 10 * price
    passed = run_summary(bounded, "--max-spend", f"{worst + 0.001}", "--require-termination-hours", env=env)
    assert passed.returncode == 0 and passed.stderr == "", passed.stderr
    failed = run_summary(bounded, "--max-spend", f"{worst - 0.01}", "--format", "json", env=env)
    assert failed.returncode == 3
    (line,) = violations(failed)
    assert line.startswith("max-spend: the pods can cost $") and "`lium_pod.new` $" in line
    document = json.loads(failed.stdout)
    jsonschema.validate(document, SCHEMA)
    assert document["policies"] == [
        {"policy": "max-spend", "limit": pytest.approx(worst - 0.01), "passed": False, "violations": [line]}
    ]


def test_money_policies_refuse_an_unknown_price(tmp_path: Path) -> None:
    path = write_plan(tmp_path, "plan.json", created("lium_pod.new", 10))
    result = run_summary(
        path, "--max-hourly-increase", "5", env={"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/x"}
    )
    assert result.returncode == 3
    (line,) = violations(result)
    assert line.startswith("max-hourly-increase: `lium_pod.new`: price not known now")


@pytest.mark.parametrize("amount", ["-1", "lots", "inf", "nan"])
def test_a_bad_policy_amount_is_refused_naming_the_flag(tmp_path: Path, amount: str) -> None:
    path = write_plan(tmp_path, "plan.json", kept("lium_pod.a", 0.5))
    result = run_summary(path, "--max-spend", amount, env={})
    assert result.returncode == 2 and result.stdout == ""
    assert "--max-spend" in result.stderr and amount in result.stderr


def test_the_documented_schema_is_a_valid_json_schema_that_rejects_other_versions() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    document = json.loads(
        run_summary("-", "--format", "json", env={}, stdin=plan_document(kept("lium_pod.a", 0.5, 24))).stdout
    )
    jsonschema.validate(document, SCHEMA)
    document["schema_version"] = 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_real_plans_count_termination_hours_and_the_provider_default(
    make_terraform: Callable[..., Terraform], account: Account, emulator: RunningEmulator
) -> None:
    """Through real plans: the worst case is price times termination_hours, the policy names the pod
    without one, and the provider's ``default_termination_hours`` counts, being planned into the pod."""
    body = stack(extra="").replace(
        '  gpu         = "RTX 4090"\n', '  gpu         = "RTX 4090"\n  termination_hours = 5\n'
    )
    tf = make_terraform(body, **account.env, TF_VAR_token=SECRET_TOKEN)
    tf.init()
    nodes = feed_nodes(emulator)
    _, price_a = cheapest(nodes, "RTX 4090", 1)
    env = {"LIUM_API_URL": emulator.api_url}

    _, summary = summarize_plan(tf)
    rows = pod_rows(summary)
    assert rows["lium_pod.a"]["Until removal"] == f"${price_a * 5:.2f} (5 h)", rows["lium_pod.a"]
    assert "unbounded" in rows["lium_pod.b"]["Until removal"], rows["lium_pod.b"]
    failed = run_summary(str(tf.workdir / "plan.json"), "--require-termination-hours", env=env)
    assert failed.returncode == 3
    assert violations(failed) == ["require-termination-hours: `lium_pod.b` has no `termination_hours`"]
    document = json.loads(run_summary(str(tf.workdir / "plan.json"), "--format", "json", env=env).stdout)
    jsonschema.validate(document, SCHEMA)
    lifetimes = {p["address"]: (p["lifetime"], p["termination_hours"]) for p in document["stacks"][0]["pods"]}
    assert lifetimes == {"lium_pod.a": ("bounded", 5), "lium_pod.b": ("unbounded", None)}

    # The provider's default, from the environment of the plan, is in the plan JSON as b's hours.
    tf.env["LIUM_DEFAULT_TERMINATION_HOURS"] = "10"
    summarize_plan(tf)
    price_b = node_price(nodes, PINNED_EXECUTOR, 1)
    passed = run_summary(
        str(tf.workdir / "plan.json"),
        "--require-termination-hours",
        "--max-spend",
        f"{price_a * 5 + price_b * 10 + 0.01}",
        env=env,
    )
    assert passed.returncode == 0 and passed.stderr == "", passed.stderr
    assert f"${price_b * 10:.2f} (10 h)" in pod_rows(passed.stdout)["lium_pod.b"]["Until removal"]
    assert account.live()["pods"] == [], "plans rent nothing"


def test_a_saved_plan_or_other_binary_input_is_refused_saying_what_to_pass(tmp_path: Path) -> None:
    saved = tmp_path / "plan.bin"
    saved.write_bytes(b"PK\x03\x04\x14\x00\x08\x00\xff\xfe")  # a saved plan is a zip archive
    other = tmp_path / "blob"
    other.write_bytes(b"\xff\xfe\x00binary")
    command = [sys.executable, "-m", "lium_provider.cli", "plan-summary"]
    for path, words in ((saved, "terraform show -json"), (other, "terraform show -json <plan file>")):
        result = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and words in result.stderr, result.stderr
    saved_message = subprocess.run([*command, str(saved)], capture_output=True, text=True, timeout=60).stderr
    assert "is a saved Terraform plan, not its JSON" in saved_message


def test_a_pod_without_gpu_is_an_estimate_bounded_by_its_max_price(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    """A new pod whose GPU is chosen at apply: the cheapest matching offer now, worst case its price cap."""
    nodes = feed_nodes(emulator)
    one_gpu = [
        round(n["price_per_gpu_hour"], 6)
        for n in nodes
        if n["min_rentable_gpu_count"] <= 1 <= n["available_gpu_count"]
    ]
    cap = sorted(one_gpu)[len(one_gpu) // 2]
    after = {"name": "any", "gpu_count": 1, "max_price_per_hour": cap, "termination_hours": 10}
    entry = pod_entry("lium_pod.any", ["create"], None, after)
    entry["change"]["after_unknown"] = {"gpu": True, "executor_id": True}
    uncapped = dict(after, max_price_per_hour=None)
    second = pod_entry("lium_pod.free", ["create"], None, uncapped)
    second["change"]["after_unknown"] = {"gpu": True, "executor_id": True}
    path = write_plan(tmp_path, "plan.json", entry, second)
    env = {"LIUM_API_URL": emulator.api_url}

    result = run_summary(path, "--format", "json", "--max-spend", "100000", env=env)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    pods = {p["address"]: p for p in document["stacks"][0]["pods"]}
    capped, free = pods["lium_pod.any"], pods["lium_pod.free"]
    assert capped["price_per_hour_after"] == pytest.approx(min(one_gpu))
    assert (capped["price_estimate"], capped["worst_case_price_basis"]) == (True, "max_price_per_hour")
    assert capped["worst_case_price_per_hour"] == pytest.approx(cap)
    assert capped["worst_case_spend_usd"] == pytest.approx(cap * 10)
    assert free["worst_case_price_basis"] == "dearest_offer"
    assert free["worst_case_price_per_hour"] == pytest.approx(max(one_gpu))
    assert document["cost"]["hourly_after"]["estimated_pods"] == 2
    assert document["cost"]["exact"] is False

    strict = run_summary(path, "--max-spend", "100000", "--strict-prices", env=env)
    assert strict.returncode == 3
    assert len(violations(strict)) == 2
    assert all("--strict-prices refuses estimates" in line for line in violations(strict))


def test_a_forgotten_pod_is_still_billed_not_a_saving(tmp_path: Path) -> None:
    """A ``removed`` block with ``destroy = false`` leaves the pod running: the account still pays for it."""
    unused_feed = {"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"}
    values = {"name": "a", "gpu": "H100", "gpu_count": 1, "price_per_hour": 1.99, "termination_hours": 5}
    forgotten = pod_entry("lium_pod.a", ["forget"], values, None)
    plan = write_plan(tmp_path, "forget.json", forgotten, kept("lium_pod.b", 1.0, 10))
    result = run_summary(plan, "--format", "json", "--max-hourly-increase", "0.01", env=unused_feed)
    assert result.returncode == 0, result.stderr
    cost = json.loads(result.stdout)["cost"]
    assert cost["hourly_before"]["usd"] == cost["hourly_after"]["usd"] == 2.99, cost
    assert cost["worst_case_spend"]["usd"] == pytest.approx(1.99 * 5 + 10.0), cost
    assert run_summary(plan, "--max-hourly-total", "2.5", env=unused_feed).returncode == 3


def test_an_executor_id_the_configuration_sets_but_the_plan_does_not_know_leaves_the_price_unknown(
    tmp_path: Path,
) -> None:
    """``executor_id = terraform_data.x.output``: the filter does not choose the node, that value does."""
    after = {"name": "p", "gpu": "RTX 4090", "gpu_count": 1, "termination_hours": 1}
    pinned_later = pod_entry("module.gpu.lium_pod.p[0]", ["create"], None, after)
    pinned_later["change"]["after_unknown"] = {"executor_id": True}
    configuration = {
        "root_module": {
            "module_calls": {
                "gpu": {
                    "module": {
                        "resources": [
                            {"address": "lium_pod.p", "expressions": {"executor_id": {}, "gpu": {}}}
                        ]
                    }
                }
            }
        }
    }
    plan = json.dumps(
        {"format_version": "1.2", "resource_changes": [pinned_later], "configuration": configuration}
    )
    path = tmp_path / "pinned-later.json"
    path.write_text(plan)
    unused_feed = {"LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"}
    result = run_summary(str(path), "--format", "json", "--max-hourly-total", "1000", env=unused_feed)
    assert result.returncode == 3, result.stdout + result.stderr
    (pod,) = json.loads(result.stdout)["stacks"][0]["pods"]
    assert (
        pod["price_per_hour_after"] is None
        and "`executor_id` known after apply" in pod["price_basis_markdown"]
    )


def test_a_closed_standard_output_fails_the_command_saying_so(tmp_path: Path) -> None:
    """Where the summary would go nowhere, the command says so and fails instead of a traceback."""
    plan = write_plan(tmp_path, "plan.json", kept("lium_pod.a", 0.5, 24))
    result = subprocess.run(
        f'exec "{sys.executable}" -m lium_provider.cli plan-summary "{plan}" >&-',
        shell=True,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LIUM_NODES_FEED_URL": "http://127.0.0.1:9/unused"},
        timeout=120,
    )
    assert result.returncode == 120, result.stderr
    assert result.stderr == "lium-tf: standard output is closed\n"
