"""A state copied into another stack (``copied-state`` scenarios): the copy may act on nothing it holds.

The scenario's stack applies; its state file is copied into a second directory of the same
configuration, which names another stack (``LIUM_STACK``: a copy of a state is otherwise the same
stack). There ``copy_command`` runs first: a ``plan`` or ``apply`` must fail, naming the other stack; a
``destroy`` must fail too, saying it did not delete them, and leave the objects alone. Then the copy
lets go of what it holds (``terraform state rm``, as the error says) and is destroyed (which must
succeed and leave its state empty), and the first stack's pods must still be its own, alive and
unchanged, with an empty plan, before it converges.
"""

from __future__ import annotations

import json
import shutil
import time

from tests.chaos.harness import APPLY, DESTROY, ScenarioRun, tail
from tests.chaos.outcome import Outcome
from tests.support.terraform import Terraform, flat

COPY_COMMANDS = {"plan": ["plan", "-input=false", "-no-color"], "apply": APPLY, "destroy": DESTROY}
REFUSED = "belongs to another stack"
LEFT_ALONE = "It was not deleted"


def managed_ids(tf: Terraform) -> set[str]:
    """The ids of every object ``tf``'s local state holds."""
    path = tf.workdir / "terraform.tfstate"
    if not path.exists():
        return set()
    state = json.loads(path.read_text())
    return {
        instance["attributes"]["id"]
        for resource in state.get("resources", [])
        if resource.get("mode") == "managed"
        for instance in resource["instances"]
    }


class CopiedStateRun(ScenarioRun):
    """Runs one ``copied-state`` scenario in ``tf`` (the owner) and a sibling directory (the copy)."""

    def execute(self) -> Outcome:
        started = time.monotonic()
        try:
            self._apply_cleanly("owner: apply")
            owned = self._live_pods()
            named = {**self.tf.env, "LIUM_STACK": f"{self.tf.workdir.name}-copy"}
            copy = Terraform(self.tf.workdir.parent / f"{self.tf.workdir.name}-copy", named)
            copy.write((self.tf.workdir / "main.tf").read_text())
            self.workdirs.append(copy.workdir)
            self._run("copy: init", ["init", "-input=false", "-no-color"], tf=copy)
            shutil.copy(self.tf.workdir / "terraform.tfstate", copy.workdir / "terraform.tfstate")
            self.outcome.faults_injected += 1
            self._first_command(copy)
            held = self._run("copy: state list", ["state", "list"], tf=copy).output.split()
            if held:
                self._run("copy: let go", ["state", "rm", "-no-color", *held], tf=copy)
            if managed_ids(copy):
                result = self._run("copy: destroy", DESTROY, tf=copy)
                if result.returncode != 0 or managed_ids(copy):
                    self.outcome.problems.append(
                        f"the copy's destroy did not end cleanly:\n{tail(result.output)}"
                    )
            if self._live_pods() != owned:
                self.outcome.cross_stack.append(
                    f"the copy changed the owner's pods: {sorted(owned)} → {sorted(self._live_pods())}"
                )
            self._check_plan_is_empty("of the owner after the copy's commands")
            self._converge(label="owner: ")
        finally:
            self.outcome.seconds = time.monotonic() - started
        self._audit(self.outcome.seconds)
        return self.outcome

    def _first_command(self, copy: Terraform) -> None:
        command = self.scenario.copy_command
        result = self._run(f"copy: {command}", COPY_COMMANDS[command], tf=copy)
        output = flat(result.output)  # diagnostics wrap at any space
        if command == "destroy":
            if result.returncode != 1 or LEFT_ALONE not in output:
                self.outcome.problems.append(
                    f"the copy's destroy did not fail saying it left the objects alone:\n{tail(result.output)}"
                )
        elif result.returncode != 1 or REFUSED not in output:
            self.outcome.cross_stack.append(
                f"the copy's {command} was not refused as another stack's:\n{tail(result.output)}"
            )

    def _live_pods(self) -> set[str]:
        """The account's pods that are alive and not being deleted."""
        return {
            p["id"]
            for p in self._report()["pods"]
            if not p["deleting_at"] and p["status"] not in ("DELETING", "DELETED")
        }
