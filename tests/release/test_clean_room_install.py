"""``terraform init`` of the released provider where only Terraform exists, by each installation protocol.

Every terraform run here is in a clean room (:mod:`tests.release.clean_room`: no Python, no checkout, no
venv). The provider comes from ``make release``'s artifacts, served as a user's infrastructure would:

- the **provider registry protocol** over HTTPS (a test CA through ``SSL_CERT_FILE``). ``examples/hcl``
  asks for ``lium-stacks/lium``, i.e. ``registry.terraform.io``; the CLI configuration's ``host`` block
  points that hostname's ``providers.v1`` service at the local server, so the example runs unchanged and
  nothing leaves the machine. Service discovery itself (``/.well-known/terraform.json``) is exercised
  with a source naming the server, ``localhost:<port>/lium-stacks/lium`` (Terraform's hostnames may
  carry a port);
- the **network-mirror protocol** over HTTPS;
- a **filesystem mirror** in the packed layout.

Each installs, applies and destroys the HCL example against the emulator. The example's committed lock
file comes with it: the registry install must accept it and leave it as it is (it holds the archive's
two hashes, as Terraform writes them), and the lock after that install is given to the two mirror
installs as is: the same archive, the same hashes, wherever it is installed from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from release import layout
from release.archive import h1_hash, zip_hash
from release.locks import LOCK_FILE
from tests.release.clean_room import NO_PYTHON_EXIT, clean_room
from tests.release.https_server import HttpsHost, serve_https
from tests.support.lium import assert_nothing_left, instances, new_account
from tests.support.procs import private_zygotes
from tests.support.terraform import REPO, Terraform

pytestmark = [pytest.mark.terraform, pytest.mark.release]

EXAMPLE = REPO / "examples" / "hcl"
HASH = re.compile(r'"((?:h1|zh):[^"]+)"')


@dataclass(frozen=True)
class CleanRoom:
    """The environment terraform runs with in the clean room (its PATH starts with the wrapper)."""

    env: dict[str, str]
    base: Path

    def terraform(self, name: str, cli_config: str, **env: str) -> Terraform:
        """A working directory holding a copy of ``examples/hcl`` and this CLI configuration."""
        workdir = self.base / name
        shutil.copytree(EXAMPLE, workdir)
        config = self.base / f"{name}.tfrc"
        config.write_text(cli_config)
        return Terraform(workdir, {**self.env, "TF_CLI_CONFIG_FILE": str(config), **env})


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CleanRoom]:
    base = tmp_path_factory.mktemp("clean-room")
    home = base / "home"
    home.mkdir()
    bin_dir = clean_room(base / "bin")
    with private_zygotes(base / "zygotes"):
        yield CleanRoom(
            {
                "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "HOME": str(home),
                "CHECKPOINT_DISABLE": "1",
                "TF_IN_AUTOMATION": "1",
                "TF_INPUT": "0",
            },
            base,
        )


@pytest.fixture(scope="module")
def archive(release_dist: Path) -> Path:
    os_name, arch = layout.build_platform()
    return release_dist / layout.archive_name(os_name, arch)


@pytest.fixture(scope="module")
def registry_host(release_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsHost]:
    with serve_https(release_dist / "registry", tmp_path_factory.mktemp("registry-pki")) as host:
        yield host


def lock_hashes(tf: Terraform) -> set[str]:
    return set(HASH.findall((tf.workdir / LOCK_FILE).read_text()))


def apply_and_destroy(tf: Terraform, emulator: RunningEmulator, directory: Path) -> None:
    account = new_account(emulator, directory)
    tf.env.update(account.env)
    tf.apply()
    (runner,) = instances(tf, "lium_runner")
    assert runner["healthy"] is True
    assert runner["smoke_test_output"].splitlines()[-2:] == ["no-gpu", "42"]
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)
    assert tf.resources() == []


@pytest.fixture(scope="module")
def registry_lock(room: CleanRoom, registry_host: HttpsHost, archive: Path) -> tuple[Terraform, str]:
    """``examples/hcl`` initialised from the registry protocol: its working directory and lock file."""
    tf = room.terraform(
        "registry",
        f'host "registry.terraform.io" {{\n  services = {{ "providers.v1" = "{registry_host.url}/v1/providers/" }}\n}}\n'
        "provider_installation {\n  direct {}\n}\n",
        SSL_CERT_FILE=str(registry_host.ca_file),
    )
    result = tf.run("init", "-input=false", "-no-color")
    key_id = json.loads(
        (
            registry_host.root / "v1/providers/lium-stacks/lium" / layout.VERSION / "download/linux/amd64"
        ).read_text()
    )["signing_keys"]["gpg_public_keys"][0]["key_id"]
    assert f"Installed lium-stacks/lium v{layout.VERSION}" in result.stdout
    # Verified against signing_keys: Terraform names the key that signed SHA256SUMS.
    assert f"v{layout.VERSION} (self-signed, key ID {key_id})" in result.stdout, result.stdout
    assert any(
        path.endswith(layout.PROVIDER_SHA256SUMS + layout.SIGNATURE_SUFFIX) for path in registry_host.requests
    )
    return tf, (tf.workdir / LOCK_FILE).read_text()


def test_clean_room_has_no_python(room: CleanRoom, tmp_path: Path) -> None:
    """The room itself: terraform runs, and a Python reachable inside would fail every run."""
    result = Terraform(tmp_path, room.env).run("version")
    assert result.stdout.startswith("Terraform v")
    escape = tmp_path / "python3"
    escape.symlink_to(shutil.which("sh") or "/bin/sh")  # a "python3" that runs: the room must refuse
    leaky = {
        **room.env,
        "PATH": f"{room.env['PATH'].split(os.pathsep)[0]}{os.pathsep}{tmp_path}{os.pathsep}/usr/bin:/bin",
    }
    assert Terraform(tmp_path, leaky).run("version", check=False).returncode == NO_PYTHON_EXIT


def test_registry_protocol_installs_signed_provider_and_applies(
    registry_lock: tuple[Terraform, str], archive: Path, emulator: RunningEmulator, tmp_path: Path
) -> None:
    tf, lock = registry_lock
    assert set(HASH.findall(lock)) == {h1_hash(archive), zip_hash(archive)}
    assert lock == (EXAMPLE / LOCK_FILE).read_text(), "terraform init rewrote the committed lock file"
    apply_and_destroy(tf, emulator, tmp_path)


def test_registry_service_discovery_with_a_port_in_the_hostname(
    room: CleanRoom, registry_host: HttpsHost, archive: Path
) -> None:
    tf = room.terraform(
        "discovery", "provider_installation {\n  direct {}\n}\n", SSL_CERT_FILE=str(registry_host.ca_file)
    )
    main_tf = (tf.workdir / "main.tf").read_text()
    (tf.workdir / "main.tf").write_text(
        main_tf.replace('"lium-stacks/lium"', f'"{registry_host.host}/lium-stacks/lium"')
    )
    result = tf.run("init", "-input=false", "-no-color", "-backend=false")
    assert f"Installed {registry_host.host}/lium-stacks/lium v{layout.VERSION}" in result.stdout
    assert "/.well-known/terraform.json" in registry_host.requests
    assert lock_hashes(tf) == {h1_hash(archive), zip_hash(archive)}


def test_registry_protocol_refuses_a_bad_signature(
    room: CleanRoom, release_dist: Path, tmp_path: Path
) -> None:
    """SHA256SUMS changed after signing (as a tampered mirror would serve it): init must fail."""
    tree = tmp_path / "tampered"
    shutil.copytree(release_dist / "registry", tree, copy_function=os.link)
    sums = tree / "v1/providers/lium-stacks/lium" / layout.VERSION / layout.PROVIDER_SHA256SUMS
    text = sums.read_text()
    sums.unlink()
    sums.write_text(text + f"{'0' * 64}  extra-file\n")
    with serve_https(tree, tmp_path / "pki") as host:
        tf = room.terraform(
            "tampered", "provider_installation {\n  direct {}\n}\n", SSL_CERT_FILE=str(host.ca_file)
        )
        main_tf = (tf.workdir / "main.tf").read_text()
        (tf.workdir / "main.tf").write_text(
            main_tf.replace('"lium-stacks/lium"', f'"{host.host}/lium-stacks/lium"')
        )
        result = tf.run("init", "-input=false", "-no-color", "-backend=false", check=False)
    assert result.returncode != 0
    assert "signature" in result.stderr.lower(), result.stderr
    assert not (tf.workdir / ".terraform" / "providers").exists()


def test_network_mirror_installs_with_the_registry_lock_and_applies(
    room: CleanRoom,
    release_dist: Path,
    registry_lock: tuple[Terraform, str],
    emulator: RunningEmulator,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _, lock = registry_lock
    with serve_https(release_dist / "mirror", tmp_path_factory.mktemp("mirror-pki")) as host:
        tf = room.terraform(
            "network-mirror",
            f'provider_installation {{\n  network_mirror {{\n    url = "{host.url}/"\n  }}\n}}\n',
            SSL_CERT_FILE=str(host.ca_file),
        )
        (tf.workdir / LOCK_FILE).write_text(lock)
        tf.init()
        assert any(path.endswith(f"/lium-stacks/lium/{layout.VERSION}.json") for path in host.requests)
    assert (tf.workdir / LOCK_FILE).read_text() == lock
    apply_and_destroy(tf, emulator, tmp_path)


def test_filesystem_mirror_installs_with_the_registry_lock_and_applies(
    room: CleanRoom,
    release_dist: Path,
    registry_lock: tuple[Terraform, str],
    emulator: RunningEmulator,
    tmp_path: Path,
) -> None:
    _, lock = registry_lock
    mirror = tmp_path / "fs-mirror"  # outside the checkout, which the clean room hides
    shutil.copytree(release_dist / "fs-mirror", mirror)
    tf = room.terraform(
        "fs-mirror", f'provider_installation {{\n  filesystem_mirror {{\n    path = "{mirror}"\n  }}\n}}\n'
    )
    (tf.workdir / LOCK_FILE).write_text(lock)
    tf.init()
    assert (tf.workdir / LOCK_FILE).read_text() == lock
    apply_and_destroy(tf, emulator, tmp_path)
