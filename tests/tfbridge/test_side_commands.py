"""A provider program's side commands, and starts that only a warm zygote may serve.

A side command runs with its starter's streams and exit code, warm in a fork of the zygote or cold
without one, and goes when its launcher is killed. A warm-only start with no zygote to serve it must
start nothing at all: no server, no command, no zygote.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import children, private_zygotes
from tests.tfbridge.plugin_host import ClientIdentity, plugin_env
from tests.tfbridge.test_zygote import DEADLINE, LAUNCHER, eventually, warm_up, zygote_pid
from tfbridge.serving import launch
from tfbridge.serving.commands import UNKNOWN_COMMAND_EXIT_CODE
from tfbridge.serving.constants import COMMAND_FLAG, WARM_ONLY_ENV
from tfbridge.serving.zygote import process_running as running


@pytest.fixture
def zygotes(socket_root: Path) -> Iterator[Path]:
    with private_zygotes(socket_root / "z") as directory:
        yield directory


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*LAUNCHER, *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def first_line(process: subprocess.Popen[str]) -> tuple[str, int]:
    """The echo command's first line: its arguments, and the pid it ran as."""
    assert process.stdout is not None
    *words, pid = process.stdout.readline().split()
    return " ".join(words), int(pid)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_side_command_gets_the_starters_streams_and_exit_code(
    warm: bool, zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    env = plugin_env(identity, socket_root, **({} if warm else {"TFBRIDGE_ZYGOTE": "0"}))
    zygote = warm_up(env, zygotes) if warm else 0
    command = start(env, COMMAND_FLAG, "echo", "7", "hello")
    try:
        arguments, pid = first_line(command)
        assert arguments == "7 hello"
        if warm:
            assert pid in children(zygote), "a warm command runs in a fork of the zygote"
        else:
            assert pid in children(command.pid), "without a zygote the launcher runs it cold"
        output, _ = command.communicate("first line\nsecond\n", timeout=DEADLINE)
        assert output.splitlines() == ["FIRST LINE", "SECOND"]
        assert command.returncode == 7
    finally:
        command.kill()
        command.wait()


def test_an_unknown_side_command_fails_and_says_so(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    env = plugin_env(identity, socket_root)
    warm_up(env, zygotes)
    command = start(env, COMMAND_FLAG, "no-such-command")
    _, errors = command.communicate("", timeout=DEADLINE)
    assert command.returncode == UNKNOWN_COMMAND_EXIT_CODE
    assert "no command 'no-such-command'" in errors


def test_a_side_command_stops_when_its_launcher_is_killed(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    env = plugin_env(identity, socket_root)
    warm_up(env, zygotes)
    command = start(env, COMMAND_FLAG, "echo")
    _, pid = first_line(command)
    assert running(pid)
    command.send_signal(signal.SIGKILL)
    command.wait(timeout=DEADLINE)
    eventually(lambda: not running(pid), "the command went on after its launcher was killed")


@pytest.mark.parametrize("args", [(), (COMMAND_FLAG, "echo")], ids=["server", "command"])
def test_a_warm_only_start_without_a_zygote_starts_nothing(
    args: tuple[str, ...], zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    env = plugin_env(identity, socket_root, **{WARM_ONLY_ENV: "1"})
    process = start(env, *args)
    output, _ = process.communicate("", timeout=DEADLINE)
    assert process.returncode == launch.NOT_SERVED_EXIT_CODE
    assert output == "", "no handshake and no command output"
    assert zygote_pid(zygotes) == 0 and not list(zygotes.glob("*.lock")), "no zygote may be started"


def test_a_warm_only_start_is_served_by_a_warm_zygote(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    env = plugin_env(identity, socket_root)
    zygote = warm_up(env, zygotes)
    command = start({**env, WARM_ONLY_ENV: "1"}, COMMAND_FLAG, "echo", "warm")
    try:
        arguments, pid = first_line(command)
        assert arguments == "warm" and pid in children(zygote)
        command.communicate("", timeout=DEADLINE)
        assert command.returncode == 0
    finally:
        command.kill()
        command.wait()
