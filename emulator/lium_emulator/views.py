"""How records look on the wire: pod rows (docs/lium-api.md#pod-row), templates, credentials, volumes, events, nodes."""

import math
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lium_emulator.catalogs.nodes import KIB_PER_GIB, Node
from lium_emulator.lifecycle import local_volume_path, pod_internal_ports
from lium_emulator.records.access import Workspace
from lium_emulator.records.entities import (
    ACTIVE_STATUSES,
    DockerCredential,
    Event,
    Pod,
    SshKey,
    Template,
    Volume,
)
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.timeutil import iso

if TYPE_CHECKING:
    from lium_emulator.api.caller import Caller

POD_HOST = "127.0.0.1"


def ssh_connect_cmd(pod: Pod) -> str | None:
    """``ssh root@127.0.0.1 -p <port>`` once sshd is published, else None."""
    if not pod.ssh_ready or pod.status != "RUNNING" or not pod.ports_mapping or 22 not in pod.ports_mapping:
        return None
    return f"ssh root@{POD_HOST} -p {pod.ports_mapping[22]}"


# A listing's executor objects by node id: every row of one node embeds the same figures, and each
# costs a pass over all pods, so a listing computes each once (linear, not quadratic, in pods).
ListingExecutors = dict[str, dict[str, Any] | None]


def pod_row(
    state: EmulatorState,
    pod: Pod,
    now: datetime,
    pending_seconds: float,
    *,
    detailed: bool = False,
    listing: ListingExecutors | None = None,
) -> dict[str, Any]:
    """A ``GET /pods`` row; ``detailed`` adds ``last_event`` and ``executor.disk_health_ok`` (GET one).

    ``pending_seconds`` is the configured PENDING time, from which a PENDING pod's ETA is derived;
    ``listing`` is shared by the rows of one listing (never with ``detailed``, which edits its copy).
    """
    creator = state.api_keys.get(pod.api_key_id or "")
    if listing is not None and pod.executor_id in listing:
        executor = listing[pod.executor_id]
    else:
        node = state.catalog.get(pod.executor_id)
        executor = (
            executor_object(
                node, state.available_gpus(node), available_ports(state, node), price_per_gpu=None
            )
            if node
            else None
        )
        if listing is not None:
            listing[pod.executor_id] = executor
    volume = state.volumes.get(pod.volume_id or "")
    row: dict[str, Any] = {
        "id": pod.id,
        "pod_name": pod.pod_name,
        "executor_id": pod.executor_id,
        "status": pod.status,
        "ssh_connect_cmd": ssh_connect_cmd(pod),
        "ports_mapping": {str(k): v for k, v in pod.ports_mapping.items()} if pod.ports_mapping else None,
        "gpu_name": pod.gpu_name,
        "gpu_count": str(pod.gpu_count),
        "cpu_name": pod.cpu_name,
        "cpu_count": pod.cpu_count,
        "ram_total": pod.memory_gib,
        "storage_quota_gb": pod.storage_quota_gb,
        "local_volume_gb": pod.local_volume_gb,
        "price": pod.price,
        "created_at": iso(pod.created_at),
        "updated_at": iso(pod.updated_at),
        "removal_scheduled_at": iso(pod.removal_scheduled_at),
        "termination_hours": pod.termination_hours,
        "template": pod_template_object(pod.template),
        "executor": executor,
        "volume": volume_object(volume) if volume else None,
        "local_volume_path": local_volume_path(pod.template.volumes),
        "enable_volume_encryption": pod.enable_volume_encryption,
        "volume_encryption_status": None,
        "enable_jupyter": pod.enable_jupyter,
        "jupyter_installation_status": pod.jupyter_installation_status,
        "jupyter_url": pod.jupyter_url,
        "jupyter_error": pod.jupyter_error,
        "workspace_id": pod.user_id,
        "created_by_api_key_id": pod.api_key_id,
        "api_key_id": pod.api_key_id,
        "api_key_name": creator.name if creator else None,
        "cluster_id": pod.cluster_id,
        "cluster_node_index": pod.cluster_node_index,
        "cluster_overlay_ip": pod.cluster_overlay_ip,
        "is_favorite": False,
        "ssh_keys": list(pod.authorized_keys),
        "notice_period": None,
        "skip_add_agent_ssh_key": False,
    }
    if pod.status in ("PENDING", "REBOOT_PENDING"):
        row.update(pending_progress(pod, now, pending_seconds))
    if detailed:
        events = state.pod_events(pod.id)
        row["last_event"] = event_object(events[-1]) if events else None
        if executor is not None:
            executor["disk_health_ok"] = True
    return row


def pending_progress(pod: Pod, now: datetime, pending_seconds: float) -> dict[str, Any]:
    """``estimated_ready_seconds``, ``eta_basis`` and ``phase`` of a PENDING or REBOOT_PENDING pod."""
    since = pod.reboot_requested_at if pod.status == "REBOOT_PENDING" else None
    elapsed = (now - (since or pod.created_at)).total_seconds()
    fraction = elapsed / pending_seconds if pending_seconds > 0 else 1.0
    phase = (
        "preparing node" if fraction < 0.34 else "pulling image" if fraction < 0.67 else "starting container"
    )
    return {
        "estimated_ready_seconds": max(0, math.ceil(pending_seconds - elapsed)),
        "eta_basis": "fleet_default",
        "phase": phase,
    }


def pod_template_object(template: Template) -> dict[str, Any]:
    """The ``template`` object embedded in a pod row."""
    return {
        "id": template.id,
        "name": template.name,
        "docker_image": template.docker_image,
        "docker_image_tag": template.docker_image_tag,
        "category": template.category,
        "volumes": list(template.volumes),
    }


def template_object(template: Template) -> dict[str, Any]:
    """A template as ``/templates`` returns it."""
    return template.model_dump(mode="json")


def credential_object(credential: DockerCredential) -> dict[str, Any]:
    """A docker credential; the password is never returned."""
    return {
        "id": credential.id,
        "user_id": credential.user_id,
        "username": credential.username,
        "created_at": iso(credential.created_at),
        "updated_at": iso(credential.updated_at),
    }


def ssh_key_object(key: SshKey) -> dict[str, Any]:
    """An account SSH key."""
    return key.model_dump(mode="json")


def volume_object(volume: Volume, directory: Path | None = None, holder: Pod | None = None) -> dict[str, Any]:
    """A volume; with ``directory``, its current size and file count are measured from disk."""
    size, files = directory_usage(directory) if directory is not None else (0, 0)
    return {
        "id": volume.id,
        "user_id": volume.user_id,
        "name": volume.name,
        "description": volume.description,
        "created_at": iso(volume.created_at),
        "updated_at": iso(volume.updated_at),
        "current_size_bytes": size,
        "current_file_count": files,
        "current_size_gb": round(size / 1e9, 6),
        "current_size_mb": round(size / 1e6, 3),
        "last_metrics_update": iso(volume.updated_at),
        "attached_pod_id": holder.id if holder else None,
    }


def directory_usage(directory: Path) -> tuple[int, int]:
    """Total bytes and number of regular files under ``directory`` (0, 0 if it does not exist)."""
    size = files = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = Path(root, name)
            if path.is_file() and not path.is_symlink():
                size += path.stat().st_size
                files += 1
    return size, files


def event_object(event: Event) -> dict[str, Any]:
    """An event as the event routes return it."""
    return event.model_dump(mode="json", exclude={"user_id"})


def me_object(caller: "Caller", balance: float) -> dict[str, Any]:
    """``GET /users/me``: the user, the workspace the caller acts in, and the calling key (None fields
    for a browser session)."""
    account, key = caller.account, caller.key
    return {
        "id": account.user_id,
        "email": account.email,
        "balance": balance,
        "stripe_customer_id": None,
        "api_key_id": key.id if key else None,
        "api_key_name": key.name if key else None,
        "scopes": list(key.scopes) if key else None,
        "pod_visibility": key.pod_visibility if key else None,
        "created_at": iso(account.created_at),
        "workspace": workspace_object(caller.workspace, caller.role),
    }


def workspace_object(workspace: Workspace, role: str) -> dict[str, Any]:
    """A workspace as ``/workspaces`` and ``/users/me`` show it to a member of ``role``."""
    return {
        "id": workspace.id,
        "name": workspace.name,
        "role": role,
        "billing_owner_user_id": workspace.billing_owner_user_id,
        "pending_billing_owner_user_id": workspace.pending_billing_owner_user_id,
        "is_personal": workspace.is_personal,
        "created_at": iso(workspace.created_at),
    }


def feed_node(node: Node, available: int, rent_url_base: str) -> dict[str, Any]:
    """A node of the public feed (docs/lium-api.md#nodes-feed): host totals rounded to whole GB, free GPUs now."""
    return {
        "id": node.id,
        "gpu_model": node.gpu_model,
        "gpu_count": node.gpu_count,
        "available_gpu_count": available,
        "min_rentable_gpu_count": node.min_rentable_gpu_count,
        "price_per_gpu_hour": node.price_per_gpu_hour,
        "price_per_node_hour": round(node.price_per_gpu_hour * node.gpu_count, 6),
        "gpu_memory_gb": node.gpu_memory_gb,
        "cpu_count": node.cpu_count,
        "ram_gb": round(node.ram_gb),
        "disk_gb": round(node.disk_gb),
        "disk_free_gb": round(node.disk_free_gb),
        "network_download_mbps": node.network_download_mbps,
        "tier": node.tier,
        "country": node.country,
        "country_code": node.country_code,
        "region": node.region,
        "city": node.city,
        "rent_url": f"{rent_url_base}/browse-pods/{node.id}",
    }


def available_ports(state: EmulatorState, node: Node) -> int:
    """External ports ``node`` can still publish: its ``port_count`` minus those its active pods hold."""
    held = sum(
        len(pod_internal_ports(p.template.internal_ports))
        for p in state.pods.values()
        if p.executor_id == node.id and p.status in ACTIVE_STATUSES
    )
    return max(0, node.port_count - held)


def interconnect_object(node: Node) -> dict[str, Any] | None:
    """How the node's GPUs are wired, as Lium's ``nvidia-smi topo`` check reports it; None when unknown."""
    if node.nvlink is None:
        return None
    pairs = node.gpu_count * (node.gpu_count - 1) // 2
    return {
        "gpu_count": node.gpu_count,
        "gpu_pairs": pairs,
        "nvlink": node.nvlink,
        "nvlink_pairs": pairs if node.nvlink else 0,
        "pcie_class": None if node.nvlink else "SYS",
        "p2p": node.nvlink,
        "p2p_pairs": pairs,
        "p2p_ok_pairs": pairs if node.nvlink else 0,
    }


def executor_object(
    node: Node, available: int, free_ports: int, *, price_per_gpu: float | None, with_ip: bool = True
) -> dict[str, Any]:
    """A host row: embedded in pods (``price_per_gpu`` None) and listed by ``GET /executors``.

    ``with_ip`` False leaves ``executor_ip_address`` null: Lium sends a node's address only to a
    signed-in caller.
    """
    interconnect = interconnect_object(node)
    return {
        "id": node.id,
        "machine_name": node.machine_name,
        "gpu_count": node.gpu_count,
        "available_gpu_count": available,
        "is_whole_host_free": available == node.gpu_count,
        "min_gpu_count_for_rental": node.min_rentable_gpu_count if node.splittable else None,
        "price_per_gpu": price_per_gpu,
        "executor_ip_address": POD_HOST if with_ip else None,
        "tier": node.tier,
        "status": "online",
        "reliability_score": node.reliability_score,
        "uptime_in_minutes": node.uptime_in_minutes,
        "max_cuda_version": node.max_cuda_version,
        "interconnect": interconnect,
        "nvlink": node.nvlink,
        "gpu_power_limited": False,
        "gpu_power_limit_w": None,
        "gpu_power_limit_default_w": None,
        "frequent_rent_failures": False,
        "effective_download_speed_mbps": node.network_download_mbps,
        "effective_upload_speed_mbps": node.network_upload_mbps,
        "location": {
            "country": node.country,
            "country_code": node.country_code,
            "region": node.region,
            "city": node.city,
            "lat": node.latitude,
            "lon": node.longitude,
        },
        "specs": {
            "gpu": {
                "count": node.gpu_count,
                "driver": node.driver_version,
                "details": [{"name": node.machine_name, "capacity": int(node.gpu_memory_gb * 1024)}]
                * node.gpu_count,
            },
            "cpu": {"count": node.cpu_count, "model": node.cpu_name},
            "ram": {
                "total": int(node.ram_gb * KIB_PER_GIB),
                "pod_reserve": int(node.host_ram_reserve_gib * KIB_PER_GIB),
            },
            "hard_disk": {
                "total": int(node.disk_gb * 1e9 / 1024),
                "free": int(node.disk_free_gb * 1e9 / 1024),
            },
            "available_port_count": free_ports,
            "sysbox_runtime": False,
            "interconnect": interconnect,
        },
    }
