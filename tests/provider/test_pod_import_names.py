"""The ``name`` an imported pod gets: a Lium name's first part counts as a ``lium_pod``'s ``name`` only
when a ``lium_pod`` provably made it.

A person's name can have the shape ``<name>-<tag><digest>`` (``gpu-workstation``: 11 letters of the tag
alphabet after the last hyphen), so the shape alone would import it under the name ``gpu``. The rent
digest, recomputed from the pod's row, or the tag on its template tells the two apart. (Whose the pod
is does not depend on this: the tag in any such name is its mark.)
"""

from __future__ import annotations

from lium_provider.api.models import Pod
from lium_provider.domain.stack import lium_pod_name, rent_digest, stack_tag
from lium_provider.resources.authorized_keys import rented_keys
from lium_provider.resources.pod_import import imported_fields, name_made_by_lium_pod
from lium_provider.resources.pod_model import PodModel, pod_rent_digest

TEMPLATE = "0b6f6f7e-1d2c-4b8a-9a53-5c2f0d7e8a42"
EXECUTOR = "5d6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPaYQzsTQ+aa7RKvRt1XZjIacFaYF7s9qoIRfC8sO4SK"
TAG = stack_tag("stack:team-a")


def pod(name: str, keys: tuple[str, ...] = (KEY,)) -> Pod:
    return Pod(
        id="a7a88446-0000-4000-8000-000000000001",
        pod_name=name,
        status="RUNNING",
        gpu_count=1,
        template_id=TEMPLATE,
        executor_id=EXECUTOR,
        ssh_keys=list(keys),  # as the JSON row has them
    )


def no_template_tag() -> str | None:
    return None


def test_a_name_a_lium_pod_made_carries_its_stack() -> None:
    for executor, key in ((None, None), (EXECUTOR, None), (None, KEY), (EXECUTOR, KEY)):
        made = lium_pod_name("trainer-0", TAG, rent_digest(TEMPLATE, 1, None, executor, key))
        assert name_made_by_lium_pod(pod(made), no_template_tag) == ("trainer-0", TAG)


def test_a_persons_name_of_the_same_shape_is_no_stacks_mark() -> None:
    for name in ("gpu-workstation", "bert-experiments"):
        assert name_made_by_lium_pod(pod(name), no_template_tag) is None
        assert imported_fields(pod(name), None)["name"] == name


def test_a_digest_the_row_cannot_recompute_counts_when_the_template_carries_the_same_tag() -> None:
    # A key configured with a comment (file() of a .pub) is listed without it: the digest cannot be
    # recomputed, but the stack's own template carries its tag.
    made = lium_pod_name("trainer-0", TAG, rent_digest(TEMPLATE, 1, None, None, KEY + " me@laptop"))
    assert name_made_by_lium_pod(pod(made), no_template_tag) is None
    assert name_made_by_lium_pod(pod(made), lambda: TAG) == ("trainer-0", TAG)
    assert name_made_by_lium_pod(pod(made), lambda: stack_tag("stack:team-b")) is None


TEAMMATE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJIydWWIcrrkxIho5QwvrGLRDGBksaRlBEvgYkx5uOr2"
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGfnCWyGYQ+B8T7YwVavvywrR5vwKvkTmfzxNpfa4DGD"


def test_a_pod_rented_with_a_teams_keys_still_proves_its_stack() -> None:
    for key, extra in ((KEY, [TEAMMATE, OTHER]), (None, [OTHER, TEAMMATE])):
        configured = PodModel.model_construct(
            name="shared",
            gpu_count=1,
            volume_id=None,
            executor_id=None,
            ssh_public_key=key,
            authorized_keys=extra,
        )
        made = lium_pod_name("shared", TAG, pod_rent_digest(configured, configured))
        sent = rented_keys(key or KEY, extra)  # the provider's own key when none is configured
        assert sent == [KEY, *extra]
        assert name_made_by_lium_pod(pod(made, tuple(sent)), no_template_tag) == ("shared", TAG)


def test_the_same_keys_in_another_order_name_the_same_rent() -> None:
    def digest(extra: list[str]) -> str:
        configured = PodModel.model_construct(
            gpu_count=1, volume_id=None, executor_id=None, ssh_public_key=KEY, authorized_keys=extra
        )
        return pod_rent_digest(configured, configured)

    assert digest([TEAMMATE, OTHER]) == digest([OTHER, TEAMMATE, KEY, TEAMMATE + " bob@laptop"])
    assert digest([]) == rent_digest(1, None, None, KEY), "a one-key pod's digest is unchanged"
    assert digest([TEAMMATE]) != digest([OTHER])
