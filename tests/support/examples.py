"""The Registry-style examples (``examples/resources/<type>/resource.tf``) adapted to a live object.

An import test declares the imported object with its resource's own example, as a user following the
docs would, but with the values of the object actually imported. The examples are ``terraform fmt``
output, one argument per line, so they are adapted line by line: the example's first
``resource "<type>"`` block and the ``variable`` blocks it still reads are kept (other resources and
outputs refer to objects the test does not have), and each top-level argument of that block takes the
live object's value when the live state holds one; the others (nested blocks such as ``timeouts``, and
inputs the state lacks) stay as the example wrote them.

:func:`copy_example` is how a test runs an example directory with the checkout's launcher.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from release.locks import LOCK_FILE
from tests.support.terraform import REPO, Terraform

EXAMPLES = REPO / "examples" / "resources"
_BLOCK_START = re.compile(r'^(?P<kind>[a-z_]+)(?P<labels>(?:\s+"[^"]*")*)\s*\{\s*$')
_ARGUMENT = re.compile(r"^  (?P<name>[a-z_][a-z0-9_]*)(?P<pad>\s*)=\s*(?P<value>.*)$")
_NESTED_BLOCK = re.compile(r"^  (?P<name>[a-z_][a-z0-9_]*)\s*\{\s*$")
_LABEL = re.compile(r'"([^"]*)"')


@dataclass(frozen=True)
class AdaptedExample:
    """An example's configuration for one live object."""

    name: str
    """The example's resource name (``gpu`` in ``resource "lium_pod" "gpu"``)."""
    text: str
    """HCL: the example's variables and its resource block with the live values."""
    arguments: frozenset[str]
    """Top-level arguments and nested blocks the adapted block sets."""


def copy_example(example: Path, workdir: Path) -> None:
    """``example``'s files into ``workdir``, without its committed lock file.

    The lock holds the released archive's hashes; the tests install the checkout's launcher, a
    different package, so ``terraform init`` in the copy writes a lock of its own and the committed one
    stays as it is.
    """
    shutil.copytree(example, workdir, dirs_exist_ok=True, ignore=shutil.ignore_patterns(LOCK_FILE))


def initialised_example(
    example: Path, make_terraform: Callable[..., Terraform], env: Mapping[str, str]
) -> Terraform:
    """A working directory holding a copy of ``example`` (:func:`copy_example`) and nothing else, with
    ``terraform init`` done: the example exactly as a user runs it, configured by ``env`` alone."""
    tf = make_terraform("", **env)
    (tf.workdir / "main.tf").unlink()
    copy_example(example, tf.workdir)
    tf.init()
    return tf


def example_path(type_name: str) -> Path:
    return EXAMPLES / type_name / "resource.tf"


def hcl_literal(value: object) -> str:
    """``value`` (a JSON value from a state file) as an HCL literal; strings cannot interpolate."""
    if isinstance(value, str):
        return json.dumps(value).replace("${", "$${").replace("%{", "%%{")
    if isinstance(value, list):
        return "[" + ", ".join(hcl_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {hcl_literal(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # numbers, booleans, null


def _top_level_blocks(text: str) -> list[tuple[str, list[str], list[str]]]:
    """``(kind, labels, lines)`` of each top-level block; ``lines`` include the opening and closing ones."""
    blocks: list[tuple[str, list[str], list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if current is None:
            start = _BLOCK_START.match(line)
            if start:
                current = [line]
                blocks.append((start["kind"], _LABEL.findall(start["labels"]), current))
            continue
        current.append(line)
        if line.rstrip() == "}":
            current = None
    return blocks


def _balanced(value: str) -> bool:
    return sum(value.count(c) for c in "[{(") == sum(value.count(c) for c in "]})")


def adapt_example(type_name: str, live: Mapping[str, object]) -> AdaptedExample:
    """The example of ``type_name`` with the live object's values (``live`` is its state's attributes)."""
    blocks = _top_level_blocks(example_path(type_name).read_text())
    resource = next((b for b in blocks if b[0] == "resource" and b[1][:1] == [type_name]), None)
    if resource is None:
        raise ValueError(f'{example_path(type_name)} has no resource "{type_name}" block')
    _, labels, lines = resource
    adapted: list[str] = []
    arguments: set[str] = set()
    depth = 0
    for line in lines:
        argument = _ARGUMENT.match(line) if depth == 1 else None
        nested = _NESTED_BLOCK.match(line) if depth == 1 else None
        if argument:
            name = argument["name"]
            value = argument["value"].split(" #", 1)[0].strip()
            if not _balanced(value):
                raise ValueError(f"{example_path(type_name)}: {name} spans lines; write it on one line")
            arguments.add(name)
            if live.get(name) is not None:
                line = f"  {name}{argument['pad']}= {hcl_literal(live[name])}"
        elif nested:
            arguments.add(nested["name"])
        depth += line.count("{") - line.count("}") if not argument else 0
        adapted.append(line)
    block = "\n".join(adapted)
    # Only the variables the adapted block still reads: a live value replaced the others' references.
    variables = [
        "\n".join(body)
        for kind, names, body in blocks
        if kind == "variable" and re.search(rf"\bvar\.{names[0]}\b", block)
    ]
    return AdaptedExample(labels[1], "\n\n".join([*variables, block]) + "\n", frozenset(arguments))
