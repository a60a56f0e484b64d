"""A fleet of N pods, rented and removed through Terraform and through Lium's own SDK, side by side.

For each N, one emulator (a generated catalog with room for the largest N) serves two accounts:

* **Terraform**: ``terraform apply`` of N ``lium_pod`` (and their template) at ``-parallelism=P``, a
  refreshing ``terraform plan``, then ``terraform destroy``;
* **the SDK script**: what a team would write with Lium's SDK (``lium-io``) for the same fleet, in P
  threads: each thread rents its next pod with ``Lium.up(..., wait=True)`` (the SDK's own wait for
  RUNNING and SSH); to remove them, each thread ``Lium.rm``'s its next pod and waits until the account's
  pod list no longer shows it, the list read by one shared poller once a second (within Lium's
  60 listings a minute, as the provider's own watcher is).

Printed per N: wall times and the Terraform / SDK ratio of apply and destroy; the API requests per pod of
Terraform's create, refresh and delete (the emulator's count for the account); with the SDK's fleet
running, the emulator's memory (RSS) and open files per pod, and the host's available memory per pod;
and, from ``--sample`` of the SDK's pods, whether every other pod's advertised SSH address answers with
an SSH banner (the pods' view of each other, docs/emulator.md "Pod networking"). Nothing may be left:
each account's live pods and templates are checked after each destroy.

Run from the repository root:
``.venv/bin/python -m bench.fleet [--counts 200 500] [--parallelism 50] [--sample 3]``
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import queue
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import paramiko
from lium.sdk import Config, Lium, LiumRateLimitError, PodInfo
from lium.sdk.client import ssh_target

from bench.pods import STACK
from bench.workspace import terraform, terraform_workspace, timed_terraform
from lium_emulator.catalogs.nodes import generate_fleet
from lium_emulator.launcher import RunningEmulator, launch
from tests.support.lium import PROVIDER_BLOCK, Account, new_account

GPUS_PER_NODE = 8
# The SDK's pods run what the stack's do: the template resource's image, command and default ports.
SDK_TEMPLATE = {
    "name": "fleet-sdk",
    "docker_image": "python:3.11-slim",
    "docker_image_tag": "",
    "entrypoint": "/bin/sh",
    "startup_commands": "-c 'exec sleep infinity'",
    "internal_ports": [22, 10022],
    "volumes": ["/root"],
}
# Run inside a pod: how many of the addresses given (host:port ...) answer with an SSH banner.
BANNERS = """
import socket, sys
answered = 0
for address in sys.argv[1:]:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.settimeout(10)
            answered += s.recv(64).startswith(b"SSH-")
    except OSError:
        pass
print(answered)
"""


def requests(account: Account) -> Counter[str]:
    return Counter(account.report()["api_requests"])


def used_since(account: Account, before: Counter[str]) -> int:
    """Requests the account made since ``before``, less the report's own ``GET /users/me``."""
    used = requests(account) - before
    used["GET /users/me"] -= 1
    return used.total()


def emulator_usage(emulator: RunningEmulator) -> tuple[int, int]:
    """The emulator process's resident memory (bytes) and open files."""
    pid = emulator.process.pid
    rss = next(
        line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:")
    )
    return int(rss.split()[1]) * 1024, len(os.listdir(f"/proc/{pid}/fd"))


def available_memory() -> int:
    line = next(
        line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemAvailable:")
    )
    return int(line.split()[1]) * 1024


class GonePoller:
    """One thread listing the account's pods once a second; ``wait_gone`` returns once a pod is not listed."""

    def __init__(self, lium: Lium) -> None:
        self._lium = lium
        self._listed: set[str] | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listed = {pod.id for pod in self._lium.ps()}
            except LiumRateLimitError as e:
                self._stop.wait(e.retry_after or 1.0)
                continue
            with self._changed:
                self._listed = listed
                self._changed.notify_all()
            self._stop.wait(1.0)

    def wait_gone(self, pod_id: str) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._listed is not None and pod_id not in self._listed)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def in_threads(count: int, work: list[Any], action: Callable[[Any], Any]) -> tuple[float, list[Any]]:
    """``action`` over ``work`` by ``count`` threads, each taking the next item when done; wall seconds."""
    pending: queue.Queue[tuple[int, Any]] = queue.Queue()
    for item in enumerate(work):
        pending.put(item)
    results: list[Any] = [None] * len(work)

    def worker() -> None:
        while True:
            try:
                index, item = pending.get_nowait()
            except queue.Empty:
                return
            results[index] = action(item)

    started = time.monotonic()
    with ThreadPoolExecutor(count) as pool:
        for future in [pool.submit(worker) for _ in range(count)]:
            future.result()
    return time.monotonic() - started, results


@contextmanager
def sdk_client(emulator: RunningEmulator, account: Account) -> Iterator[Lium]:
    lium = Lium(
        config=Config(api_key=account.api_key, base_url=emulator.api_url, ssh_key_path=str(account.key_file))
    )
    try:
        yield lium
    finally:
        lium.close()


def answering(account: Account, pod: PodInfo, addresses: list[str]) -> int:
    """From inside ``pod``, how many of ``addresses`` answer with an SSH banner."""
    key = paramiko.Ed25519Key.from_private_key(io.StringIO(account.key_file.read_text()))
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    _, host, port = ssh_target(pod.ssh_cmd)
    client.connect(host, port=port, username="root", pkey=key, look_for_keys=False, allow_agent=False)
    try:
        command = f"python3 -c {shlex.quote(BANNERS)} {' '.join(addresses)}"
        _, stdout, _ = client.exec_command(command, timeout=600)
        return int(stdout.read().decode().strip())
    finally:
        client.close()


def ssh_address(pod: PodInfo) -> str:
    _, host, port = ssh_target(pod.ssh_cmd)
    return f"{host}:{port}"


def sdk_fleet(
    emulator: RunningEmulator, account: Account, nodes: list[str], count: int, threads: int, sample: int
) -> dict[str, Any]:
    """Rent and remove ``count`` pods with the SDK; the times, the emulator's cost and the sample's view."""
    public_key = Path(f"{account.key_file}.pub").read_text().strip()
    with account.api() as api:
        response = api.post("/templates", json=SDK_TEMPLATE)
        response.raise_for_status()
        template_id = response.json()["id"]
    placements = [nodes[index // GPUS_PER_NODE] for index in range(count)]
    emulator_before, memory_before = emulator_usage(emulator), available_memory()
    with sdk_client(emulator, account) as lium:

        def up(node_id: str) -> PodInfo:
            pod = lium.up(
                executor_id=node_id,
                name="sdk-fleet",
                template_id=template_id,
                ssh_keys=[public_key],
                gpu_count=1,
                wait=True,
                timeout=900,
                enable_backups=False,
            )
            assert isinstance(pod, PodInfo) and pod.ssh_cmd, pod
            return pod

        apply_seconds, pods = in_threads(threads, placements, up)
        (rss, files), memory = emulator_usage(emulator), available_memory()
        addresses = [ssh_address(pod) for pod in pods]
        sampled = [pods[round(i * (count - 1) / max(1, sample - 1))] for i in range(min(sample, count))]
        views = [answering(account, pod, [a for a in addresses if a != ssh_address(pod)]) for pod in sampled]
        poller = GonePoller(lium)

        def rm(pod: PodInfo) -> None:
            lium.rm(pod)
            poller.wait_gone(pod.id)

        try:
            destroy_seconds, _ = in_threads(threads, pods, rm)
        finally:
            poller.close()
    with account.api() as api:
        api.delete(f"/templates/{template_id}").raise_for_status()
    return {
        "apply": apply_seconds,
        "destroy": destroy_seconds,
        "emulator_rss_per_pod": (rss - emulator_before[0]) / count,
        "emulator_files_per_pod": (files - emulator_before[1]) / count,
        "host_memory_per_pod": (memory_before - memory) / count,
        "views": views,
        "others": count - 1,
    }


def terraform_fleet(
    base: Path, workspace_env: dict[str, str], account: Account, count: int, threads: int
) -> dict[str, Any]:
    """Apply, refresh and destroy ``count`` pods with Terraform; times and requests per pod."""
    env = {**workspace_env, **account.env}
    workdir = base / f"stack-{count}"
    workdir.mkdir()
    (workdir / "main.tf").write_text(PROVIDER_BLOCK + STACK % count)
    terraform(workdir, env, "init", "-input=false")
    parallel = f"-parallelism={threads}"
    phases: dict[str, Any] = {}
    for phase, args in (
        ("apply", ("apply", "-auto-approve", "-input=false", parallel)),
        ("refresh", ("plan", "-input=false", "-detailed-exitcode", parallel)),
        ("destroy", ("destroy", "-auto-approve", "-input=false", parallel)),
    ):
        before = requests(account)
        try:
            seconds = timed_terraform(workdir, env, *args)
        except Exception:
            if phase != "refresh":
                raise
            seconds = math.nan
        phases[phase] = seconds
        phases[f"{phase}_requests_per_pod"] = used_since(account, before) / count
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[200, 500])
    parser.add_argument("--parallelism", type=int, default=50, help="terraform -parallelism and SDK threads")
    parser.add_argument("--delay", type=float, default=5.0, help="emulator PENDING seconds")
    parser.add_argument("--ssh-delay", type=float, default=0.5)
    parser.add_argument("--deleting", type=float, default=3.0)
    parser.add_argument("--sample", type=int, default=3, help="pods that check every other pod's address")
    args = parser.parse_args()
    timings = ["--pending-seconds", str(args.delay), "--ssh-delay-seconds", str(args.ssh_delay)]
    timings += ["--deleting-seconds", str(args.deleting)]
    print(
        f"emulator delays: pending {args.delay}s, ssh {args.ssh_delay}s, deleting {args.deleting}s; "
        f"terraform -parallelism={args.parallelism}, {args.parallelism} SDK threads"
    )
    for count in args.counts:
        with terraform_workspace("bench-fleet-") as (base, workspace_env):
            catalog = base / "nodes.json"
            node_count = math.ceil(count / GPUS_PER_NODE) + 2
            nodes = generate_fleet(node_count, GPUS_PER_NODE, "RTX 3090")
            catalog.write_text(json.dumps({"nodes": [node.model_dump(mode="json") for node in nodes]}))
            with launch([*timings, "--nodes", str(catalog)]) as emulator:
                sdk_account = new_account(emulator, base / "sdk", balance=100000.0)
                tf_account = new_account(emulator, base / "tf", balance=100000.0)
                with sdk_client(emulator, sdk_account) as lium:
                    node_ids = [node.id for node in lium.ls()]
                sdk = sdk_fleet(emulator, sdk_account, node_ids, count, args.parallelism, args.sample)
                tf = terraform_fleet(base, workspace_env, tf_account, count, args.parallelism)
                for account in (sdk_account, tf_account):
                    left = account.live()
                    assert not left["pods"] and not left["templates"], f"left behind: {left}"
        print(
            f"N={count}: apply terraform {tf['apply']:.1f} s, SDK {sdk['apply']:.1f} s "
            f"({tf['apply'] / sdk['apply']:.2f}x); destroy terraform {tf['destroy']:.1f} s, "
            f"SDK {sdk['destroy']:.1f} s ({tf['destroy'] / sdk['destroy']:.2f}x); nothing left"
        )
        print(
            f"  terraform requests per pod: create {tf['apply_requests_per_pod']:.2f}, "
            f"refresh {tf['refresh_requests_per_pod']:.2f} ({tf['refresh']:.1f} s), "
            f"delete {tf['destroy_requests_per_pod']:.2f}"
        )
        print(
            f"  per running pod: emulator {sdk['emulator_rss_per_pod'] / 2**20:.2f} MiB RSS and "
            f"{sdk['emulator_files_per_pod']:.1f} open files; host memory {sdk['host_memory_per_pod'] / 2**20:.1f} MiB"
        )
        print(
            f"  advertised SSH addresses answering, from {len(sdk['views'])} sampled pods: "
            + ", ".join(f"{seen}/{sdk['others']}" for seen in sdk["views"])
        )


if __name__ == "__main__":
    main()
