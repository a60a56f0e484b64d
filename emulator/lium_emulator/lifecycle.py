"""Pod lifecycle (docs/lium-api.md#lifecycle): PENDING → RUNNING | CREATION_FAILED, RUNNING →
REBOOT_PENDING → RUNNING | REBOOT_FAILED, then DELETING → DELETED.

Each pod is driven by asyncio tasks on the event loop; the blocking sandbox calls (start, stop) run in
a dedicated thread pool. Timings come from ``EmulatorConfig``; faults attached to the pod at rent
time (``PodFaults``) stretch or break the steps. ``recover`` resumes pods after a restart.
"""

import asyncio
import logging
import os
import shutil
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import anyio

from lium_emulator.catalogs.images import ImageConfig, resolve_image
from lium_emulator.config import EmulatorConfig
from lium_emulator.faults import FaultEngine
from lium_emulator.records.entities import Pod, Template
from lium_emulator.records.state import EmulatorState, sha256_hex
from lium_emulator.records.timeutil import utcnow
from lium_emulator.sandbox.file_guard import OPEN_FILES_EXHAUSTED
from lium_emulator.sandbox.manager import PodSpec, SandboxError, SandboxManager
from lium_emulator.sandbox.overlay import OverlayMember
from lium_emulator.services.notebooks import clear_notebook

logger = logging.getLogger(__name__)

T = TypeVar("T")
_STUCK_POLL_SECONDS = 0.1
_CONTAINER_POLL_SECONDS = 0.5  # only where pidfds cannot be had
_SSHD_POLL_SECONDS = 0.05
_SSHD_WAIT_SECONDS = 60.0
CLUSTER_MEMBER_FAILED = "cluster_member_failed"
"""The delete reason of cluster members released because another member failed to start."""
# Statuses a scheduled removal deletes: a pod that never became ready is removed all the same.
REMOVABLE_STATUSES: frozenset[str] = frozenset(
    {"PENDING", "RUNNING", "REBOOT_PENDING", "REBOOT_FAILED", "BROKEN"}
)
# Statuses a reboot (or a template switch) starts from: the billed ones whose container is not starting.
REBOOTABLE_STATUSES: frozenset[str] = frozenset({"RUNNING", "REBOOT_FAILED"})


class PodLifecycle:
    """Starts, fails, deletes and recovers pods; owns the sandboxes and pod directories."""

    def __init__(
        self,
        state: EmulatorState,
        config: EmulatorConfig,
        faults: FaultEngine,
        sandboxes: SandboxManager,
        data_dir: Path,
    ) -> None:
        self._state = state
        self._config = config
        self._faults = faults
        self._sandboxes = sandboxes
        self._data_dir = data_dir
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sandbox")
        self._creating: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._removals: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # What else follows a pod's first RUNNING and its deletion (a rent's restore, its backups' schedule).
        self.on_running: list[Callable[[Pod], None]] = []
        self.on_deleted: list[Callable[[Pod], None]] = []

    # --- directories ---------------------------------------------------------------------------

    def volume_dir(self, volume_id: str) -> Path:
        """Host directory holding a network volume's files."""
        return self._data_dir / "volumes" / volume_id

    def local_volume_dir(self, pod_id: str) -> Path:
        """Host directory of a pod's local volume (template ``volumes[0]``, else /root) as emulators
        before the volume image kept it; a pod that has one keeps using it."""
        return self._data_dir / "pods" / pod_id / "local-volume"

    def host_keys_file(self, pod_id: str) -> Path:
        """The pod's sshd host keys, kept with its other files (so a restart does not change them)."""
        return self._data_dir / "pods" / pod_id / "host-keys.json"

    def local_volume_image(self, pod_id: str) -> Path:
        """The size-bounded image backing a pod's local volume (``sandbox/volume_image.py``)."""
        return self._data_dir / "pods" / pod_id / "local-volume.img"

    def container_output(self, pod_id: str) -> Path:
        """The file the pod's container writes its output to (absent before it starts and after stop)."""
        return self._sandboxes.console_log(pod_id)

    # --- entry points ----------------------------------------------------------------------------

    def begin_create(self, pod: Pod) -> None:
        """Drive a new PENDING pod towards RUNNING."""
        self._wake[pod.id] = asyncio.Event()
        self._creating[pod.id] = self._spawn(self._create(pod))

    def begin_reboot(self, pod: Pod, *, actor: dict[str, Any], template: Template | None = None) -> None:
        """Replace the container of a pod in ``REBOOTABLE_STATUSES``, as Lium's reboot does.

        The pod is REBOOT_PENDING (still billed) for the pending time while a fresh sandbox starts, then
        RUNNING with new ports and a new SSH host key, or REBOOT_FAILED. Its local and network volumes
        are kept. ``template`` (a template switch) is what the new container runs.
        """
        previous = pod.status
        if template is not None:
            pod.template = template.model_copy(deep=True)
        pod.status = "REBOOT_PENDING"
        pod.ssh_ready = False
        pod.ports_mapping = None
        clear_notebook(pod)  # the new container has none
        pod.reboot_requested_at = pod.updated_at = utcnow()
        self._state.save(pod)
        # Lium's names for the request (its audit reads them as "reboot requested", "template switched")
        requested = "pod-switch-template.success" if template is not None else "pod-reboot.success"
        self._state.record_event(pod.user_id, requested, pod=pod, actor=actor)
        self._status_event(pod, previous, "REBOOT_PENDING", "user_initiated")
        self._start_reboot(pod)

    def _start_reboot(self, pod: Pod) -> None:
        self._wake[pod.id] = asyncio.Event()
        self._creating[pod.id] = self._spawn(self._reboot(pod))

    def schedule_removal(self, pod: Pod, at: datetime | None) -> None:
        """Have the platform delete ``pod`` at ``at`` (reason ``scheduled_termination``); None cancels.

        Replaces any earlier schedule. Cancelling also drops the rent's ``termination_hours``, so a
        pending pod does not get a schedule back when it turns RUNNING.
        """
        pod.removal_scheduled_at = at
        if at is None:
            pod.termination_hours = None
        pod.updated_at = utcnow()
        self._state.save(pod)
        self._arm_removal(pod)

    def _arm_removal(self, pod: Pod) -> None:
        armed = self._removals.pop(pod.id, None)
        if armed is not None:
            armed.cancel()
        if pod.removal_scheduled_at is not None:
            self._removals[pod.id] = self._spawn(self._remove_when_due(pod, pod.removal_scheduled_at))

    async def _remove_when_due(self, pod: Pod, at: datetime) -> None:
        await asyncio.sleep(max(0.0, (at - utcnow()).total_seconds()))
        self._removals.pop(pod.id, None)
        if pod.status in REMOVABLE_STATUSES:
            self.begin_delete(pod, actor=None, reason="scheduled_termination")

    def begin_delete(
        self,
        pod: Pod,
        *,
        actor: dict[str, Any] | None,
        reason: str,
        extra_seconds: float = 0.0,
        detail: str | None = None,
    ) -> None:
        """Move ``pod`` to DELETING now and to DELETED after the deleting time; ``actor`` is the event
        actor of who asked (None: the platform), ``detail`` goes on the status event."""
        armed = self._removals.pop(pod.id, None)
        if armed is not None:  # a removal that fires has already left the table
            armed.cancel()
        previous = pod.status
        now = utcnow()
        pod.status = "DELETING"
        pod.delete_reason = reason
        pod.deleting_at = pod.updated_at = now
        if pod.running_at is not None and pod.billing_stopped_at is None:
            pod.billing_stopped_at = now
        self._state.save(pod)
        if actor is not None:
            self._state.record_event(pod.user_id, "pod-delete.success", pod=pod, actor=actor, reason=reason)
        self._status_event(pod, previous, "DELETING", reason, detail)
        if previous in ("PENDING", "REBOOT_PENDING"):
            self._wake[pod.id].set()  # ends the wait for the pending time
        if previous == "PENDING":
            self._state.record_event(
                pod.user_id,
                "pod-create.failed",
                pod=pod,
                reason=reason,
                detail="creation cancelled: the pod was deleted while pending",
            )
        self._spawn(self._delete(pod, extra_seconds))

    def recover(self) -> None:
        """Resume every pod after a (re)start; the old sandboxes were already cleaned up."""
        now = utcnow()
        for pod in list(self._state.pods.values()):
            if pod.status in REMOVABLE_STATUSES:
                self._arm_removal(pod)
            if pod.status == "PENDING":
                self.begin_create(pod)
            elif pod.status == "RUNNING":
                self._creating[pod.id] = self._spawn(self._restart(pod))
            elif pod.status == "REBOOT_PENDING":
                self._start_reboot(pod)
            elif pod.status == "DELETING":
                self._spawn(self._delete(pod, 0.0))
            elif pod.status == "CREATION_FAILED" and pod.failed_at is not None:
                left = self._config.failed_row_seconds - (now - pod.failed_at).total_seconds()
                self._spawn(self._expire_failed(pod, max(0.0, left)))

    async def shutdown(self) -> None:
        """Cancel every pending step and tear down every sandbox."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(self._stop_everything)

    def _stop_everything(self) -> None:
        # Starts still running in the pool must finish first, or their sandboxes would outlive stop_all.
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._sandboxes.stop_all()

    # --- steps -------------------------------------------------------------------------------------

    async def _create(self, pod: Pod) -> None:
        try:
            ports = await self._provision(pod, "PENDING", self._fail)
            if ports is not None:
                self._mark_running(pod, ports)
        finally:
            self._creating.pop(pod.id, None)

    async def _reboot(self, pod: Pod) -> None:
        try:
            await self._stop_sandbox(pod)
            # A new container has host keys of its own (an emulator restart keeps a container's keys).
            self.host_keys_file(pod.id).unlink(missing_ok=True)
            ports = await self._provision(pod, "REBOOT_PENDING", self._reboot_failed)
            if ports is not None:
                self._mark_rebooted(pod, ports)
        finally:
            self._creating.pop(pod.id, None)

    async def _provision(
        self, pod: Pod, waiting: str, fail: Callable[[Pod, str, str], None]
    ) -> dict[int, int] | None:
        """Start the pod's sandbox while it is ``waiting`` (PENDING or REBOOT_PENDING) for the pending time.

        Returns the published ports; None when the pod failed (``fail`` got the reason and detail) or
        left ``waiting`` meanwhile (deleted: the delete step stops the sandbox).
        """
        image, failure = self._resolve(pod)
        # On Lium, PENDING covers pulling the image and starting the container, so the sandbox
        # starts now and the pod turns RUNNING when the pending time is up: D is the whole
        # provisioning time, not D plus the sandbox's own start-up.
        starting = (
            None
            if image is None
            else asyncio.ensure_future(
                self._in_pool(self._sandboxes.start, self._spec(pod, image, self._config.pending_seconds))
            )
        )
        await self._hold_pending(pod, waiting)
        if starting is None:
            if pod.status == waiting:
                fail(pod, *failure)
            return None
        try:
            ports = await starting
        except Exception as error:
            if pod.status == waiting:
                fail(pod, "sandbox_error", _start_failure(pod, error))
            return None
        return ports if pod.status == waiting else None

    async def _hold_pending(self, pod: Pod, waiting: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.pending_seconds
        wake = self._wake[pod.id]
        while pod.status == waiting:
            remaining = deadline - loop.time()
            rule = pod.faults.stuck_pending_rule if waiting == "PENDING" else None
            stuck = rule is not None and self._faults.has_rule(rule, "stuck_pending")
            if remaining <= 0 and not stuck:
                return
            try:
                await asyncio.wait_for(wake.wait(), remaining if remaining > 0 else _STUCK_POLL_SECONDS)
            except TimeoutError:
                continue

    def _resolve(self, pod: Pod) -> tuple[ImageConfig | None, tuple[str, str]]:
        """The pod's image, or why the pod cannot be created (reason code, detail)."""
        if pod.faults.creation_failed is not None:
            return None, ("fault_injected", pod.faults.creation_failed)
        template = pod.template
        image = resolve_image(template.docker_image, template.docker_image_tag)
        reference = f"{template.docker_image}:{template.docker_image_tag or 'latest'}"
        if image is None:
            return None, ("image_pull_failed", f"image {reference} not found in the registry")
        if image.private:
            credential = self._state.credentials.get(template.docker_credential_id or "")
            if credential is None or credential.user_id != pod.user_id:
                return None, (
                    "image_pull_failed",
                    f"image {reference} is private and the template has no docker credential",
                )
            if credential.username != image.registry_username or credential.password_sha256 != sha256_hex(
                image.registry_password or ""
            ):
                return None, (
                    "image_pull_failed",
                    f"the registry rejected the docker credential for image {reference}",
                )
        return image, ("", "")

    def _spec(
        self, pod: Pod, image: ImageConfig, running_in: float, ports: dict[int, int] | None = None
    ) -> PodSpec:
        """The sandbox of ``pod``, which turns RUNNING ``running_in`` seconds after the sandbox starts.

        sshd starts when the pod turns RUNNING, so it answers by the time ``ssh_connect_cmd`` is
        published ``ssh_delay_seconds`` later; an ``ssh_late`` fault holds it back past that.
        """
        late = pod.faults.ssh_late_seconds
        sshd_after = running_in + (self._config.ssh_delay_seconds + late if late else 0.0)
        template = pod.template
        local_dir = self.local_volume_dir(pod.id)
        # A pod kept from an emulator of before the image keeps its directory; every other one an image.
        volume_file = None if local_dir.is_dir() else self.local_volume_image(pod.id)
        volume_dir = self.volume_dir(pod.volume_id) if pod.volume_id else None
        if volume_dir is not None:
            volume_dir.mkdir(parents=True, exist_ok=True)
        return PodSpec(
            pod_id=pod.id,
            hostname=pod.id.replace("-", "")[:12],
            image=image,
            entrypoint=template.entrypoint or None,
            startup_commands=template.startup_commands,
            environment=dict(template.environment),
            authorized_keys=list(pod.authorized_keys),
            internal_ports=pod_internal_ports(template.internal_ports),
            local_volume_path=local_volume_path(template.volumes),
            local_volume_dir=local_dir,
            volume_dir=volume_dir,
            ssh_delay_seconds=sshd_after,
            cpu_count=pod.cpu_count,
            memory_gib=pod.memory_gib,
            disk_quota_gb=pod.storage_quota_gb,
            local_volume_image=volume_file,
            local_volume_gb=pod.local_volume_gb,
            host_keys_file=self.host_keys_file(pod.id),
            preferred_ports=dict(ports or {}),
            overlay=(
                OverlayMember(network=pod.cluster_id, address=pod.cluster_overlay_ip)
                if pod.cluster_id is not None and pod.cluster_overlay_ip is not None
                else None
            ),
        )

    def _mark_running(self, pod: Pod, ports: dict[int, int]) -> None:
        now = utcnow()
        pod.status = "RUNNING"
        pod.running_at = pod.updated_at = now
        pod.ports_mapping = dict(ports)
        self._state.save(pod)
        self._state.record_event(pod.user_id, "pod-create.success", pod=pod)
        self._status_event(pod, "PENDING", "RUNNING", None)
        if pod.termination_hours is not None and pod.removal_scheduled_at is None:
            # termination_hours counts from the start; a schedule set while pending takes precedence
            self.schedule_removal(pod, now + timedelta(hours=pod.termination_hours))
        self._after_running(pod)
        for follow in self.on_running:
            follow(pod)

    def _mark_rebooted(self, pod: Pod, ports: dict[int, int]) -> None:
        pod.status = "RUNNING"
        pod.ports_mapping = dict(ports)
        pod.updated_at = utcnow()
        self._state.save(pod)
        self._status_event(pod, "REBOOT_PENDING", "RUNNING", None)
        self._after_running(pod)

    def _reboot_failed(self, pod: Pod, reason: str, detail: str) -> None:
        """REBOOT_FAILED: the container did not come back; still billed until deleted (docs/lium-api.md#lifecycle)."""
        pod.status = "REBOOT_FAILED"
        pod.updated_at = utcnow()
        self._state.save(pod)
        self._state.record_event(pod.user_id, "pod-reboot.failed", pod=pod, reason=reason, error=detail)
        self._status_event(pod, "REBOOT_PENDING", "REBOOT_FAILED", reason, detail)

    def _after_running(self, pod: Pod) -> None:
        self._spawn(self._publish_ssh(pod))
        self._spawn(self._watch_container(pod))

    async def _publish_ssh(self, pod: Pod) -> None:
        """Publish ``ssh_connect_cmd`` ``ssh_delay_seconds`` after RUNNING, once sshd answers.

        With an ``ssh_late`` fault the command is published on the normal schedule without waiting, so
        clients meet a published but silent sshd, as on Lium where the SSH bootstrap lags.
        """
        await asyncio.sleep(self._config.ssh_delay_seconds)
        port = (pod.ports_mapping or {}).get(22)
        if port is None:
            return
        if pod.faults.ssh_late_seconds == 0 and not await _sshd_answers(
            port, lambda: pod.status == "RUNNING"
        ):
            if pod.status == "RUNNING":
                logger.warning("sshd of pod %s never answered; ssh_connect_cmd stays unpublished", pod.id)
            return
        if pod.status == "RUNNING":
            pod.ssh_ready = True
            pod.updated_at = utcnow()
            self._state.save(pod)

    async def _watch_container(self, pod: Pod) -> None:
        """A pod whose container's PID 1 exits becomes BROKEN (reason ``container_exited``), unbilled;
        one the sandbox killed for holding too much of the host says so (``open_files_exhausted``).

        Docker stops a container when its entrypoint ends; the pod then cannot serve SSH or jobs, so
        Lium's clients must see a terminal state rather than a RUNNING pod that never becomes reachable.
        """
        await self._container_exit(pod)
        # Woken by a delete or a reboot too: those leave RUNNING before they stop the sandbox.
        if pod.status == "RUNNING" and pod.id not in self._creating:
            pod.status = "BROKEN"
            pod.ssh_ready = False
            pod.billing_stopped_at = pod.updated_at = utcnow()
            self._state.save(pod)
            killed_because = self._sandboxes.killed_because(pod.id)
            if killed_because is None:
                reason, detail = "container_exited", "the container's main process exited"
            else:
                reason, detail = OPEN_FILES_EXHAUSTED, killed_because
            self._status_event(pod, "RUNNING", "BROKEN", reason, detail)

    async def _container_exit(self, pod: Pod) -> None:
        """Return once the pod's PID 1 has exited (at once when it runs no more)."""
        try:
            notice = await self._in_pool(self._sandboxes.exit_notice, pod.id)
        except OSError as error:  # no pidfd to be had (fd limit, a seccomp filter): poll instead
            logger.warning("watching pod %s by polling: no pidfd (%s)", pod.id, error)
            while await self._in_pool(self._sandboxes.is_alive, pod.id):
                await asyncio.sleep(_CONTAINER_POLL_SECONDS)
            return
        if notice is not None:
            try:
                await anyio.wait_readable(notice)  # a pidfd polls readable once its process exited
            finally:
                os.close(notice)

    def _fail(self, pod: Pod, reason: str, detail: str) -> None:
        now = utcnow()
        pod.status = "CREATION_FAILED"
        pod.failed_at = pod.updated_at = now
        pod.failure_reason, pod.failure_detail = reason, detail
        self._state.save(pod)
        self._state.record_event(
            pod.user_id, "pod-create.failed", pod=pod, reason=reason, detail=detail, error=detail
        )
        self._status_event(pod, "PENDING", "CREATION_FAILED", reason, detail)
        self._spawn(self._expire_failed(pod, self._config.failed_row_seconds))
        if pod.cluster_id is not None:
            self._release_cluster(pod)

    def _release_cluster(self, failed: Pod) -> None:
        """A cluster is rented all or nothing: one member failing to start deletes the others (billed
        only for what they ran), with the reason ``cluster_member_failed``."""
        assert failed.cluster_id is not None
        for member in self._state.cluster_members(failed.cluster_id):
            if member.status in REMOVABLE_STATUSES:
                self.begin_delete(member, actor=None, reason=CLUSTER_MEMBER_FAILED)

    async def _expire_failed(self, pod: Pod, delay: float) -> None:
        await asyncio.sleep(delay)
        if pod.status != "CREATION_FAILED":
            return
        await self._stop_sandbox(pod)
        if pod.status == "CREATION_FAILED":
            self._state.record_event(
                pod.user_id, "worker-pod-delete.success", pod=pod, reason="creation_failed"
            )
            await self._finish_deleted(pod, "CREATION_FAILED", "creation_failed")

    async def _delete(self, pod: Pod, extra_seconds: float) -> None:
        # The container is torn down while the pod is DELETING, so the deleting time is the whole
        # time to DELETED (unless tearing down takes longer).
        loop = asyncio.get_running_loop()
        deadline = (
            loop.time() + self._config.deleting_seconds + pod.faults.slow_deleting_seconds + extra_seconds
        )
        creating = self._creating.get(pod.id)
        if creating is not None:
            await asyncio.wait([creating])
        await self._stop_sandbox(pod)
        await asyncio.sleep(max(0.0, deadline - loop.time()))
        await self._finish_deleted(pod, "DELETING", pod.delete_reason)

    async def _stop_sandbox(self, pod: Pod) -> None:
        try:
            await self._in_pool(self._sandboxes.stop, pod.id)
        except Exception:
            # The row still reaches DELETED; the sandbox manager reports what it could not clean up.
            logger.exception("stopping the sandbox of pod %s failed", pod.id)

    async def _finish_deleted(self, pod: Pod, previous: str, reason: str | None) -> None:
        now = utcnow()
        pod.status = "DELETED"
        pod.deleted_at = pod.updated_at = now
        pod.ssh_ready = False
        self._state.save(pod)
        self._status_event(pod, previous, "DELETED", reason)
        self._wake.pop(pod.id, None)
        for follow in self.on_deleted:
            follow(pod)
        await asyncio.to_thread(shutil.rmtree, self.local_volume_dir(pod.id).parent, True)
        template = self._state.templates.get(pod.template.id)
        if template is not None and template.one_time_template:
            del self._state.templates[template.id]
            self._state.forget(template)

    async def _restart(self, pod: Pod) -> None:
        """Bring a pod that was RUNNING before a restart back as a fresh sandbox (BROKEN if it cannot)."""
        try:
            # Published again on the same host ports where they are free (keys are strings once stored).
            previous = {int(k): int(v) for k, v in (pod.ports_mapping or {}).items()}
            pod.ports_mapping, pod.ssh_ready = None, False
            clear_notebook(pod)  # the new container has none
            self._state.save(pod)
            image, failure = self._resolve(pod)
            detail = failure[1]
            if image is not None:
                try:
                    spec = self._spec(pod, image, 0.0, previous)
                    ports = await self._in_pool(self._sandboxes.start, spec)
                except Exception as error:
                    detail = _start_failure(pod, error)
                else:
                    if pod.status == "RUNNING":  # else deleted meanwhile: the delete step stops it
                        self._mark_recovered(pod, ports)
                    return
            if pod.status == "RUNNING":
                pod.status = "BROKEN"
                pod.billing_stopped_at = pod.updated_at = utcnow()
                self._state.save(pod)
                self._status_event(pod, "RUNNING", "BROKEN", "executor_offline", detail)
        finally:
            self._creating.pop(pod.id, None)

    def _mark_recovered(self, pod: Pod, ports: dict[int, int]) -> None:
        pod.ports_mapping = dict(ports)
        pod.updated_at = utcnow()
        self._state.save(pod)
        self._state.record_event(
            pod.user_id,
            "pod-host-reboot-recovery.recovered",
            pod=pod,
            detail="restarted after an emulator restart",
        )
        self._after_running(pod)

    # --- helpers -----------------------------------------------------------------------------------

    def _status_event(
        self, pod: Pod, from_status: str | None, to_status: str, reason: str | None, detail: str | None = None
    ) -> None:
        self._state.record_event(
            pod.user_id,
            "pod-lifecycle.status",
            pod=pod,
            from_status=from_status,
            to_status=to_status,
            reason=reason,
            detail=detail,
        )

    def _spawn(self, step: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(step)
        self._tasks.add(task)
        task.add_done_callback(self._step_done)
        return task

    def _step_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a pod lifecycle step failed", exc_info=task.exception())

    async def _in_pool(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, function, *args)


def _start_failure(pod: Pod, error: Exception) -> str:
    """What to tell the pod's owner about a failed sandbox start (internal errors only by type)."""
    if isinstance(error, SandboxError):
        return str(error)
    logger.error("starting the sandbox of pod %s failed", pod.id, exc_info=error)
    return f"internal sandbox error ({type(error).__name__})"


async def _sshd_answers(port: int, still_wanted: Callable[[], bool]) -> bool:
    """Poll 127.0.0.1:``port`` until an SSH banner arrives (True) or the wait is pointless or too long."""
    deadline = asyncio.get_running_loop().time() + _SSHD_WAIT_SECONDS
    while still_wanted() and asyncio.get_running_loop().time() < deadline:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1.0)
            try:
                if await asyncio.wait_for(reader.readexactly(4), 1.0) == b"SSH-":
                    return True
            finally:
                writer.close()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        await asyncio.sleep(_SSHD_POLL_SECONDS)
    return False


def pod_internal_ports(template_ports: list[int]) -> list[int]:
    """The container ports a pod exposes: the template's, with SSH (22) always first."""
    return [22, *(port for port in template_ports if port != 22)]


def local_volume_path(template_volumes: list[str]) -> str:
    """Where the pod's local volume is mounted: the template's first volume, else /root."""
    return template_volumes[0] if template_volumes else "/root"
