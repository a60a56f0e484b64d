"""``lium-tf run`` and ``lium-tf logs``: a team's job on a stack's runners, and a pod's output."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CODE_LIMIT_MIB = 64
"""The most code ``lium-tf run`` uploads unless told otherwise: a directory, not a dataset."""
NEEDS = "set LIUM_API_KEY (and LIUM_API_URL for another endpoint), as for the provider"


def _assignment(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not _NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (NAME: letters, digits and _)")
    return name, value


def _secret(name: str) -> tuple[str, str]:
    if not _NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"{name!r} is not an environment variable name")
    value = os.environ.get(name)
    if value is None:
        raise argparse.ArgumentTypeError(f"{name} is not set in this environment: export it first")
    return name, value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _client() -> Any:
    from lium_provider.api.client import LiumClient
    from lium_provider.api.endpoints import DEFAULT_ENDPOINT

    api_key = os.environ.get("LIUM_API_KEY")
    if not api_key:
        return None
    return LiumClient(os.environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT, api_key)


def cmd_run(args: argparse.Namespace) -> int:
    from lium_provider.api.errors import LiumError
    from lium_provider.jobs.code import CodeTooLarge, pack_code
    from lium_provider.jobs.run import RunError, RunRequest, run_on_stack
    from lium_provider.jobs.stack import StackError, read_state

    argv = [a for a in args.command if a != "--"] if args.command[:1] == ["--"] else list(args.command)
    if not argv:
        print("lium-tf run: give the command after --, e.g. lium-tf run -- python3 train.py", file=sys.stderr)
        return 2
    key_file = os.environ.get("LIUM_SSH_PRIVATE_KEY_FILE")
    if not key_file:
        print(
            "lium-tf run: set LIUM_SSH_PRIVATE_KEY_FILE to the stack's provider key (the runners accept it)",
            file=sys.stderr,
        )
        return 2
    client = _client()
    if client is None:
        print(f"lium-tf run: {NEEDS}", file=sys.stderr)
        return 2
    _quiet_ssh_library()
    try:
        private_key = Path(key_file).expanduser().read_text()
        state = read_state(Path(args.dir))  # first: a wrong --dir says so before the code is read
        code = None if args.no_code else pack_code(Path.cwd(), args.code_limit_mib * 1024 * 1024)
        request = RunRequest(tuple(argv), dict(args.env or []), dict(args.secret or []), code)
        with client:
            return run_on_stack(state, client, request, private_key, args.target or ())
    except (StackError, RunError, CodeTooLarge, LiumError, OSError) as exc:
        print(f"lium-tf run: {exc}", file=sys.stderr)
        return 1


def _quiet_ssh_library() -> None:
    """paramiko logs every refused tunnel (a runner restarting) to stderr: the command says what matters."""
    import logging

    ssh_log = logging.getLogger("paramiko")
    ssh_log.addHandler(logging.NullHandler())
    ssh_log.propagate = False


def cmd_logs(args: argparse.Namespace) -> int:
    from lium_provider.api.errors import LiumError
    from lium_provider.jobs.logs import pod_to_read, show_lines
    from lium_provider.jobs.stack import StackError, read_state

    client = _client()
    if client is None:
        print(f"lium-tf logs: {NEEDS}", file=sys.stderr)
        return 2
    try:
        state = read_state(Path(args.dir))
    except StackError as exc:
        from lium_provider.api.models import is_lium_id

        if not is_lium_id(args.target):
            print(f"lium-tf logs: {exc}", file=sys.stderr)
            return 1
        state = None
        print(
            f"lium-tf logs: no stack state in {args.dir}: the output is not redacted of runners' environment "
            "values (pass the stack's directory with --dir)",
            file=sys.stderr,
        )
    secrets = state.secret_values() if state is not None else []

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:
        pod_id = pod_to_read(args.target, state, args.node)
        with client:
            if args.follow:
                shown = show_lines(client.follow_pod_logs(pod_id, args.tail), secrets, write)
            else:
                shown = show_lines(client.pod_logs(pod_id, args.tail).splitlines(), secrets, write)
        if not shown:
            print(
                f"lium-tf logs: pod {pod_id}'s container printed nothing (its first process's output; a "
                "job's is what `lium-tf run` streams, and the runner keeps it on the node in "
                "/tmp/runner/job.log)",
                file=sys.stderr,
            )
    except KeyboardInterrupt:
        return 130
    except (StackError, LiumError) as exc:
        print(f"lium-tf logs: {exc}", file=sys.stderr)
        return 1
    return 0


def add_job_commands(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run one job through the runners of a stack (every node of a cluster together) and stream it",
        description="Submits COMMAND to the dstack runner of every lium_runner in the stack's state (or the "
        "ones --target names), as dstack's server does. As ssh does, the words after -- are joined with "
        "spaces and run by /bin/sh on each node: quote what your shell must not expand, e.g. "
        "lium-tf run -- 'torchrun --nnodes=$WORLD_SIZE --node_rank=$NODE_RANK train.py'. The CURRENT "
        "directory (not --dir) is uploaded as the job's code to /workflow/<run> on each node, where the job "
        "runs (what .gitignore files leave out, .git, .terraform, cdktf.out and Terraform state files are "
        "not sent), as the image's user, with the image's environment, the runner's `environment` and "
        "--env/--secret. Members of one lium_cluster start together with NODE_RANK/RANK, WORLD_SIZE, "
        "MASTER_ADDR (node 0's overlay address) and MASTER_PORT set (a --target subset of a cluster runs as "
        "a cluster of those nodes); one failing stops the others. Each line of output is prefixed by its "
        "node, and every value of a runner's `environment` and of --secret is redacted. The exit code is "
        "the job's (the first failing node's); Ctrl-C or SIGTERM stops the job on every node and exits 130; "
        "a runner busy with another job fails the run before it starts. Uses LIUM_API_URL, LIUM_API_KEY "
        "and LIUM_SSH_PRIVATE_KEY_FILE, as the provider does, and `terraform show -json` in --dir.",
    )
    run.add_argument(
        "--dir", default=".", help="the stack's directory, where `terraform init` ran (default: .)"
    )
    run.add_argument(
        "--target",
        action="append",
        metavar="ADDRESS",
        help="only the lium_runner at this address, or every one under it (lium_runner.gpu, module.train); "
        "repeat it for more",
    )
    run.add_argument(
        "--env",
        action="append",
        type=_assignment,
        metavar="NAME=VALUE",
        help="an environment variable of the job",
    )
    run.add_argument(
        "--secret",
        action="append",
        type=_secret,
        metavar="NAME",
        help="an environment variable of the job whose value is taken from this environment and redacted "
        "from all output",
    )
    run.add_argument(
        "--no-code", action="store_true", help="upload no code: run in the image's working directory"
    )
    run.add_argument(
        "--code-limit-mib",
        type=_positive,
        default=CODE_LIMIT_MIB,
        metavar="MIB",
        help=f"refuse to upload more code than this (default: {CODE_LIMIT_MIB})",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    run.set_defaults(handler=cmd_run)

    logs = commands.add_parser(
        "logs",
        help="a pod's container output, by Terraform address (lium_pod, lium_runner, lium_cluster --node N) or pod id",
        description="Prints the last --tail lines the pod's container printed (its first process's output, "
        "as `docker logs` shows it, from Lium's logs route; a job's output is what `lium-tf run` streams), "
        "and with --follow what it prints next, until the pod stops or Ctrl-C. Every value of the stack's "
        "runners' `environment` is redacted. Uses LIUM_API_URL and LIUM_API_KEY, and `terraform show -json` "
        "in --dir for an address.",
    )
    logs.add_argument("target", metavar="ADDRESS|POD_ID", help="lium_pod.gpu, lium_runner.node[1], a pod id")
    logs.add_argument("--dir", default=".", help="the stack's directory (default: .)")
    logs.add_argument("--node", type=int, metavar="N", help="the node of a lium_cluster address, by index")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing what the pod prints")
    logs.add_argument(
        "--tail", type=int, default=100, metavar="N", help="lines to show first, 0 to 10000 (default: 100)"
    )
    logs.set_defaults(handler=cmd_logs)
