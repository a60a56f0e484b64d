"""Markdown reference docs generated from schemas, laid out as the Terraform Registry expects.

``docs/resources/<name>.md`` and ``docs/data-sources/<name>.md`` (name without the provider prefix),
each with the description, an example usage and import command when ``examples/`` has them, and the
argument/attribute reference split into required, optional, write-only and read-only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfbridge import cty
from tfbridge.resource import Provider
from tfbridge.schema import MISSING, AttributeSchema, BlockSchema, Schema


def _type_name(t: cty.CtyType) -> str:
    raw = json.loads(cty.type_to_json(t))
    return _render_type(raw)


def _render_type(raw: Any) -> str:
    if isinstance(raw, str):
        return str(raw)
    kind = raw[0]
    if kind in ("list", "set", "map"):
        return f"{kind}({_render_type(raw[1])})"
    if kind == "object":
        return "object({" + ", ".join(f"{k} = {_render_type(v)}" for k, v in raw[1].items()) + "})"
    return str(kind)


def _line(attr: AttributeSchema) -> str:
    spec = attr.spec
    notes = [_type_name(attr.type)]
    if spec.sensitive:
        notes.append("sensitive")
    if spec.write_only:
        notes.append("write-only")
    if spec.default is not MISSING:
        notes.append(f"default `{json.dumps(spec.default)}`")
    if any(type(rule).__name__ == "RequiresReplace" for rule in spec.plan):
        notes.append("forces replacement")
    return f"- `{attr.name}` ({', '.join(notes)}) {spec.description}".rstrip()


def _block_reference(block: BlockSchema, heading: str = "##") -> list[str]:
    groups: dict[str, list[str]] = {"Required": [], "Optional": [], "Write-only": [], "Read-only": []}
    for attr in block.attributes.values():
        spec = attr.spec
        if spec.required:
            groups["Required"].append(_line(attr))
        elif spec.write_only:
            groups["Write-only"].append(_line(attr))
        elif spec.optional:
            groups["Optional"].append(_line(attr))
        else:
            groups["Read-only"].append(_line(attr))
    lines: list[str] = []
    for title, entries in groups.items():
        if entries:
            lines += [f"{heading}# {title}", "", *entries, ""]
    for name, nested in block.blocks.items():
        lines += [
            f"{heading}# Nested block `{name}`",
            "",
            nested.spec.description or nested.block.description,
            "",
        ]
        lines += _block_reference(nested.block, heading + "#")
    return lines


def render(kind: str, type_name: str, provider_name: str, schema: Schema, examples_dir: Path | None) -> str:
    """The Markdown page of one resource (``kind="resource"``) or data source (``kind="data-source"``)."""
    title = f"{type_name} ({'Resource' if kind == 'resource' else 'Data Source'})"
    lines = [
        "---",
        f'page_title: "{title} - {provider_name}"',
        "---",
        "",
        f"# {title}",
        "",
        schema.block.description,
        "",
    ]
    folder = (
        examples_dir / ("resources" if kind == "resource" else "data-sources") / type_name
        if examples_dir
        else None
    )
    if folder is not None and (folder / f"{kind}.tf").exists():
        example = (folder / f"{kind}.tf").read_text().strip()
        lines += ["## Example Usage", "", "```terraform", example, "```", ""]
    lines += ["## Schema", "", *_block_reference(schema.block)]
    if folder is not None and (folder / "import.sh").exists():
        lines += ["## Import", "", "```shell", (folder / "import.sh").read_text().strip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def render_provider(provider: type[Provider[Any]]) -> str:
    """The provider's index page: what it manages and its configuration reference."""
    schema = provider.schema()
    lines = [
        "---",
        f'page_title: "Provider: {provider.type_name}"',
        "---",
        "",
        f"# {provider.type_name} Provider",
        "",
        schema.block.description,
        "",
        "Resources: " + ", ".join(f"`{r.type_name}`" for r in provider.resources) + ".",
        "",
        "Data sources: " + ", ".join(f"`{d.type_name}`" for d in provider.data_sources) + ".",
        "",
        "## Schema",
        "",
        *_block_reference(schema.block),
    ]
    return "\n".join(lines).rstrip() + "\n"


def generate(provider: type[Provider[Any]], examples_dir: Path | None = None) -> dict[str, str]:
    """Every page, keyed by its path relative to ``docs/``."""
    prefix = provider.type_name + "_"
    pages: dict[str, str] = {"index.md": render_provider(provider)}
    for resource in provider.resources:
        short = resource.type_name.removeprefix(prefix)
        pages[f"resources/{short}.md"] = render(
            "resource", resource.type_name, provider.type_name, resource.schema(), examples_dir
        )
    for data_source in provider.data_sources:
        short = data_source.type_name.removeprefix(prefix)
        pages[f"data-sources/{short}.md"] = render(
            "data-source", data_source.type_name, provider.type_name, data_source.schema(), examples_dir
        )
    return pages


def write(provider: type[Provider[Any]], docs_dir: Path, examples_dir: Path | None = None) -> list[Path]:
    written = []
    for relative, content in generate(provider, examples_dir).items():
        path = docs_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        written.append(path)
    return written
