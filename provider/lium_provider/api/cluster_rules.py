"""What a Lium cluster is made of, as plain values: the image its members run and how many they may be.

No pydantic here: the constructs check a ``GpuStack(nodes=...)`` against these at synth, where every
millisecond of import is the app's.
"""

from __future__ import annotations

CLUSTER_IMAGE_PREFIX = "daturaai/lium-cluster"
"""Every cluster member runs a template of this image; Lium refuses a cluster rental of any other."""


def is_cluster_image(docker_image: str | None) -> bool:
    """Whether a template's ``docker_image`` is Lium's cluster image: that repository (a template keeps
    its tag apart, in ``docker_image_tag``), with or without a tag or digest — not another repository
    whose name merely starts the same (``daturaai/lium-cluster-dev``)."""
    image = (docker_image or "").split("@", 1)[0]
    repository, _, tag = image.rpartition(":")
    if repository and "/" not in tag:  # a tag, not a registry's port
        image = repository
    return image == CLUSTER_IMAGE_PREFIX


MIN_CLUSTER_NODES, MAX_CLUSTER_NODES = 2, 64
"""How many whole nodes a cluster may have (the emulator takes at most 64 in one rental)."""
