"""A provider whose Terraform died without calling Shutdown (SIGKILL) stops serving instead of lingering."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.tfbridge.plugin_host import ClientIdentity, Handshake, plugin_env, read_handshake_line
from tfbridge.serving.zygote import process_running as running

SERVE_SCRIPT = Path(__file__).with_name("serve_empty_provider.py")


def test_plugin_exits_once_terraform_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "plugin.pid"
    plugin = shlex.join([sys.executable, str(SERVE_SCRIPT)])
    # A stand-in for Terraform: starts the plugin as its child, then waits.
    parent = subprocess.Popen(
        ["sh", "-c", f"{plugin} & echo $! > {shlex.quote(str(pid_file))}; wait"],
        env={**plugin_env(ClientIdentity.generate(), tmp_path), "PYTHONPATH": str(Path(__file__).parents[2])},
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    plugin_pid = 0
    try:
        Handshake.parse(read_handshake_line(parent))
        plugin_pid = int(pid_file.read_text())
        assert running(plugin_pid)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 15
        while running(plugin_pid):
            assert time.monotonic() < deadline, "the orphaned plugin kept running"
            time.sleep(0.05)
        assert not any(tmp_path.glob("plugin*/plugin.sock")), "the socket directory must be removed"
    finally:
        if plugin_pid and running(plugin_pid):
            os.kill(plugin_pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
