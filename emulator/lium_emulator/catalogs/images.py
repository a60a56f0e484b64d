"""The emulator's built-in image catalog: what `docker run <image>` would set up, without pulling anything.

Pods do not get an image filesystem: every pod sees the host's read-only ``/usr`` (so Python is the
host's ``/usr/bin/python3``). What an image contributes is its *config* — ENV, WORKDIR, USER,
ENTRYPOINT and CMD — plus a few per-pod adjustments (``python``/``python3`` links on the image PATH,
the image user in ``/etc/passwd``). Private images name the one registry credential they accept.

Template images are given as ``docker_image`` + ``docker_image_tag``; with an empty tag the full
reference is split the way Lium's backend does (``repo/name:tag``, ``registry:5000/team/img``,
``repo/name@sha256:…``), defaulting to tag ``latest``. Docker Hub spellings (``python``,
``library/python``, ``docker.io/library/python``) name the same image.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

_DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DOCKER_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")
CLUSTER_IMAGE_REPOSITORY = "daturaai/lium-cluster"
"""The image every cluster member must run: Lium refuses a cluster rental of any other."""
CLUSTER_IMAGE = CLUSTER_IMAGE_REPOSITORY + ":1.2.0"


@dataclass(frozen=True)
class ImageConfig:
    """One image's runtime config, as `docker inspect` would report it.

    The defaults are those of a plain public Debian-style image (root in ``/``, no ENTRYPOINT), so each
    catalog entry states only what makes it different.
    """

    reference: str
    env: dict[str, str]
    cmd: list[str]
    workdir: str = "/"
    user: str = "root"
    entrypoint: list[str] = field(default_factory=list)
    private: bool = False
    registry_username: str | None = None
    registry_password: str | None = field(default=None, repr=False)
    user_uid: int = 0
    user_gid: int = 0
    user_home: str = "/root"
    python_bin_dirs: tuple[str, ...] = ()
    """Directories that get ``python3`` and ``python`` links to the host interpreter (the image's own)."""

    @property
    def digest(self) -> str:
        """A stable fake content digest, so ``repo/name@sha256:<digest>`` resolves too."""
        return "sha256:" + hashlib.sha256(self.reference.encode()).hexdigest()


def _python_image(reference: str, **extra_env: str) -> ImageConfig:
    """An image built ``FROM python:3.11-slim``: its ENV (plus ``extra_env``), CMD and interpreter.

    What such an image changes on top is applied with :func:`dataclasses.replace`.
    """
    env = {
        "PATH": "/usr/local/bin:" + _DEBIAN_PATH,
        "LANG": "C.UTF-8",
        "GPG_KEY": "A035C8C19219BA821ECEA86B64E628F8D684696D",
        "PYTHON_VERSION": "3.11.2",
        **extra_env,
    }
    return ImageConfig(reference, env, ["python3"], python_bin_dirs=("/usr/local/bin",))


_CATALOG: tuple[ImageConfig, ...] = (
    _python_image("python:3.11-slim"),
    ImageConfig(
        "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        {
            "PATH": "/opt/conda/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:" + _DEBIAN_PATH,
            "NVIDIA_VISIBLE_DEVICES": "all",
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            "LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTORCH_VERSION": "2.4.0",
        },
        ["/bin/bash"],
        workdir="/workspace",
        python_bin_dirs=("/opt/conda/bin",),
    ),
    # Lium's cluster image (every cluster member runs it): a PyTorch image whose own init raises the
    # overlay and stays up, so its CMD keeps running here too; the overlay itself is raised by the
    # emulator's sandbox for each member (docs/emulator.md, "Pod networking").
    ImageConfig(
        CLUSTER_IMAGE,
        {
            "PATH": "/opt/conda/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:" + _DEBIAN_PATH,
            "NVIDIA_VISIBLE_DEVICES": "all",
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTORCH_VERSION": "2.4.0",
        },
        ["sleep", "infinity"],
        workdir="/workspace",
        python_bin_dirs=("/opt/conda/bin",),
    ),
    ImageConfig(
        "dstackai/base:0.16-base-ubuntu24.04",
        {"PATH": _DEBIAN_PATH, "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"},
        ["/bin/bash"],
        python_bin_dirs=("/usr/local/bin",),
    ),
    ImageConfig("ubuntu:22.04", {"PATH": _DEBIAN_PATH}, ["/bin/bash"]),
    replace(
        _python_image("registry.lium-emulator.local/team/private-trainer:1.0", TRAINER_HOME="/workspace"),
        workdir="/workspace",
        private=True,
        # A fixture credential of the emulator's fake private registry, not a real secret.
        registry_username="trainer-bot",
        registry_password="lium-emulator-registry-pass",
    ),
    replace(
        _python_image("lium-emulator/nonroot-python:3.11", APP_ENV="emulator"),
        workdir="/home/app",
        user="app",
        user_uid=1000,
        user_gid=1000,
        user_home="/home/app",
    ),
)


def image_catalog() -> list[ImageConfig]:
    """Every image the emulator can run."""
    return list(_CATALOG)


def _split_reference(reference: str) -> tuple[str, str, str | None]:
    """``repository, tag, digest`` of a full reference; the tag defaults to ``latest``."""
    repository, _, digest = reference.partition("@")
    last_slash = repository.rfind("/")
    colon = repository.rfind(":")
    tag = "latest"
    # A colon before the last slash is a registry port (registry:5000/team/img), not a tag.
    if colon > last_slash:
        repository, tag = repository[:colon], repository[colon + 1 :]
    return repository, tag, digest or None


def _canonical_repository(repository: str) -> str:
    """Docker Hub spellings of one repository collapse to the short form (``python``, ``pytorch/pytorch``)."""
    for prefix in _DOCKER_HUB_PREFIXES:
        if repository.startswith(prefix):
            repository = repository[len(prefix) :]
            break
    return repository.removeprefix("library/")


def resolve_image(docker_image: str, docker_image_tag: str) -> ImageConfig | None:
    """The catalog image a template names, or None when the emulator does not know it."""
    image = docker_image.strip()
    tag = docker_image_tag.strip()
    if not image:
        return None
    repository, parsed_tag, digest = _split_reference(image)
    if tag:
        if digest is not None or repository != image:
            return None  # a tag or digest both in the reference and in docker_image_tag is not valid
    else:
        tag = parsed_tag
    repository = _canonical_repository(repository)
    for config in _CATALOG:
        config_repository, config_tag, _ = _split_reference(config.reference)
        if config_repository != repository:
            continue
        if digest is not None:
            if digest == config.digest:
                return config
        elif config_tag == tag:
            return config
    return None
