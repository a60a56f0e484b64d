"""``lium-tf logs``: a pod's container output (Lium's logs route), by Terraform address or pod id.

An address is looked up in the stack's state: a ``lium_pod``, a ``lium_runner`` (its pod), or a
``lium_cluster`` with the node's index. The output is redacted of every value of the stack's runners'
``environment``, line by line, as ``lium-tf run`` redacts a job's output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lium_provider.api.models import is_lium_id
from lium_provider.jobs.stack import StackError, StackState
from lium_provider.runner.output import redactor


def pod_to_read(target: str, state: StackState | None, node: int | None) -> str:
    """The pod id ``target`` names: a pod id as is, else the pod of that address in ``state``."""
    if is_lium_id(target):
        if node is not None:
            raise StackError("--node picks a node of a lium_cluster address, not of a pod id")
        return target
    if state is None:
        raise StackError(f"{target} is neither a pod id nor readable without the stack's state")
    found = next((r for r in state.resources if r.address == target), None)
    if found is None:
        shown = ", ".join(r.address for r in state.resources if r.type in _WITH_PODS) or "none"
        raise StackError(
            f"the stack in {state.directory} has no {target} (its pods, clusters and runners: {shown})"
        )
    if found.type == "lium_cluster":
        nodes = found.values.get("nodes") or []
        if node is None or not 0 <= node < len(nodes):
            raise StackError(
                f"{target} is a cluster of {len(nodes)} nodes: pick one with --node 0 to {len(nodes) - 1}"
            )
        return str(nodes[node].get("pod_id") or "")
    if node is not None:
        raise StackError(f"--node picks a node of a lium_cluster; {target} is a {found.type}")
    if found.type == "lium_pod":
        return str(found.values.get("id") or "")
    if found.type == "lium_runner":
        return str(found.values.get("pod_id") or "")
    raise StackError(f"{target} is a {found.type}: name a lium_pod, lium_cluster or lium_runner")


_WITH_PODS = ("lium_pod", "lium_cluster", "lium_runner")


def show_lines(lines: Iterable[str], secrets: Iterable[str], write: Callable[[str], None]) -> int:
    """Write each line, redacted of every secret value; how many there were."""
    redact = redactor(secrets).redact
    count = 0
    for line in lines:
        write(redact(line.rstrip("\n")) + "\n")
        count += 1
    return count
