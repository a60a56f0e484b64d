"""``lium-tf run``: one job on the runners of a stack, started together, followed until every node ends.

Each node is a ``lium_runner`` of the state: its pod is read from Lium (the SSH address, the cluster it
is a member of), and reached over root SSH with the host key the runner pins; the runner's API goes
through that connection, as dstack's server reaches it. The job is driven in phases on every node at
once — health, submit, code, run — so a busy or broken runner fails the run before any node starts,
and a cluster's nodes start together. Members of one ``lium_cluster`` get its rendezvous
(``NODE_RANK``/``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``: node 0's overlay address, ``MASTER_PORT``) and
dstack's own cluster variables; when one of them fails, the others are stopped. Ctrl-C stops the job on
every node, waits (bounded) for each to say it ended, and exits 130.
"""

from __future__ import annotations

import io
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import TypeVar

from lium_provider.api.client import LiumClient
from lium_provider.api.errors import LiumError
from lium_provider.api.models import RUNNING, Pod
from lium_provider.jobs.stack import StackError, StackState, StateResource
from lium_provider.runner import bootstrap
from lium_provider.runner.output import LineWriter, redactor
from lium_provider.runner.pod_ssh import HostKeyMismatch, LoginRefused, PodSSH, PodUnreachable
from lium_provider.runner.task_api import ClusterPlace, Job, JobOutcome, JobSpec, RunnerAPIError, RunnerBusy
from tfbridge import Context, TFError
from tfbridge.cancel import Cancelled, CancelToken
from tfbridge.logs import Logger

REPO_ROOT = "/workflow"
"""Where runs' code goes (dstack's repo directory), one directory per run: never the last run's files."""
DEFAULT_MASTER_PORT = 29500
STOP_GRACE_SECONDS = 30.0
"""How long a stopped job may take to say it ended (the runner kills what is left after 10 s)."""
INTERRUPTED = 130
BUSY_GRACE_SECONDS = 10.0
BUSY_RETRY_SECONDS = 0.3
_T = TypeVar("_T")
_R = TypeVar("_R")


class RunError(Exception):
    """The run cannot start, or a node cannot be reached; the message names the node and what to do."""


@dataclass(frozen=True)
class Node:
    """One runner of the run, and where it runs."""

    runner: StateResource
    pod: Pod
    label: str
    place: ClusterPlace | None = None

    @property
    def host_key(self) -> str:
        return str(self.runner.values.get("ssh_host_key") or "")

    @property
    def runner_env(self) -> Mapping[str, str]:
        return self.runner.values.get("environment") or {}


@dataclass(frozen=True)
class RunRequest:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    secrets: Mapping[str, str]
    code: bytes | None
    run_name: str = field(default_factory=lambda: new_run_name())


def new_run_name() -> str:
    return f"lium-tf-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def nodes_of(state: StackState, targets: Sequence[str], client: LiumClient) -> list[Node]:
    """The runners ``targets`` select (all without one), with their pods; the members of a cluster in
    rank order, each with its place in the run."""
    runners = state.selected("lium_runner", targets)
    if not runners:
        if targets and state.of_type("lium_runner"):
            named = ", ".join(r.address for r in state.of_type("lium_runner"))
            raise StackError(
                f"--target {' '.join(targets)} names no lium_runner of the stack (it has {named})"
            )
        raise StackError(
            f"the stack in {state.directory} has no lium_runner: add one per pod or cluster node "
            '(resource "lium_runner" with pod_id and ssh_host_key; GpuStack adds them unless runner=None) '
            "and apply, then run again"
        )
    pods: dict[str, Pod] = {}
    for runner in runners:
        pod_id = str(runner.values.get("pod_id") or "")
        pod = client.get_pod(pod_id)
        if pod is None or pod.is_terminal:
            raise RunError(f"{runner.address}: its pod {pod_id} is gone; apply the stack again")
        if pod.status != RUNNING:
            raise RunError(f"{runner.address}: its pod {pod_id} is {pod.status}, not RUNNING")
        pods[runner.address] = pod
    members: dict[str, list[StateResource]] = {}
    for runner in runners:
        cluster = pods[runner.address].cluster_id
        if cluster:
            members.setdefault(cluster, []).append(runner)
    nodes = []
    for runner in runners:
        pod = pods[runner.address]
        if not pod.cluster_id:
            nodes.append(Node(runner, pod, runner.address))
            continue
        ranked = sorted(members[pod.cluster_id], key=lambda r: pods[r.address].cluster_node_index or 0)
        ips = tuple(pods[r.address].cluster_overlay_ip or "" for r in ranked)
        if not all(ips):
            raise RunError(f"{runner.address}: Lium gives no overlay address for a member of its cluster")
        rank = ranked.index(runner)
        place = ClusterPlace(rank, ips, pod.gpu_count or 0)
        # Named by its index in the cluster (a subset's ranks count from 0 among the nodes chosen).
        label = f"node {pod.cluster_node_index}" if len(members) == 1 else runner.address
        nodes.append(Node(runner, pod, label, place))
    return sorted(
        nodes, key=lambda n: (n.place is None, n.pod.cluster_id or "", n.place.rank if n.place else 0)
    )


def rendezvous(node: Node) -> dict[str, str]:
    """The variables a distributed launch reads (``torchrun``, ``torch.distributed``), for a member."""
    place = node.place
    if place is None:
        return {}
    return {
        "NODE_RANK": str(place.rank),
        "RANK": str(place.rank),
        "WORLD_SIZE": str(len(place.node_ips)),
        "MASTER_ADDR": place.master_ip,
        "MASTER_PORT": str(node.runner_env.get("MASTER_PORT") or DEFAULT_MASTER_PORT),
    }


@dataclass
class _Running:
    """One node's job while it runs."""

    node: Node
    ssh: PodSSH
    ctx: Context
    job: Job | None = None
    outcome: JobOutcome | None = None
    error: str | None = None
    stop_sent: bool = False


class Run:
    """One job on ``nodes``; :meth:`start` then :meth:`follow` (or use :func:`run_on_stack`)."""

    def __init__(
        self,
        nodes: Sequence[Node],
        request: RunRequest,
        private_key: str,
        secrets: Sequence[str],
        write: Callable[[str], None],
        say: Callable[[str], None],
    ) -> None:
        self.nodes = list(nodes)
        self.request = request
        self.private_key = private_key
        # The rendezvous is the cluster's public facts (overlay addresses, a port), which the run sets
        # itself: a runner environment that holds them too (examples/cluster) keeps them readable.
        public = {value for node in self.nodes for value in rendezvous(node).values()}
        self.redactor = redactor([*(s for s in secrets if s not in public), *request.secrets.values()])
        self.write = write
        self.say = say
        self.stopping = threading.Event()
        self.interrupted = False
        self.cancel = CancelToken()  # ends what the start waits for (health) at Ctrl-C
        self._lock = threading.Lock()
        self._running: list[_Running] = []
        self._connections: list[PodSSH] = []

    # -- phases ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, wait for health, submit, upload the code and start the job on every node."""
        self._running = self._each(self._connect, self.nodes)
        self._each(self._submit, self._running)
        if self.request.code is not None:
            self._each(lambda r: self._job(r).upload_code(self.request.code or b""), self._running)
        self._each(lambda r: self._job(r).start(), self._running)

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for ssh in connections:
            ssh.close()

    def _each(self, action: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        """``action`` on every item at once; once all ended, the first error (each names its node)."""
        pool = ThreadPoolExecutor(max_workers=max(len(items), 1))
        try:
            futures = [pool.submit(action, item) for item in items]
            try:
                wait(futures)
            except KeyboardInterrupt:
                self.cancel.cancel()  # the waits for health end; then the pool can be left
                raise
        finally:
            pool.shutdown(wait=True)
        failed = next((e for f in futures if (e := f.exception()) is not None), None)
        if isinstance(failed, Cancelled):
            raise KeyboardInterrupt
        if failed is not None:
            raise failed
        return [f.result() for f in futures]

    def _connect(self, node: Node) -> _Running:
        address = node.pod.ssh_host_port()
        if address is None:
            raise RunError(f"{node.label}: Lium gives no SSH address for pod {node.pod.id}")
        try:
            ssh = PodSSH.connect(*address, node.host_key, self.private_key)
        except HostKeyMismatch as exc:
            raise RunError(
                f"{node.label}: pod {node.pod.id} offered the host key {exc.offered}, not the one its runner "
                "pins: nothing was sent to it (a replaced or switched pod needs `terraform apply` first)"
            ) from None
        except LoginRefused:
            raise RunError(
                f"{node.label}: pod {node.pod.id} refused root login with LIUM_SSH_PRIVATE_KEY_FILE's key "
                "(the stack's provider key)"
            ) from None
        except (PodUnreachable, ValueError) as exc:
            raise RunError(f"{node.label}: cannot reach pod {node.pod.id} over SSH ({exc})") from None
        with self._lock:
            self._connections.append(ssh)
        ctx = Context(cancel=self.cancel, log=Logger("lium-tf", stream=_NOWHERE))
        try:
            bootstrap.wait_healthy(ctx, ssh)
        except TFError as exc:
            raise RunError(f"{node.label}: {exc.summary}. {exc.detail}") from None
        return _Running(node, ssh, ctx)

    def _submit(self, running: _Running) -> None:
        node = running.node
        try:
            facts, _ = bootstrap.probe(running.ctx, running.ssh)
        except TFError as exc:
            raise RunError(f"{node.label}: {exc.summary}. {exc.detail}") from None
        spec = JobSpec(
            run_name=self.request.run_name,
            # As ssh runs a remote command: the words joined, run by the image's shell on the node.
            argv=("/bin/sh", "-c", " ".join(self.request.argv)),
            user=facts.user,
            env={**rendezvous(node), **self.request.env},
            secrets=self.request.secrets,
            repo_dir=f"{REPO_ROOT}/{self.request.run_name}" if self.request.code is not None else "",
            has_code=self.request.code is not None,
            cluster=node.place,
        )
        job = Job(bootstrap.runner_http(running.ssh), spec)
        # A runner that just ended a job still refuses one until it exits and its supervisor starts the
        # next (the stock runner does so right after its final state is pulled): busy only past that.
        give_up = time.monotonic() + BUSY_GRACE_SECONDS
        while True:
            try:
                job.submit()
                break
            except RunnerBusy:
                if time.monotonic() > give_up:
                    raise RunError(
                        f"{node.label}: its runner is busy with another job (another `lium-tf run`, or "
                        "dstack); wait for it to end, or stop it, then run again"
                    ) from None
            running.ctx.sleep(BUSY_RETRY_SECONDS)
            try:
                bootstrap.wait_healthy(running.ctx, running.ssh)
            except TFError as exc:
                raise RunError(f"{node.label}: {exc.summary}. {exc.detail}") from None
        running.job = job

    def _job(self, running: _Running) -> Job:
        assert running.job is not None
        return running.job

    # -- following ---------------------------------------------------------------------------------

    def follow(self) -> int:
        """Stream every node's output until each job ended; the run's exit code."""
        ended = [threading.Event() for _ in self._running]
        for running, done in zip(self._running, ended, strict=True):
            threading.Thread(
                target=self._follow_one, args=(running, done), name=running.node.label, daemon=True
            ).start()
        # Events, not Thread.join: a join that Ctrl-C interrupts can leave its thread taken for ended
        # (CPython 3.11), and the process would exit before that node's job said it ended.
        try:
            for done in ended:
                while not done.wait(0.2):
                    pass
        except KeyboardInterrupt:
            self.interrupt()
            for done in ended:
                done.wait(STOP_GRACE_SECONDS + 5)
        return self._exit_code()

    def interrupt(self) -> None:
        """Ctrl-C: stop the job on every node (each thread sends its stop and pulls the final state)."""
        if not self.interrupted:
            self.interrupted = True
            self.say("lium-tf run: interrupted: stopping the job on every node")
        self.stopping.set()

    def stop_all(self) -> None:
        """Send a stop to every node that started, now (the run was interrupted before following)."""
        for running in self._running:
            if running.job is not None and not running.stop_sent:
                running.stop_sent = True
                try:
                    running.job.stop()
                except (PodUnreachable, RunnerAPIError, OSError) as exc:
                    self.say(f"lium-tf run: {running.node.label}: could not stop its job ({exc})")

    def _follow_one(self, running: _Running, done: threading.Event) -> None:
        try:
            self._follow(running)
        finally:
            done.set()

    def _follow(self, running: _Running) -> None:
        prefix = f"[{running.node.label}] "
        lines = LineWriter(prefix, self.redactor, self.write, self._lock)
        stop_deadline: list[float] = []

        def sleep(seconds: float) -> None:
            if self.stopping.is_set() and not running.stop_sent:
                running.stop_sent = True
                stop_deadline.append(time.monotonic() + STOP_GRACE_SECONDS)
                self._job(running).stop()
            if stop_deadline and time.monotonic() > stop_deadline[0]:
                raise RunnerAPIError(f"the job did not end within {STOP_GRACE_SECONDS:g} s of its stop")
            time.sleep(seconds)

        try:
            running.outcome = self._job(running).follow(sleep, lines.feed, keep_output=False)
        except (RunnerAPIError, PodUnreachable, OSError) as exc:
            running.error = str(exc)
        finally:
            lines.close()
        failed = running.error is not None or not running.outcome or not running.outcome.succeeded
        if failed and running.node.place is not None and not self.stopping.is_set():
            self.say(f"lium-tf run: {running.node.label} failed: stopping the other nodes")
            self.stopping.set()

    def _exit_code(self) -> int:
        code = 0
        for running in self._running:
            outcome, label = running.outcome, running.node.label
            if running.error is not None:
                self.say(f"lium-tf run: {label}: {self.redactor.redact(running.error)}")
                code = code or 1
            elif outcome is None or not outcome.succeeded:
                described = self.redactor.redact(outcome.describe() if outcome else "no final state")
                stopped = running.stop_sent and outcome is not None and outcome.state == "terminated"
                self.say(f"lium-tf run: {label} {'was stopped' if stopped else 'ended'}: {described}")
                if not stopped:
                    status = outcome.exit_status if outcome else None
                    code = code or (status if status is not None and 0 < status < 256 else 1)
        if self.interrupted:
            return INTERRUPTED
        if code == 0 and any(r.stop_sent for r in self._running):
            return 1  # stopped because another node failed, and that one's code was not known
        return code


class _Nowhere(io.StringIO):
    """Where the runner helpers' log lines go: the command says what matters itself."""

    def write(self, text: str) -> int:
        return len(text)


_NOWHERE = _Nowhere()


@contextmanager
def _interrupts_as_keyboard() -> Iterator[None]:
    """SIGTERM (a CI job cancelled) ends the run as Ctrl-C does: the job is stopped on every node."""

    def raise_interrupt(_signal: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_on_stack(
    state: StackState,
    client: LiumClient,
    request: RunRequest,
    private_key: str,
    targets: Sequence[str] = (),
    write: Callable[[str], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> int:
    """Run ``request`` on the stack's runners; the exit code (0, the failing node's, or 130)."""
    out = write or _stdout
    err = say or _stderr
    try:
        nodes = nodes_of(state, targets, client)
    except LiumError as exc:
        raise RunError(f"reading the runners' pods from Lium failed: {exc}") from None
    run = Run(nodes, request, private_key, state.secret_values(), out, err)
    names = ", ".join(n.label for n in nodes)
    err(f"lium-tf run: {request.run_name} on {len(nodes)} node(s): {names}")
    with _interrupts_as_keyboard():
        try:
            try:
                run.start()
            except KeyboardInterrupt:
                run.interrupt()
                run.stop_all()
                return INTERRUPTED
            except (RunError, RunnerAPIError, PodUnreachable, OSError) as exc:
                run.stop_all()
                raise RunError(str(exc)) from None
            return run.follow()
        finally:
            run.close()


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
