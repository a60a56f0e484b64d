"""Runs one chaos scenario end to end and audits the account afterwards.

Flow: (for faults that hit plan or destroy, and Ctrl-C during destroy) a clean apply first; then the
faulted Terraform command — under the scenario's fault plan, or interrupted by a signal or an emulator stop
at the seeded moment; then the faults are cleared, a successful apply is checked with
``plan -detailed-exitcode``, and the stack is converged (optionally ``apply``, then at most three
``destroy`` runs). Finally the account is audited (:mod:`tests.chaos.audit`).

``fresh-runner`` scenarios converge as a new CI runner would: a new ``HOME`` and an empty rent journal,
the same working directory and state. ``host-key-change`` scenarios apply a stack with a ``lium_runner``,
rotate the pod's SSH host keys, and must end it (``destroy``, ``destroy -refresh=false`` or ``apply
-replace``) with a warning instead of an error. Two stacks at once: :mod:`tests.chaos.twins`.

Every Terraform command runs in its own process group with a deadline, so a hung run is killed with all
of its providers instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from lium_emulator.config import random_admin_key
from lium_emulator.launcher import RunningEmulator, launch
from lium_emulator.sandbox.manager import processes_mentioning
from tests.chaos import audit
from tests.chaos.outcome import Outcome
from tests.chaos.scenarios import Scenario
from tests.support import http
from tests.support.lium import FAST_TIMINGS, Account, rotate_host_keys
from tests.support.procs import find_descendant, kill_machine, providers_in
from tests.support.terraform import Terraform, interrupt, kill_group
from tfbridge.serving.handshake import ABANDON_GRACE_SECONDS

COMMAND_TIMEOUT = 240.0  # no single Terraform command of a scenario may take longer
CTRL_C_GRACE = 90.0  # after Ctrl-C, Terraform must stop within this
# After terraform is killed its providers end within the time a server has to undo what it made.
ORPHAN_GRACE = ABANDON_GRACE_SECONDS + 2.0
_POLL = 0.1
_SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}


class RestartableEmulator:
    """An emulator with a state directory that can be stopped by a signal and restarted on the same port."""

    def __init__(self, state_dir: Path, api_key: str) -> None:
        self.state_dir = state_dir
        self.api_key = api_key
        # One admin key for every run on this state dir, so handles kept across a restart stay valid.
        self.admin_key = random_admin_key()
        self.port: int | None = None
        self.current: RunningEmulator | None = None

    def start(self) -> RunningEmulator:
        args = ["--state-dir", str(self.state_dir), "--api-key", self.api_key, *FAST_TIMINGS]
        if self.port is not None:
            args += ["--port", str(self.port)]  # after launch's own "--port 0": the last one wins
        self.current = launch(args, admin_key=self.admin_key)
        self.port = int(self.current.api_url.rsplit(":", 1)[1].split("/", 1)[0])
        return self.current

    def kill(self, signal_name: str) -> None:
        """Stop the emulator with ``signal_name`` (SIGTERM: graceful; SIGKILL: a crash) and wait for it."""
        if self.current is None:
            return
        process = self.current.process
        if process.poll() is None:
            process.send_signal(_SIGNALS[signal_name])
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.current = None

    def close(self) -> int:
        """Graceful stop (after a crash, a restart first so the new run tears down the old sandboxes).

        Returns how many sandbox processes outlived it — they are killed here — so a scenario can
        report what the emulator leaked.
        """
        if self.current is None and self.port is not None:
            with contextlib.suppress(Exception):
                self.start()
        if self.current is not None:
            self.current.stop()
            self.current = None
        leftovers = [pid for pid, _, _ in processes_mentioning(str(self.state_dir))]
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(leftovers)


@dataclass
class Transcript:
    """Everything the scenario's Terraform commands printed, by step label."""

    texts: dict[str, str] = field(default_factory=dict)

    def add(self, label: str, text: str) -> None:
        key, number = label, 1
        while key in self.texts:
            number += 1
            key = f"{label}#{number}"
        self.texts[key] = text


@dataclass
class Finished:
    """A finished Terraform command: its exit status (negative: killed by that signal) and its output.

    ``timed_out``: it was still running at its deadline and was killed with its providers.
    """

    returncode: int
    output: str
    timed_out: bool = False


def run_command(
    tf: Terraform,
    args: list[str],
    *,
    during: Callable[[subprocess.Popen[str]], None] | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> Finished:
    """Run ``terraform <args>`` in its own process group; ``during(process)`` runs while it does.

    Output is drained by a thread so a chatty run never blocks on a full pipe. Past ``timeout`` the whole
    group (terraform and its providers) is killed and the run counts as timed out.
    """
    deadline = time.monotonic() + timeout
    process = tf.start(*args)
    timed_out = False
    chunks: list[str] = []
    reader = threading.Thread(target=_drain, args=(process, chunks), daemon=True)
    reader.start()
    try:
        if during is not None:
            during(process)
        process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        kill_group(process)  # also reaps providers orphaned by a killed terraform
        reader.join(10)
    return Finished(process.returncode, "".join(chunks), timed_out)


def _drain(process: subprocess.Popen[str], chunks: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        chunks.append(line)


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[str], deadline: float) -> bool:
    """Poll ``condition`` until it holds (True), or the process ended or the deadline passed (False)."""
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(_POLL)
    return False


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(stat.parent.name))
    return members


def user_id_of(account: Account) -> str:
    with account.api() as api:
        return str(api.get("/users/me").json()["id"])


def admin_report(account: Account, user_id: str) -> dict[str, Any]:
    """The account's part of the inspection report, through the admin route only.

    Unlike ``Account.report`` it sends no API request, so faults on ``/users/me`` neither break it nor
    count its reads.
    """
    emulator = account.emulator
    response = http.get(
        f"{emulator.root_url}/_emulator/resources",
        params={"user_id": user_id},
        headers=emulator.admin_headers,
        timeout=30,
    )
    response.raise_for_status()
    (report,) = response.json()["accounts"]
    result: dict[str, Any] = report
    return result


APPLY = ["apply", "-auto-approve", "-input=false", "-no-color"]
DESTROY = ["destroy", "-auto-approve", "-input=false", "-no-color"]
PLAN = ["plan", "-input=false", "-no-color", "-detailed-exitcode"]
PHASE_COMMANDS = {"apply": APPLY, "destroy": DESTROY, "plan": ["plan", "-input=false", "-no-color"]}
HOST_KEY_EXIT_COMMANDS = {
    "destroy": DESTROY,
    "destroy -refresh=false": [*DESTROY, "-refresh=false"],
    "apply -replace": [*APPLY, "-replace=lium_pod.p0"],
}


class ScenarioRun:
    """Runs one scenario against ``account`` in ``tf``'s working directory.

    ``secrets`` (name → value) must appear in no output and no file the run leaves; ``emulator`` is the
    scenario's own emulator when it is to be restarted.
    """

    def __init__(
        self,
        scenario: Scenario,
        tf: Terraform,
        account: Account,
        secrets: dict[str, str],
        emulator: RestartableEmulator | None = None,
    ) -> None:
        self.scenario = scenario
        self.tf = tf
        self.account = account
        self.secrets = secrets
        self.emulator = emulator
        self.user_id = user_id_of(account)  # before any fault: the harness's own reads use admin routes
        self.transcript = Transcript()
        self.outcome = Outcome(scenario.name, scenario.category)
        self.workdirs = [tf.workdir]  # every working directory of the run
        self.state_dirs = [account.state_dir]  # every rent journal the run used
        self.label = ""  # prefixes the step labels of the stack the chaos hits
        self._baseline: set[str] = set()  # pods that existed before the chaos step

    # -- the steps -------------------------------------------------------------------------------

    def execute(self) -> Outcome:
        started = time.monotonic()
        s = self.scenario
        try:
            if s.phase != "apply":
                self._apply_cleanly("setup apply")
            if s.category == "host-key-change":
                self._past_a_changed_host_key()
            else:
                with self.account.faults(s.fault_plan):
                    result = self._chaos()
                if s.phase == "apply" and result.returncode == 0:
                    self._check_plan_is_empty("after the chaos apply")
            if s.category == "fresh-runner" or s.fresh_runner:
                self._become_a_fresh_runner()
            elif s.category == "pg-killed-runner":
                self._become_a_fresh_runner(new_checkout=True)
            self._converge()
        finally:
            self.outcome.seconds = time.monotonic() - started
        self._audit(self.outcome.seconds)
        return self.outcome

    def _run(
        self,
        label: str,
        args: list[str],
        during: Callable[[subprocess.Popen[str]], None] | None = None,
        tf: Terraform | None = None,
    ) -> Finished:
        """Run one Terraform command in ``tf`` (default: the scenario's stack) and note its step."""
        started = time.monotonic()
        finished = run_command(tf or self.tf, args, during=during)
        self.outcome.steps.append(
            f"{label}: exit {finished.returncode} in {time.monotonic() - started:.1f} s"
        )
        self.transcript.add(label, finished.output)
        return finished

    def _apply_cleanly(self, label: str, tf: Terraform | None = None) -> None:
        """An apply without faults must succeed and leave an empty plan."""
        result = self._run(label, APPLY, tf=tf)
        if result.returncode != 0:
            self.outcome.problems.append(f"{label} failed without faults:\n{tail(result.output)}")
        else:
            self._check_plan_is_empty(f"after the {label}", tf)

    def _check_plan_is_empty(self, when: str, tf: Terraform | None = None) -> None:
        result = self._run(f"plan {when}", PLAN, tf=tf)
        if result.returncode != 0:
            what = "shows changes" if result.returncode == 2 else f"failed ({result.returncode})"
            self.outcome.problems.append(f"plan {when} {what}:\n{tail(result.output)}")

    def _chaos(self) -> Finished:
        s = self.scenario
        command = PHASE_COMMANDS[s.phase]
        self._baseline = {p["id"] for p in self._report()["pods"]}
        if s.variant:
            result = self._run(f"{self.label}{s.phase} under faults", command)
            self.outcome.faults_injected += self._fired()
            return result
        action = {
            "sigint": self._ctrl_c,
            "kill-terraform": self._kill_terraform,
            "kill-provider": self._kill_provider,
            "kill-machine": self._kill_machine,
            "restart": self._restart_emulator,
        }[s.action]
        label = f"{self.label}{s.phase} with {s.action}"
        result = self._run(label, command, during=self._at_the_moment(action))
        if s.rules:
            self.outcome.faults_injected += self._fired()
        return result

    def _at_the_moment(
        self, action: Callable[[subprocess.Popen[str]], None]
    ) -> Callable[[subprocess.Popen[str]], None]:
        """Wait for the scenario's trigger and delay, then act (unless Terraform already finished)."""
        s = self.scenario

        def during(process: subprocess.Popen[str]) -> None:
            deadline = time.monotonic() + COMMAND_TIMEOUT
            if s.trigger == "rent" and not wait_until(self._rented, process, deadline):
                self.outcome.notes.append("no pod was rented before terraform ended: nothing interrupted")
                return
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(s.delay)  # the seeded moment; returns early if terraform ends first
            if process.poll() is not None:
                self.outcome.notes.append("terraform ended before the seeded moment")
                return
            self.outcome.faults_injected += 1
            action(process)

        return during

    def _ctrl_c(self, process: subprocess.Popen[str]) -> None:
        interrupt(process)
        try:
            process.wait(CTRL_C_GRACE)
        except subprocess.TimeoutExpired:
            self.outcome.problems.append(f"terraform did not stop within {CTRL_C_GRACE:.0f} s of Ctrl-C")

    def _kill_terraform(self, process: subprocess.Popen[str]) -> None:
        """SIGKILL terraform alone; its orphaned providers must notice and exit by themselves."""
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
        workdir = self.tf.workdir.resolve()

        def lingering_providers() -> set[int]:
            return {*group_members(process.pid), *providers_in(workdir)}

        deadline = time.monotonic() + ORPHAN_GRACE
        while lingering_providers() and time.monotonic() < deadline:
            time.sleep(_POLL)
        lingering = lingering_providers()
        if lingering:
            self.outcome.orphaned_providers += len(lingering)
            self.outcome.problems.append(
                f"{len(lingering)} provider process(es) still ran {ORPHAN_GRACE:.0f} s after terraform was killed"
            )

    def _kill_provider(self, process: subprocess.Popen[str]) -> None:
        provider = find_descendant(process.pid, "lium_provider")
        if provider is None:
            self.outcome.notes.append("no provider process to kill at the seeded moment")
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(provider, signal.SIGKILL)

    def _kill_machine(self, process: subprocess.Popen[str]) -> None:
        kill_machine(process, self.tf.workdir)

    def _restart_emulator(self, process: subprocess.Popen[str]) -> None:
        assert self.emulator is not None, "restart scenarios need their own emulator"
        self.emulator.kill(self.scenario.signal)
        time.sleep(self.scenario.downtime)  # the outage itself, not a synchronisation
        self.account.emulator = self.emulator.start()

    def _past_a_changed_host_key(self) -> None:
        """The pod's host keys change under its runner; the scenario's exit command must still succeed,
        warning that the runner was not stopped."""
        (pod,) = (
            i["attributes"] for r in self.tf.resources() if r["type"] == "lium_pod" for i in r["instances"]
        )
        rotate_host_keys(self.account, pod)
        self.outcome.faults_injected += 1
        exit_command = self.scenario.host_key_exit
        result = self._run(f"{exit_command} after the host key changed", HOST_KEY_EXIT_COMMANDS[exit_command])
        output = " ".join(result.output.split())  # warnings wrap at any space
        if result.returncode != 0:
            self.outcome.problems.append(
                f"{exit_command} failed after a host key change:\n{tail(result.output)}"
            )
        elif f"The runner on pod {pod['id']} was not stopped" not in output:
            self.outcome.problems.append(
                f"{exit_command} gave no warning naming the pod:\n{tail(result.output)}"
            )
        elif exit_command == "apply -replace":
            self._check_plan_is_empty("after the replacing apply")

    def _become_a_fresh_runner(self, *, new_checkout: bool = False) -> None:
        """What follows runs as a new CI runner: a new, empty ``HOME`` and rent journal, the same state;
        with ``new_checkout`` also a new checkout directory of the same configuration, initialised
        against the same (remote) backend."""
        home = self.tf.workdir.parent / f"{self.tf.workdir.name}-fresh-home"
        home.mkdir()
        env = {**self.tf.env, "HOME": str(home), "LIUM_STATE_DIR": str(home / "state")}
        self.state_dirs.append(home / "state")
        if not new_checkout:
            self.tf.env = env
            return
        checkout = Terraform(self.tf.workdir.parent / f"{self.tf.workdir.name}-fresh-checkout", env)
        checkout.write((self.tf.workdir / "main.tf").read_text())
        self._run("fresh runner: init", ["init", "-input=false", "-no-color"], tf=checkout)
        self.tf = checkout
        self.workdirs.append(checkout.workdir)

    def _converge(self, tf: Terraform | None = None, *, recover: bool | None = None, label: str = "") -> None:
        """Faults cleared: optionally apply (and check the plan), then destroy, at most three times.

        ``tf``: which stack (default: the scenario's); ``recover``: whether to apply first (default: the
        scenario's ``recover_by_apply``); ``label`` prefixes the steps.
        """
        if self.scenario.recover_by_apply if recover is None else recover:
            self._apply_cleanly(f"{label}recovery apply", tf)
        for attempt in range(1, 4):
            result = self._run(f"{label}converge destroy {attempt}", DESTROY, tf=tf)
            if result.returncode == 0:
                if attempt > 1:
                    self.outcome.extra_destroys += attempt - 1
                    self.outcome.notes.append(f"{label}destroy converged on run {attempt}")
                return
        self.outcome.problems.append(f"{label}destroy did not succeed in 3 runs:\n{tail(result.output)}")

    # -- the audit -------------------------------------------------------------------------------

    def _audit(self, wall_seconds: float) -> None:
        report = self._report()
        self.outcome.leaks = audit.leftovers(report)
        self.outcome.duplicates = audit.duplicate_rentals(report)
        self.outcome.problems += audit.overbilled(report, wall_seconds)
        texts = dict(self.transcript.texts)
        for label, text in texts.items():
            self.outcome.crashes += [f"{c}:\n{tail(text, 15)}" for c in audit.find_crashes({label: text})]
        for path in self._files_to_search():
            texts[str(path)] = path.read_text(errors="replace")
        self.outcome.secrets = audit.find_secrets(texts, self.secrets)

    def _files_to_search(self) -> Iterator[Path]:
        """State files (every workspace's) and the rent journals: where a leaked secret would persist."""
        for workdir in self.workdirs:
            yield from state_files(workdir)
        for state_dir in self.state_dirs:
            if state_dir.exists():
                yield from (p for p in state_dir.rglob("*") if p.is_file())

    # -- emulator access -------------------------------------------------------------------------

    def _report(self) -> dict[str, Any]:
        return admin_report(self.account, self.user_id)

    def _fired(self) -> int:
        emulator = self.account.emulator
        response = http.get(
            f"{emulator.root_url}/_emulator/faults", headers=emulator.admin_headers, timeout=30
        )
        response.raise_for_status()
        return sum(int(c["fired"]) for c in response.json().get("counters", {}).values())

    def _rented(self) -> bool:
        """Whether a pod the chaos step's command rented exists (pods from before it do not count)."""
        with contextlib.suppress(httpx.HTTPError):
            pods = self._report()["pods"]
            return any(p["status"] != "DELETED" and p["id"] not in self._baseline for p in pods)
        return False  # the emulator is down for the moment


def state_files(workdir: Path) -> Iterator[Path]:
    """The local state files of ``workdir``: the default workspace's and every other workspace's."""
    for pattern in ("*.tfstate", "*.tfstate.backup", "terraform.tfstate.d/*/*.tfstate*"):
        yield from workdir.glob(pattern)


def tail(text: str, lines: int = 30) -> str:
    """The last ``lines`` lines of a command's output, for a finding."""
    return "\n".join(text.strip().splitlines()[-lines:])
