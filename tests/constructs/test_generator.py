"""The construct generator: the checked-in package is current, staleness is detected, names never clash."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import lium_constructs
from devtools import constructs_gen
from devtools.__main__ import main as devtools_main
from lium_constructs import generated
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.provider import LiumProvider
from tests.constructs.apps import QUIET
from tests.support.terraform import REPO

GENERATED = REPO / "constructs" / "lium_constructs" / "generated"


def test_checked_in_constructs_match_the_provider_schema() -> None:
    stale = constructs_gen.stale_files(LiumProvider, GENERATED)
    assert stale == [], f"stale generated constructs {stale}: run `make constructs`"


def test_every_resource_and_data_source_has_a_construct() -> None:
    text = (GENERATED / "__init__.py").read_text()
    for resource in LiumProvider.resources:
        short = resource.type_name.removeprefix("lium_")
        assert f"generated.{short} import {constructs_gen.camel(short)}" in text
    for data_source in LiumProvider.data_sources:
        assert f"import Data{constructs_gen.camel(data_source.type_name)}" in text


def test_staleness_is_detected_and_write_repairs_it(tmp_path: Path) -> None:
    out = tmp_path / "generated"
    constructs_gen.write(LiumProvider, out)
    assert constructs_gen.stale_files(LiumProvider, out) == []

    pod = out / "pod.py"
    pod.write_text(pod.read_text().replace("Pod name", "Pod title"))
    (out / "template.py").unlink()
    (out / "gone.py").write_text(f'"""Old.\n\n{constructs_gen.GENERATED_MARKER} ..."""\n')
    (out / "hand_written.py").write_text('"""Not generated."""\n')
    assert constructs_gen.stale_files(LiumProvider, out) == ["gone.py", "pod.py", "template.py"]
    assert devtools_main(["constructs", "--out", str(out), "--check"]) == 1

    assert devtools_main(["constructs", "--out", str(out)]) == 0
    assert constructs_gen.stale_files(LiumProvider, out) == []
    assert not (out / "gone.py").exists()
    assert (out / "hand_written.py").exists(), "only generated modules may be removed"


def test_python_names_avoid_cdk_members_keywords_and_constructor_arguments() -> None:
    assert constructs_gen.python_name("gpu_count") == "gpu_count"
    assert constructs_gen.python_name("count") == "count_attribute"
    assert constructs_gen.python_name("provider") == "provider_attribute"
    assert constructs_gen.python_name("lambda") == "lambda_attribute"
    assert constructs_gen.python_name("scope") == "scope_attribute"


def _public_members(module: str) -> set[str]:
    """Public members of the three CDK base classes, read in a fresh interpreter (one CDK per process)."""
    script = (
        f"import json, {module} as m\n"
        "names = {n for c in (m.TerraformResource, m.TerraformDataSource, m.TerraformProvider)"
        " for n in dir(c) if not n.startswith('_')}\n"
        "print(json.dumps(sorted(names)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **QUIET},
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout))


def test_cdk_member_list_covers_cdktf_and_cdktn() -> None:
    for module in ("cdktf", "cdktn"):
        missing = _public_members(module) - constructs_gen.CDK_MEMBERS
        assert not missing, f"{module} has members the generator could shadow: {sorted(missing)}"


def test_gpu_stack_takes_the_generated_offer_filter() -> None:
    assert lium_constructs.OfferFilter is generated.OfferFilter
    fields = {f.name: f.default for f in dataclasses.fields(generated.OfferFilter)}
    assert tuple(fields) == OfferFilter.fields()
    assert fields["gpu_count"] == 1 and fields["gpu"] is None
    assert generated.OfferFilter(min_memory_gib=16).arguments() == {**fields, "min_memory_gib": 16}
