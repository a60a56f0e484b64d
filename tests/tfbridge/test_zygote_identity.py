"""Which zygote a start uses: one per provider build and user, whichever copy of the build starts.

Terraform copies the provider into every working directory, so copies of one build at different paths
must find one zygote, while another build (or a checkout) gets its own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.terraform import REPO

SERVING = REPO / "provider" / "tfbridge" / "serving"
WHERE = (
    "import runpy, sys; print(runpy.run_path(sys.argv[1], run_name='launch')['socket_path']('lium_provider'))"
)


def installed_copy(root: Path, record: str, distributions: tuple[str, ...] = ()) -> Path:
    """A site-packages holding the launcher, as a wheel install lays it out; returns the launcher."""
    serving = root / "site-packages" / "tfbridge" / "serving"
    serving.mkdir(parents=True)
    for name in ("launch.py", "constants.py"):
        shutil.copy(SERVING / name, serving / name)
    for name in ("lium_stacks-1.0.dist-info", *distributions):
        (serving.parents[1] / name).mkdir()
    (serving.parents[1] / "lium_stacks-1.0.dist-info" / "RECORD").write_text(record)
    return serving / "launch.py"


def zygote_socket(launcher: Path, zygotes: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-I", "-c", WHERE, str(launcher)],
        env={"TFBRIDGE_ZYGOTE_DIR": str(zygotes)},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return result.stdout.strip()


def test_copies_of_one_build_share_a_zygote_and_other_builds_do_not(tmp_path: Path) -> None:
    zygotes = tmp_path / "zygotes"
    record = "tfbridge/serving/launch.py,sha256=abc,100\nlium_provider/pod.py,sha256=def,200\n"
    first = installed_copy(tmp_path / "dir-a" / ".terraform", record, ("grpcio-1.0.dist-info",))
    second = installed_copy(tmp_path / "dir-b" / ".terraform", record, ("grpcio-1.0.dist-info",))
    assert zygote_socket(first, zygotes) == zygote_socket(second, zygotes)

    edited = installed_copy(tmp_path / "dir-c", record.replace("def", "xyz"), ("grpcio-1.0.dist-info",))
    other_dependency = installed_copy(tmp_path / "dir-d", record, ("grpcio-2.0.dist-info",))
    sockets = {zygote_socket(p, zygotes) for p in (first, edited, other_dependency)}
    assert len(sockets) == 3


def test_a_checkout_is_told_apart_by_its_path(tmp_path: Path) -> None:
    zygotes = tmp_path / "zygotes"
    copies = []
    for name in ("one", "two"):
        serving = tmp_path / name / "provider" / "tfbridge" / "serving"
        serving.mkdir(parents=True)
        for file in ("launch.py", "constants.py"):
            shutil.copy(SERVING / file, serving / file)
        copies.append(serving / "launch.py")
    assert zygote_socket(copies[0], zygotes) != zygote_socket(copies[1], zygotes)
    assert zygote_socket(copies[0], zygotes) == zygote_socket(copies[0], zygotes)
