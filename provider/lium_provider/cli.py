"""``lium-tf``: install the provider for offline ``terraform init``, and helpers around it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lium_provider import PROVIDER_SOURCE, __version__


def launcher_command() -> list[str]:
    """How Terraform starts the provider: this interpreter in isolated mode, so neither PYTHON* variables nor
    a stray module in Terraform's working directory can change what runs."""
    return [sys.executable, "-I", "-m", "lium_provider"]


def cmd_install(args: argparse.Namespace) -> int:
    from tfbridge.install import DEFAULT_PLUGINS_DIR, write_launcher

    plugins_dir = Path(args.plugins_dir) if args.plugins_dir else DEFAULT_PLUGINS_DIR
    path = write_launcher(plugins_dir, PROVIDER_SOURCE, __version__, launcher_command())
    print(path)
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    from lium_provider.provider import LiumProvider
    from tfbridge.docs import write

    for path in write(LiumProvider, Path(args.docs_dir), Path(args.examples_dir)):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lium-tf", description=__doc__)
    parser.add_argument("--version", action="version", version=f"lium-tf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    install = commands.add_parser(
        "install",
        help="write the provider launcher into Terraform's filesystem mirror and print its path",
        description="Write the launcher for source lium-stacks/lium into Terraform's implied filesystem mirror "
        "(~/.terraform.d/plugins), so `terraform init` works offline with no CLI configuration change.",
    )
    install.add_argument("--plugins-dir", help="mirror directory (default: ~/.terraform.d/plugins)")
    install.set_defaults(handler=cmd_install)

    docs = commands.add_parser("docs", help="regenerate docs/resources and docs/data-sources from the schemas")
    docs.add_argument("--docs-dir", default="docs")
    docs.add_argument("--examples-dir", default="examples")
    docs.set_defaults(handler=cmd_docs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = args.handler
    result: int = handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
