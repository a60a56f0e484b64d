"""Markdown reference docs generated from schemas, in the layout and format of HashiCorp's tfplugindocs.

The Terraform Registry renders a provider's ``docs/`` directory; tfplugindocs is the tool Go providers
generate it with, so its output is what Registry readers (and tools that lint Registry docs) expect:

- ``docs/index.md`` for the provider, ``docs/resources/<name>.md`` and ``docs/data-sources/<name>.md``
  (name without the provider prefix), each opening with front matter (``page_title``, ``subcategory``,
  ``description`` in plain text);
- ``## Example Usage`` from ``examples/provider/provider.tf``, ``examples/resources/<type>/resource.tf``
  or ``examples/data-sources/<type>/data-source.tf``;
- ``## Schema`` with ``### Required``, ``### Optional`` and ``### Read-Only`` groups, each entry
  ``- `name` (String, Sensitive) description`` in name order, and every nested block or object-typed
  attribute under its own ``<a id="nestedblock--path"></a>`` / ``### Nested Schema for `path```;
- ``## Import`` from ``import-by-string-id.tf`` (an ``import`` block, Terraform 1.5+) and ``import.sh``
  (the ``terraform import`` command) in the resource's example directory, with the write-only arguments
  named (Terraform never stores them, so no import can) and what ``import.md`` there says.

Two facts tfplugindocs cannot know are added to the description: an attribute's default value and whether
changing it replaces the resource. Hand-written pages (``docs/guides/``) are not touched.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from tfbridge.protocol import cty
from tfbridge.resource import DataSource, Provider, Resource
from tfbridge.schema import (
    MISSING,
    Attribute,
    AttributeSchema,
    BlockSchema,
    NestedBlockSchema,
    Schema,
    unwrap_optional,
)
from tfbridge.timeouts import OPERATIONS, format_duration

Kind = Literal["resource", "data-source"]
# A sentence to add to the attribute at a path (``("timeouts", "create")``): what the schema cannot say.
Notes = Mapping[tuple[str, ...], str]
# tfplugindocs' wording for write-only arguments (Terraform 1.11+).
WRITE_ONLY_LINK = "[Write-only](https://developer.hashicorp.com/terraform/language/resources/ephemeral#write-only-arguments)"
WRITE_ONLY_NOTE = (
    "> **NOTE**: [Write-only arguments](https://developer.hashicorp.com/terraform/language/resources/"
    "ephemeral#write-only-arguments) are supported in Terraform 1.11 and later."
)
GROUPS = ("Required", "Optional", "Read-Only")
_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def type_label(t: cty.CtyType) -> str:
    """tfplugindocs' name of a type: ``String``, ``Number``, ``Boolean``, ``List of String``, ``Object``."""
    return _label(json.loads(cty.type_to_json(t)))


def _label(raw: Any) -> str:
    if isinstance(raw, str):
        return {"string": "String", "number": "Number", "bool": "Boolean", "dynamic": "Dynamic"}[raw]
    kind = raw[0]
    if kind in ("list", "set", "map"):
        return f"{kind.capitalize()} of {_label(raw[1])}"
    return "Tuple" if kind == "tuple" else "Object"


def _object_fields(raw: Any) -> dict[str, Any] | None:
    """The attribute types of an object type (cty's JSON form), or of a collection's object elements; else
    None. tfplugindocs documents these fields in a nested section of their own."""
    while isinstance(raw, list) and raw[0] in ("list", "set", "map"):
        raw = raw[1]
    if isinstance(raw, list) and raw[0] == "object":
        fields: dict[str, Any] = raw[1]
        return fields
    return None


def plain_text(markdown: str) -> str:
    """Markdown as plain text for front matter: links keep their text, code spans lose their backticks."""
    return _MARKDOWN_LINK.sub(r"\1", markdown).replace("`", "").strip()


def _anchor(prefix: str, path: tuple[str, ...]) -> str:
    return f"{prefix}--{'--'.join(path)}"


def _see_below(anchor: str) -> str:
    return f" (see [below for nested schema](#{anchor}))"


@dataclass(frozen=True)
class _Nested:
    """A nested schema section still to be written: a block, or the fields of an object-typed attribute."""

    anchor: str
    path: tuple[str, ...]
    group: str
    block: BlockSchema | None = None
    fields: Mapping[str, Any] | None = None
    descriptions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """What the model behind an object-typed attribute says of each field (tfplugindocs has no such
    text for object fields: without it they are listed bare)."""


def _group(attr: AttributeSchema) -> str:
    if attr.spec.required:
        return "Required"
    return "Optional" if attr.spec.optional else "Read-Only"


def _block_group(nested: NestedBlockSchema) -> str:
    return "Required" if nested.spec.min_items > 0 else "Optional"


def _attribute_line(
    attr: AttributeSchema, path: tuple[str, ...], pending: list[_Nested], notes: Notes
) -> str:
    spec = attr.spec
    labels = [type_label(attr.type)]
    if spec.sensitive:
        labels.append("Sensitive")
    if spec.deprecated:
        labels.append("Deprecated")
    if spec.write_only:
        labels.append(WRITE_ONLY_LINK)
    text = [attr.documentation()]
    if spec.default is not MISSING and "Default" not in spec.description:  # unless it says so already
        text.append(f"Defaults to `{json.dumps(spec.default)}`.")
    if path in notes:
        text.append(notes[path])
    if attr.requires_replace:
        text.append("Changing it replaces the resource.")
    line = f"- `{attr.name}` ({', '.join(labels)}) {' '.join(t for t in text if t)}".rstrip()
    fields = _object_fields(json.loads(cty.type_to_json(attr.type)))
    if fields is not None:
        anchor = _anchor("nestedatt", path)
        described = _field_descriptions(attr.annotation)
        pending.append(_Nested(anchor, path, _group(attr), fields=fields, descriptions=described))
        line += _see_below(anchor)
    return line


def _field_descriptions(annotation: Any) -> dict[str, str]:
    """Each field's description, for an attribute typed by a model (or a collection of one)."""
    model = unwrap_optional(annotation)
    while get_origin(model) in (list, set, frozenset, dict):
        model = get_args(model)[-1]
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return {}
    found: dict[str, str] = {}
    for name, info in model.model_fields.items():
        spec = next((m for m in info.metadata if isinstance(m, Attribute)), None)
        if spec is not None and spec.description.strip():
            found[name] = spec.description.strip()
    return found


def _block_line(nested: NestedBlockSchema, path: tuple[str, ...], pending: list[_Nested]) -> str:
    notes = ["Block"] if nested.nesting == "single" else ["Block List"]
    if nested.nesting == "single":
        notes.append(_block_group(nested))
    elif nested.spec.min_items > 0:
        notes.append(f"Min: {nested.spec.min_items}")
    if nested.spec.max_items > 0:
        notes.append(f"Max: {nested.spec.max_items}")
    description = (nested.spec.description or nested.block.description).strip()
    anchor = _anchor("nestedblock", path)
    pending.append(_Nested(anchor, path, _block_group(nested), block=nested.block))
    return f"- `{nested.name}` ({', '.join(notes)}) {description}".rstrip() + _see_below(anchor)


def _block_children(block: BlockSchema, parents: tuple[str, ...], notes: Notes) -> list[str]:
    """One block's groups (``### Required`` at the root, ``Required:`` below it), then its nested sections."""
    entries: dict[str, list[tuple[str, AttributeSchema | NestedBlockSchema]]] = {g: [] for g in GROUPS}
    for attr in block.attributes.values():
        entries[_group(attr)].append((attr.name, attr))
    for nested in block.blocks.values():
        entries[_block_group(nested)].append((nested.name, nested))
    lines: list[str] = []
    pending: list[_Nested] = []
    for group in GROUPS:
        if not entries[group]:
            continue
        lines += [f"### {group}" if not parents else f"{group}:", ""]
        members = sorted(entries[group], key=lambda entry: entry[0])
        if any(isinstance(m, AttributeSchema) and m.spec.write_only for _, m in members):
            lines += [WRITE_ONLY_NOTE, ""]
        for name, member in members:
            path = (*parents, name)
            if isinstance(member, AttributeSchema):
                lines.append(_attribute_line(member, path, pending, notes))
            else:
                lines.append(_block_line(member, path, pending))
        lines.append("")
    return lines + _nested_sections(pending, notes)


def _object_children(
    fields: Mapping[str, Any], parents: tuple[str, ...], group: str, descriptions: Mapping[str, str]
) -> list[str]:
    lines = [f"{group}:", ""]
    pending: list[_Nested] = []
    for name in sorted(fields):
        raw = fields[name]
        path = (*parents, name)
        line = f"- `{name}` ({_label(raw)})" + (f" {descriptions[name]}" if name in descriptions else "")
        inner = _object_fields(raw)
        if inner is not None:
            anchor = _anchor("nestedobjatt", path)
            pending.append(_Nested(anchor, path, group, fields=inner))
            line += _see_below(anchor)
        lines.append(line)
    return [*lines, "", *_nested_sections(pending, {})]


def _nested_sections(pending: list[_Nested], notes: Notes) -> list[str]:
    lines: list[str] = []
    for nested in pending:
        lines += [f'<a id="{nested.anchor}"></a>', f"### Nested Schema for `{'.'.join(nested.path)}`", ""]
        if nested.block is not None:
            lines += _block_children(nested.block, nested.path, notes)
        elif nested.fields is not None:
            lines += _object_children(nested.fields, nested.path, nested.group, nested.descriptions)
    return lines


def schema_markdown(block: BlockSchema, notes: Notes | None = None) -> list[str]:
    """The ``## Schema`` section of a block, as tfplugindocs writes it; ``notes`` adds a sentence to the
    attributes at those paths."""
    return [
        "<!-- schema generated by tfbridge.docs -->",
        "## Schema",
        "",
        *_block_children(block, (), notes or {}),
    ]


def timeout_notes(resource: type[Resource[Any]]) -> Notes:
    """What each ``timeouts`` attribute of ``resource`` defaults to, from its ``default_timeouts``."""
    if "timeouts" not in resource.schema().block.blocks:
        return {}
    return {
        ("timeouts", operation): f"Defaults to `{format_duration(seconds)}`."
        if (seconds := resource.default_timeouts.get(operation)) is not None
        else "No limit by default."
        for operation in OPERATIONS
    }


def _front_matter(page_title: str, subcategory: str, description: str) -> list[str]:
    summary = plain_text(description).splitlines() or [""]
    return [
        "---",
        f"page_title: {json.dumps(page_title, ensure_ascii=False)}",
        f"subcategory: {json.dumps(subcategory, ensure_ascii=False)}",
        "description: |-",
        *(f"  {line}".rstrip() for line in summary),
        "---",
        "",
    ]


def _example(path: Path, language: str = "terraform") -> list[str]:
    return [f"```{language}", path.read_text().strip(), "```", ""]


def _import_section(folder: Path, schema: BlockSchema) -> list[str]:
    block, command, notes = folder / "import-by-string-id.tf", folder / "import.sh", folder / "import.md"
    if not (block.exists() or command.exists()):
        return []
    lines = ["## Import", "", "Import is supported using the following syntax:", ""]
    write_only = [f"`{name}`" for name, attr in schema.attributes.items() if attr.spec.write_only]
    if write_only:
        lines += [
            f"Write-only arguments are never imported (nor stored in state): {', '.join(write_only)}.",
            "",
        ]
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    if block.exists():
        lines += [
            "In Terraform v1.5.0 and later, the [`import` block](https://developer.hashicorp.com/terraform/"
            "language/import) can be used with the `id` attribute, for example:",
            "",
            *_example(block),
        ]
    if command.exists():
        lines += [
            "The [`terraform import` command](https://developer.hashicorp.com/terraform/cli/commands/import) "
            "can be used, for example:",
            "",
            *_example(command, "shell"),
        ]
    return lines


def render(
    kind: Kind,
    type_name: str,
    provider_name: str,
    schema: Schema,
    examples_dir: Path | None,
    subcategory: str = "",
    notes: Notes | None = None,
) -> str:
    """The Markdown page of one resource (``kind="resource"``) or data source (``kind="data-source"``)."""
    label = "Resource" if kind == "resource" else "Data Source"
    description = schema.block.description.strip()
    lines = [
        *_front_matter(f"{type_name} {label} - {provider_name}", subcategory, description),
        f"# {type_name} ({label})",
        "",
        description,
        "",
    ]
    folder = (examples_dir / f"{kind}s" / type_name) if examples_dir else None
    if folder is not None and (folder / f"{kind}.tf").exists():
        lines += ["## Example Usage", "", *_example(folder / f"{kind}.tf")]
    lines += schema_markdown(schema.block, notes)
    if folder is not None and kind == "resource":
        lines += _import_section(folder, schema.block)
    return "\n".join(lines).rstrip() + "\n"


def render_provider(provider: type[Provider[Any]], examples_dir: Path | None = None) -> str:
    """The provider's index page: what it manages, an example configuration and its schema."""
    schema = provider.schema()
    description = schema.block.description.strip()
    lines = [
        *_front_matter(f"{provider.type_name} Provider", "", description),
        f"# {provider.type_name} Provider",
        "",
        description,
        "",
        "Resources: " + ", ".join(f"`{r.type_name}`" for r in provider.resources) + ".",
        "",
        "Data sources: " + ", ".join(f"`{d.type_name}`" for d in provider.data_sources) + ".",
        "",
    ]
    example = examples_dir / "provider" / "provider.tf" if examples_dir else None
    if example is not None and example.exists():
        lines += ["## Example Usage", "", *_example(example)]
    lines += schema_markdown(schema.block)
    return "\n".join(lines).rstrip() + "\n"


def generate(
    provider: type[Provider[Any]],
    examples_dir: Path | None = None,
    subcategories: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Every page, keyed by its path relative to ``docs/``; ``subcategories`` maps type names to the
    Registry's navigation group of their pages (unlisted: none)."""
    groups = subcategories or {}
    prefix = provider.type_name + "_"
    pages: dict[str, str] = {"index.md": render_provider(provider, examples_dir)}
    elements: list[tuple[Kind, type[Resource[Any]] | type[DataSource[Any]], Notes]] = [
        *(("resource", resource, timeout_notes(resource)) for resource in provider.resources),
        *(("data-source", data_source, {}) for data_source in provider.data_sources),
    ]
    for kind, element, notes in elements:
        short = element.type_name.removeprefix(prefix)
        pages[f"{kind}s/{short}.md"] = render(  # resources/ and data-sources/
            kind,
            element.type_name,
            provider.type_name,
            element.schema(),
            examples_dir,
            groups.get(element.type_name, ""),
            notes,
        )
    return pages


def write(pages: Mapping[str, str], docs_dir: Path) -> list[Path]:
    """Write ``pages`` (from :func:`generate`) under ``docs_dir``; returns the paths written."""
    written = []
    for relative, content in pages.items():
        path = docs_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        written.append(path)
    return written
