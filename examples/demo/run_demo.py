"""``make demo``: deploy the quickstart GPU stack with the cdktf CLI, use it over SSH, destroy it, check nothing is left.

Without ``LIUM_API_URL`` and ``LIUM_API_KEY`` it starts the embedded Lium emulator (real sandboxes, real
sshd, the dstack runner stand-in); without ``LIUM_SSH_PRIVATE_KEY_FILE`` it makes a throwaway ed25519 key
pair. The provider's filesystem mirror, the Terraform CLI configuration, the cdktf working directory and
the state live in a temporary directory that is removed at the end.

If the deploy fails, the demo still runs ``cdktf destroy``: a failed demo must not leave a paid pod.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from lium_emulator.launcher import RunningEmulator, launch
from lium_provider.api.client import LiumClient
from lium_provider.cli.sweep import find_leftovers
from tfbridge.serving.zygote import close_directory

REPO = Path(__file__).resolve().parents[2]
CDKTF = REPO / "node_modules" / ".bin" / "cdktf"
EXAMPLE = "quickstart"
QUIET = {"CHECKPOINT_DISABLE": "1", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
# The lines of cdktf's output the demo shows: each resource's progress and Terraform's closing line.
PROGRESS = re.compile(
    r": (Creating|Creation complete|Still creating|Destroying|Destruction complete|Still destroying)"
    r"|(Apply|Destroy) complete!"
)
TRANSCRIPT_TAIL = 60  # lines of cdktf's output shown when it fails
# What Terraform prints when a deploy or destroy really ran: a CDK CLI that could not ask for approval
# (no terminal, no --auto-approve) stops with exit status 0 having done nothing, so the demo checks.
FINISHED = {"deploy": "Apply complete!", "destroy": "Destroy complete!"}
# What the demo runs on the pod, through the SSH command the stack printed.
POD_COMMAND = 'echo "$(hostname): $(uname -sr), $(nproc) CPUs, $(python3 --version)"; df -h /root | tail -1'


@dataclass
class Timeline:
    """Named steps with their durations, for the closing summary."""

    steps: list[tuple[str, float]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    current: str = ""
    """The step under way (the last one begun)."""

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        print(f"\n==> {name}", flush=True)
        begin = time.monotonic()
        self.current = name
        try:
            yield
        finally:
            self.steps.append((name, time.monotonic() - begin))

    @property
    def total(self) -> float:
        return time.monotonic() - self.started


@dataclass(frozen=True)
class Target:
    """Where the stack goes: the API, the key pair, and the emulator when the demo started one."""

    api_url: str
    api_key: str
    key_file: Path
    emulator: RunningEmulator | None


def _keypair(directory: Path) -> Path:
    directory.mkdir(mode=0o700)
    path = directory / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lium-demo", "-f", str(path)], check=True
    )
    return path


def _target(stack: contextlib.ExitStack, tmp: Path, timeline: Timeline) -> Target:
    api_url, api_key = os.environ.get("LIUM_API_URL"), os.environ.get("LIUM_API_KEY")
    emulator = None
    if not (api_url and api_key):
        with timeline.step("start the embedded Lium emulator (LIUM_API_URL / LIUM_API_KEY are unset)"):
            emulator = stack.enter_context(launch())
            api_url, api_key = emulator.api_url, "lium-emulator-key"
            print(f"    {api_url}")
    else:
        print(f"Using the Lium API at {api_url} (LIUM_API_URL): the demo rents one pod there for about 30 s.")
    configured_key = os.environ.get("LIUM_SSH_PRIVATE_KEY_FILE")
    key_file = Path(configured_key) if configured_key else _keypair(tmp / "ssh")
    if not configured_key:
        print(f"    throwaway SSH key pair: {key_file}(.pub)")
    return Target(api_url, api_key, key_file, emulator)


def zygote_dir(tmp: Path) -> Path:
    path = tmp / "zygotes"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _environment(target: Target, tmp: Path) -> dict[str, str]:
    plugins = tmp / "plugins"
    subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "install", "--plugins-dir", str(plugins)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    cli_config = tmp / "terraformrc"
    cli_config.write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path = "{plugins}"\n  }}\n}}\n'
    )
    env = {
        **os.environ,
        **QUIET,
        # cdktf's output goes through the demo, not to a terminal: CI mode prints plain lines once.
        "CI": "1",
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "LIUM_API_URL": target.api_url,
        "LIUM_API_KEY": target.api_key,
        "LIUM_SSH_PRIVATE_KEY_FILE": str(target.key_file),
    }
    # The provider's warm zygote (see docs/design.md) lives with this run and is stopped at its end.
    env["TFBRIDGE_ZYGOTE_DIR"] = str(zygote_dir(tmp))
    if target.emulator is not None:
        env["LIUM_RUNNER_DOWNLOAD_URL"] = target.emulator.runner_url
        env["LIUM_STATE_DIR"] = str(tmp / "state")  # the rent journal goes away with the emulator
    return env


class CdkDidNothing(Exception):
    """A CDK CLI run that exited 0 without applying or destroying anything."""


class Interrupted(Exception):
    """Ctrl-C reached the demo (and, through the terminal's process group, the CDK CLI and Terraform)."""


# How a process ends on SIGINT: killed by it (a negative status), or exiting 128 + 2 as shells report it.
_INTERRUPTED_STATUSES = (-signal.SIGINT, 128 + signal.SIGINT)


def _cdktf(app_dir: Path, env: dict[str, str], *args: str) -> None:
    """Run cdktf, showing only its progress lines (:data:`PROGRESS`); all of its output when it fails.

    Terraform's plan and outputs, and cdktf's own copy of the outputs, are left out: the demo prints the
    outputs once, itself. ``--no-color`` keeps escape sequences out of logs and pipes.
    """
    command = [str(CDKTF), *args, "--auto-approve", "--skip-provider-lock", "--no-color"]
    print("    $ cdktf " + " ".join(args[:1]), flush=True)
    transcript: list[str] = []
    with subprocess.Popen(
        command,
        cwd=app_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            transcript.append(line)
            if PROGRESS.search(line):
                print("    " + line.strip(), flush=True)
    if process.returncode in _INTERRUPTED_STATUSES:
        raise Interrupted(f"cdktf {args[0]} was interrupted")
    finished = FINISHED[args[0]]
    if process.returncode != 0 or not any(finished in line for line in transcript):
        print("".join(transcript[-TRANSCRIPT_TAIL:]), end="", flush=True)
        if process.returncode == 0:
            raise CdkDidNothing(f"cdktf {args[0]} exited 0 but never printed {finished!r}: it did nothing")
        raise subprocess.CalledProcessError(process.returncode, command)


def _write_app(app_dir: Path) -> None:
    app_dir.mkdir()
    config = {
        "language": "python",
        "app": f"{shlex.quote(sys.executable)} {shlex.quote(str(REPO / 'examples' / EXAMPLE / 'main.py'))}",
        "sendCrashReports": "false",
        "terraformProviders": [],
        "terraformModules": [],
        "context": {},
    }
    (app_dir / "cdktf.json").write_text(json.dumps(config, indent=2))


def _pods(app_dir: Path) -> list[dict[str, Any]]:
    state = json.loads((app_dir / f"terraform.{EXAMPLE}.tfstate").read_text())
    return [i["attributes"] for r in state["resources"] if r["type"] == "lium_pod" for i in r["instances"]]


def _ssh(pod: dict[str, Any], key_file: Path, tmp: Path) -> str:
    """Run :data:`POD_COMMAND` as root with OpenSSH, trusting only the host key the provider pinned."""
    known_hosts = tmp / "known_hosts"
    known_hosts.write_text(f"[{pod['ssh_host']}]:{pod['ssh_port']} {pod['ssh_host_key']}\n")
    command = [
        "ssh",
        "-i",
        str(key_file),
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-p",
        str(pod["ssh_port"]),
        f"root@{pod['ssh_host']}",
        POD_COMMAND,
    ]
    print(
        f"    $ ssh -o UserKnownHostsFile=known_hosts -p {pod['ssh_port']} root@{pod['ssh_host']} '{POD_COMMAND}'"
    )
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


def _leftovers(target: Target) -> dict[str, Any]:
    """What the account still holds, and its billing, from the emulator's inspection report."""
    assert target.emulator is not None
    me = httpx.get(f"{target.api_url}/users/me", headers={"X-API-KEY": target.api_key}, timeout=30)
    me.raise_for_status()
    report = httpx.get(
        f"{target.emulator.root_url}/_emulator/resources", headers=target.emulator.admin_headers, timeout=30
    )
    report.raise_for_status()
    account: dict[str, Any] = next(a for a in report.json()["accounts"] if a["user_id"] == me.json()["id"])
    return account


def _leak_check(target: Target) -> tuple[bool, str]:
    if target.emulator is None:  # a real endpoint: what `lium-tf sweep --name-prefix quickstart` would find
        with LiumClient(target.api_url, target.api_key) as client:
            leftovers = find_leftovers(client, EXAMPLE)
        found = {kind: len(items) for kind, items in leftovers.as_dict().items()}
        return leftovers.empty(), "Lium lists " + ", ".join(f"{n} {kind}" for kind, n in found.items())
    account = _leftovers(target)
    live = {
        "pods": [p["id"] for p in account["pods"] if p["status"] != "DELETED"],
        "templates": [t["id"] for t in account["templates"]],
        "docker credentials": [c["id"] for c in account["docker_credentials"]],
        "volumes": [v["id"] for v in account["volumes"]],
    }
    summary = ", ".join(f"{len(ids)} {kind}" for kind, ids in live.items())
    return not any(live.values()), f"the emulator reports {summary} left"


def _cost(target: Target, outputs: dict[str, Any], timeline: Timeline) -> str:
    if target.emulator is not None:
        pods = _leftovers(target)["pods"]
        dollars = sum(p["billed_seconds"] * (p["price"] or 0.0) / 3600 for p in pods)
        seconds = sum(p["billed_seconds"] for p in pods)
        return f"{len(pods)} pod(s), {seconds:.1f} billed pod-seconds = ${dollars:.4f} (emulator's report)"
    price = float(outputs.get("stack_price_per_hour") or 0.0)
    return f"at most ${price * timeline.total / 3600:.4f} (${price:g}/h for {timeline.total:.0f} s)"


def run(tmp: Path) -> int:
    timeline = Timeline()
    outputs: dict[str, Any] = {}
    deployed = False
    interrupted: list[str] = []  # the steps Ctrl-C cut short
    with contextlib.ExitStack() as stack:
        target = _target(stack, tmp, timeline)
        with timeline.step("install the provider into a private filesystem mirror"):
            env = _environment(target, tmp)
        stack.callback(close_directory, zygote_dir(tmp))
        app_dir = tmp / "app"
        _write_app(app_dir)
        try:
            with timeline.step(
                f"cdktf deploy ({EXAMPLE}: one pod, its template, the dstack runner, a smoke test)"
            ):
                outputs_file = app_dir / "outputs.json"
                _cdktf(app_dir, env, "deploy", "--outputs-file", str(outputs_file))
                # Grouped by construct path: stack "quickstart", then its GpuStack "quickstart".
                outputs = json.loads(outputs_file.read_text())[EXAMPLE][EXAMPLE]
                deployed = True
            print("\nOutputs:\n" + json.dumps(outputs, indent=2))
            with timeline.step("run a command on the pod over SSH"):
                (pod,) = _pods(app_dir)
                print(_ssh(pod, target.key_file, tmp))
        except (KeyboardInterrupt, Interrupted):
            interrupted.append(timeline.current)
            print(f"\nInterrupted during: {timeline.current}. Destroying what was deployed…", flush=True)
        finally:
            try:
                with timeline.step("cdktf destroy"):
                    _cdktf(app_dir, env, "destroy")
            except (KeyboardInterrupt, Interrupted):
                interrupted.append("cdktf destroy")
        with timeline.step("check that nothing is left"):
            clean, detail = _leak_check(target)
            print(f"    {detail}")
        cost = _cost(target, outputs, timeline)
    print("\n== Summary ==")
    for name, seconds in timeline.steps:
        print(f"  {seconds:6.1f} s  {name}")
    print(f"  {timeline.total:6.1f} s  total")
    print(f"  cost: {cost}")
    if interrupted:
        cleanup = "the destroy was interrupted too" if "cdktf destroy" in interrupted else "cdktf destroy ran"
        print(f"  interrupted (Ctrl-C) during: {interrupted[0]}; {cleanup}; {detail}")
        print(f"  result: INTERRUPTED, {'nothing left' if clean else 'something is left (listed above)'}")
        return 130
    print(f"  result: {'deployed, used and destroyed; nothing left' if clean and deployed else 'FAILED'}")
    return 0 if clean and deployed else 1


def main() -> int:
    if not CDKTF.exists():
        print(f"{CDKTF} is missing: run `make setup` first", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="lium-demo-") as tmp:
        try:
            return run(Path(tmp))
        except subprocess.CalledProcessError as exc:
            print(
                f"\nThe demo failed: {shlex.join(map(str, exc.cmd[:2]))} exited {exc.returncode}",
                file=sys.stderr,
            )
            return 1
        except CdkDidNothing as exc:
            print(f"\nThe demo failed: {exc}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
