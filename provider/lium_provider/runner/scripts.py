"""The shell ``lium_runner`` runs on a pod, and the parsing of what it prints.

Everything lives in :data:`BOOTSTRAP_DIR` (root-only, like dstack's ``/root/.dstack-lium``):

* ``dstack-runner`` — the binary, fetched on the pod or uploaded over SFTP;
* ``launch.sh`` — ``exec env -i -- <PID 1's environment> <extra> dstack-runner start ...`` in PID 1's
  working directory: root SSH replaced both, and this restores them, so the image's ENV and WORKDIR hold
  and the runner sees the image USER (it drops privileges to it for each job);
* ``supervise.sh`` — restarts the runner whenever it exits. The stock runner exits after every job and
  after minutes without one; a runner that must stay ready needs a supervisor. Three quick failures in a
  row mean the runner cannot start: the supervisor gives up (file ``gave-up``) and health checks say so;
* ``supervisor.pid``, ``runner.pid``, ``config-id`` (what the running runner was started with, so a second
  bootstrap adopts it instead of starting another), ``runner.log`` (+ ``.1``, the previous run).

The runner's environment carries ``LIUM_RUNNER_ID=<id>``: every process it starts inherits it, including
jobs in their own sessions, so stopping finds them all without trusting pids or process groups (an idle
runner is killed at once; jobs, or SSH sessions into the runner, get SIGTERM and 10 s first). A
process is alive only if its ``/proc/<pid>/cmdline`` says so: pods whose PID 1 never reaps (``sleep
infinity``) keep dead children as zombies, and pid files survive on a persistent ``/root``.

Every command is ``/bin/sh -c <script> sh <args...>``: values travel as arguments, never spliced into
the script.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping, Sequence

BOOTSTRAP_DIR = "/root/.lium-runner"
TEMP_DIR = "/tmp/runner"
HTTP_PORT = 10999
SSH_PORT = 10022
TAG_VARIABLE = "LIUM_RUNNER_ID"
BINARY = f"{BOOTSTRAP_DIR}/dstack-runner"
PARTIAL_BINARY = f"{BINARY}.part"
SUPERVISOR_SCRIPT = f"{BOOTSTRAP_DIR}/supervise.sh"
QUICK_EXIT_SECONDS = 10
QUICK_EXITS_BEFORE_GIVING_UP = 3
RESTART_PAUSE_SECONDS = 1
STOP_GRACE_TENTHS = 100  # jobs get SIGTERM and 10 s before SIGKILL
TOOLS = ("setsid", "curl", "wget", "python3")
ENVIRON_MARKER = "--environ of PID 1--"

_PRELUDE = f"""D={BOOTSTRAP_DIR}
supervisor_pid() {{
  candidate=$(cat "$D/supervisor.pid" 2>/dev/null) || return 1
  case $candidate in ''|*[!0-9]*) return 1 ;; esac
  tr '\\0' ' ' < "/proc/$candidate/cmdline" 2>/dev/null | grep -qF {SUPERVISOR_SCRIPT} || return 1
  echo "$candidate"
}}
"""

_STATUS = """if supervisor=$(supervisor_pid); then
  echo "supervisor=$supervisor"
  echo "config=$(cat "$D/config-id" 2>/dev/null)"
  echo "runner=$(cat "$D/runner.pid" 2>/dev/null)"
fi
if [ -f "$D/gave-up" ]; then echo "gave_up=$(cat "$D/gave-up")"; fi
"""

_PROBE = f"""echo "arch=$(uname -m)"
while read -r key value rest; do
  case $key in Uid:) echo "uid=$value" ;; Gid:) echo "gid=$value" ;; esac
done < /proc/1/status
tools=
for tool in {" ".join(TOOLS)}; do
  if command -v "$tool" > /dev/null 2>&1; then tools="$tools $tool"; fi
done
echo "tools=$tools"
printf '%s\n' "{ENVIRON_MARKER}"
cat /proc/1/environ
"""

_FETCH = """umask 077
mkdir -p "$D" || exit 1
url=$1
out="$D/dstack-runner.part"
rm -f "$out"
if command -v curl > /dev/null 2>&1; then
  curl -fsS --location --connect-timeout 30 --max-time 300 --retry 1 --output "$out" "$url"
elif command -v wget > /dev/null 2>&1; then
  wget -q -T 30 -O "$out" "$url"
elif command -v python3 > /dev/null 2>&1; then
  python3 -c 'import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=30) as r, open(sys.argv[2], "wb") as f:
    shutil.copyfileobj(r, f)' "$url" "$out"
else
  echo "the image has neither curl, wget nor python3 to download the runner" >&2
  false
fi
status=$?
if [ "$status" -ne 0 ]; then rm -f "$out"; exit "$status"; fi
"""

_INSTALL_BINARY = """chmod 755 "$D/dstack-runner.part" && mv -f "$D/dstack-runner.part" "$D/dstack-runner"
"""

SUPERVISOR = f"""#!/bin/sh
# Written by lium-stacks (lium_runner). Keeps one dstack runner listening: the runner exits after each
# job and after minutes without one, so it is started again; {QUICK_EXITS_BEFORE_GIVING_UP} quick failures in a row mean
# it cannot start, and this gives up (file gave-up), which the health check reports.
D={BOOTSTRAP_DIR}
umask 022
echo "$$" > "$D/supervisor.pid"
quick_failures=0
while :; do
  if [ -f "$D/runner.log" ]; then mv -f "$D/runner.log" "$D/runner.log.1"; fi
  started=$(date +%s)
  /bin/sh "$D/launch.sh" > "$D/runner.log" 2>&1 < /dev/null &
  echo "$!" > "$D/runner.pid"
  wait "$!"
  status=$?
  echo "$status" > "$D/runner.exit"
  if [ "$status" -ne 0 ] && [ $(($(date +%s) - started)) -lt {QUICK_EXIT_SECONDS} ]; then
    quick_failures=$((quick_failures + 1))
  else
    quick_failures=0
  fi
  if [ "$quick_failures" -ge {QUICK_EXITS_BEFORE_GIVING_UP} ]; then
    echo "$status" > "$D/gave-up"
    exit 1
  fi
  sleep {RESTART_PAUSE_SECONDS}
done
"""


_START = f"""umask 077
mkdir -p "$D" || exit 1
cat > "$D/launch.sh.tmp" && chmod 700 "$D/launch.sh.tmp" && mv -f "$D/launch.sh.tmp" "$D/launch.sh" || exit 1
cat > "$D/supervise.sh.tmp" <<'LIUM_SUPERVISOR_EOF' || exit 1
{SUPERVISOR}LIUM_SUPERVISOR_EOF
chmod 700 "$D/supervise.sh.tmp" && mv -f "$D/supervise.sh.tmp" "$D/supervise.sh" || exit 1
rm -f "$D/gave-up" "$D/runner.pid" "$D/runner.exit"
printf '%s\\n' "$1" > "$D/config-id" || exit 1
setsid /bin/sh "$D/supervise.sh" > "$D/supervisor.log" 2>&1 < /dev/null &
echo "$!" > "$D/supervisor.pid"
echo "supervisor=$!"
"""

_STOP = f"""tag=$1
tagged() {{
  for environ in /proc/[0-9]*/environ; do
    process=${{environ#/proc/}}
    process=${{process%/environ}}
    if tr '\\0' '\\n' < "$environ" 2>/dev/null | grep -qxF "$tag"; then echo "$process"; fi
  done
}}
session_of() {{
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  set -- ${{stat##*) }}
  echo "$4"
}}
# The supervisor first: it would start the runner again. Its session is the runner's.
runner_session=none
if supervisor=$(supervisor_pid); then runner_session=$supervisor; kill -KILL "$supervisor"; fi
# Jobs, and SSH sessions into the runner, run in sessions of their own: if there are any, everything gets
# SIGTERM and a grace period to finish; an idle runner is stopped at once.
processes=$(tagged)
busy=
for process in $processes; do
  if [ "$(session_of "$process")" != "$runner_session" ]; then busy=yes; fi
done
if [ -n "$busy" ]; then
  kill -TERM $processes 2>/dev/null
  tenths=0
  while [ -n "$(tagged)" ] && [ "$tenths" -lt {STOP_GRACE_TENTHS} ]; do sleep 0.1; tenths=$((tenths + 1)); done
  processes=$(tagged)
fi
if [ -n "$processes" ]; then kill -KILL $processes 2>/dev/null; fi
rm -rf "$D" {TEMP_DIR}
echo stopped
"""

_LOG_TAIL = """tail -n "$1" "$D/runner.log" 2>/dev/null
"""


def _command(script: str, *args: str) -> str:
    return shlex.join(["/bin/sh", "-c", _PRELUDE + script, "sh", *args])


def status_command() -> str:
    """``supervisor=``, ``config=`` and ``runner=`` (its pid) while a runner is supervised; ``gave_up=<exit>``."""
    return _command(_STATUS)


def probe_command() -> str:
    """The status, ``arch=``, PID 1's ``uid=``/``gid=`` (the image user), the ``tools=`` present, then
    :data:`ENVIRON_MARKER` and PID 1's raw environment (see :func:`split_probe`)."""
    return _command(_STATUS + _PROBE)


def fetch_command(url: str) -> str:
    """Download ``url`` to the partial binary with the first of curl, wget or python3 the image has."""
    return _command(_FETCH + _INSTALL_BINARY, url)


def prepare_upload_command() -> str:
    """Create the bootstrap directory before an SFTP upload to :data:`PARTIAL_BINARY`."""
    return _command('umask 077\nmkdir -p "$D"\n')


def install_uploaded_command() -> str:
    return _command(_INSTALL_BINARY)


def start_command(config_id: str) -> str:
    """Write ``launch.sh`` (from stdin) and ``supervise.sh``, then start the supervisor in its own session."""
    return _command(_START, config_id)


def stop_command(tag: str) -> str:
    """Stop the supervisor and every process carrying the runner's tag, then remove the bootstrap files."""
    return _command(_STOP, tag_entry(tag))


def log_tail_command(lines: int) -> str:
    return _command(_LOG_TAIL, str(lines))


def tag_entry(tag: str) -> str:
    return f"{TAG_VARIABLE}={tag}"


def runner_arguments(authorized_keys: Sequence[str]) -> list[str]:
    """dstack's command line for the runner (``get_docker_commands``), keys for the runner's own sshd."""
    arguments = [BINARY, "--log-level", "6", "start", "--temp-dir", TEMP_DIR]
    arguments += ["--http-port", str(HTTP_PORT), "--ssh-port", str(SSH_PORT)]
    for key in authorized_keys:
        arguments += ["--ssh-authorized-key", key]
    return arguments


def launch_script(
    image_environment: Sequence[str], extra: Mapping[str, str], tag: str, authorized_keys: Sequence[str]
) -> str:
    """``launch.sh``: PID 1's environment, then ``extra`` (wins over the image), then the tag."""
    assignments = [*image_environment, *(f"{name}={value}" for name, value in extra.items()), tag_entry(tag)]
    words = ["exec", "env", "-i", "--", *assignments, *runner_arguments(authorized_keys)]
    return (
        "#!/bin/sh\n"
        "# Written by lium-stacks (lium_runner): the dstack runner with the environment and working directory\n"
        "# of the pod's PID 1, which root SSH replaced, so the image's ENV, WORKDIR and USER hold as in docker run.\n"
        "cd -P /proc/1/cwd || exit 96\n" + " \\\n  ".join(shlex.quote(word) for word in words) + "\n"
    )


def config_id(launch: str, binary_source: str) -> str:
    """What a running runner was started with: equal ids mean a bootstrap may adopt it."""
    digest = hashlib.sha256()
    for part in (launch, SUPERVISOR, binary_source):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def parse_fields(output: str) -> dict[str, str]:
    """``key=value`` lines as a dict (the last one wins); other lines are ignored."""
    fields: dict[str, str] = {}
    for line in output.splitlines():
        key, separator, value = line.partition("=")
        if separator and key.isidentifier():
            fields[key] = value.strip()
    return fields


def split_probe(output: bytes) -> tuple[str, bytes]:
    """The probe's ``key=value`` text and PID 1's raw environment."""
    text, _, environ = output.partition(b"\n" + ENVIRON_MARKER.encode() + b"\n")
    return text.decode("utf-8", "replace"), environ


def parse_environ(data: bytes) -> list[str]:
    """``NAME=value`` entries of a NUL-separated ``/proc/<pid>/environ``; bytes that are not UTF-8 survive."""
    entries = [item.decode("utf-8", "surrogateescape") for item in data.split(b"\0")]
    return [entry for entry in entries if entry.partition("=")[0] and "=" in entry]


def go_arch(machine: str) -> str:
    """``uname -m`` in the spelling of dstack's download URLs (``amd64``, ``arm64``)."""
    machine = machine.strip().lower()
    if machine in ("x86_64", "amd64"):
        return "amd64"
    if machine in ("aarch64", "arm64") or machine.startswith("armv8"):
        return "arm64"
    raise ValueError(f"the pod's architecture {machine!r} has no dstack runner build (amd64 and arm64 only)")


def download_url(template: str, version: str, arch: str) -> str:
    """Fill dstack's ``{version}`` and ``{arch}`` placeholders."""
    return template.replace("{version}", version).replace("{arch}", arch)


def display_url(url: str) -> str:
    """The URL without its query and credentials (a pre-signed URL's query is a secret)."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    host = authority.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path.partition('?')[0]}"
