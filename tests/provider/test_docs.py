"""The generated reference docs match the schemas, in tfplugindocs' format, and every example runs alone.

A stale page fails here. Each Registry snippet (``examples/provider/provider.tf``,
``examples/resources/<type>/resource.tf``, ``examples/data-sources/<type>/data-source.tf``) is what a
reader copies into an empty directory, so each one must ``terraform validate`` there by itself; a
resource's ``import-by-string-id.tf`` must validate next to its resource's snippet.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from devtools.reference_docs import DOCS_SUBCATEGORIES, reference_pages
from lium_provider.provider import LiumProvider
from tests.support.terraform import REPO, Terraform
from tfbridge.schema import Bounds
from tfbridge.timeouts import OPERATIONS, format_duration

EXAMPLES = REPO / "examples"
SNIPPETS = sorted(
    [
        EXAMPLES / "provider" / "provider.tf",
        *EXAMPLES.glob("resources/*/resource.tf"),
        *EXAMPLES.glob("data-sources/*/data-source.tf"),
    ]
)
IMPORT_BLOCKS = sorted(EXAMPLES.glob("resources/*/import-by-string-id.tf"))
FRONT_MATTER = re.compile(
    r'\A---\npage_title: "[^"\n]+"\nsubcategory: "[^"\n]*"\ndescription: \|-\n(  [^\n]*\n)+---\n\n# '
)


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference_pages(EXAMPLES)


def test_docs_are_current(pages: dict[str, str]) -> None:
    assert {"index.md", "resources/pod.md", "data-sources/offers.md"} <= set(pages)
    stale = [name for name, content in pages.items() if (REPO / "docs" / name).read_text() != content]
    assert not stale, f"regenerate with `make docs`: stale {stale}"


def test_every_page_has_registry_front_matter(pages: dict[str, str]) -> None:
    malformed = [name for name, content in pages.items() if not FRONT_MATTER.match(content)]
    assert not malformed, f"front matter must hold page_title, subcategory and description: {malformed}"
    pod = pages["resources/pod.md"]
    assert pod.startswith('---\npage_title: "lium_pod Resource - lium"\nsubcategory: "Compute"\n')
    description = pod.split("description: |-\n", 1)[1].split("---", 1)[0]
    assert "`" not in description, "the front matter's description is plain text"
    assert pages["data-sources/offers.md"].splitlines()[1] == 'page_title: "lium_offers Data Source - lium"'


def test_subcategories_name_only_real_types() -> None:
    types = {t.type_name for t in (*LiumProvider.resources, *LiumProvider.data_sources)}
    assert set(DOCS_SUBCATEGORIES) <= types


def test_schema_uses_tfplugindocs_types_groups_and_anchors(pages: dict[str, str]) -> None:
    pod = pages["resources/pod.md"]
    for heading in ("## Example Usage", "## Schema", "### Required", "### Optional", "### Read-Only"):
        assert f"\n{heading}\n" in pod, heading
    assert (
        "- `volume_id` (String) `lium_volume` to mount at /mnt (one). Changing it replaces the resource."
        in pod
    )
    assert "- `regions` (List of String) " in pod and "- `spot` (Boolean) " in pod
    assert "- `ports` (Map of Number) " in pod
    assert (
        "- `timeouts` (Block, Optional) " in pod
        and "(see [below for nested schema](#nestedblock--timeouts))" in pod
    )
    assert '\n<a id="nestedblock--timeouts"></a>\n### Nested Schema for `timeouts`\n\nOptional:\n' in pod
    read_only = pod.split("### Read-Only\n", 1)[1].split("\n\n<a id=", 1)[0]
    names = re.findall(r"^- `([a-z_]+)`", read_only, re.M)
    assert names == sorted(names) and "id" in names and "ssh_host_key" in names
    offers = pages["data-sources/offers.md"]
    assert "- `offers` (List of Object) " in offers and '<a id="nestedatt--offers"></a>' in offers
    assert (
        "### Nested Schema for `offers`\n\nRead-Only:\n\n- `cpu` (Number) CPUs a pod of this size gets.\n"
        in offers
    )


def test_every_timeouts_block_shows_the_resources_own_defaults(pages: dict[str, str]) -> None:
    for resource in LiumProvider.resources:
        if "timeouts" not in resource.schema().block.blocks:
            continue
        assert set(resource.default_timeouts) == set(OPERATIONS), f"{resource.type_name} lacks a default"
        page = pages[f"resources/{resource.type_name.removeprefix('lium_')}.md"]
        section = page.split("### Nested Schema for `timeouts`", 1)[1]
        for operation, seconds in resource.default_timeouts.items():
            line = next(line for line in section.splitlines() if line.startswith(f"- `{operation}` "))
            assert line.endswith(f"Defaults to `{format_duration(seconds)}`."), line
    pod_section = pages["resources/pod.md"].split("### Nested Schema for `timeouts`", 1)[1]
    assert "- `create` (String) Time budget for create, e.g. `20m`. Defaults to `30m`." in pod_section


def test_bounds_are_rendered_from_their_declaration_and_never_written_by_hand(pages: dict[str, str]) -> None:
    bounded = [
        (element.type_name, attr)
        for element in (LiumProvider, *LiumProvider.resources, *LiumProvider.data_sources)
        for _, attr in element.schema().block.walk_attributes()
        if attr.bounds != Bounds()
    ]
    assert {("lium_pod", "termination_hours"), ("lium_volume", "name")} <= {(t, a.name) for t, a in bounded}
    by_hand = [
        f"{type_name}.{attr.name}: {attr.spec.description!r}"
        for type_name, attr in bounded
        for text in (attr.bounds.range_text(), attr.bounds.length_text("characters"))
        if text and text in attr.spec.description
    ]
    assert not by_hand, "state bounds with Field(...), not in the description:\n" + "\n".join(by_hand)
    assert "Must be 1 to 720." in pages["index.md"] and "Must be 1 to 720." in pages["resources/pod.md"]
    assert "- `name` (String) Pod name. Must be 1 to 63 characters long." in pages["resources/pod.md"]


def test_write_only_and_sensitive_attributes_are_marked(pages: dict[str, str]) -> None:
    credential = pages["resources/docker_credential.md"]
    assert "- `password_wo` (String, Sensitive, [Write-only](https://developer.hashicorp.com/" in credential
    assert "> **NOTE**: [Write-only arguments]" in credential
    assert "- `api_key` (String, Sensitive) " in pages["index.md"]


def test_import_section_shows_the_import_block_and_the_command(pages: dict[str, str]) -> None:
    pod = pages["resources/pod.md"]
    section = pod.split("\n## Import\n", 1)[1]
    block = (EXAMPLES / "resources" / "lium_pod" / "import-by-string-id.tf").read_text().strip()
    assert f"```terraform\n{block}\n```" in section
    assert "```shell\nterraform import lium_pod.gpu " in section
    assert "## Import" not in pages["resources/runner.md"], "lium_runner has no import example"


def test_the_provider_page_shows_the_provider_example(pages: dict[str, str]) -> None:
    example = (EXAMPLES / "provider" / "provider.tf").read_text().strip()
    assert f"## Example Usage\n\n```terraform\n{example}\n```" in pages["index.md"]


def _validate(files: list[Path], workdir: Path, env: dict[str, str]) -> dict[str, object]:
    workdir.mkdir()
    for file in files:
        shutil.copy(file, workdir / file.name)
    tf = Terraform(workdir, env)
    tf.run("init", "-backend=false", "-input=false", "-no-color")
    result: dict[str, object] = json.loads(tf.run("validate", "-json", check=False).stdout)
    return result


@pytest.mark.terraform
@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda p: str(p.relative_to(EXAMPLES).parent))
def test_each_registry_snippet_validates_alone(
    snippet: Path, tmp_path: Path, terraform_env: dict[str, str]
) -> None:
    text = snippet.read_text()
    assert 'source = "lium-stacks/lium"' in text, f"{snippet} needs its own required_providers"
    result = _validate([snippet], tmp_path / "alone", terraform_env)
    assert result["valid"] is True, f"{snippet.relative_to(REPO)} does not validate alone:\n{result}"


@pytest.mark.terraform
@pytest.mark.parametrize("import_block", IMPORT_BLOCKS, ids=lambda p: p.parent.name)
def test_each_import_block_validates_with_its_resource_snippet(
    import_block: Path, tmp_path: Path, terraform_env: dict[str, str]
) -> None:
    assert (import_block.parent / "import.sh").exists(), "the import command belongs beside the block"
    result = _validate(
        [import_block.parent / "resource.tf", import_block], tmp_path / "import", terraform_env
    )
    assert result["valid"] is True, f"{import_block.relative_to(REPO)} does not validate:\n{result}"
