"""In-process checks of the image catalog, of how a pod's command and environment are derived, and of
its confinement: id ranges, volume ownership, capabilities, seccomp program, cgroup limits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lium_emulator.catalogs.images import image_catalog, resolve_image
from lium_emulator.sandbox import idmap, pod_init
from lium_emulator.sandbox.cgroups import PIDS_PER_POD, CgroupLimits
from lium_emulator.sandbox.confinement import DENIED_SYSCALLS, KEPT_CAPABILITIES, seccomp_program
from lium_emulator.sandbox.manager import (
    PodSpec,
    SandboxError,
    build_plan,
    host_private_paths,
    pod_command,
    pod_environment,
)
from tests.emulator.test_sandbox_support import image


@pytest.mark.parametrize(
    ("docker_image", "tag"),
    [
        ("python:3.11-slim", ""),
        ("python", "3.11-slim"),
        ("library/python:3.11-slim", ""),
        ("docker.io/library/python:3.11-slim", ""),
        ("index.docker.io/library/python", "3.11-slim"),
    ],
)
def test_docker_hub_spellings_name_one_image(docker_image: str, tag: str) -> None:
    config = resolve_image(docker_image, tag)
    assert config is not None and config.reference == "python:3.11-slim"


def test_full_references_are_split_like_lium_does() -> None:
    private = resolve_image("registry.lium-emulator.local/team/private-trainer:1.0", "")
    assert private is not None and private.private
    assert (private.registry_username, private.registry_password) == (
        "trainer-bot",
        "lium-emulator-registry-pass",
    )
    assert resolve_image("registry.lium-emulator.local/team/private-trainer", "1.0") == private
    ubuntu = image("ubuntu:22.04")
    assert resolve_image(f"ubuntu@{ubuntu.digest}", "") == ubuntu
    assert resolve_image("ubuntu@sha256:" + "0" * 64, "") is None
    assert resolve_image("ubuntu", "") is None  # tag "latest" is not in the catalog
    assert resolve_image("python:3.11-slim", "3.11-slim") is None  # a tag twice is no reference
    assert resolve_image("localhost:5000/team/python", "3.11-slim") is None  # a port is no tag
    assert resolve_image("", "") is None


def test_catalog_images_are_runnable_configs() -> None:
    references = [config.reference for config in image_catalog()]
    assert len(references) == len(set(references))
    for config in image_catalog():
        assert config.env["PATH"].startswith("/") and config.workdir.startswith("/")
        assert config.entrypoint or config.cmd
        assert resolve_image(config.reference, "") == config
        if config.registry_password:
            assert config.registry_password not in repr(config)
    nonroot = image("lium-emulator/nonroot-python:3.11")
    assert (nonroot.user, nonroot.user_uid, nonroot.user_gid, nonroot.workdir) == (
        "app",
        1000,
        1000,
        "/home/app",
    )
    torch = image("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
    assert torch.workdir == "/workspace" and torch.env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert torch.env["PATH"].startswith("/opt/conda/bin:")


def spec(tmp_path: Path, **fields: object) -> PodSpec:
    values: dict[str, object] = {
        "pod_id": "unit",
        "hostname": "unit-host",
        "image": image("python:3.11-slim"),
        "entrypoint": None,
        "startup_commands": "",
        "environment": {},
        "authorized_keys": ["ssh-ed25519 AAAA key"],
        "internal_ports": [22],
        "local_volume_path": "/root",
        "local_volume_dir": tmp_path,
        "volume_dir": None,
        "ssh_delay_seconds": 0.0,
        "cpu_count": 1,
        "memory_gib": 1,
        "disk_quota_gb": 10,
        **fields,
    }
    return PodSpec(**values)  # type: ignore[arg-type]


def test_pod_command_follows_docker_run(tmp_path: Path) -> None:
    assert pod_command(spec(tmp_path)) == ["python3"]  # the image CMD
    assert pod_command(spec(tmp_path, startup_commands="-m http.server")) == ["-m", "http.server"]
    dstack = spec(tmp_path, entrypoint="/bin/sh", startup_commands="-c 'exec sleep infinity'")
    assert pod_command(dstack) == ["/bin/sh", "-c", "exec sleep infinity"]
    assert pod_command(spec(tmp_path, entrypoint="/bin/true")) == ["/bin/true"]  # --entrypoint drops CMD
    with pytest.raises(SandboxError, match="cannot parse"):
        pod_command(spec(tmp_path, startup_commands="-c 'open"))


def test_pod_environment_is_image_env_with_docker_additions_and_template_overrides(tmp_path: Path) -> None:
    env = pod_environment(spec(tmp_path, environment={"LANG": "en_US.UTF-8", "EXTRA": "1"}))
    assert env == {
        **image("python:3.11-slim").env,
        "LANG": "en_US.UTF-8",
        "EXTRA": "1",
        "HOSTNAME": "unit-host",
        "HOME": "/root",
    }
    assert (
        pod_environment(spec(tmp_path, image=image("lium-emulator/nonroot-python:3.11")))["HOME"]
        == "/home/app"
    )


def test_plan_adds_the_image_user_and_never_host_secrets(tmp_path: Path) -> None:
    keys = {"ssh_host_ed25519_key": ("PRIVATE", "ssh-ed25519 PUBLIC\n")}
    plan = build_plan(
        spec(tmp_path, image=image("lium-emulator/nonroot-python:3.11")), tmp_path / "pod", keys
    )
    files = {file["path"]: file for file in plan["files"]}
    assert "app:x:1000:1000::/home/app:/bin/sh\n" in files["/etc/passwd"]["content"]
    shadow = files["/etc/shadow"]["content"].splitlines()
    assert shadow and all(line.split(":")[1] == "*" for line in shadow)  # no host password hashes
    assert files["/etc/ssh/ssh_host_ed25519_key"] == {
        "path": "/etc/ssh/ssh_host_ed25519_key",
        "content": "PRIVATE",
        "mode": 0o600,
    }
    assert "UsePAM no" in files["/etc/ssh/sshd_config"]["content"]
    assert plan["remove"] and all("ed25519" not in path for path in plan["remove"])  # host keys hidden
    assert plan["dirs"] == [{"path": "/home/app", "mode": 0o755, "uid": 1000, "gid": 1000}]
    assert (plan["workdir"], plan["user"]) == ("/home/app", {"name": "app", "uid": 1000, "gid": 1000})
    assert plan["symlinks"]["/usr/local/bin/python3"] == "/usr/bin/python3"


@pytest.mark.parametrize("path", ["/usr/data", "/proc/x", "relative", "/", "/a/../etc"])
def test_volume_paths_that_would_break_the_pod_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(SandboxError, match="cannot be mounted"):
        build_plan(spec(tmp_path, local_volume_path=path), tmp_path / "pod", {})


def test_plan_confines_the_pod(tmp_path: Path) -> None:
    plan = build_plan(spec(tmp_path), tmp_path / "pod", {}, id_base=idmap.ID_BASE + 3 * idmap.ID_COUNT)
    assert (plan["id_base"], plan["id_count"]) == (idmap.ID_BASE + 3 * idmap.ID_COUNT, 65536)
    kept = set(plan["keep_capabilities"])
    sys_admin, dac_read_search, sys_module, net_admin = 21, 2, 16, 12
    assert kept == set(KEPT_CAPABILITIES.values()) and not kept & {
        sys_admin,
        dac_read_search,
        sys_module,
        net_admin,
    }
    program = bytes.fromhex(plan["seccomp_bpf"])
    assert program == seccomp_program() and len(program) % 8 == 0 and len(program) // 8 > len(DENIED_SYSCALLS)


def test_id_ranges_are_exclusive_while_held_and_stable_per_pod() -> None:
    first = idmap.acquire("unit-idmap-pod")
    second = idmap.acquire("unit-idmap-pod")
    try:
        assert first.slot != second.slot and first.base == idmap.ID_BASE + first.slot * idmap.ID_COUNT
        assert idmap.ID_BASE + idmap.SLOTS * idmap.ID_COUNT <= 2**32 - 1
    finally:
        second.release()
        first.release()
    again = idmap.acquire("unit-idmap-pod")
    again.release()
    assert again.slot == first.slot  # free again, and derived from the pod id


def test_ownership_shifts_between_pod_ranges_keeping_inner_ids(tmp_path: Path) -> None:
    old, new = idmap.ID_BASE + 5 * idmap.ID_COUNT, idmap.ID_BASE + 9 * idmap.ID_COUNT
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine").write_text("x")
    os.chown(tmp_path / "data", old, old)
    os.chown(tmp_path / "data" / "mine", old + 1000, old + 1000)  # the image user of the last pod
    outside = tmp_path.parent / f"outside-{tmp_path.name}"
    outside.write_text("host file")
    (tmp_path / "link").symlink_to(outside)
    idmap.shift_ownership(tmp_path, new)
    assert (tmp_path.stat().st_uid, (tmp_path / "data").stat().st_gid) == (new, new)  # host root -> pod root
    assert (tmp_path / "data" / "mine").stat().st_uid == new + 1000
    assert outside.stat().st_uid == 0 and (tmp_path / "link").lstat().st_uid == new  # link itself only
    assert idmap.inner_id(70000) == idmap.NOBODY
    outside.unlink()


def test_cgroup_limits_are_written_and_removed(tmp_path: Path) -> None:
    limits = CgroupLimits(str(tmp_path))
    report = limits.report()
    assert set(report) == {"memory", "cpu", "pids", "disk"}
    groups = limits.create("unit-limits", memory_gib=2, cpu_count=3)
    cpus = min(3, limits.caps.cpu_count)  # an offer's CPUs are cut to the host's
    try:

        def read(directory: str, *names: str) -> str:
            return next(
                (Path(directory) / n).read_text().strip() for n in names if (Path(directory) / n).exists()
            )

        for name, directory in groups.mounts.items():
            if name in ("", "memory") and report["memory"]["enforced"]:
                assert read(directory, "memory.max", "memory.limit_in_bytes") == str(2 << 30)
            if name in ("", "cpu") and report["cpu"]["enforced"]:
                assert read(directory, "cpu.max", "cpu.cfs_quota_us").split()[0] == str(cpus * 100_000)
            if name in ("", "pids") and report["pids"]["enforced"]:
                assert read(directory, "pids.max") == str(PIDS_PER_POD)
        enforced = [report[c]["enforced"] for c in ("memory", "cpu", "pids")]
        assert bool(groups.mounts) == any(enforced)
        assert len(groups.procs_files) == len(groups.directories)
    finally:
        limits.remove("unit-limits")
    assert not any(directory.exists() for directory in groups.directories)


def test_private_paths_are_unreadable_entries_never_behind_symlinks(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o755)
    (tmp_path / "open" / "key").write_text("secret")
    (tmp_path / "open" / "key").chmod(0o600)
    (tmp_path / "open" / "readme").write_text("hello")
    (tmp_path / "open" / "readme").chmod(0o644)
    (tmp_path / "closed").mkdir()
    (tmp_path / "closed" / "inner").write_text("not listed: its directory is hidden whole")
    (tmp_path / "closed").chmod(0o700)
    (tmp_path / "link").symlink_to(tmp_path / "open" / "key")
    (tmp_path / "dir-link").symlink_to(tmp_path / "closed")
    found = host_private_paths(tmp_path)
    assert sorted(found) == [str(tmp_path / "closed"), str(tmp_path / "open" / "key")]


def test_a_directory_that_cannot_be_opened_is_hidden_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sealed").mkdir()
    (tmp_path / "sealed").chmod(0o755)
    (tmp_path / "sealed" / "secret").write_text("x")
    (tmp_path / "sealed" / "secret").chmod(0o600)
    real_open = os.open

    def refuse_sealed(path: str, flags: int, *args: int) -> int:
        if path == str(tmp_path / "sealed"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse_sealed)
    assert host_private_paths(tmp_path) == [str(tmp_path / "sealed")]


def test_the_init_script_starts_without_heavy_modules() -> None:
    """Every pod runs the init twice (PID 1, then sshd's entry); json, typing or socket would double
    its start-up CPU (~40 → ~85 ms each, see the script's docstring)."""
    script = Path(pod_init.__file__).read_text()
    probe = (
        "import sys\n"
        f"exec(compile({script!r}, 'pod_init.py', 'exec'), {{'__name__': 'probe'}})\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True
    )
    loaded = set(result.stdout.split())
    assert "ctypes" in loaded  # the probe did run the script's imports
    assert not loaded & {"json", "typing", "re", "enum", "socket", "shutil", "platform", "signal"}


def test_remove_tree_removes_links_without_following_them(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("kept")
    top = tmp_path / "top"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "file").write_text("x")
    (top / "dir-link").symlink_to(outside)
    (top / "file-link").symlink_to(outside / "kept")
    pod_init.remove_tree(str(top))
    assert not top.exists()
    assert (outside / "kept").read_text() == "kept"
