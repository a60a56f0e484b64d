"""Every example synthesizes to its checked-in snapshot, identically under cdktf and cdktn, and as valid HCL.

Snapshots are normalised (the CDK's version and the state path are left out). After an intended change,
rewrite them with ``LIUM_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/constructs/test_synth.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lium_emulator.images import image_catalog
from tests.constructs.apps import EXAMPLES, SNAPSHOT_KEY, normalised, synth
from tests.support.terraform import Terraform

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("LIUM_UPDATE_SNAPSHOTS") == "1"
SYNTH_ENV = {"LIUM_SSH_PRIVATE_KEY_FILE": str(SNAPSHOT_KEY)}
CDK_VERSIONS = {"cdktf": "0.21.0", "cdktn": "0.24.0"}


def _rendered(doc: dict[str, object]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_matches_its_snapshot_under_cdktf_and_cdktn(example: str, tmp_path: Path) -> None:
    docs = {}
    for cdk, version in CDK_VERSIONS.items():
        stack = synth(example, tmp_path / cdk, cdk=cdk, env=SYNTH_ENV)
        synthesized_by = json.loads((stack / "cdk.tf.json").read_text())["//"]["metadata"]["version"]
        assert synthesized_by == version, f"LIUM_CDK={cdk} did not synthesize with {cdk} {version}"
        docs[cdk] = normalised(stack, tmp_path / cdk)
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
    assert 'resource "lium_pod"' in hcl and 'source = "lium-stacks/lium"' in hcl
    tf = Terraform(stack, terraform_env)
    tf.run("init", "-backend=false", "-input=false", "-no-color")
    result = tf.run("validate", "-json")
    assert json.loads(result.stdout)["valid"] is True, result.stdout
