"""A real, throwaway PostgreSQL server for tests (Terraform's ``pg`` backend: shared state and locking).

Debian's server binaries (``/usr/lib/postgresql/<major>/bin``) make a fresh cluster in a temporary
directory, trusted without passwords and reachable only on 127.0.0.1 (plus a Unix socket inside that
directory). PostgreSQL refuses to run as root, so as root the cluster belongs to, and runs as, the
unprivileged system user ``nobody`` (started with ``runuser``). Leaving :func:`running_postgres` stops
the server and deletes the directory, also when the test failed.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

SUPERUSER = "postgres"
UNPRIVILEGED_USER = "nobody"
HOST = "127.0.0.1"
START_ATTEMPTS = 5  # a free port can be taken between choosing it and the server binding it
# Durability is pointless for a throwaway cluster; skipping it makes the server start and commit faster.
SERVER_OPTIONS = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are not installed."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: trust authentication for ``user`` on ``127.0.0.1:port``, database ``database``."""

    port: int
    database: str
    directory: Path
    user: str = SUPERUSER

    @property
    def conn_str(self) -> str:
        """The connection string Terraform's ``pg`` backend takes (``PG_CONN_STR`` / ``conn_str``)."""
        return f"postgres://{self.user}@{HOST}:{self.port}/{self.database}?sslmode=disable"

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self.conn_str, autocommit=True)


def server_bin_dir() -> Path:
    """The newest installed ``/usr/lib/postgresql/<major>/bin`` with initdb, pg_ctl and postgres."""
    candidates = [
        d
        for d in Path("/usr/lib/postgresql").glob("*/bin")
        if d.parent.name.isdigit() and all((d / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres"))
    ]
    if not candidates:
        raise PostgresUnavailable(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: "
            "install Debian's `postgresql` package (apt-get install postgresql)"
        )
    return max(candidates, key=lambda d: int(d.parent.name))


def _run_as() -> pwd.struct_passwd | None:
    """The user the cluster runs as: ``nobody`` when we are root, else ourselves (None)."""
    return pwd.getpwnam(UNPRIVILEGED_USER) if os.geteuid() == 0 else None


def _command(user: pwd.struct_passwd | None, argv: list[str]) -> list[str]:
    return ["runuser", "-u", user.pw_name, "--", *argv] if user else argv


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def running_postgres(database: str = "terraform") -> Iterator[PostgresServer]:
    """Start a fresh cluster with ``database`` created; stop it and delete its files on exit."""
    bin_dir = server_bin_dir()
    user = _run_as()
    # As root the directory must be reachable by `nobody`: /tmp is, a root-only TMPDIR might not be.
    directory = Path(tempfile.mkdtemp(prefix="lium-pg-", dir="/tmp" if user else None))
    data = directory / "data"
    log = directory / "server.log"
    try:
        if user:
            os.chown(directory, user.pw_uid, user.pw_gid)
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust", "--no-sync"]
        subprocess.run(
            _command(user, [*initdb, "-E", "UTF8", "--no-locale"]),
            check=True,
            capture_output=True,
            cwd=directory,
            timeout=120,
        )
        port = _start(bin_dir, user, directory, data, log)
        server = PostgresServer(port=port, database=database, directory=directory)
        with psycopg.connect(f"postgres://{SUPERUSER}@{HOST}:{port}/postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        yield server
    finally:
        _stop(bin_dir, user, directory, data)
        shutil.rmtree(directory, ignore_errors=True)


def _start(bin_dir: Path, user: pwd.struct_passwd | None, directory: Path, data: Path, log: Path) -> int:
    """Start the server on a free loopback port (``pg_ctl -w`` returns once it accepts connections)."""
    for _ in range(START_ATTEMPTS):
        port = _free_port()
        options = [
            "-p",
            str(port),
            "-c",
            f"listen_addresses={HOST}",
            "-c",
            f"unix_socket_directories={directory}",
        ]
        start = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60"]
        result = subprocess.run(
            _command(user, [*start, "-o", shlex.join([*options, *SERVER_OPTIONS]), "start"]),
            capture_output=True,
            text=True,
            cwd=directory,
            timeout=120,
        )
        if result.returncode == 0:
            return port
        server_log = log.read_text(errors="replace") if log.exists() else ""
        if "could not bind" not in server_log and "already in use" not in server_log:
            raise RuntimeError(
                f"PostgreSQL did not start:\n{result.stdout}{result.stderr}\n{server_log[-2000:]}"
            )
    raise RuntimeError(f"PostgreSQL found no free port in {START_ATTEMPTS} attempts")


def _stop(bin_dir: Path, user: pwd.struct_passwd | None, directory: Path, data: Path) -> None:
    """Stop the server if it runs; if pg_ctl cannot, kill the postmaster whose pid the cluster recorded."""
    pid_file = data / "postmaster.pid"
    if not pid_file.exists():
        return
    stop = [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "30", "stop"]
    result = subprocess.run(_command(user, stop), capture_output=True, cwd=directory, timeout=60, check=False)
    if result.returncode == 0 or not pid_file.exists():
        return
    with suppress(ProcessLookupError, ValueError, IndexError):
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
