"""The released wheel in a fresh venv: what ``pip install lium-stacks[cdktf]`` gives a user.

Installed from ``make release``'s ``dist/`` with its dependencies from the package index (compatible
ranges, not the lock's pins), without the ``emulator`` extra: the provider, ``lium-tf`` and the
constructs must work without FastAPI, and mypy must see the constructs' types (``py.typed``).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lium_provider import __version__
from release import layout

pytestmark = pytest.mark.release

# A construct argument of the wrong type: an error only if mypy sees the package's annotations.
TYPE_CHECK = """\
from lium_constructs import OfferFilter

OfferFilter(gpu_count="two")
"""


def run(venv: Path, *command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / command[0]), *command[1:]], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_wheel_metadata_has_one_version_ranges_and_extras(release_dist: Path) -> None:
    (wheel,) = release_dist.glob("lium_stacks-*.whl")
    assert wheel.name == f"lium_stacks-{__version__}-py3-none-any.whl"  # the version written once
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"lium_stacks-{__version__}.dist-info/METADATA").decode()
    assert {
        f"{p}/py.typed" for p in ("tfbridge", "lium_provider", "lium_constructs", "lium_emulator")
    } <= names
    assert f"lium_stacks-{__version__}.dist-info/licenses/LICENSE" in names
    requires = [
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")
    ]
    runtime = [r for r in requires if "extra ==" not in r]
    assert runtime and all("==" not in r and "<" in r for r in runtime), runtime
    assert not any(r.startswith(("fastapi", "uvicorn")) for r in runtime)
    assert 'fastapi<1,>=0.163.2; extra == "emulator"' in requires


def test_provider_and_lium_tf_run_without_the_emulator_extra(wheel_venv: Path, tmp_path: Path) -> None:
    imports = run(
        wheel_venv,
        "python",
        "-c",
        "import lium_provider.provider, lium_provider.cli, lium_constructs; print('ok')",
    )
    assert imports.stdout.strip() == "ok", imports.stderr
    assert "No module named 'fastapi'" in run(wheel_venv, "python", "-c", "import fastapi").stderr
    help_text = run(wheel_venv, "lium-tf", "--help")
    assert help_text.returncode == 0 and "install" in help_text.stdout, help_text.stderr
    assert run(wheel_venv, "lium-tf", "--version").stdout.strip() == f"lium-tf {__version__}"
    installed = run(wheel_venv, "lium-tf", "install", "--plugins-dir", str(tmp_path / "plugins"))
    assert installed.returncode == 0, installed.stderr
    assert "Terraform or OpenTofu 1.11+" in installed.stderr
    for hostname in layout.HOSTNAMES:
        installed_dir = tmp_path / "plugins" / hostname / layout.PROVIDER_NAMESPACE / layout.PROVIDER_TYPE
        assert (installed_dir / layout.VERSION).is_dir()


# What a user runs: the contributor tools (`make docs`, `make constructs`) are not in the wheel's CLI.
USER_COMMANDS = ("install", "sweep", "plan-summary", "gitops", "run", "logs")


def test_lium_tf_offers_only_user_commands_and_writes_nothing_unasked(
    wheel_venv: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "a-users-project"
    empty.mkdir()
    help_text = run(wheel_venv, "lium-tf", "--help", cwd=empty)
    assert help_text.returncode == 0, help_text.stderr
    listed = help_text.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert tuple(listed) == USER_COMMANDS, help_text.stdout
    for removed in ("docs", "constructs"):
        result = run(wheel_venv, "lium-tf", removed, cwd=empty)
        assert result.returncode == 2 and "invalid choice" in result.stderr, result.stderr
    for command in USER_COMMANDS:
        assert run(wheel_venv, "lium-tf", command, "--help", cwd=empty).returncode == 0
    assert list(empty.iterdir()) == [], "lium-tf wrote into the user's directory"
    missing = run(wheel_venv, "python", "-c", "import devtools", cwd=empty)
    assert "No module named 'devtools'" in missing.stderr, "the contributor tools must not be installed"


def test_mypy_sees_the_constructs_types(wheel_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(TYPE_CHECK)
    mypy = Path(sys.executable).with_name("mypy")
    result = subprocess.run(
        [
            str(mypy),
            "--python-executable",
            str(wheel_venv / "bin" / "python"),
            "--no-incremental",
            "--follow-imports=silent",
            "app.py",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert (
        'Argument "gpu_count" to "OfferFilter" has incompatible type "str"; expected "int"' in result.stdout
    ), result.stdout + result.stderr
    assert "missing library stubs or py.typed marker" not in result.stdout
