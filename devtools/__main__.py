"""``python -m devtools docs|constructs``: regenerate the checkout's reference pages or typed constructs.

Both write into this repository (by default relative to its root, wherever the command runs), so they
live here and not in the user's ``lium-tf``. ``make docs`` and ``make constructs`` run them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from devtools import constructs_gen
from devtools.reference_docs import REPO, write_reference_pages
from lium_provider.provider import LiumProvider


def cmd_docs(args: argparse.Namespace) -> int:
    for path in write_reference_pages(Path(args.examples_dir), Path(args.docs_dir)):
        print(path)
    return 0


def cmd_constructs(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    if args.check:
        stale = constructs_gen.stale_files(LiumProvider, out_dir)
        for name in stale:
            print(f"stale: {out_dir / name}")
        return 1 if stale else 0
    for path in constructs_gen.write(LiumProvider, out_dir):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devtools",
        description="Regenerate the checkout's reference pages (docs) or typed constructs (constructs).",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    docs = commands.add_parser(
        "docs",
        help="regenerate the Registry reference pages (docs/index.md, docs/resources, docs/data-sources)",
        description="Write the provider's reference pages from its schemas, in tfplugindocs' format, with "
        "the examples of the examples directory (provider/provider.tf, resources/<type>/resource.tf, "
        "import-by-string-id.tf, import.sh, data-sources/<type>/data-source.tf). Run after changing a "
        "schema; tests/provider/test_docs.py fails while the pages are stale.",
    )
    docs.add_argument(
        "--docs-dir", default=str(REPO / "docs"), help="where the pages are written (default: %(default)s)"
    )
    docs.add_argument(
        "--examples-dir",
        default=str(REPO / "examples"),
        help="where the examples are read (default: %(default)s)",
    )
    docs.set_defaults(handler=cmd_docs)

    constructs = commands.add_parser(
        "constructs",
        help="regenerate the typed CDKTF constructs (lium_constructs.generated) from the schemas",
        description="Write one typed construct module per resource and data source, and the provider's, "
        "from the schemas. Run after changing a schema; tests/constructs/test_generator.py fails while "
        "they are stale.",
    )
    constructs.add_argument(
        "--out",
        default=str(constructs_gen.GENERATED_DIR),
        help="the generated package's directory (default: %(default)s)",
    )
    constructs.add_argument(
        "--check", action="store_true", help="write nothing; list stale files and exit 1 if there are any"
    )
    constructs.set_defaults(handler=cmd_constructs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
