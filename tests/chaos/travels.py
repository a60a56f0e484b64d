"""Everyday moves of a state, an edited state and a killed cluster create: the scenarios of a stack's
identity and of what its destroy must still end.

* ``moved-directory``: the stack applies, its directory is moved (``mv``); its plan there must be empty,
  and its destroy (hit by the scenario's ``hit``, then converged) must leave nothing.
* ``migrated-backend``: the same, its local state migrated to a ``pg`` schema of its own
  (``terraform init -migrate-state``) and the local file removed.
* ``edited-id``: the stack and a bystander stack of the same configuration apply; the stack's state is
  edited so its pod's id is the bystander's pod. The stack's destroy must fail naming that pod and
  leave it running; once the stack lets go of it (``terraform state rm``) it converges, and the
  bystander's plan stays empty until its own destroy.
* ``killed-cluster-create``: the cluster stack's template is applied first; the cluster's create then
  dies (Terraform killed while the rental's answer is slower than the grace an abandoned create gets,
  or the whole machine killed while the members' deadlines are being set); converging must leave
  nothing, by the abandoned provider, the recovery apply's adoption, or the destroy's search.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable

from tests.chaos.harness import APPLY, DESTROY, ScenarioRun, tail
from tests.chaos.outcome import Outcome
from tests.chaos.scenarios import Scenario
from tests.support.faults import fault_counters
from tests.support.lium import Account
from tests.support.postgres import PostgresServer
from tests.support.procs import wait_for
from tests.support.terraform import Terraform, flat

REFUSED_DELETE = "It was not deleted"
HELD_RULE = "chaos-held"
HELD_WAIT_SECONDS = 60.0


class TravellingRun(ScenarioRun):
    """Runs one scenario of the categories above in ``tf`` (and, for ``edited-id``, a sibling directory)."""

    def __init__(
        self,
        scenario: Scenario,
        tf: Terraform,
        account: Account,
        secrets: dict[str, str],
        postgres: PostgresServer | None = None,
    ) -> None:
        super().__init__(scenario, tf, account, secrets)
        self.postgres = postgres

    def execute(self) -> Outcome:
        started = time.monotonic()
        category = self.scenario.category
        try:
            if category == "killed-cluster-create":
                self._killed_cluster_create()
            else:
                self._apply_cleanly("setup apply")
                if category == "edited-id":
                    self._edited_id()
                else:
                    self._travel()
                    self._hit_destroy()
                    self._converge()
        finally:
            self.outcome.seconds = time.monotonic() - started
        self._audit(self.outcome.seconds)
        return self.outcome

    # -- moved-directory, migrated-backend -------------------------------------------------------------

    def _travel(self) -> None:
        if self.scenario.category == "moved-directory":
            moved = self.tf.workdir.parent / f"{self.tf.workdir.name}-moved"
            shutil.move(self.tf.workdir, moved)
            self.tf = Terraform(moved, dict(self.tf.env))
            self.workdirs = [moved]
        else:
            assert self.postgres is not None, "a migrated-backend scenario needs the chaos PostgreSQL server"
            schema = f"chaos_{self.scenario.seed}_{self.scenario.index}"
            backend = f'terraform {{\n  backend "pg" {{\n    conn_str    = "{self.postgres.conn_str}"\n'
            self.tf.write(backend + f'    schema_name = "{schema}"\n  }}\n}}\n', "backend.tf")
            self._run(
                "migrate the state", ["init", "-migrate-state", "-force-copy", "-input=false", "-no-color"]
            )
            (self.tf.workdir / "terraform.tfstate").unlink()
        self.outcome.faults_injected += 1
        self._check_plan_is_empty(f"after the {self.scenario.category.replace('-', ' ')}")

    def _hit_destroy(self) -> None:
        s = self.scenario
        if not s.hit:
            self._run("destroy after the move", DESTROY)
            return
        action = self._ctrl_c if s.hit == "sigint" else self._kill_terraform
        self._run(f"destroy with {s.hit}", DESTROY, during=self._at_the_moment(action))

    # -- edited-id -------------------------------------------------------------------------------------

    def _edited_id(self) -> None:
        bystander = Terraform(self.tf.workdir.parent / f"{self.tf.workdir.name}-bystander", dict(self.tf.env))
        bystander.write((self.tf.workdir / "main.tf").read_text())
        self.workdirs.append(bystander.workdir)
        self._run("bystander: init", ["init", "-input=false", "-no-color"], tf=bystander)
        self._apply_cleanly("bystander: apply", bystander)
        theirs = _first_pod_id(bystander)
        state_file = self.tf.workdir / "terraform.tfstate"
        state = json.loads(state_file.read_text())
        pod = next(r for r in state["resources"] if r["type"] == "lium_pod")
        pod["instances"][0]["attributes"]["id"] = theirs  # state surgery gone wrong
        state_file.write_text(json.dumps(state))
        self.outcome.faults_injected += 1
        result = self._run("destroy of the edited state", DESTROY)
        if result.returncode == 0 or REFUSED_DELETE not in flat(result.output) or theirs not in result.output:
            self.outcome.cross_stack.append(
                f"the edited state's destroy did not fail naming the bystander's pod:\n{tail(result.output)}"
            )
        if theirs not in self._running_pods():
            self.outcome.cross_stack.append(f"the edited state's destroy ended the bystander's pod {theirs}")
        self._run("let go of the edited pod", ["state", "rm", "-no-color", f"lium_pod.{pod['name']}"])
        self._converge()
        self._check_plan_is_empty("of the bystander after the edited state's destroy", bystander)
        self._converge(bystander, recover=False, label="bystander: ")

    # -- killed-cluster-create -------------------------------------------------------------------------

    def _killed_cluster_create(self) -> None:
        s = self.scenario
        self._apply_cleanly_targeted()
        action = self._kill_terraform if s.hit == "kill-terraform" else self._kill_machine
        with self.account.faults(s.fault_plan):
            self._run(f"apply with {s.variant}", APPLY, during=self._when_held(action))
        self.outcome.faults_injected += self._fired()
        self._converge()

    def _apply_cleanly_targeted(self) -> None:
        """The template alone first, so that the state holds something when the cluster's create dies
        (Terraform refreshes a destroy, the moment it meets an unrecorded create, only then)."""
        result = self._run("setup apply of the template", [*APPLY, "-target=lium_template.t"])
        if result.returncode != 0:
            self.outcome.problems.append(
                f"the template's apply failed without faults:\n{tail(result.output)}"
            )

    def _when_held(
        self, action: Callable[[subprocess.Popen[str]], None]
    ) -> Callable[[subprocess.Popen[str]], None]:
        """Act once the scenario's held request has reached Lium (its rule matched)."""

        def during(process: subprocess.Popen[str]) -> None:
            wait_for(
                lambda: fault_counters(self.account.emulator).get(HELD_RULE, {}).get("matched", 0) >= 1,
                "the held request reaches Lium",
                HELD_WAIT_SECONDS,
                process=process,
            )
            action(process)

        return during

    def _running_pods(self) -> set[str]:
        return {p["id"] for p in self._report()["pods"] if p["status"] == "RUNNING" and not p["deleting_at"]}


def _first_pod_id(tf: Terraform) -> str:
    state = json.loads((tf.workdir / "terraform.tfstate").read_text())
    pod = next(r for r in state["resources"] if r["type"] == "lium_pod")
    pod_id: str = pod["instances"][0]["attributes"]["id"]
    return pod_id
