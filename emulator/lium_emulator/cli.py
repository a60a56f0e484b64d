"""``lium-emulator``: ``serve`` runs a local Lium; ``resources`` prints what it holds; ``catalog`` generates nodes (docs/emulator.md)."""

import argparse
import json
import logging
import sys
from pathlib import Path

from lium_emulator import __version__
from lium_emulator.config import (
    ADMIN_KEY_FILE,
    DEFAULT_API_KEY,
    DEFAULT_FEATURES,
    EmulatorConfig,
    random_admin_key,
)
from lium_emulator.sandbox.file_guard import POD_FILE_SHARE


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _positive_tick(text: str) -> float:
    value = float(text)
    if not 0.01 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be between 0.01 and 3600")
    return value


def _positive_whole_number(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lium-emulator", description="A local, Lium-compatible GPU cloud.")
    parser.add_argument("--version", action="version", version=f"lium-emulator {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="serve the Lium API at http://HOST:PORT/api",
        description="Serve the Lium API at http://HOST:PORT/api; pods are Linux sandboxes with a real sshd.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument(
        "--port", type=int, default=8787, help="port to listen on; 0 picks a free one (default: %(default)s)"
    )
    serve.add_argument(
        "--api-key",
        action="append",
        dest="api_keys",
        metavar="KEY",
        help=f"an accepted API key, one account each (repeatable; when none is given: {DEFAULT_API_KEY!r})",
    )
    serve.add_argument(
        "--admin-key",
        help="value of X-Emulator-Admin for /_emulator routes "
        f"(default: a random key per start, printed once and written to STATE_DIR/{ADMIN_KEY_FILE})",
    )
    serve.add_argument(
        "--state-dir", type=Path, help="keep state in SQLite here across restarts (default: memory)"
    )
    serve.add_argument("--nodes", type=Path, help="node catalog JSON (default: the packaged catalog)")
    serve.add_argument("--faults", type=Path, help="fault plan JSON")
    serve.add_argument(
        "--features",
        default=",".join(DEFAULT_FEATURES),
        help="comma-separated features advertised on /version, '' for none (default: %(default)s)",
    )
    serve.add_argument(
        "--balance",
        type=float,
        default=1000.0,
        help="starting balance of each account, USD (default: %(default)s)",
    )
    serve.add_argument(
        "--pending-seconds",
        type=_non_negative,
        default=2.0,
        help="how long a new pod stays PENDING (default: %(default)s)",
    )
    serve.add_argument(
        "--ssh-delay-seconds",
        type=_non_negative,
        default=1.0,
        help="how long after RUNNING the pod's SSH command is published (default: %(default)s)",
    )
    serve.add_argument(
        "--deleting-seconds",
        type=_non_negative,
        default=1.0,
        help="how long a deleted pod stays DELETING (default: %(default)s)",
    )
    serve.add_argument(
        "--budget-tick-seconds",
        type=_positive_tick,
        default=1.0,
        help="how often running pods are checked against their API keys' budgets (default: %(default)s)",
    )
    serve.add_argument(
        "--backup-hour-seconds",
        type=_positive_tick,
        default=3600.0,
        help="how long one hour of a backup schedule lasts, a time scale for schedules and retention; "
        "POST /_emulator/backups/run-due runs what is due at once (default: %(default)s)",
    )
    serve.add_argument(
        "--backup-max-mib",
        type=_positive_whole_number,
        default=256,
        help="the largest backup the emulator's store takes, in MiB; a workspace's backups hold 4 times "
        "that together (default: %(default)s)",
    )
    serve.add_argument(
        "--failed-seconds",
        type=_non_negative,
        default=180.0,
        help="how long CREATION_FAILED rows stay listed (default: %(default)s)",
    )
    serve.add_argument(
        "--pod-open-files-limit",
        type=_positive_whole_number,
        help="the most files a pod may hold open before it is killed (default: "
        f"{POD_FILE_SHARE} of the host's file table, fs.file-max)",
    )

    resources = commands.add_parser(
        "resources",
        help="print every account's resources as JSON",
        description="Print the pods, templates, credentials and volumes of every account of a running "
        "emulator, with their billing, as JSON (its /_emulator/resources route).",
    )
    resources.add_argument("--url", required=True, help="the emulator's URL, e.g. http://127.0.0.1:8787/api")
    resources.add_argument("--admin-key", required=True, help="the emulator's admin key")
    catalog = commands.add_parser(
        "catalog",
        help="print a generated node catalog (for --nodes) as JSON",
        description="Print COUNT nodes of GPUS_PER_NODE GPUs each, copies of the packaged catalog's "
        "GPU_MODEL node at rising prices, as a node catalog for `serve --nodes`.",
    )
    catalog.add_argument("--count", type=int, required=True, help="how many nodes")
    catalog.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default: %(default)s)")
    catalog.add_argument("--gpu-model", default="RTX 3090", help="GPU model to copy (default: %(default)s)")
    return parser


def _catalog(args: argparse.Namespace) -> int:
    from lium_emulator.catalogs.nodes import generate_fleet

    try:
        nodes = generate_fleet(args.count, args.gpus_per_node, args.gpu_model)
    except ValueError as exc:
        print(f"lium-emulator catalog: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"nodes": [node.model_dump(mode="json") for node in nodes]}, indent=1))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from lium_emulator.server import serve  # imported here: `resources` must not need the server stack

    config = EmulatorConfig(
        host=args.host,
        port=args.port,
        api_keys=tuple(args.api_keys or (DEFAULT_API_KEY,)),
        admin_key=args.admin_key or random_admin_key(),
        admin_key_generated=args.admin_key is None,
        state_dir=args.state_dir,
        nodes_file=args.nodes,
        faults_file=args.faults,
        features=tuple(name.strip() for name in args.features.split(",") if name.strip()),
        balance_usd=args.balance,
        pending_seconds=args.pending_seconds,
        ssh_delay_seconds=args.ssh_delay_seconds,
        deleting_seconds=args.deleting_seconds,
        failed_row_seconds=args.failed_seconds,
        budget_tick_seconds=args.budget_tick_seconds,
        backup_hour_seconds=args.backup_hour_seconds,
        backup_max_mib=args.backup_max_mib,
        pod_open_files_limit=args.pod_open_files_limit,
    )
    return serve(config)


def emulator_root(url: str) -> str:
    """``http://host:port`` from the emulator's URL, with or without the ``/api`` suffix."""
    root = url.rstrip("/")
    return root[: -len("/api")] if root.endswith("/api") else root


def _resources(args: argparse.Namespace) -> int:
    import httpx  # here: with its CLI (click, rich) it is a fifth of the start of `serve`, which never uses it

    try:
        response = httpx.get(
            f"{emulator_root(args.url)}/_emulator/resources",
            headers={"X-Emulator-Admin": args.admin_key},
            timeout=30,
        )
    except httpx.HTTPError as error:
        print(f"cannot reach the emulator: {type(error).__name__}", file=sys.stderr)
        return 1
    if response.status_code != 200:
        try:
            envelope = response.json()["error"]
            said = f": {envelope['message']}. {envelope.get('hint', '')}".rstrip()
        except (ValueError, KeyError, TypeError):
            said = ""
        print(f"the emulator answered HTTP {response.status_code}{said}", file=sys.stderr)
        return 1
    print(json.dumps(response.json(), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lium-emulator`` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return _serve(args)
    if args.command == "catalog":
        return _catalog(args)
    return _resources(args)


if __name__ == "__main__":
    sys.exit(main())
