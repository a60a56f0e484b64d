"""Starting the installed provider outside Terraform: finding it, reading its lines, attaching to it.

The provider is found only where ``terraform init`` puts exactly one; its lines are read whole, with a
deadline and a bound; and Terraform is pointed at it only for a plaintext go-plugin handshake of
protocol 6 on a unix socket, the one kind of provider ``TF_REATTACH_PROVIDERS`` can attach to.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import python_program
from tfbridge.serving.reattach import REATTACH_ENV, ReattachableProvider
from tfbridge.serving.warm import InstalledProvider, LineReader, installed_provider

SOURCE = "lium-stacks/lium"


def install(data_dir: Path, version: str, hostname: str = "registry.terraform.io") -> Path:
    """A provider executable where ``terraform init`` puts it."""
    directory = data_dir / "providers" / hostname / "lium-stacks" / "lium" / version / "linux_amd64"
    directory.mkdir(parents=True)
    executable = directory / f"terraform-provider-lium_v{version}"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
    return executable


def test_the_one_installed_provider_is_found_with_its_address_and_version(tmp_path: Path) -> None:
    assert installed_provider(tmp_path, SOURCE, {}) is None
    executable = install(tmp_path / ".terraform", "1.2.3", hostname="registry.opentofu.org")
    found = installed_provider(tmp_path, SOURCE, {})
    assert found == InstalledProvider("registry.opentofu.org/lium-stacks/lium", "1.2.3", executable)


def test_the_executable_is_found_from_a_relative_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = install(tmp_path / "stack" / ".terraform", "1.0.0")
    monkeypatch.chdir(tmp_path)
    found = installed_provider(Path("stack"), SOURCE, {})
    assert found is not None and found.executable.is_absolute() and found.executable == executable


def test_the_data_directory_terraform_is_told_is_searched(tmp_path: Path) -> None:
    install(tmp_path / ".terraform", "1.0.0")
    elsewhere = install(tmp_path / "data", "2.0.0")
    found = installed_provider(tmp_path, SOURCE, {"TF_DATA_DIR": "data"})
    assert found is not None and found.executable == elsewhere and found.version == "2.0.0"


def test_a_file_that_cannot_be_executed_is_no_provider(tmp_path: Path) -> None:
    install(tmp_path / ".terraform", "1.0.0").chmod(0o644)
    assert installed_provider(tmp_path, SOURCE, {}) is None


def writer(script: str) -> subprocess.Popen[bytes]:
    """A process that runs ``script`` (Python, with ``out`` its binary stdout and ``time``)."""
    program = f"import sys, time\nout = sys.stdout.buffer\n{script}"
    return subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    ("script", "lines"),
    [
        ("out.write(b'one\\ntwo\\n'); out.flush()", [b"one", b"two", b""]),
        ("out.write(b'par'); out.flush(); time.sleep(0.05); out.write(b'ts\\n')", [b"parts", b""]),
        ("out.write(b'no newline')", [None]),
        ("", [b""]),
    ],
    ids=["two at once", "in pieces", "cut short", "nothing"],
)
def test_lines_are_read_whole_and_in_order(script: str, lines: list[bytes | None]) -> None:
    process = writer(script)
    reader = LineReader(process)
    assert [reader.line(timeout=30, limit=1024) for _ in lines] == lines
    process.wait()


def test_a_line_too_long_or_too_late_is_none(tmp_path: Path) -> None:
    slow = writer("time.sleep(600)")
    assert LineReader(slow).line(timeout=0.05, limit=1024) is None
    slow.kill()
    slow.wait()
    long = writer("out.write(b'x' * 5000 + b'\\n')")
    assert LineReader(long).line(timeout=30, limit=100) is None
    long.wait()


def provider_printing(tmp_path: Path, line: str) -> InstalledProvider:
    executable = python_program(
        tmp_path / "terraform-provider-lium_v1.0.0",
        f"import time\nprint({line!r}, flush=True)\ntime.sleep(600)\n",
    )
    return InstalledProvider("registry.terraform.io/lium-stacks/lium", "1.0.0", executable)


def test_terraform_is_pointed_at_a_plaintext_provider(tmp_path: Path) -> None:
    provider = ReattachableProvider(
        provider_printing(tmp_path, "1|6|unix|/tmp/plugin1/plugin.sock|grpc|"), tmp_path, {}
    )
    try:
        environment = provider.reattach_environment(timeout=30)
        assert environment is not None
        config = json.loads(environment[REATTACH_ENV])["registry.terraform.io/lium-stacks/lium"]
        assert config["Addr"] == {"Network": "unix", "String": "/tmp/plugin1/plugin.sock"}
        assert config["ProtocolVersion"] == 6 and config["Protocol"] == "grpc" and config["Test"] is True
        assert isinstance(config["Pid"], int)
    finally:
        provider.stop()


@pytest.mark.parametrize(
    "line",
    [
        "1|6|unix|/tmp/plugin1/plugin.sock|grpc|MIIBcertificate",
        "1|5|unix|/tmp/plugin1/plugin.sock|grpc|",
        "1|6|tcp|127.0.0.1:1234|grpc|",
        "1|6|unix|/tmp/plugin1/plugin.sock|netrpc|",
        "not a handshake",
    ],
    ids=["TLS", "protocol 5", "tcp", "net/rpc", "garbage"],
)
def test_no_provider_terraform_cannot_attach_to_is_offered(tmp_path: Path, line: str) -> None:
    provider = ReattachableProvider(provider_printing(tmp_path, line), tmp_path, {})
    try:
        assert provider.reattach_environment(timeout=30) is None
        assert not provider.declined, "it answered: it did not decline"
    finally:
        provider.stop()


def test_an_empty_data_directory_setting_means_the_default(tmp_path: Path) -> None:
    executable = install(tmp_path / ".terraform", "1.0.0")
    found = installed_provider(tmp_path, SOURCE, {"TF_DATA_DIR": ""})
    assert found is not None and found.executable == executable


def test_after_an_upgrade_the_version_terraform_selects_is_the_one(
    tmp_path: Path, terraform_env: dict[str, str]
) -> None:
    install(tmp_path / ".terraform", "0.1.0")
    upgraded = install(tmp_path / ".terraform", "0.2.0")
    (tmp_path / ".terraform.lock.hcl").write_text(
        '# This file is maintained automatically by "terraform init".\n\n'
        'provider "registry.terraform.io/lium-stacks/lium" {\n'
        '  # was version = "0.1.0" before the upgrade\n'
        '  version     = "0.2.0"\n  constraints = ">= 0.1.0"\n  hashes = [\n    "h1:abc//def=",\n  ]\n}\n'
    )
    found = installed_provider(tmp_path, SOURCE, {**os.environ, **terraform_env})
    assert found is not None and found.executable == upgraded and found.version == "0.2.0"
    (tmp_path / ".terraform.lock.hcl").unlink()  # nothing selects either: neither is guessed
    assert installed_provider(tmp_path, SOURCE, {**os.environ, **terraform_env}) is None
