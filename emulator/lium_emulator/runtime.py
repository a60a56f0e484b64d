"""Assembles one emulator: state, fault engine, sandboxes and pod lifecycle, from an ``EmulatorConfig``."""

import ipaddress
import json
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lium_emulator.catalogs.images import image_catalog
from lium_emulator.catalogs.nodes import Catalog
from lium_emulator.catalogs.templates import public_templates
from lium_emulator.config import EmulatorConfig
from lium_emulator.faults import FaultEngine, FaultPlan
from lium_emulator.lifecycle import PodLifecycle
from lium_emulator.records.idempotency import IdempotencyLedger
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.store import Store
from lium_emulator.sandbox.manager import SandboxManager
from lium_emulator.sandbox.watchdog import Watchdog, hold_work_dir, reap_dead_instances
from lium_emulator.services.backups import Backups
from lium_emulator.services.notebooks import Notebooks
from lium_emulator.views import POD_HOST

STATE_FILE = "state.sqlite3"


@dataclass
class Runtime:
    """Everything a request handler needs, reachable as ``app.state.runtime``."""

    config: EmulatorConfig
    port: int
    state: EmulatorState
    faults: FaultEngine
    ledger: IdempotencyLedger
    lifecycle: PodLifecycle
    sandboxes: SandboxManager
    notebooks: Notebooks
    backups: Backups
    work_dir: Path
    started_at: datetime
    stale_pods: list[str]
    """Pods of dead emulators this start reaped: of this work directory's, and of any other registered."""
    watchdog: Watchdog
    work_dir_lock: int
    requests: "RequestCounter" = field(default_factory=lambda: RequestCounter())

    @property
    def base_url(self) -> str:
        """The emulator's root URL as clients on this host reach it."""
        host = "127.0.0.1" if self.config.host in ("0.0.0.0", "", "::") else self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """After the pods are torn down: release the store and the watchdog; remove the scratch
        directory when there is no state directory; let go of the work directory."""
        self.state.store.close()
        self.watchdog.release()
        if self.config.state_dir is None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        os.close(self.work_dir_lock)


def dialable(host: str) -> str:
    """The address a process on this host dials to reach a server listening on ``host``: the loopback
    address of its family for an unspecified one (``0.0.0.0``, ``::``), else ``host`` itself."""
    address = ipaddress.ip_address(host)
    if address.is_unspecified:
        return "::1" if address.version == 6 else "127.0.0.1"
    return str(address)


def load_fault_plan(path: Path | None) -> FaultPlan:
    """The plan in ``path`` (JSON), or an empty plan."""
    if path is None:
        return FaultPlan()
    return FaultPlan.model_validate(json.loads(path.read_text()))


def build_runtime(config: EmulatorConfig, port: int, host: str = "127.0.0.1") -> Runtime:
    """Load or create the state, clean up sandboxes a previous run left behind, wire everything up.

    ``host`` and ``port`` are the address the HTTP server listens on; pods reach the emulator at
    127.0.0.1:``port``, relayed to that address (loopback for an unspecified one).
    """
    catalog = Catalog.load(config.nodes_file)
    plan = load_fault_plan(config.faults_file)
    reaped = reap_dead_instances()  # what emulators that died on this host left, before anything of ours
    if config.state_dir is not None:
        work_dir = config.state_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        store = Store(work_dir / STATE_FILE)
    else:
        work_dir = Path(tempfile.mkdtemp(prefix="lium-emulator-"))
        store = Store(None)
    state = EmulatorState(store, catalog)
    for api_key in config.api_keys:
        state.ensure_account(api_key, config.balance_usd)
    for template in public_templates(image_catalog()):
        state.templates[template.id] = template
    work_dir_lock = hold_work_dir(work_dir)
    sandbox_root = work_dir / "sandboxes"
    stale_pods = reaped + SandboxManager.cleanup_stale(sandbox_root)
    watchdog = Watchdog.start(work_dir, temporary=config.state_dir is None)
    sandboxes = SandboxManager(
        sandbox_root,
        emulator_port=port,
        emulator_host=dialable(host),
        pod_open_files_limit=config.pod_open_files_limit,
    )
    faults = FaultEngine(plan)
    lifecycle = PodLifecycle(state, config, faults, sandboxes, work_dir)
    backups = Backups(
        state,
        sandboxes,
        work_dir / "backups",
        config.backup_hour_seconds,
        config.backup_max_mib * 1024 * 1024,
    )
    backups.recover()
    lifecycle.on_running.append(backups.restore_at_rent)
    lifecycle.on_deleted.append(backups.pod_gone)
    return Runtime(
        config=config,
        port=port,
        state=state,
        faults=faults,
        ledger=IdempotencyLedger(state),
        lifecycle=lifecycle,
        sandboxes=sandboxes,
        notebooks=Notebooks(state, sandboxes, POD_HOST),
        backups=backups,
        work_dir=work_dir,
        started_at=datetime.now(UTC),
        stale_pods=stale_pods,
        watchdog=watchdog,
        work_dir_lock=work_dir_lock,
    )


_ID_SEGMENT = re.compile(
    r"/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?=/|$)"
)


class RequestCounter:
    """API requests per client (``user:<id>`` or ``ip:<addr>``) and route, for the inspection report.

    Benchmarks and tests read it to check that a client does not hammer the API (Lium allows about 60
    listings a minute per account); ids in paths are folded into ``{id}`` so routes aggregate.
    """

    def __init__(self) -> None:
        self._counts: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def count(self, client: str, method: str, path: str) -> None:
        route = f"{method} {_ID_SEGMENT.sub('/{id}', path)}"
        with self._lock:
            self._counts.setdefault(client, Counter())[route] += 1

    def of(self, client: str) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.get(client, Counter()).items()))
