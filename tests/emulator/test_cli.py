"""The ``lium-emulator`` console script: its announcement, runner download, clean exits on
SIGTERM and SIGINT, and the ``resources`` command."""

import json
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lium_emulator.catalogs.nodes import Catalog
from lium_emulator.launcher import RunningEmulator, launch
from tests.emulator.testkit import DEFAULT_KEY, api_client, create_template
from tests.support import http

CONSOLE_SCRIPT = Path(sys.executable).with_name("lium-emulator")


def _start(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Run the console script; its first two lines (a watchdog kills a silent process after 20 s)."""
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "serve", "--port", "0", *args], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    watchdog = threading.Timer(20, process.kill)
    watchdog.start()
    try:
        lines = [process.stdout.readline().strip(), process.stdout.readline().strip()]
    finally:
        watchdog.cancel()
    return process, lines


@pytest.mark.sandbox  # starts an emulator of its own
def test_serve_announces_itself_serves_the_runner_and_exits_0_on_signals() -> None:
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        process, lines = _start("--api-key", "k-one", "--api-key", "k-two")
        try:
            listening = re.fullmatch(r"listening on (http://127\.0\.0\.1:(\d+)/api)", lines[0])
            assert listening is not None, lines
            runner = re.fullmatch(r"runner download URL: (\S+)", lines[1])
            assert runner is not None and "{version}" in runner.group(1)
            for version in ("0.19.30", "0.22.5"):
                download = http.get(runner.group(1).replace("{version}", version))
                assert download.status_code == 200 and f'"{version}"'.encode() in download.content
            assert http.get(runner.group(1).replace("{version}", "..bad")).status_code == 404
            api = listening.group(1)
            ids = {
                http.get(f"{api}/users/me", headers={"X-API-KEY": k}).json()["id"] for k in ("k-one", "k-two")
            }
            assert len(ids) == 2, "each key is its own account"
            assert http.get(f"{api}/users/me", headers={"X-API-KEY": DEFAULT_KEY}).status_code == 401
        finally:
            process.send_signal(stop_signal)
            assert process.wait(30) == 0


def test_resources_command_prints_the_inspection_json(emulator: RunningEmulator) -> None:
    with api_client(emulator, DEFAULT_KEY) as client:
        template = create_template(client)
    printed = subprocess.run(
        [str(CONSOLE_SCRIPT), "resources", "--url", emulator.api_url, "--admin-key", emulator.admin_key],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(printed.stdout)
    templates = [t["id"] for account in report["accounts"] for t in account["templates"]]
    assert template["id"] in templates
    assert DEFAULT_KEY not in printed.stdout, "API keys never appear in the report"
    wrong = subprocess.run(
        [str(CONSOLE_SCRIPT), "resources", "--url", emulator.root_url, "--admin-key", "wrong"],
        capture_output=True,
        text=True,
    )
    assert wrong.returncode == 1 and "HTTP 401" in wrong.stderr
    assert "X-Emulator-Admin" in wrong.stderr and "admin key:" in wrong.stderr, wrong.stderr
    assert "X-API-KEY" not in wrong.stderr, "the admin routes' hint names the API key header"


def test_serve_refuses_a_bad_fault_plan_or_a_taken_port(tmp_path: Path, emulator: RunningEmulator) -> None:
    plan = tmp_path / "faults.json"
    plan.write_text(json.dumps({"rules": [{"path": "/pods", "kind": "explode"}]}))
    bad_plan = subprocess.run(
        [str(CONSOLE_SCRIPT), "serve", "--port", "0", "--faults", str(plan)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad_plan.returncode == 2 and "cannot start" in bad_plan.stderr and "kind" in bad_plan.stderr
    taken_port = emulator.root_url.rsplit(":", 1)[1]
    taken = subprocess.run(
        [str(CONSOLE_SCRIPT), "serve", "--port", taken_port], capture_output=True, text=True, timeout=30
    )
    assert taken.returncode == 2 and "cannot start" in taken.stderr


@pytest.mark.sandbox  # starts an emulator of its own
def test_serve_takes_its_node_catalog_from_a_file(tmp_path: Path) -> None:
    node = next(n for n in Catalog.load(None).nodes.values() if n.fabric_id is None).model_copy(
        update={"id": "11111111-2222-4333-8444-555555555555"}
    )
    (tmp_path / "nodes.json").write_text(json.dumps([node.model_dump()]))
    with launch(["--nodes", str(tmp_path / "nodes.json")]) as emulator:
        feed = http.get(f"{emulator.api_url}/public/v1/nodes").json()
        assert [n["id"] for n in feed["nodes"]] == [node.id] and feed["count"] == 1
        assert emulator.stop() == 0


def test_catalog_generates_a_fleet_in_price_order(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lium_emulator.cli", "catalog", "--count", "4", "--gpus-per-node", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    path = tmp_path / "nodes.json"
    path.write_text(result.stdout)
    nodes = list(Catalog.load(path).nodes.values())
    assert [n.gpu_count for n in nodes] == [2] * 4 and all(n.min_rentable_gpu_count == 1 for n in nodes)
    prices = [n.price_per_gpu_hour for n in nodes]
    assert prices == sorted(set(prices)), prices
    again = subprocess.run(
        [sys.executable, "-m", "lium_emulator.cli", "catalog", "--count", "4", "--gpus-per-node", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert again.stdout == result.stdout, "the same command makes the same catalog"
