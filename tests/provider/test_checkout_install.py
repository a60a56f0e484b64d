"""Each checkout's provider in a mirror of its own: ``lium-tf install --plugins-dir D --cli-config F``.

Two checkouts on one machine (two CI jobs on a shared runner) each install into their own mirror and
name it with their own CLI configuration, so neither ``terraform init`` can pick up the other's launcher,
and nothing is written into the user's ``~/.terraform.d``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lium_provider import PROVIDER_SOURCE, __version__
from tests.support.lium import PROVIDER_BLOCK
from tests.support.terraform import Terraform
from tfbridge.serving.install import cli_configuration, launcher_path, write_launcher

pytestmark = pytest.mark.terraform


def test_two_checkouts_install_and_init_their_own_providers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first_mirror, first_config = tmp_path / "one" / "plugins", tmp_path / "one" / ".terraformrc"
    first_config.parent.mkdir()
    install = [sys.executable, "-m", "lium_provider.cli", "install", "--plugins-dir", str(first_mirror)]
    subprocess.run(
        [*install, "--cli-config", str(first_config)],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        timeout=60,
    )
    # Another checkout: another interpreter's launcher, in its own mirror.
    second_mirror = tmp_path / "two" / "plugins"
    write_launcher(second_mirror, PROVIDER_SOURCE, __version__, ["/other/checkout/python", "-I", "launch.py"])
    second_config = tmp_path / "two" / ".terraformrc"
    second_config.write_text(cli_configuration(second_mirror, PROVIDER_SOURCE.split("/")[0]))

    for mirror, config in ((first_mirror, first_config), (second_mirror, second_config)):
        tf = Terraform(
            tmp_path / "work" / mirror.parent.name,
            {"HOME": str(home), "TF_CLI_CONFIG_FILE": str(config), "CHECKPOINT_DISABLE": "1"},
        )
        tf.write(PROVIDER_BLOCK)
        tf.init()
        installed = launcher_path(tf.workdir / ".terraform" / "providers", PROVIDER_SOURCE, __version__)
        assert installed.read_text() == launcher_path(mirror, PROVIDER_SOURCE, __version__).read_text()
    assert not (home / ".terraform.d").exists(), "a checkout install must not touch the user's mirror"
