#!/usr/bin/python3
"""A stand-in for ``dstack-runner``, served by the Lium emulator to its pods instead of the real binary.

It speaks the same command line and HTTP API (v1 job API) that dstack's server uses, so dstack runs
jobs on emulator pods unchanged:

    dstack-runner --log-level 6 start --temp-dir /tmp/runner --http-port 10999 --ssh-port 10022 \
        --ssh-authorized-key KEY [--ssh-authorized-key KEY2 ...]

* an OpenSSH ``sshd -D`` of its own on ``--ssh-port`` (config, host keys and authorized_keys under
  ``/dstack/ssh``) — dstack's server reaches the HTTP API through it;
* ``GET /api/healthcheck``; ``POST /api/submit`` (the job spec), ``/api/upload_archive`` (multipart
  file archives), ``/api/upload_code`` (a tar of the repo, optional), ``/api/run`` (answers the job's
  working dir and user), ``GET /api/pull?timestamp=`` (job states, job logs, runner logs newer than
  the timestamp), ``POST /api/stop``;
* the job runs ``job_spec.commands`` on a pseudo-terminal with the runner's own environment (the
  image's, as dstack starts it) plus dstack's ``DSTACK_*`` variables, secrets and the job env, in the
  job's working dir, as the job user (privileges dropped from root);
* logs go to ``<temp-dir>/default.log``, ``runner.log`` and ``job.log``; like the real runner it exits
  once the job finished and its final state was pulled (or after 5 minutes without a job).

Limits of the stand-in: git ("remote") repos are refused (pods have no network), job logs keep ANSI
sequences, there are no metrics and no log quota. Python 3 standard library only: it runs with the
pod's ``/usr/bin/python3``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import grp
import json
import logging
import os
import posixpath
import pwd
import re
import select
import shlex
import signal
import subprocess
import sys
import tarfile
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

VERSION = "0.22.5"  # replaced with the version the runner is downloaded as
SSHD = "/usr/sbin/sshd"
DSTACK_DIR = Path("/dstack")
LEGACY_REPO_DIR = "/workflow"
START_WAIT_SECONDS = 300.0
LOGS_WAIT_SECONDS = 300.0
KILL_DELAY_SECONDS = 10.0
DRAIN_SECONDS = 0.2
DRAIN_MAX_SECONDS = 2.0
LOGRUS_LEVELS = {
    0: logging.CRITICAL,
    1: logging.CRITICAL,
    2: logging.ERROR,
    3: logging.WARNING,
    4: logging.INFO,
}
LEVEL_NAMES = {"panic": 0, "fatal": 1, "error": 2, "warning": 3, "warn": 3, "info": 4, "debug": 5, "trace": 6}

log = logging.getLogger("dstack-runner")
job_log = logging.getLogger("dstack-runner.executor")


class JobSetupError(Exception):
    """The job cannot start; carries dstack's termination reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class History:
    """Job states, job logs and runner logs, in dstack's pull shape.

    Timestamps are strictly increasing milliseconds (dstack pulls what is newer than the last
    one). They are taken and events stored under one lock, and a pull reads the events and
    ``last_updated`` under it too: no event is stamped older than a pull that missed it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = int(time.time() * 1000)
        self._states: list[dict[str, Any]] = []
        self._job_logs: list[dict[str, Any]] = []
        self._runner_logs: list[dict[str, Any]] = []

    def add_state(
        self, state: str, reason: str = "", message: str = "", exit_status: int | None = None
    ) -> None:
        with self._lock:
            self._states.append(
                {
                    "state": state,
                    "timestamp": self._next_timestamp(),
                    "termination_reason": reason,
                    "termination_message": message,
                    "exit_status": exit_status,
                }
            )
        job_log.info("Job state changed: %s%s", state, f" ({reason}: {message})" if reason else "")

    def _next_timestamp(self) -> int:
        self._last = max(int(time.time() * 1000), self._last + 1)
        return self._last

    def add_job_log(self, data: bytes) -> None:
        self._add_log(self._job_logs, data)

    def add_runner_log(self, data: bytes) -> None:
        self._add_log(self._runner_logs, data)

    def _add_log(self, events: list[dict[str, Any]], data: bytes) -> None:
        with self._lock:
            events.append({"timestamp": self._next_timestamp(), "message": base64.b64encode(data).decode()})

    def since(self, timestamp: int) -> dict[str, Any]:
        """Everything newer than ``timestamp``, and the ``last_updated`` to pull from next."""
        with self._lock:
            return {
                "job_states": [e for e in self._states if e["timestamp"] > timestamp],
                "job_logs": [e for e in self._job_logs if e["timestamp"] > timestamp],
                "runner_logs": [e for e in self._runner_logs if e["timestamp"] > timestamp],
                "last_updated": self._last,
            }


class RunnerLogHandler(logging.Handler):
    """Executor log records become the run's runner logs (and ``runner.log``)."""

    def __init__(self, history: History, path: Path) -> None:
        super().__init__()
        self._history = history
        self._file = path.open("a")

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record) + "\n"
        self._file.write(line)
        self._file.flush()
        self._history.add_runner_log(line.encode())


class JobUser:
    def __init__(self, name: str, uid: int, gid: int, groups: list[int], home: str) -> None:
        self.name, self.uid, self.gid, self.groups, self.home = name, uid, gid, groups, home


def resolve_user(spec: dict[str, Any] | None) -> JobUser:
    """The job's Unix user from the job spec (uid/username, gid/groupname); None means the runner's own."""
    if spec is None:
        entry = pwd.getpwuid(os.getuid())
        user = JobUser(entry.pw_name, entry.pw_uid, entry.pw_gid, os.getgroups(), entry.pw_dir or "/root")
    else:
        entry_or_none: pwd.struct_passwd | None = None
        if spec.get("uid") is not None:
            uid = int(spec["uid"])
            try:
                entry_or_none = pwd.getpwuid(uid)
            except KeyError:
                entry_or_none = None
        elif spec.get("username"):
            try:
                entry_or_none = pwd.getpwnam(spec["username"])
            except KeyError as e:
                raise JobSetupError("executor_error", f"no such user: {spec['username']}") from e
            uid = entry_or_none.pw_uid
        else:
            raise JobSetupError("executor_error", "the job user has neither uid nor username")
        if spec.get("gid") is not None:
            groups = [int(spec["gid"])]
        elif spec.get("groupname"):
            try:
                groups = [grp.getgrnam(spec["groupname"]).gr_gid]
            except KeyError as e:
                raise JobSetupError("executor_error", f"no such group: {spec['groupname']}") from e
        elif entry_or_none is not None:
            groups = [entry_or_none.pw_gid, *os.getgrouplist(entry_or_none.pw_name, entry_or_none.pw_gid)]
        else:
            raise JobSetupError("executor_error", f"uid {uid} has no passwd entry and the job sets no group")
        name = entry_or_none.pw_name if entry_or_none is not None else str(uid)
        home = entry_or_none.pw_dir if entry_or_none is not None else "/"
        user = JobUser(name, uid, groups[0], list(dict.fromkeys(groups)), home)
    if not os.path.isdir(user.home):
        job_log.warning("Home dir %s of %s is not accessible, using /", user.home, user.name)
        user.home = "/"
    return user


def expand_path(path: str, base: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return os.path.normpath(os.path.join(base, path))


def chown_tree(root: str, user: JobUser) -> None:
    os.lchown(root, user.uid, user.gid)
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            os.lchown(os.path.join(directory, name), user.uid, user.gid)


def inside(path: str) -> bool:
    """Whether an archive path stays inside the extraction directory."""
    normalized = posixpath.normpath(path)
    return not posixpath.isabs(normalized) and normalized != ".." and not normalized.startswith("../")


def extract_tar(archive: Path, destination: str, user: JobUser) -> None:
    """Extract refusing members that would land outside ``destination``; owned by the job user."""
    os.makedirs(destination, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            if (
                not inside(member.name)
                or (
                    member.issym()
                    and not inside(posixpath.join(posixpath.dirname(member.name), member.linkname))
                )
                or (member.islnk() and not inside(member.linkname))
            ):
                raise JobSetupError("executor_error", f"unsafe path in archive: {member.name}")
            if member.isfile() or member.isdir() or member.issym() or member.islnk():
                members.append(member)
        tar.extractall(destination, members=members)
    chown_tree(destination, user)


def established_connections(port: int) -> int:
    """Established TCP connections to local ``port`` (SSH sessions to the runner's sshd)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


class Executor:
    """The runner's single job: wait_submit -> wait_run -> serve_logs -> wait_logs_finished."""

    def __init__(self, temp_dir: Path, ssh_port: int) -> None:
        self.temp_dir = temp_dir
        self.ssh_port = ssh_port
        self.history = History()
        self.lock = threading.Lock()
        self.state = "wait_submit"
        self.body: dict[str, Any] = {}
        self.code_path: Path | None = None
        self.archives: dict[str, Path] = {}
        self.user: JobUser | None = None
        self.working_dir = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.terminal: int | None = None
        self.cancelled = threading.Event()
        self.started = threading.Event()
        self.finished = threading.Event()
        self.final_pull = threading.Event()
        self.output_done = threading.Event()
        self.last_connection = time.monotonic()
        handler = RunnerLogHandler(self.history, temp_dir / "runner.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        job_log.addHandler(handler)

    @property
    def job_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.body.get("job_spec") or {}
        return spec

    def submit(self, body: dict[str, Any]) -> HTTPStatus:
        with self.lock:
            if self.state not in ("wait_submit", "wait_run"):
                return HTTPStatus.CONFLICT
            if self.state == "wait_run":
                log.warning("Job already submitted, submitting again")
            self.body = body
            self.state = "wait_run"
        return HTTPStatus.OK

    def upload_archive(self, archive_id: str, data: bytes) -> HTTPStatus:
        with self.lock:
            if self.state != "wait_run":
                return HTTPStatus.CONFLICT
            if not re.fullmatch(r"[A-Za-z0-9-]+", archive_id):
                return HTTPStatus.BAD_REQUEST
            path = self.temp_dir / "file_archives" / archive_id
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            self.archives[archive_id] = path
        return HTTPStatus.OK

    def upload_code(self, data: bytes) -> HTTPStatus:
        with self.lock:
            if self.state != "wait_run":
                return HTTPStatus.CONFLICT
            self.code_path = self.temp_dir / "code"
            self.code_path.write_bytes(data)
        return HTTPStatus.OK

    def run(self) -> tuple[HTTPStatus, dict[str, str] | None]:
        with self.lock:
            if self.state != "wait_run":
                return HTTPStatus.CONFLICT, None
            self.state = "serve_logs"
        info = None
        try:
            self.user = resolve_user(self.job_spec.get("user"))
            working_dir = self.job_spec.get("working_dir")
            self.working_dir = expand_path(working_dir, "/", self.user.home) if working_dir else os.getcwd()
            info = {"working_dir": self.working_dir, "username": self.user.name}
        except JobSetupError as e:
            self.history.add_state("failed", e.reason, str(e))
        self.started.set()
        threading.Thread(target=self._run_job, name="job", daemon=True).start()
        return HTTPStatus.OK, info

    def pull(self, timestamp: int) -> dict[str, Any]:
        with self.lock:
            finishing = self.state == "wait_logs_finished"
        if established_connections(self.ssh_port):
            self.last_connection = time.monotonic()
        response: dict[str, Any] = {
            **self.history.since(timestamp),
            "no_connections_secs": int(time.monotonic() - self.last_connection),
            "has_more": not finishing,
        }
        return response

    def stop(self) -> None:
        """Interrupt the job (its final ``terminated`` state is still pulled) or give up waiting for one."""
        with self.lock:
            running = self.state == "serve_logs"
            if not running:
                self.state = "wait_logs_finished"
        if running:
            self.cancelled.set()
            self._interrupt()
        else:
            self.started.set()
            self.finished.set()

    def _interrupt(self) -> None:
        """Ctrl-C and hang-up for the job: SIGINT to its terminal's foreground process group, SIGHUP
        to the job's shell (an interactive shell survives Ctrl-C, not a hang-up); SIGKILL follows
        ``KILL_DELAY_SECONDS`` later if something still runs."""
        process, terminal = self.process, self.terminal
        if process is None or process.poll() is not None:
            return
        if terminal is not None:
            with contextlib.suppress(OSError):
                os.killpg(os.tcgetpgrp(terminal), signal.SIGINT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGHUP)

    def _run_job(self) -> None:
        try:
            if self.user is not None:
                self._execute(self.user)
        except Exception:
            job_log.exception("Executor failed")
            self.history.add_state("failed", "executor_error", "the runner stand-in failed")
        finally:
            with self.lock:
                self.state = "wait_logs_finished"
            self.finished.set()

    def _execute(self, user: JobUser) -> None:
        try:
            repo_dir = self._setup_repo(user)
            self._setup_files(user)
            commands = list(self.job_spec.get("commands") or [])
            if not commands:
                raise JobSetupError("executor_error", "the job has no commands")
            if not os.path.isdir(self.working_dir):
                os.makedirs(self.working_dir)
                os.chown(self.working_dir, user.uid, user.gid)
        except (JobSetupError, OSError, tarfile.TarError) as e:
            reason = e.reason if isinstance(e, JobSetupError) else "executor_error"
            self.history.add_state("failed", reason, f"Failed to set up the job ({e})")
            return
        if self.cancelled.is_set():
            self.history.add_state("terminated")
            return
        env = self._environment(user, repo_dir)
        self.history.add_state("running")
        returncode, timed_out = self._exec(commands, env, user)
        if self.cancelled.is_set() and not timed_out:
            self.history.add_state("terminated")
        elif timed_out:
            self.history.add_state("terminated", "max_duration_exceeded", "Max duration exceeded")
        elif returncode == 0:
            self.history.add_state("done", exit_status=0)
        else:
            # Like Go's ExitCode(): -1 when the process was killed by a signal.
            self.history.add_state("failed", exit_status=returncode if returncode > 0 else -1)

    def _setup_repo(self, user: JobUser) -> str:
        spec = self.job_spec
        run_spec = (self.body.get("run") or {}).get("run_spec") or {}
        repo_data = spec.get("repo_data") or run_spec.get("repo_data") or {}
        repo_dir = expand_path(spec.get("repo_dir") or LEGACY_REPO_DIR, self.working_dir, user.home)
        if os.path.isdir(repo_dir) and os.listdir(repo_dir):
            action = spec.get("repo_exists_action") or "skip"
            if action == "error":
                raise JobSetupError("container_exited_with_error", f"repo dir is not empty: {repo_dir}")
            job_log.info("Skipping repo checkout: %s is not empty", repo_dir)
            return repo_dir
        if repo_data.get("repo_type") == "remote":
            raise JobSetupError(
                "container_exited_with_error",
                "git repos cannot be cloned: Lium emulator pods have no network access",
            )
        os.makedirs(repo_dir, exist_ok=True)
        if self.code_path is not None and self.code_path.stat().st_size > 0:
            extract_tar(self.code_path, repo_dir, user)
        os.chown(repo_dir, user.uid, user.gid)
        return repo_dir

    def _setup_files(self, user: JobUser) -> None:
        for mapping in self.job_spec.get("file_archives") or []:
            archive = self.archives.get(str(mapping.get("id")))
            if archive is None:
                raise JobSetupError("executor_error", f"file archive {mapping.get('id')} was not uploaded")
            extract_tar(archive, expand_path(str(mapping["path"]), self.working_dir, user.home), user)

    def _environment(self, user: JobUser, repo_dir: str) -> dict[str, str]:
        spec = self.job_spec
        run = self.body.get("run") or {}
        run_spec = run.get("run_spec") or {}
        cluster = self.body.get("cluster_info") or {}
        job_ips = [str(ip) for ip in cluster.get("job_ips") or []]
        gpus_per_node = [int(n) for n in cluster.get("gpus_per_node") or []]
        gpus_per_job = int(cluster.get("gpus_per_job") or 0)
        nodes = int(spec.get("jobs_per_replica") or 1)
        hostfile = DSTACK_DIR / "mpi" / "hostfile"
        hostfile.parent.mkdir(parents=True, exist_ok=True)
        slots = gpus_per_node or [gpus_per_job] * len(job_ips)
        hostfile.write_text("".join(f"{ip} slots={n}\n" for ip, n in zip(job_ips, slots, strict=False) if ip))
        env = dict(os.environ)
        env.update(
            {
                "DSTACK_RUN_ID": str(run.get("id", "")),
                "DSTACK_JOB_ID": str((self.body.get("job_submission") or {}).get("id", "")),
                "DSTACK_RUN_NAME": str(run_spec.get("run_name", "")),
                "DSTACK_REPO_ID": str(run_spec.get("repo_id", "")),
                "DSTACK_REPO_DIR": repo_dir,
                "DSTACK_WORKING_DIR": self.working_dir,
                "DSTACK_NODES_IPS": "\n".join(job_ips),
                "DSTACK_MASTER_NODE_IP": str(cluster.get("master_job_ip", "")),
                "DSTACK_NODE_RANK": str(spec.get("job_num", 0)),
                "DSTACK_NODES_NUM": str(nodes),
                "DSTACK_GPUS_PER_NODE": str(gpus_per_job),
                "DSTACK_GPUS_NUM": str(sum(gpus_per_node) if gpus_per_node else nodes * gpus_per_job),
                "DSTACK_MPI_HOSTFILE": str(hostfile),
            }
        )
        env.update({str(k): str(v) for k, v in (self.body.get("secrets") or {}).items()})
        env.update({str(k): str(v) for k, v in (spec.get("env") or {}).items()})
        write_profile(env)
        env["HOME"] = user.home  # after the profile: sshd sets the right HOME per user
        return env

    def _exec(self, commands: list[str], env: dict[str, str], user: JobUser) -> tuple[int, bool]:
        """Run the job on a pty until it exits; returns (exit code, max duration exceeded)."""
        master, slave = os.openpty()
        self.terminal = master
        tty = os.ttyname(slave)
        drop = user.uid != os.getuid()
        if drop:
            os.chown(tty, user.uid, -1)
        try:
            with (self.temp_dir / "job.log").open("ab") as job_log_file:
                # A new session whose first open of the tty makes it the controlling terminal, as
                # for a login. Our slave fd stays open until the job exited: had every slave fd been
                # closed, even briefly before the job opens it, the master would read EIO.
                self.process = subprocess.Popen(
                    ["/bin/sh", "-c", 'exec "$@" <"$0" >"$0" 2>&1', tty, *commands],
                    cwd=self.working_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    user=user.uid if drop else None,
                    group=user.gid if drop else None,
                    extra_groups=user.groups if drop else None,
                )
                if self.cancelled.is_set():
                    self._interrupt()
                reader = threading.Thread(target=self._copy_output, args=(master, job_log_file), daemon=True)
                reader.start()
                returncode, timed_out = self._wait(self.process)
                self.output_done.set()
                reader.join()
        finally:
            self.terminal = None
            os.close(slave)
            os.close(master)
        return returncode, timed_out

    def _wait(self, process: subprocess.Popen[bytes]) -> tuple[int, bool]:
        """Wait for the job; on max_duration or stop interrupt it, and kill it if it lingers."""
        max_duration = self.job_spec.get("max_duration")
        deadline = time.monotonic() + float(max_duration) if max_duration else None
        timed_out = False
        kill_at: float | None = None
        while True:
            try:
                return process.wait(timeout=0.2), timed_out
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if deadline is not None and now >= deadline and not timed_out:
                timed_out = True
                self._interrupt()
            if kill_at is None and (timed_out or self.cancelled.is_set()):
                kill_at = now + KILL_DELAY_SECONDS
            if kill_at is not None and now >= kill_at:
                kill_session(process.pid)

    def _copy_output(self, master: int, job_log_file: BinaryIO) -> None:
        """Job output to the job logs until the job exited and its output went quiet."""
        stop_by: float | None = None
        while stop_by is None or time.monotonic() < stop_by:
            if stop_by is None and self.output_done.is_set():
                stop_by = time.monotonic() + DRAIN_MAX_SECONDS  # background writers cannot hold us
            ready, _, _ = select.select([master], [], [], DRAIN_SECONDS)
            if not ready:
                if self.output_done.is_set():
                    return
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            job_log_file.write(data)
            job_log_file.flush()
            self.history.add_job_log(data)


def kill_session(session: int) -> None:
    """SIGKILL every process of a session: the job and whatever it started, in any process group."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == session:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)


def write_profile(env: dict[str, str]) -> None:
    """The job environment for SSH sessions into the job (sshd resets the environment)."""
    lines = [
        f"export {name}={shlex.quote(value)}\n"
        for name, value in env.items()
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
        and name not in ("HOME", "PWD", "SHLVL", "_", "OLDPWD")
    ]
    profile = DSTACK_DIR / "profile"
    profile.write_text("".join(lines))
    include = f"[ -f {profile} ] && . {profile}\n"
    etc_profile = Path("/etc/profile")
    try:
        current = etc_profile.read_text()
    except FileNotFoundError:
        current = ""
    if include not in current:
        etc_profile.write_text(current + include)


class RunnerSshd:
    """The runner's own sshd on ``--ssh-port``, configured under ``/dstack/ssh``."""

    def __init__(self, port: int, log_level: str) -> None:
        self.port = port
        self.base = DSTACK_DIR / "ssh"
        self.conf = self.base / "conf"
        self.process: subprocess.Popen[bytes] | None = None
        self.terminal: int | None = None
        self._log_level = log_level

    def prepare(self, authorized_keys: list[str]) -> None:
        # sshd's StrictModes wants root-owned, not group/world-writable directories up to the key file.
        DSTACK_DIR.mkdir(mode=0o755, exist_ok=True)
        os.chown(DSTACK_DIR, 0, 0)
        DSTACK_DIR.chmod(0o755)
        subprocess.run(["rm", "-rf", str(self.base)], check=True)
        self.conf.mkdir(mode=0o755, parents=True)
        (self.base / "log").mkdir(mode=0o755)
        for key_type in ("ecdsa", "ed25519"):
            key = self.conf / f"ssh_host_{key_type}_key"
            subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(key)], check=True)
        keys = self.conf / "authorized_keys"
        keys.write_text("".join(key.strip() + "\n" for key in authorized_keys if key.strip()))
        keys.chmod(0o644)
        (self.conf / "sshd_config").write_text(
            f"LogLevel {self._log_level}\n"
            f"Port {self.port}\n"
            "PidFile none\n"
            "Subsystem sftp internal-sftp\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            # Emulator pods give every account a "*" (not locked) password, so keys work without PAM.
            "UsePAM no\n"
            f"AuthorizedKeysFile {keys} .ssh/authorized_keys\n"
            "AcceptEnv LANG LC_* COLORTERM NO_COLOR\n"
            "ClientAliveInterval 30\n"
            "ClientAliveCountMax 4\n"
            + "".join(f"HostKey {self.conf}/ssh_host_{t}_key\n" for t in ("ecdsa", "ed25519"))
        )
        for privsep in ("/run/sshd", "/var/empty"):
            os.makedirs(privsep, 0o755, exist_ok=True)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.conf / "sshd_config"), "-E", str(self.base / "log" / "sshd.log")],
            stdin=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(KILL_DELAY_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def multipart_archive(content_type: str, body: bytes) -> tuple[str, bytes] | None:
    """(file name, bytes) of the single ``archive`` field of a multipart form, None if malformed."""
    boundary = re.search(r'boundary="?([^";]+)"?', content_type)
    if not content_type.startswith("multipart/form-data") or boundary is None:
        return None
    delimiter = b"\r\n--" + boundary.group(1).encode()
    sections = (b"\r\n" + body).split(delimiter)
    fields = [section for section in sections[1:] if not section.startswith(b"--")]
    if sections[0] or len(fields) != 1:
        return None
    head, separator, content = fields[0].partition(b"\r\n\r\n")
    disposition = next(
        (
            line
            for line in head.decode("latin-1").split("\r\n")
            if line.lower().startswith("content-disposition:")
        ),
        "",
    )
    name = re.search(r';\s*name="([^"]*)"', disposition)
    filename = re.search(r';\s*filename="([^"]*)"', disposition)
    if (
        not separator
        or name is None
        or name.group(1) != "archive"
        or filename is None
        or not filename.group(1)
    ):
        return None
    return filename.group(1), content


def make_handler(executor: Executor) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "dstack-runner"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s - " + format, self.address_string(), *args)

        def _send(self, status: HTTPStatus, payload: Any = None) -> None:
            body = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            if payload is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/api/healthcheck":
                self._send(HTTPStatus.OK, {"service": "dstack-runner", "version": VERSION})
            elif path == "/api/pull":
                match = re.search(r"(?:^|&)timestamp=(-?\d+)", query)
                if query and "timestamp=" in query and match is None:
                    self._send(HTTPStatus.BAD_REQUEST, {"error": "invalid timestamp"})
                    return
                response = executor.pull(int(match.group(1)) if match else 0)
                self._send(HTTPStatus.OK, response)
                if not response["has_more"]:
                    # Set only once the answer is written: the runner exits on it, and its handler
                    # threads with it, which cut a final answer still being sent.
                    executor.final_pull.set()
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"not found: {path}"})

        def do_POST(self) -> None:
            path = self.path.partition("?")[0]
            body = read_body(self)
            if path == "/api/submit":
                try:
                    payload = json.loads(body)
                except ValueError:
                    self._send(HTTPStatus.BAD_REQUEST, {"error": "invalid JSON"})
                    return
                self._send(executor.submit(payload) if isinstance(payload, dict) else HTTPStatus.BAD_REQUEST)
            elif path == "/api/upload_archive":
                archive = multipart_archive(self.headers.get("Content-Type", ""), body)
                if archive is None:
                    self._send(HTTPStatus.BAD_REQUEST, {"error": "expected one multipart field 'archive'"})
                else:
                    self._send(executor.upload_archive(*archive))
            elif path == "/api/upload_code":
                self._send(executor.upload_code(body))
            elif path == "/api/run":
                status, info = executor.run()
                self._send(status, info)
            elif path == "/api/stop":
                executor.stop()
                self._send(HTTPStatus.OK)
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"not found: {path}"})

    return Handler


def configure_logging(level: str, temp_dir: Path) -> None:
    number = int(level) if level.isdigit() else LEVEL_NAMES.get(level.lower(), 4)
    root = logging.getLogger()
    root.setLevel(LOGRUS_LEVELS.get(number, logging.DEBUG))
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in (logging.StreamHandler(sys.stdout), logging.FileHandler(temp_dir / "default.log")):
        handler.setFormatter(formatter)
        root.addHandler(handler)


def start(args: argparse.Namespace) -> int:
    temp_dir = Path(args.temp_dir)
    temp_dir.mkdir(parents=True, exist_ok=True)
    configure_logging(args.log_level, temp_dir)
    if os.geteuid() != 0:
        log.error("must be root")
        return 1
    os.environ["HOME"] = pwd.getpwuid(0).pw_dir or "/root"
    sshd = RunnerSshd(args.ssh_port, args.ssh_log_level)
    sshd.prepare(args.ssh_authorized_key)
    sshd.start()
    executor = Executor(temp_dir, args.ssh_port)
    server = ThreadingHTTPServer((args.http_address, args.http_port), make_handler(executor))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(signum, lambda *_: executor.stop())
    # Started under nohup, SIGHUP is ignored, and an ignored signal stays ignored in the job. A
    # handler keeps the runner immune while the job gets the default disposition back at exec.
    signal.signal(signal.SIGHUP, lambda *_: log.info("SIGHUP ignored"))
    log.info("dstack-runner %s (Lium emulator stand-in) listening on %s", VERSION, args.http_port)
    try:
        if not executor.started.wait(START_WAIT_SECONDS):
            log.error("Job didn't start in time, shutting down")
            return 1
        executor.finished.wait()
        if not executor.final_pull.wait(LOGS_WAIT_SECONDS):
            log.error("Logs streaming didn't finish in time")
        return 0
    finally:
        server.shutdown()
        server.server_close()
        sshd.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dstack-runner", description="dstack-runner (Lium emulator stand-in)"
    )
    parser.add_argument("--version", action="version", version=VERSION)
    parser.add_argument("--log-level", default="info")
    commands = parser.add_subparsers(dest="command", required=True)
    start_parser = commands.add_parser("start", help="Start dstack-runner")
    start_parser.add_argument("--temp-dir", default="/tmp/runner")
    start_parser.add_argument("--home-dir", help="ignored, as by the real runner since 0.20.4")
    start_parser.add_argument("--working-dir", help="ignored (pre-0.20 runners' flag)")
    start_parser.add_argument("--http-address", default="")
    start_parser.add_argument("--http-port", type=int, default=10999)
    start_parser.add_argument("--ssh-port", type=int, default=10022)
    start_parser.add_argument("--ssh-authorized-key", action="append", default=[])
    start_parser.add_argument("--ssh-log-level", default="INFO")
    args = parser.parse_args(argv)
    return start(args)


if __name__ == "__main__":
    sys.exit(main())
