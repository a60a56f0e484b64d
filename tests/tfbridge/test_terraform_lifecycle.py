"""The bridge through real Terraform: every lifecycle step of the test resource, end to end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.terraform import Terraform, flat, interrupt, reaped

pytestmark = pytest.mark.terraform

SECRET = "s3cr3t-write-only-value-9f8e7d"


def config(store: Path, body: str, token: str = '"bridge-token-0123456789"') -> str:
    return f"""
terraform {{
  required_providers {{
    bridgetest = {{ source = "lium-stacks/bridgetest" }}
  }}
}}
provider "bridgetest" {{
  store_dir = "{store}"
  token     = {token}
}}
{body}
"""


def thing(name: str = "alpha", extra: str = "") -> str:
    return f"""
resource "bridgetest_thing" "t" {{
  name = "{name}"
  {extra}
}}
"""


def only_instance(tf: Terraform) -> dict[str, object]:
    resources = tf.resources()
    assert len(resources) == 1, resources
    instances = resources[0]["instances"]
    assert len(instances) == 1
    attributes: dict[str, object] = instances[0]["attributes"]
    return attributes


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


def test_create_update_replace_and_destroy(make_terraform: Callable[..., Terraform], store: Path) -> None:
    tf = make_terraform(config(store, thing("alpha", 'tags = { team = "ml" }\n  ports = [22, 10022]')))
    tf.init()
    tf.apply()
    created = only_instance(tf)
    assert created["name"] == "alpha"
    assert created["size"] == 1  # the schema default
    assert created["revision"] == 1
    assert created["tags"] == {"team": "ml"}
    assert created["ports"] == [22, 10022]
    first_id = created["id"]
    assert (store / f"{first_id}.json").exists()
    assert tf.plan_exitcode()[0] == 0, "a fresh apply must plan no changes"

    # In place: same id, bumped revision, created_at kept by use-state-for-unknown.
    tf.write(config(store, thing("beta")))
    code, plan = tf.plan_exitcode()
    assert code == 2 and "~ update in-place" in plan
    assert "revision" in plan and "created_at" not in plan, "use-state-for-unknown keeps created_at known"
    tf.apply()
    updated = only_instance(tf)
    assert updated["id"] == first_id and updated["name"] == "beta" and updated["revision"] == 2
    assert updated["created_at"] == created["created_at"]

    # Requires-replace: a new id, the old file gone.
    tf.write(config(store, thing("beta", "size = 5")))
    code, plan = tf.plan_exitcode()
    assert code == 2 and "forces replacement" in plan
    tf.apply()
    replaced = only_instance(tf)
    assert replaced["id"] != first_id and replaced["size"] == 5
    assert not (store / f"{first_id}.json").exists()

    tf.destroy()
    assert tf.resources() == []
    assert list(store.glob("*.json")) == []


def test_conditional_replacement(make_terraform: Callable[..., Terraform], store: Path) -> None:
    tf = make_terraform(config(store, thing("z", 'zone = "eu"')))
    tf.init()
    tf.apply()
    first = only_instance(tf)["id"]
    tf.write(config(store, thing("z", 'zone = "any"')))
    tf.apply()
    assert only_instance(tf)["id"] == first, "moving into zone 'any' is an in-place update"
    tf.write(config(store, thing("z", 'zone = "us"')))
    tf.apply()
    tf.write(config(store, thing("z", 'zone = "ap"')))
    code, plan = tf.plan_exitcode()
    assert code == 2 and "forces replacement" in plan


def test_out_of_band_delete_is_recreated(make_terraform: Callable[..., Terraform], store: Path) -> None:
    tf = make_terraform(config(store, thing()))
    tf.init()
    tf.apply()
    gone = only_instance(tf)["id"]
    (store / f"{gone}.json").unlink()
    code, plan = tf.plan_exitcode()
    assert code == 2 and "will be created" in plan and "Plan: 1 to add, 0 to change, 0 to destroy" in plan
    tf.apply()
    assert only_instance(tf)["id"] != gone
    assert len(list(store.glob("*.json"))) == 1


def test_import(make_terraform: Callable[..., Terraform], store: Path) -> None:
    (store / "abc123.json").write_text(
        json.dumps({"id": "abc123", "name": "imported", "size": 3, "revision": 7, "created_at": "then"})
    )
    tf = make_terraform(config(store, thing("imported", "size = 3")))
    tf.init()
    tf.run("import", "-no-color", "bridgetest_thing.t", "abc123")
    state = only_instance(tf)
    assert state["id"] == "abc123" and state["revision"] == 7 and state["name"] == "imported"
    assert tf.plan_exitcode()[0] == 0
    result = tf.run("import", "-no-color", "bridgetest_thing.t", "nope", check=False)
    assert result.returncode != 0


def test_write_only_secret_never_stored(make_terraform: Callable[..., Terraform], store: Path) -> None:
    # The secret comes from an ephemeral variable, as users pass secrets: a literal in the configuration
    # would be echoed by Terraform itself in the plan's configuration section.
    variable = "".join(
        f'variable "{name}" {{\n  type = string\n  sensitive = true\n  ephemeral = true\n}}\n'
        for name in ("secret", "token")
    )
    body = variable + thing("w", "secret_wo = var.secret\n  secret_wo_version = 1")
    tf = make_terraform(
        config(store, body, token="var.token"),
        TF_LOG="TRACE",
        TF_LOG_PATH=str(store.parent / "trace.log"),
        TF_VAR_secret=SECRET,
        TF_VAR_token="bridge-token-0123456789",
    )
    tf.init()
    applied = tf.apply()
    assert only_instance(tf)["secret_length"] == len(SECRET), "the write-only value must reach the apply"
    tf.run("plan", "-out=plan.bin", "-no-color")
    show_plan = tf.run("show", "-json", "plan.bin").stdout
    show_state = tf.run("show", "-json").stdout
    state_file = (tf.workdir / "terraform.tfstate").read_text()
    trace = (store.parent / "trace.log").read_text()
    for where, text in {
        "apply output": applied.stdout + applied.stderr,
        "plan json": show_plan,
        "show json": show_state,
        "state file": state_file,
        "TF_LOG=TRACE": trace,
    }.items():
        assert SECRET not in text, f"the write-only secret leaked into {where}"
        assert "bridge-token-0123456789" not in text, f"the sensitive provider token leaked into {where}"
    assert only_instance(tf)["secret_wo"] is None
    # The provider's structured logs reach Terraform's log, with the sensitive token redacted.
    configured = [
        line
        for line in trace.splitlines()
        if "provider.terraform-provider-bridgetest" in line and "configured" in line
    ]
    assert configured and all("token=<redacted>" in line for line in configured), configured[:3]
    # Rotation: a new version sends the new secret.
    tf.write(
        config(
            store, variable + thing("w", "secret_wo = var.secret\n  secret_wo_version = 2"), token="var.token"
        )
    )
    tf.env["TF_VAR_secret"] = "longer-secret-value-2"
    tf.apply()
    assert only_instance(tf)["secret_length"] == len("longer-secret-value-2")


def test_invalid_config_names_the_attribute(make_terraform: Callable[..., Terraform], store: Path) -> None:
    tf = make_terraform(config(store, thing("", 'size = 5000\n  timeouts { create = "soon" }')))
    tf.init()
    result = tf.run("plan", "-no-color", check=False)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "Invalid value for name" in output
    flattened = flat(output)
    assert "Invalid value for size" in flattened and "Must be 1 to 1000 (got 5000)." in flattened, output
    assert "Invalid value for timeouts.create" in output and "is not a duration" in output
    assert 'name = ""' in output, "the diagnostic must point at the configuration line"


def test_provider_config_error_names_the_attribute(
    make_terraform: Callable[..., Terraform], store: Path
) -> None:
    tf = make_terraform(config(store, thing(), token='"reject-me"'))
    tf.init()
    result = tf.run("plan", "-no-color", check=False)
    assert result.returncode == 1
    assert "token rejected" in result.stdout + result.stderr


def test_data_source(make_terraform: Callable[..., Terraform], store: Path) -> None:
    body = (
        thing("keep-me")
        + """
data "bridgetest_things" "all" {
  name_prefix = "keep"
  depends_on  = [bridgetest_thing.t]
}
output "names" { value = data.bridgetest_things.all.names }
"""
    )
    tf = make_terraform(config(store, body))
    tf.init()
    tf.apply()
    outputs = json.loads(tf.run("output", "-json").stdout)
    assert outputs["names"]["value"] == ["keep-me"]


def test_sigint_during_slow_create_keeps_the_object(
    make_terraform: Callable[..., Terraform], store: Path
) -> None:
    tf = make_terraform(config(store, thing("slow", "create_delay_seconds = 300")))
    tf.init()
    with reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        deadline = time.monotonic() + 60
        while not list(store.glob("*.json")):
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "create never started"
            time.sleep(0.05)
        started = time.monotonic()
        interrupt(process)
        output, _ = process.communicate(timeout=60)
        assert time.monotonic() - started < 30, "cancellation must stop the wait promptly"
    assert process.returncode != 0
    assert "cancelled" in output.lower() or "interrupt" in output.lower(), output
    created = only_instance(tf)
    assert (store / f"{created['id']}.json").exists(), "the created object must be in state"
    tf.destroy()
    assert list(store.glob("*.json")) == []
    assert tf.resources() == []


LABELS = """
resource "bridgetest_label" "from_thing" {
  name = bridgetest_thing.t.id
}
resource "bridgetest_label" "solo" {
  name = "solo"
}
resource "bridgetest_label" "twice" {
  name   = "%s"
  copies = 2
}
"""


def planned_changes(tf: Terraform) -> dict[str, dict[str, Any]]:
    """``terraform plan`` as JSON: each resource's change (``after``, ``after_unknown``, ``actions``)."""
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    return {c["address"]: c["change"] for c in tf.show_json("plan.bin")["resource_changes"]}


def test_typed_modify_plan_sees_defaults_and_unknowns(
    make_terraform: Callable[..., Terraform], store: Path
) -> None:
    tf = make_terraform(config(store, thing("alpha") + LABELS % "two"))
    tf.init()
    plan = planned_changes(tf)
    # The name comes from an object not created yet: the label is known only after apply.
    assert plan["bridgetest_label.from_thing"]["after_unknown"].get("label") is True
    # copies is unset: the resource's typed plan read the schema default, 1.
    assert plan["bridgetest_label.solo"]["after"]["label"] == "solo"
    assert plan["bridgetest_label.twice"]["after"]["label"] == "two-two"
    tf.apply()  # Terraform fails the apply if a planned known value differs from the result
    labels = {
        r["name"]: r["instances"][0]["attributes"] for r in tf.resources() if r["type"] == "bridgetest_label"
    }
    thing_id = next(r for r in tf.resources() if r["type"] == "bridgetest_thing")["instances"][0][
        "attributes"
    ]["id"]
    assert labels["from_thing"]["label"] == thing_id
    assert labels["solo"]["copies"] == 1 and labels["solo"]["label"] == "solo"

    # An update: the declarative rules make the computed label unknown; the resource plans it again.
    tf.write(config(store, thing("alpha") + LABELS % "three"))
    plan = planned_changes(tf)
    assert plan["bridgetest_label.twice"]["actions"] == ["update"]
    assert plan["bridgetest_label.twice"]["after"]["label"] == "three-three"
    assert plan["bridgetest_label.solo"]["actions"] == ["no-op"]
    tf.apply()
    tf.destroy()
    assert tf.resources() == []


def test_typed_validate_config_reads_defaults_and_names_the_attribute(
    make_terraform: Callable[..., Terraform], store: Path
) -> None:
    long_name = 'resource "bridgetest_label" "long" {\n  name = "%s"\n}\n' % ("y" * 65)
    tf = make_terraform(config(store, thing("alpha") + LABELS % ("x" * 40) + long_name))
    tf.init()
    result = tf.run("plan", "-no-color", check=False)
    output = " ".join((result.stdout + result.stderr).split())  # Terraform wraps long lines
    assert result.returncode == 1, output
    assert output.count("The label is too long") == 2, output
    assert "2 copies of 'xxxx" in output and "copies = 2" in output, "the diagnostic points at the line"
    assert "1 copies of 'yyyy" in output, "an unset copies reads its default, 1"
