"""``lium-tf``: install the provider for offline ``terraform init``, and helpers around it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from lium_provider import PROVIDER_SOURCE, __version__
from lium_provider.cli.jobs import add_job_commands
from lium_provider.cli.summary import add_summary_commands

DESCRIPTION = (
    "Helpers around the Lium Terraform provider: install it for an offline terraform init, summarise "
    "plans with prices, apply only reviewed plans, sweep up leftovers, run jobs through a stack's "
    "runners and read pods' output."
)


def launcher_command() -> list[str]:
    """How Terraform starts the provider: this interpreter in isolated mode, so neither PYTHON* variables nor
    a stray module in Terraform's working directory can change what runs. The launcher script hands the
    start to a warm zygote, or execs ``python -I -m lium_provider`` (see :mod:`tfbridge.serving.zygote`)."""
    from tfbridge.serving.install import LAUNCH_SCRIPT

    return [sys.executable, "-I", "-S", str(LAUNCH_SCRIPT), "lium_provider"]


def cmd_install(args: argparse.Namespace) -> int:
    from tfbridge.serving.install import (
        REGISTRY_HOSTNAMES,
        cli_configuration,
        default_plugins_dir,
        write_launcher,
    )

    plugins_dir = (Path(args.plugins_dir) if args.plugins_dir else default_plugins_dir()).absolute()
    for hostname in REGISTRY_HOSTNAMES:
        print(write_launcher(plugins_dir, PROVIDER_SOURCE, __version__, launcher_command(), hostname))
    if args.cli_config:
        config = Path(args.cli_config)
        config.write_text(cli_configuration(plugins_dir, PROVIDER_SOURCE.split("/")[0]))
        print(
            f"wrote {config}: set TF_CLI_CONFIG_FILE={config.absolute()} to use this mirror", file=sys.stderr
        )
    print(
        f"installed {PROVIDER_SOURCE} {__version__} for Terraform or OpenTofu 1.11+: "
        "`terraform init` (or `tofu init`) finds it there with no registry",
        file=sys.stderr,
    )
    return 0


def _narrowing(why: str) -> Callable[[str], str]:
    """An argparse type for a value that narrows what ``sweep`` deletes: refused, before any request,
    when blank (an unset shell variable expands to nothing), saying ``why``."""

    def value(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"must not be empty: {why}")
        return text

    return value


def cmd_sweep(args: argparse.Namespace) -> int:
    import contextlib
    import json
    import os

    from lium_provider.api.client import LiumClient
    from lium_provider.api.endpoints import DEFAULT_ENDPOINT, SESSION_TOKEN_ENV
    from lium_provider.api.errors import LiumError
    from lium_provider.cli.sweep import (
        Leftovers,
        delete_leftovers,
        find_leftovers,
        find_stack_leftovers,
        stack_api_keys,
    )
    from lium_provider.domain.journal import RentJournal
    from lium_provider.domain.stack import parse_tagged_name, tags_of
    from lium_provider.provider import WORKSPACE_ENV
    from lium_provider.session import journal_dir, workspace_mismatch

    endpoint = os.environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT
    api_key = os.environ.get("LIUM_API_KEY")
    if not api_key:
        print("lium-tf sweep: set LIUM_API_KEY (and LIUM_API_URL for another endpoint)", file=sys.stderr)
        return 2
    journal = RentJournal(journal_dir())
    try:
        with LiumClient(endpoint, api_key) as client, contextlib.ExitStack() as closing:
            me = client.me()
            mismatch = workspace_mismatch(os.environ.get(WORKSPACE_ENV) or None, me)
            if mismatch is not None:
                print(f"lium-tf sweep: {mismatch.summary}: {mismatch.detail}", file=sys.stderr)
                return 2
            if me.sees_only_own_pods:
                print(
                    f"lium-tf sweep: this API key ({me.key_label()}) sees only the pods it rented itself "
                    "(pod_visibility own): pods other keys rented are not listed, and with --delete only "
                    "its own pods are deleted (a template, credential, volume or SSH key may serve another "
                    "key's pods, which it cannot see); sweep with a key whose pod_visibility is `account` "
                    "to see and delete everything",
                    file=sys.stderr,
                )
            tags = tags_of(args.stack) if args.stack else frozenset()

            def matches(name: str) -> bool:
                if args.stack:
                    return (parse_tagged_name(name) or ("", ""))[1] in tags
                return bool(name.startswith(args.name_prefix))

            if args.stack:
                leftovers = find_stack_leftovers(client, tags, journal)
            else:
                leftovers = find_leftovers(client, args.name_prefix, journal)
            token = os.environ.get(SESSION_TOKEN_ENV)
            sessions = LiumClient(endpoint, None, session_token=token) if token else None
            if sessions is not None:
                closing.callback(sessions.close)
            if sessions is None:
                print(
                    f"lium-tf sweep: API keys a stack minted (lium_api_key) are not listed: Lium shows keys "
                    f"only to a browser session ({SESSION_TOKEN_ENV})",
                    file=sys.stderr,
                )
            else:
                leftovers.api_keys = stack_api_keys(sessions, matches)
            print(json.dumps(leftovers.as_dict(), indent=2))
            if args.delete and not leftovers.empty():
                volumes = args.include_volumes or bool(args.stack)  # a stack's volumes are provably its
                if me.sees_only_own_pods:  # what pods it cannot see may use is kept
                    leftovers = Leftovers(pods=leftovers.pods, journal=leftovers.journal)
                delete_leftovers(client, leftovers, journal, include_volumes=volumes, sessions=sessions)
                print("deleted", file=sys.stderr)
                if leftovers.volumes and not volumes:
                    print(
                        f"kept {len(leftovers.volumes)} volume(s) listed above, and their data: add "
                        "--include-volumes to delete them too",
                        file=sys.stderr,
                    )
    except (LiumError, TimeoutError) as exc:
        print(f"lium-tf sweep: {exc}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lium-tf", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"lium-tf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    install = commands.add_parser(
        "install",
        help="write the provider launcher into the filesystem mirror of Terraform or OpenTofu 1.11+ and print its paths",
        description="Write the launcher for source lium-stacks/lium into the implied filesystem mirror "
        "(~/.terraform.d/plugins) that Terraform and OpenTofu 1.11+ read, under both registry.terraform.io "
        "and registry.opentofu.org, so `terraform init` (or `tofu init`) works offline with no CLI "
        "configuration change.",
    )
    install.add_argument("--plugins-dir", help="mirror directory (default: ~/.terraform.d/plugins)")
    install.add_argument(
        "--cli-config",
        metavar="FILE",
        help="also write a Terraform CLI configuration that takes lium-stacks providers from --plugins-dir "
        "only (name it with TF_CLI_CONFIG_FILE): one mirror per checkout or environment",
    )
    install.set_defaults(handler=cmd_install)

    sweep = commands.add_parser(
        "sweep",
        help="list (and with --delete remove) pods, templates, credentials, volumes and SSH keys a stack left behind",
        description="Uses LIUM_API_URL and LIUM_API_KEY. Prints the leftovers as JSON.",
    )
    which = sweep.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--name-prefix",
        type=_narrowing("an empty prefix matches every pod, template and volume of the account"),
        help="only resources whose names start with this (not empty)",
    )
    which.add_argument(
        "--stack",
        type=_narrowing("an empty value names no stack (an unset variable?)"),
        help="exactly the pods, templates, volumes, SSH keys (and, with LIUM_SESSION_TOKEN, API keys) that carry this stack's tag in Lium, the "
        "credentials only those templates use, and its journalled rents (with --delete, volumes too): the provider's "
        "`stack` value (or LIUM_STACK) or its 8-character tag (a resource's `stack_tag`; a name shaped like "
        "a tag means both). What another stack took over from it (adopt_stacks) still carries its tag, and "
        "is listed too: never --delete a stack that handed over something still in use",
    )
    sweep.add_argument("--delete", action="store_true", help="delete what was found")
    sweep.add_argument(
        "--include-volumes", action="store_true", help="with --name-prefix --delete, delete volumes too"
    )
    sweep.set_defaults(handler=cmd_sweep)

    add_summary_commands(commands)
    add_job_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = args.handler
    result: int = handler(args)
    return result


# What CPython exits with when it cannot flush standard output at exit.
_UNFLUSHED_OUTPUT_EXIT_CODE = 120


def run() -> NoReturn:
    """The ``lium-tf`` command: :func:`main`, then an exit without the interpreter's teardown.

    The summary commands load pydantic, gpuhunt and httpx, and tearing those modules down took ~60 ms
    of a ~0.6 s pull-request job (docs/benchmarks.md). Nothing needs it: every command closes what it
    opened, logging and the standard streams are flushed here, and a failed flush of the output still
    fails the command, as CPython's own exit would.
    """
    if sys.stdout is None:  # started with its standard output closed: the summary would go nowhere
        print("lium-tf: standard output is closed", file=sys.stderr)
        os._exit(_UNFLUSHED_OUTPUT_EXIT_CODE)
    code = main()
    logging = sys.modules.get("logging")  # flushed if a command used it; not imported for nothing (~4 ms)
    if logging is not None:
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: the output is lost
            code = code or _UNFLUSHED_OUTPUT_EXIT_CODE
    os._exit(code)
