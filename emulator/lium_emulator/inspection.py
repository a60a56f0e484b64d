"""``GET /_emulator/resources``: everything every account has or had, for tests and leak checks."""

from datetime import datetime
from typing import Any

from lium_emulator.api.keys import key_row
from lium_emulator.budgets import refusal_object
from lium_emulator.records.entities import Account, Pod
from lium_emulator.records.state import EmulatorState, billed_seconds
from lium_emulator.records.timeutil import iso, utcnow
from lium_emulator.runtime import Runtime
from lium_emulator.views import (
    credential_object,
    ssh_connect_cmd,
    ssh_key_object,
    template_object,
    volume_object,
)


def resources_report(runtime: Runtime, user_id: str | None = None) -> dict[str, Any]:
    """Every account's pods (deleted ones too), templates, credentials (no passwords), volumes, SSH keys,
    billed pod-seconds and idempotency keys with their rent counts, or only the account ``user_id``'s
    (a leak check of one account need not render them all); plus the nodes' free GPUs and which of the
    offer's limits pods get on this host (``pod_limits``)."""
    state = runtime.state
    now = utcnow()
    accounts = [a for a in state.accounts.values() if user_id is None or a.user_id == user_id]
    return {
        "generated_at": iso(now),
        "accounts": [_account_report(runtime, account, now) for account in accounts],
        "nodes": [
            {
                "id": node.id,
                "gpu_model": node.gpu_model,
                "gpu_count": node.gpu_count,
                "available_gpu_count": state.available_gpus(node),
            }
            for node in state.catalog.nodes.values()
        ],
        "stale_sandboxes_cleaned": list(runtime.stale_pods),
        "pod_limits": runtime.sandboxes.limits_report(),
    }


def _account_report(runtime: Runtime, account: Account, now: datetime) -> dict[str, Any]:
    state = runtime.state
    user_id = account.user_id
    # the pods billed to the account: its personal workspace's and those of team workspaces it pays for
    pods = sorted(
        (p for p in state.pods.values() if (p.billed_user_id or p.user_id) == user_id),
        key=lambda p: p.created_at,
    )
    return {
        "user_id": user_id,
        "email": account.email,
        "api_key_id": account.api_key_id,
        "api_key_name": account.api_key_name,
        "credit_usd": account.credit_usd,
        "balance_usd": state.balance(account, now),
        "billed_pod_seconds": round(sum(billed_seconds(p, now) for p in pods), 3),
        "pods": [_pod_report(p, now) for p in pods],
        "api_keys": [
            {
                **key_row(runtime, key),
                "revoked": key.revoked,
                "revoked_at": iso(key.revoked_at),
                "refusals": [refusal_object(r) for r in state.refusals if r.api_key_id == key.id],
            }
            for key in state.api_keys.values()
            if key.user_id == user_id
        ],
        "workspaces": [
            {"id": m.workspace_id, "role": m.role} for m in state.memberships.values() if m.user_id == user_id
        ],
        "templates": [template_object(t) for t in state.templates.values() if t.user_id == user_id],
        "docker_credentials": [
            credential_object(c) for c in state.credentials.values() if c.user_id == user_id
        ],
        "volumes": [
            volume_object(v, runtime.lifecycle.volume_dir(v.id), state.volume_holder(v.id))
            for v in state.volumes.values()
            if v.user_id == user_id
        ],
        "ssh_keys": [ssh_key_object(k) for k in state.ssh_keys.values() if k.user_id == user_id],
        "idempotency_keys": _idempotency_report(state, user_id, pods),
        "api_requests": runtime.requests.of(f"user:{user_id}"),
    }


def _pod_report(pod: Pod, now: datetime) -> dict[str, Any]:
    return {
        "id": pod.id,
        "pod_name": pod.pod_name,
        "executor_id": pod.executor_id,
        "status": pod.status,
        "gpu_count": pod.gpu_count,
        "price": pod.price,
        "cpu_count": pod.cpu_count,
        "memory_gib": pod.memory_gib,
        "storage_quota_gb": pod.storage_quota_gb,
        "local_volume_gb": pod.local_volume_gb,
        "template_id": pod.template.id,
        "volume_id": pod.volume_id,
        "ports_mapping": {str(k): v for k, v in pod.ports_mapping.items()} if pod.ports_mapping else None,
        "ssh_connect_cmd": ssh_connect_cmd(pod),
        "idempotency_key": pod.idempotency_key,
        "api_key_id": pod.api_key_id,
        "workspace_id": pod.user_id,
        "delete_reason": pod.delete_reason,
        "cluster_id": pod.cluster_id,
        "cluster_node_index": pod.cluster_node_index,
        "created_at": iso(pod.created_at),
        "running_at": iso(pod.running_at),
        "failed_at": iso(pod.failed_at),
        "deleting_at": iso(pod.deleting_at),
        "deleted_at": iso(pod.deleted_at),
        "billed_seconds": round(billed_seconds(pod, now), 3),
        "failure_reason": pod.failure_reason,
        "failure_detail": pod.failure_detail,
        "faults": pod.faults.model_dump(mode="json"),
    }


def _idempotency_report(state: EmulatorState, user_id: str, pods: list[Pod]) -> list[dict[str, Any]]:
    """Per key: the record's state (``ignored`` when the feature was off) and how many rentals it made (a
    cluster, with all its members, is one rental)."""
    rentals: dict[str, set[str]] = {}
    for pod in pods:
        if pod.idempotency_key is not None:
            rentals.setdefault(pod.idempotency_key, set()).add(pod.cluster_id or pod.id)
    rent_counts = {key: len(made) for key, made in rentals.items()}
    # records are kept per workspace and key (``Caller.idempotency_scope``: "<workspace>:<who>")
    records = {
        key: record
        for (scope, key), record in state.idempotency.items()
        if scope.partition(":")[0] == user_id
    }
    report = []
    for key in sorted(set(records) | set(rent_counts)):
        record = records.get(key)
        report.append(
            {
                "key": key,
                "state": record.state if record else "ignored",
                "status_code": record.status_code if record else None,
                "created_at": iso(record.created_at) if record else None,
                "rent_count": rent_counts.get(key, 0),
            }
        )
    return report
