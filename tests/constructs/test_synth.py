"""Every example synthesizes to its checked-in snapshot, identically under cdktf and cdktn, and as valid HCL.

Snapshots leave out the CDK's version; nothing else depends on the machine (the local state path is
relative, so a copied or moved project keeps its backend). After an intended change,
rewrite them with ``LIUM_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/constructs/test_synth.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lium_emulator.catalogs.images import image_catalog
from tests.constructs.apps import CDK_VERSIONS, EXAMPLES, SNAPSHOT_KEY, normalised, synth
from tests.support.terraform import Terraform

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("LIUM_UPDATE_SNAPSHOTS") == "1"
SYNTH_ENV = {"LIUM_SSH_PRIVATE_KEY_FILE": str(SNAPSHOT_KEY)}


def _rendered(doc: dict[str, object]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_matches_its_snapshot_under_cdktf_and_cdktn(example: str, tmp_path: Path) -> None:
    docs = {}
    for cdk, version in CDK_VERSIONS.items():
        stack = synth(example, tmp_path / cdk, cdk=cdk, env=SYNTH_ENV)
        synthesized_by = json.loads((stack / "cdk.tf.json").read_text())["//"]["metadata"]["version"]
        assert synthesized_by == version, f"LIUM_CDK={cdk} did not synthesize with {cdk} {version}"
        docs[cdk] = normalised(stack)
    assert docs["cdktf"] == docs["cdktn"], "cdktf and cdktn synthesized different configurations"
    snapshot = SNAPSHOTS / f"{example}.json"
    if UPDATE:
        snapshot.write_text(_rendered(docs["cdktf"]))
    assert snapshot.read_text() == _rendered(docs["cdktf"]), (
        f"{example} no longer matches {snapshot.name}: review the change, then rewrite the snapshots with "
        "LIUM_UPDATE_SNAPSHOTS=1"
    )


def test_snapshots_cover_exactly_the_examples() -> None:
    assert sorted(p.stem for p in SNAPSHOTS.glob("*.json")) == sorted(EXAMPLES)


def test_registry_password_never_reaches_the_synthesized_json(tmp_path: Path) -> None:
    password = "hunter2-not-in-json"  # what a user exports before synth and deploy
    stack = synth("private-registry", tmp_path, env={**SYNTH_ENV, "TF_VAR_registry_password": password})
    text = (stack / "cdk.tf.json").read_text()
    assert password not in text
    doc = json.loads(text)
    (credential,) = doc["resource"]["lium_docker_credential"].values()
    assert credential["password_wo"] == "${var.registry_password}"
    assert doc["variable"]["registry_password"] | {"description": ""} == {
        "description": "",
        "ephemeral": True,
        "nullable": False,
        "sensitive": True,
        "type": "string",
    }


def test_private_registry_example_defaults_to_the_emulators_private_image(tmp_path: Path) -> None:
    private = next(image for image in image_catalog() if image.private)
    doc = json.loads((synth("private-registry", tmp_path, env=SYNTH_ENV) / "cdk.tf.json").read_text())
    (template,) = doc["resource"]["lium_template"].values()
    (credential,) = doc["resource"]["lium_docker_credential"].values()
    assert template["image"] == private.reference
    assert credential["username"] == private.registry_username


@pytest.mark.parametrize("example", EXAMPLES)
def test_hcl_synth_is_valid_terraform(example: str, tmp_path: Path, terraform_env: dict[str, str]) -> None:
    stack = synth(example, tmp_path, env=SYNTH_ENV, hcl=True)
    hcl = (stack / "cdk.tf").read_text()
    assert not (stack / "cdk.tf.json").exists()
    assert (
        'resource "lium_pod"' in hcl or 'resource "lium_cluster"' in hcl
    ) and 'source = "lium-stacks/lium"' in hcl
    tf = Terraform(stack, terraform_env)
    tf.run("init", "-backend=false", "-input=false", "-no-color")
    result = tf.run("validate", "-json")
    assert json.loads(result.stdout)["valid"] is True, result.stdout


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_local_state_stays_where_the_app_runs_by_a_relative_path(example: str, tmp_path: Path) -> None:
    stack = synth(example, tmp_path, env=SYNTH_ENV)
    path = json.loads((stack / "cdk.tf.json").read_text())["terraform"]["backend"]["local"]["path"]
    assert not Path(path).is_absolute(), path
    assert (stack / path).resolve() == tmp_path.resolve() / f"terraform.{example}.tfstate"


def test_a_moved_project_initialises_without_backend_changes(
    tmp_path: Path, terraform_env: dict[str, str]
) -> None:
    """A project copied elsewhere, with its ``cdktf.out`` and ``.terraform``, synthesizes and initialises
    again without "Backend configuration changed" (cdktf's default backend path was absolute)."""
    first = synth("quickstart", tmp_path / "checkout", env=SYNTH_ENV)
    Terraform(first, terraform_env).init()
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "checkout", moved)
    stack = synth("quickstart", moved, env=SYNTH_ENV)
    tf = Terraform(stack, terraform_env)
    tf.init()  # -input=false: a changed backend would fail here instead of asking
    assert (stack / ".terraform" / "terraform.tfstate").exists()
