"""Fixtures shared by every suite: a Terraform environment with our providers installed offline."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.procs import private_zygotes
from tests.support.terraform import Terraform, install_test_providers, write_cli_config

pytest_plugins = ["tests.support.tiers", "tests.chaos.summary"]
HOME_VARIABLES = ("HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """A HOME of this test process's own (each xdist worker has one), set before any test module is
    imported, so no test, and no module-level default, reads or writes the user's: Terraform's
    checkpoint and plugin cache, jsii's cache, ~/.ssh, the provider's state dir."""
    home = Path(tempfile.mkdtemp(prefix="lium-test-home-"))
    saved = {name: os.environ.get(name) for name in HOME_VARIABLES}
    os.environ["HOME"] = str(home)
    for name in HOME_VARIABLES[1:]:
        os.environ.pop(name, None)  # each defaults to a directory under HOME

    def restore() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(home, ignore_errors=True)

    config.add_cleanup(restore)
    # A suite started as a background job of a script (`make test &`) inherits SIGINT ignored, and so
    # would every process a test starts: the tests that press Ctrl-C on terraform or `lium-tf run`
    # would see it ignored. A handler here is reset to the default in every program a test executes.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def provider_zygotes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Warm provider zygotes (tfbridge.serving.zygote) of this test run: private to it, stopped at its end."""
    with private_zygotes(tmp_path_factory.mktemp("zygotes")) as directory:
        yield directory


@pytest.fixture(scope="session")
def terraform_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for terraform: our mirror only, no checkpoint calls, a shared plugin cache."""
    base = tmp_path_factory.mktemp("terraform")
    plugins = base / "plugins"
    install_test_providers(plugins)
    cli_config = write_cli_config(base / "terraformrc", plugins)
    sockets = base / "sockets"  # provider sockets of killed runs stay in the test's temp dir
    sockets.mkdir()
    return {
        "PLUGIN_UNIX_SOCKET_DIR": str(sockets),
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
    }


@pytest.fixture
def make_terraform(tmp_path: Path, terraform_env: dict[str, str]) -> Callable[..., Terraform]:
    counter = iter(range(1000))

    def make(main_tf: str, **env: str) -> Terraform:
        tf = Terraform(tmp_path / f"tf{next(counter)}", {**terraform_env, **env})
        tf.write(main_tf)
        return tf

    return make
