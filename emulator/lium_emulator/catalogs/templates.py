"""Template helpers: splitting full image references, and the platform's public templates."""

import uuid

from lium_emulator.catalogs.images import ImageConfig
from lium_emulator.records.entities import Template
from lium_emulator.records.timeutil import utcnow

# Public template ids are derived from the image reference, so they are stable across restarts.
_PUBLIC_TEMPLATE_NAMESPACE = uuid.UUID("0c6f3d52-5f0e-4c39-9a57-3d1f7b0f2e61")
# What ``GET /executors/default-docker-image`` names for every GPU: Lium's SDK rents the public template
# of this image when ``up`` is given no template.
DEFAULT_POD_IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
# Public templates keep the container up whatever the image's CMD (``bash`` exits without a terminal),
# as the platform's own templates do; user templates run exactly what they say.
PUBLIC_TEMPLATE_STARTUP = "sleep infinity"


def split_image_reference(reference: str) -> tuple[str, str, str]:
    """Split ``repo/name:tag``, ``registry:5000/team/img`` or ``repo/name@sha256:…`` into
    (image, tag, digest); the tag defaults to ``latest`` (what Lium does for ``docker_image_tag: ""``).
    """
    name, _, digest = reference.partition("@")
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        return name[:colon], name[colon + 1 :], digest
    return name, "latest", digest


def public_templates(images: list[ImageConfig]) -> list[Template]:
    """One public (``user_id`` null) template per image that needs no registry credential."""
    now = utcnow()
    templates = []
    for image in images:
        if image.private:
            continue
        docker_image, tag, digest = split_image_reference(image.reference)
        templates.append(
            Template(
                id=str(uuid.uuid5(_PUBLIC_TEMPLATE_NAMESPACE, image.reference)),
                user_id=None,
                name=image.reference,
                description=f"Platform template for {image.reference}",
                docker_image=docker_image,
                docker_image_tag=tag,
                docker_image_digest=digest,
                volumes=["/workspace"],
                startup_commands=PUBLIC_TEMPLATE_STARTUP,
                internal_ports=[22, 8888],
                status="VERIFY_SUCCESS",
                created_at=now,
                updated_at=now,
            )
        )
    return templates
