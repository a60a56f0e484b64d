"""An account on an emulator driven through Lium's own SDK and CLI (``lium-io``, unchanged)."""

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from lium.sdk import Config, Lium, PodInfo

from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import new_account, wait_gone
from tests.support.lium import ssh_keypair

LIUM_CLI = str(Path(sys.executable).with_name("lium"))


class SdkUser:
    """An account on the emulator, its SSH key files in a scratch home, and SDK/CLI access to it."""

    def __init__(self, emulator: RunningEmulator, home: Path) -> None:
        self.emulator = emulator
        self.api_key, self.http = new_account(emulator)
        self.home = home
        self.key_path = ssh_keypair(home / ".ssh")
        self.public_key = Path(f"{self.key_path}.pub").read_text().strip()
        self.lium = Lium(
            config=Config(api_key=self.api_key, base_url=emulator.api_url, ssh_key_path=self.key_path)
        )

    def cli(self, *args: str, api_key: str | None = None, timeout: float = 120) -> str:
        """Run ``lium ARGS``; returns stdout, fails the test on a non-zero exit."""
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "LIUM_BASE_URL": self.emulator.api_url,
            "LIUM_SSH_KEY_PATH": str(self.key_path),
            "LIUM_TELEMETRY": "0",
            "LIUM_SENTRY_DSN": "",
            "LIUM_SELF_UPDATE_DISABLE": "1",
            "NO_COLOR": "1",
            "COLUMNS": "200",
            # Nothing but the emulator on loopback: any other destination meets a closed port.
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        key = self.api_key if api_key is None else api_key
        if key:
            env["LIUM_API_KEY"] = key
        done = subprocess.run(
            [LIUM_CLI, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (
            f"lium {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
        return done.stdout

    def template(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/templates", json=body)
        assert response.status_code == 200, response.text
        template: dict[str, Any] = response.json()
        return template

    def up(self, node_id: str, template_id: str | None = None, **rent: Any) -> PodInfo:
        """Rent one GPU of ``node_id`` through the SDK and wait until SSH works; ``rent`` is more of the
        SDK's ``up`` arguments (``enable_backups``, ``restore_backup_id``...)."""
        pod = self.lium.up(
            executor_id=node_id,
            name="sdk-" + uuid.uuid4().hex[:6],
            template_id=template_id,
            ssh_keys=[self.public_key],
            gpu_count=1,
            wait=True,
            timeout=60,
            **rent,
        )
        assert isinstance(pod, PodInfo)
        return pod

    def close(self) -> None:
        for pod in self.lium.ps():
            self.http.delete(f"/pods/{pod.id}")
        for row in self.http.get("/pods").json():
            wait_gone(self.http, row["id"])
        self.lium.close()
        self.http.close()
