"""Two stacks of the same names on one account (``twin-stacks`` scenarios): the chaos hits one of them.

Stack ``a`` (the bystander) and stack ``b`` (the one the fault or signal hits) declare the same resource
names and send the same names to Lium, in two directories or in two workspaces of one directory, with one
user's rent journal. Each stack's provider talks to the emulator through its own recording proxy
(:mod:`tests.support.proxy`), which is how a request is attributed to the stack that sent it although
both use one account and one API key.

Interleaved: ``a`` applies, then ``b`` applies under the chaos, converges (optionally ``apply``, then
``destroy``), and only then ``a`` is checked and destroyed. Concurrent: both apply at once under the
chaos (a fault rule hits both, a signal only ``b``), then both are checked, ``b`` optionally re-applies,
and both destroy at once. Whatever happens to ``b``, ``a``'s pods keep their ids and never go DELETING
before ``a``'s own destroy, ``a``'s plan stays empty, and no request of one stack acts on an object of
the other (:func:`tests.chaos.audit.cross_stack_effects`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.chaos import audit
from tests.chaos.harness import APPLY, Finished, ScenarioRun, tail
from tests.chaos.outcome import Outcome
from tests.chaos.scenarios import TWIN_LABELS, Scenario
from tests.support.lium import Account
from tests.support.proxy import RecordingProxy
from tests.support.terraform import Terraform

BYSTANDER, HIT = TWIN_LABELS
STAGING = "staging"  # the hit stack's workspace in ``workspaces`` scenarios


def state_path(tf: Terraform) -> Path:
    """Where ``tf``'s workspace (``TF_WORKSPACE``, else the default one) keeps its local state."""
    workspace = tf.env.get("TF_WORKSPACE", "default")
    if workspace == "default":
        return tf.workdir / "terraform.tfstate"
    return tf.workdir / "terraform.tfstate.d" / workspace / "terraform.tfstate"


def pod_ids(tf: Terraform) -> set[str]:
    """The pod ids ``tf``'s state holds."""
    path = state_path(tf)
    if not path.exists():
        return set()
    state: dict[str, Any] = json.loads(path.read_text())
    return {
        instance["attributes"]["id"]
        for resource in state.get("resources", [])
        if resource.get("mode") == "managed" and resource["type"] == "lium_pod"
        for instance in resource["instances"]
    }


class TwinRun(ScenarioRun):
    """Runs one ``twin-stacks`` scenario: ``stacks`` and ``proxies`` by stack label (``a`` and ``b``)."""

    def __init__(
        self,
        scenario: Scenario,
        stacks: dict[str, Terraform],
        proxies: dict[str, RecordingProxy],
        account: Account,
        secrets: dict[str, str],
    ) -> None:
        super().__init__(scenario, stacks[HIT], account, secrets)
        self.stacks = stacks
        self.proxies = proxies
        self.label = f"{HIT}: "
        self.template_owners: dict[str, str] = {}  # template id → stack, from reports during the run
        self.workdirs = sorted({tf.workdir for tf in stacks.values()})

    def execute(self) -> Outcome:
        started = time.monotonic()
        s = self.scenario
        bystander = self.stacks[BYSTANDER]
        try:
            if s.concurrent:
                applied: list[Finished] = []
                with self.account.faults(s.fault_plan):
                    first = _beside(
                        lambda: applied.append(self._run(f"{BYSTANDER}: apply", APPLY, tf=bystander))
                    )
                    hit = self._chaos()
                    first.join()
                if applied and applied[0].returncode == 0:
                    self._check_plan_is_empty("after the concurrent apply", bystander)
                else:  # a fault rule hits the bystander's apply too; a signal to the other stack must not
                    if not s.rules:
                        failed = applied[0].output if applied else "(no result)"
                        self.outcome.cross_stack.append(
                            f"stack {BYSTANDER}'s apply failed while only stack {HIT} was hit:\n{tail(failed)}"
                        )
                    self._apply_cleanly(f"{BYSTANDER}: apply again", bystander)
            else:
                self._apply_cleanly(f"{BYSTANDER}: apply", bystander)
                self._note_templates()
                with self.account.faults(s.fault_plan):
                    hit = self._chaos()
            if hit.returncode == 0:
                self._check_plan_is_empty(f"{HIT} after the chaos apply")
            self._note_templates()
            kept = pod_ids(bystander)
            if s.concurrent:
                if s.recover_by_apply:
                    self._apply_cleanly(f"{HIT}: recovery apply")
                    self._note_templates()
                self._check_untouched(kept, bystander)
                destroying = _beside(lambda: self._converge(bystander, recover=False, label=f"{BYSTANDER}: "))
                self._converge(recover=False, label=self.label)
                destroying.join()
            else:
                self._converge(label=self.label)
                self._check_untouched(kept, bystander)
                self._converge(bystander, recover=False, label=f"{BYSTANDER}: ")
        finally:
            self.outcome.seconds = time.monotonic() - started
        self._audit(self.outcome.seconds)
        return self.outcome

    def _check_untouched(self, kept: set[str], bystander: Terraform) -> None:
        """The bystander's pods are still its own and alive, and its plan is still empty."""
        pods = {p["id"]: p for p in self._report()["pods"]}
        for pod_id in sorted(kept):
            pod = pods.get(pod_id)
            if pod is None or pod["deleting_at"] or pod["status"] in ("DELETING", "DELETED"):
                state = "gone" if pod is None else pod["status"]
                self.outcome.cross_stack.append(
                    f"stack {BYSTANDER}'s pod {pod_id} is {state} before its own destroy"
                )
        if pod_ids(bystander) != kept:
            self.outcome.cross_stack.append(
                f"stack {BYSTANDER}'s pods changed ids: {kept} → {pod_ids(bystander)}"
            )
        self._check_plan_is_empty(f"of {BYSTANDER} after {HIT}'s chaos", bystander)

    def _note_templates(self) -> None:
        self.template_owners |= audit.template_owners(self._report())

    def _rented(self) -> bool:
        """Whether the hit stack's provider got a rent answered (the bystander's rents do not count)."""
        return any(
            e.method == "POST" and audit.RENT_ROUTE.match(e.route) and 200 <= e.status < 300
            for e in self.proxies[HIT].snapshot()
        )

    def _audit(self, wall_seconds: float) -> None:
        super()._audit(wall_seconds)
        report = self._report()
        exchanges = {label: proxy.snapshot() for label, proxy in self.proxies.items()}
        owners = audit.stack_owners(report, exchanges)
        self.outcome.duplicates = audit.duplicate_rentals(report, owners)
        self.outcome.cross_stack += audit.cross_stack_effects(report, exchanges, self.template_owners)


def _beside(step: Callable[[], object]) -> threading.Thread:
    """``step`` (the bystander's command) started in a thread, to run while this one runs the hit stack's.

    Every Terraform command has its own deadline (harness.run_command), so ``join`` returns.
    """
    thread = threading.Thread(target=step, daemon=True)
    thread.start()
    return thread
