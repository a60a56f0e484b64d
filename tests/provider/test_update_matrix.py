"""The update matrix through real Terraform, in the style of terraform-plugin-testing's steps.

One live stack holds every resource the provider has, applied once. Each step then changes one argument
of one resource, plans (never applies) and checks the planned action against what the schema declares:
``RequiresReplace`` → replace, naming the argument in ``replace_paths``; write-only → no change
(Terraform never compares write-only values); any other argument → update in place. The pod's offer
filter is the one conditional rule, so each of its cases names its outcome: a change the
running pod still satisfies updates the state in place (the same GPU name spelt another way is no change
at all), one it no longer satisfies replaces the pod,
and one no offer satisfies fails the plan as a create with that filter would. No step may crash.

Then every importable resource is imported into a fresh state with its own Registry example (adapted to
the live object) and planned: no change, except exactly the inputs no read can return.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from lium_emulator.catalogs.images import CLUSTER_IMAGE, CLUSTER_IMAGE_REPOSITORY, image_catalog
from lium_emulator.catalogs.templates import public_templates
from lium_emulator.launcher import RunningEmulator
from lium_provider.api.endpoints import feed_url_for
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.offers import Offer, find_offers
from tests.support import http
from tests.support.arguments import RESOURCES, arguments_of
from tests.support.examples import adapt_example
from tests.support.keys import session_token
from tests.support.lium import PROVIDER_BLOCK, assert_nothing_left, new_account, ssh_keypair
from tests.support.plans import saved_plan
from tests.support.terraform import Terraform
from tfbridge import Context, RequiresReplace, RequiresReplaceIf, TFError
from tfbridge.cancel import CancelToken
from tfbridge.logs import Logger

pytestmark = pytest.mark.terraform

Action = Literal["keep", "update", "replace"]  # lium_provider.plan_summary's verbs ("keep" is "no-op")
Outcome = Action | Literal["no offer"]
REGISTRY_PASSWORD = "matrix-registry-secret"
NO_OFFER: Outcome = "no offer"
NO_OFFER_ERROR = "No Lium offer matches the pod's filter"  # the error of a filter nothing satisfies

CREDENTIAL = "lium_docker_credential.c"
TEMPLATE = "lium_template.t"
SPARE_TEMPLATE = "lium_template.spare"
VOLUME = "lium_volume.v"
POD = "lium_pod.p"
RUNNER = "lium_runner.r"
CLUSTER = "lium_cluster.c"
SSH_KEY = "lium_ssh_key.k"
API_KEY = "lium_api_key.a"
BACKUP = "lium_backup_config.b"
# The object of each type that the import tests import (the spare template, of Lium's cluster image, is
# the cluster's and gives the pod another id).
IMPORTED = {
    address.split(".")[0]: address
    for address in (CREDENTIAL, TEMPLATE, VOLUME, POD, RUNNER, CLUSTER, SSH_KEY, API_KEY, BACKUP)
}
# Arguments no read can return, so an imported object plans exactly these as changes when its config sets
# them: how a pod was placed (its offer filter; Lium keeps only the result) and Terraform's own timeouts;
# the credential's password version (Lium keeps only the password, and that is write-only).
NOT_READ_BACK: dict[str, frozenset[str]] = {
    "lium_pod": frozenset(
        {"max_price_per_hour", "regions", "min_memory_gib", "min_disk_gb", "spot", "timeouts"}
    ),
    "lium_docker_credential": frozenset({"password_wo_version"}),
    "lium_runner": frozenset({"timeouts"}),
    # where a cluster was placed: its fabric and filter (taken into the state in place at import)
    "lium_cluster": frozenset({*OfferFilter.fields(), "fabric_id", "timeouts"}),
    # Lium keeps the workspace's id (`workspace_id`), not the name a config gives; a PGP key is never sent
    "lium_api_key": frozenset({"workspace", "pgp_key"}),
}
FABRICS = ("roce-iad-a100-01", "ib-sjc-h100-01")  # the packaged catalog's
PUBLIC_CLUSTER_TEMPLATE = next(
    t.id for t in public_templates(image_catalog()) if t.docker_image == CLUSTER_IMAGE_REPOSITORY
)


@dataclass(frozen=True)
class Keys:
    """Two public key lines: the provider's own and a spare pair's (for arguments that take a key)."""

    provider: str
    spare: str


def stack_arguments(keys: Keys) -> dict[str, dict[str, Any]]:
    """The live stack: arguments by resource address, in Terraform's JSON syntax.

    The pod sets no offer filter (it rents the cheapest offer, an RTX 3090 whose state spells
    ``NVIDIA GeForce RTX 3090``), so every filter step changes one filter argument alone.
    """
    return {
        CREDENTIAL: {
            "username": "matrix-bot",
            "password_wo": "${var.registry_password}",
            "password_wo_version": 1,
        },
        TEMPLATE: {
            "name": "matrix",
            "image": "python:3.11-slim",
            "entrypoint": "/bin/sh",
            "startup_commands": "-c 'exec sleep infinity'",
            "environment": {"HF_HOME": "/root/.cache/huggingface"},
            "internal_ports": [22, 10022, 8888],
        },
        SPARE_TEMPLATE: {"name": "matrix-spare", "image": CLUSTER_IMAGE},
        VOLUME: {"name": "matrix-data", "description": "shared training data"},
        POD: {"name": "matrix-pod", "template_id": "${lium_template.t.id}"},
        RUNNER: {
            "pod_id": "${lium_pod.p.id}",
            "ssh_host_key": "${lium_pod.p.ssh_host_key}",
            "authorized_keys": [keys.spare],
            "environment": {"STACK": "matrix"},
            "smoke_test": ["python3 -c 'print(6 * 7)'"],
        },
        CLUSTER: {
            "name": "matrix-cluster",
            "node_count": 2,
            "template_id": "${lium_template.spare.id}",
            "termination_hours": 12,
        },
        SSH_KEY: {"name": "matrix-key", "public_key": keys.spare},
        API_KEY: {"name": "matrix-ci", "pod_visibility": "own", "max_budget_usd": 100},
        BACKUP: {"pod_id": "${lium_pod.p.id}", "path": "/root"},
    }


def write_stack(tf: Terraform, arguments: Mapping[str, Mapping[str, Any]]) -> None:
    resources: dict[str, dict[str, Any]] = {}
    for address, values in arguments.items():
        type_name, name = address.split(".")
        resources.setdefault(type_name, {})[name] = values
    variable = {"registry_password": {"type": "string", "sensitive": True, "ephemeral": True}}
    tf.write(json.dumps({"variable": variable, "resource": resources}, indent=2), "main.tf.json")


# -- the live stack ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    """What the steps' values are made from: the applied state, the pod's offer, the offers around it."""

    state: dict[str, dict[str, Any]]
    """Attributes by resource address."""
    pod_offer: Offer
    offers: list[Offer]
    """Every 1-GPU offer the feed lists now."""
    keys: Keys


@dataclass(frozen=True)
class LiveStack:
    """The applied stack's working directory, the arguments it was applied with, and what it holds."""

    tf: Terraform
    arguments: dict[str, dict[str, Any]]
    live: Live


@pytest.fixture(scope="module")
def stack_live(
    emulator: RunningEmulator, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveStack]:
    """Every resource applied once; destroyed at the end of the module, leaving nothing behind."""
    directory = tmp_path_factory.mktemp("matrix")
    account = new_account(emulator, directory)
    spare = ssh_keypair(directory / "spare")
    keys = Keys(
        provider=account.key_file.with_suffix(".pub").read_text().strip(),
        spare=spare.with_suffix(".pub").read_text().strip(),
    )
    arguments = stack_arguments(keys)
    tf = Terraform(
        directory / "tf",
        # One stack: the imports go into fresh states of it, as after a lost state.
        {
            **terraform_env,
            **account.env,
            "TF_VAR_registry_password": REGISTRY_PASSWORD,
            "LIUM_STACK": "matrix",
            "LIUM_SESSION_TOKEN": session_token(account),
        },
    )
    tf.write(PROVIDER_BLOCK, "providers.tf")
    write_stack(tf, arguments)
    tf.init()
    created = http.post(
        f"{emulator.api_url}/workspaces",
        json={"name": OTHER_WORKSPACE},
        headers={"Authorization": f"Bearer {tf.env['LIUM_SESSION_TOKEN']}"},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    try:
        tf.apply()
        state = {f"{r['type']}.{r['name']}": r["instances"][0]["attributes"] for r in tf.resources()}
        offers = find_offers(feed_url_for(emulator.api_url), OfferFilter(gpu_count=1))
        pod_offer = next((o for o in offers if o.executor_id == state[POD]["executor_id"]), None)
        assert pod_offer is not None, f"the feed lists no 1-GPU offer of the pod's executor: {state[POD]}"
        yield LiveStack(tf, arguments, Live(state, pod_offer, offers, keys))
    finally:
        write_stack(tf, arguments)
        tf.destroy()
        assert_nothing_left(account)


# -- steps ---------------------------------------------------------------------------------------------------

ValueOf = Callable[[Live], object]


@dataclass(frozen=True)
class Step:
    """Set ``attribute`` of ``address`` to a value; what the plan must do follows from the schema.

    ``outcome`` is given only for a conditional rule (the pod's offer filter), with ``case`` saying why:
    ``"update"``/``"replace"``, or ``"no offer"`` when no offer satisfies the new filter either (the plan
    then fails as creating a pod with it would, naming the argument).
    """

    address: str
    attribute: str
    value: ValueOf
    outcome: Outcome | None = None
    case: str = ""
    collateral: tuple[tuple[str, str], ...] = ()
    """What else an in-place change must plan, by address (a pod's new container replaces its runner)."""
    companions: tuple[tuple[str, object], ...] = ()
    """Arguments set with this one, which it needs (a restore's backup and directory go together)."""

    @property
    def type_name(self) -> str:
        return self.address.split(".")[0]

    @property
    def id(self) -> str:
        return f"{self.address}.{self.attribute}" + (f"[{self.case}]" if self.case else "")


def given(value: object) -> ValueOf:
    return lambda live: value


def the_pod(measure: Callable[[Offer], object]) -> ValueOf:
    """The running pod's own value: the boundary a filter can ask for and still be satisfied."""
    return lambda live: measure(live.pod_offer)


def beyond_the_pod(measure: Callable[[Offer], float]) -> ValueOf:
    """The largest value among the offers: some offer has it, and the running pod has less."""

    def value(live: Live) -> float:
        best = max(measure(o) for o in live.offers)
        assert best > measure(live.pod_offer), "the case needs an offer that has more than the pod"
        return best

    return value


def country(region: str) -> str:
    return region.split("-", 1)[0]


def another_country(live: Live) -> list[str]:
    """A country where some offer is, but not the pod."""
    return [
        next(country(o.region) for o in live.offers if country(o.region) != country(live.pod_offer.region))
    ]


def the_short_spelling(live: Live) -> str:
    """The short spelling: ``"RTX 3090"`` on a pod whose state spells its GPU ``NVIDIA GeForce RTX 3090``."""
    assert live.state[POD]["gpu"] == "NVIDIA GeForce RTX 3090", f"the case needs that pod: {live.state[POD]}"
    return "RTX 3090"


def another_gpu(live: Live) -> str:
    return next(o.gpu_model for o in live.offers if o.gpu != live.pod_offer.gpu)


def the_other_tier(live: Live) -> bool:
    assert any(o.spot != live.pod_offer.spot for o in live.offers), (
        "the case needs an offer of the other tier"
    )
    return not live.pod_offer.spot


def half_the_pod_price(live: Live) -> float:
    assert live.pod_offer.price_per_hour == min(o.price_per_hour for o in live.offers), "no offer is cheaper"
    return live.pod_offer.price_per_hour / 2


def another_executor(live: Live) -> str:
    return next(o.executor_id for o in live.offers if o.executor_id != live.pod_offer.executor_id)


def the_other_fabric(live: Live) -> str:
    return next(f for f in FABRICS if f != live.state[CLUSTER]["fabric_id"])


def host_key_of(key_line: str) -> str:
    """``<type> <base64>`` of a public key line: the shape of a pinned host key."""
    return " ".join(key_line.split()[:2])


TIMEOUTS = {"create": "20m"}
SOME_BACKUP = "5d2c6b1a-0f9e-4d8c-b7a6-958473625140"
OTHER_WORKSPACE = "matrix-team"  # a team workspace the fixture creates beside the personal one
STEPS = (
    Step(CREDENTIAL, "username", given("matrix-bot-2")),
    Step(CREDENTIAL, "password_wo", given("another-registry-secret")),
    Step(CREDENTIAL, "password_wo_version", given(2)),
    Step(TEMPLATE, "name", given("matrix-renamed")),
    Step(TEMPLATE, "image", given("python:3.12-slim")),
    Step(TEMPLATE, "entrypoint", given("/bin/bash")),
    Step(TEMPLATE, "startup_commands", given("-c 'exec sleep 86400'")),
    Step(TEMPLATE, "environment", given({"HF_HOME": "/mnt/hf"})),
    Step(TEMPLATE, "internal_ports", given([22, 10022, 8888, 9000])),
    Step(TEMPLATE, "local_volume_path", given("/workspace")),
    Step(TEMPLATE, "is_private", given(False)),
    Step(TEMPLATE, "docker_credential_id", given("${lium_docker_credential.c.id}")),
    Step(VOLUME, "name", given("matrix-data-2")),
    Step(VOLUME, "description", given("another description")),
    Step(POD, "name", given("matrix-pod-2")),
    # switched in place: the new container's host key replaces the runner pinned to the old one
    Step(POD, "template_id", given("${lium_template.spare.id}"), collateral=(("lium_runner.r", "replace"),)),
    Step(POD, "gpu_count", given(2)),
    Step(POD, "executor_id", another_executor),
    Step(POD, "ssh_public_key", lambda live: live.keys.spare),
    Step(POD, "volume_id", given("${lium_volume.v.id}")),
    # the keys a rent authorises: none more (the pod's own key listed, or none) keeps the pod
    Step(POD, "authorized_keys", lambda live: [live.keys.provider], "update", "the pod's own key"),
    Step(POD, "authorized_keys", lambda live: [live.keys.spare], "replace", "a key more"),
    Step(POD, "wait_for_ports", given([22])),
    Step(POD, "timeouts", given(TIMEOUTS)),
    Step(POD, "termination_hours", given(24)),  # moves the removal in place
    Step(POD, "jupyter_port", given(8888)),  # installed in place
    Step(POD, "enable_backups", given(True)),
    Step(POD, "restore_backup_id", given(SOME_BACKUP), companions=(("restore_path", "/restored"),)),
    Step(POD, "restore_path", given("/restored"), companions=(("restore_backup_id", SOME_BACKUP),)),
    # The offer filter: the pod runs an RTX 3090 (state: "NVIDIA GeForce RTX 3090") at the
    # cheapest price there is, in us-ca, secure (not spot).
    Step(POD, "gpu", the_short_spelling, "keep", "the same GPU, spelt short"),
    Step(POD, "gpu", lambda live: "RTX 3090 24GB", "update", "the pod's GPU and its memory"),
    Step(POD, "gpu", another_gpu, "replace", "another GPU"),
    Step(POD, "max_price_per_hour", the_pod(lambda o: o.price_per_hour), "update", "the pod's price"),
    Step(POD, "max_price_per_hour", half_the_pod_price, NO_OFFER, "below every offer"),
    Step(POD, "regions", lambda live: [country(live.pod_offer.region)], "update", "the pod's country"),
    Step(POD, "regions", the_pod(lambda o: [o.region]), "update", "the pod's region"),
    Step(POD, "regions", another_country, "replace", "another country"),
    Step(POD, "min_memory_gib", the_pod(lambda o: o.memory_gib), "update", "the pod's memory"),
    Step(POD, "min_memory_gib", beyond_the_pod(lambda o: o.memory_gib), "replace", "more than the pod has"),
    Step(POD, "min_disk_gb", the_pod(lambda o: o.disk_gb), "update", "the pod's disk"),
    Step(POD, "min_disk_gb", beyond_the_pod(lambda o: o.disk_gb), "replace", "more than the pod has"),
    Step(POD, "spot", the_pod(lambda o: o.spot), "update", "the pod's tier"),
    Step(POD, "spot", the_other_tier, "replace", "the other tier"),
    Step(RUNNER, "pod_id", given("0b6f6f7e-1d2c-4b8a-9a53-5c2f0d7e8a42")),
    Step(RUNNER, "ssh_host_key", lambda live: host_key_of(live.keys.provider)),
    Step(RUNNER, "runner_version", given("0.22.6")),
    Step(RUNNER, "runner_download_url", given("https://example.invalid/dstack-runner/{version}/{arch}")),
    Step(RUNNER, "runner_binary_path", given("/opt/dstack-runner")),
    Step(RUNNER, "authorized_keys", lambda live: [live.keys.provider]),
    Step(RUNNER, "environment", given({"STACK": "matrix-2"})),
    Step(RUNNER, "smoke_test", given(["true"])),
    Step(RUNNER, "timeouts", given(TIMEOUTS)),
    Step(CLUSTER, "name", given("matrix-cluster-2")),
    Step(CLUSTER, "node_count", given(3)),
    Step(CLUSTER, "template_id", given(PUBLIC_CLUSTER_TEMPLATE)),
    Step(CLUSTER, "fabric_id", the_other_fabric),
    Step(CLUSTER, "ssh_public_key", lambda live: live.keys.spare),
    Step(CLUSTER, "authorized_keys", given([]), "update", "still no more keys"),
    Step(CLUSTER, "authorized_keys", lambda live: [live.keys.spare], "replace", "a key more"),
    Step(CLUSTER, "wait_for_ports", given([22])),
    Step(CLUSTER, "termination_hours", given(24)),  # moves every member's removal in place
    Step(CLUSTER, "timeouts", given(TIMEOUTS)),
    # the offer filter chose the nodes: a cluster cannot move, so any change replaces it
    Step(CLUSTER, "gpu", given("H100")),
    Step(CLUSTER, "gpu_count", given(8)),
    Step(CLUSTER, "max_price_per_hour", given(100.0)),
    Step(CLUSTER, "regions", given(["us"])),
    Step(CLUSTER, "min_memory_gib", given(1.0)),
    Step(CLUSTER, "min_disk_gb", given(1.0)),
    Step(CLUSTER, "spot", given(False)),
    Step(SSH_KEY, "name", given("matrix-key-2")),
    Step(SSH_KEY, "public_key", lambda live: live.keys.provider),
    Step(API_KEY, "name", given("matrix-ci-2")),
    Step(API_KEY, "scopes", given(["read"])),
    Step(API_KEY, "pod_visibility", given("account")),
    Step(API_KEY, "workspace", given("personal"), "update", "its own workspace, in another case"),
    Step(API_KEY, "workspace", given(OTHER_WORKSPACE), "replace", "another workspace"),
    Step(API_KEY, "daily_budget_usd", given(10)),
    Step(API_KEY, "monthly_budget_usd", given(50)),
    Step(API_KEY, "max_budget_usd", given(200)),
    Step(API_KEY, "pgp_key", given("bm90IGEga2V5")),
    Step(BACKUP, "pod_id", given("0b6f6f7e-1d2c-4b8a-9a53-5c2f0d7e8a42")),
    Step(BACKUP, "path", given("/root/checkpoints")),
    Step(BACKUP, "frequency_hours", given(2)),
    Step(BACKUP, "retention_days", given(30)),
)


def is_conditional(type_name: str, attribute: str) -> bool:
    """Whether replacing depends on the values, so each case must name its outcome."""
    if type_name == "lium_pod" and attribute in OfferFilter.search_fields():
        return True
    if type_name in ("lium_pod", "lium_cluster") and attribute == "authorized_keys":
        # the same keys in another order, or with the pod's own, are kept (plan_same_keys)
        return True
    if type_name == "lium_api_key" and attribute == "workspace":
        return True  # the same workspace written another way keeps the key
    attr = RESOURCES[type_name].schema().block.attributes.get(attribute)
    return attr is not None and any(isinstance(rule, RequiresReplaceIf) for rule in attr.spec.plan)


def declared_action(type_name: str, attribute: str) -> Action:
    """What the schema says a change of this argument alone plans."""
    block = RESOURCES[type_name].schema().block
    if attribute in block.blocks:
        rules = [rule for _, a in block.blocks[attribute].block.walk_attributes() for rule in a.spec.plan]
        return "replace" if any(isinstance(rule, RequiresReplace) for rule in rules) else "update"
    attr = block.attributes[attribute]
    if attr.spec.write_only:
        return "keep"  # Terraform never compares write-only values: only a *_wo_version change sends one
    return "replace" if attr.requires_replace else "update"


def expected_outcome(step: Step) -> Outcome:
    return step.outcome if step.outcome is not None else declared_action(step.type_name, step.attribute)


def test_every_argument_of_every_resource_has_a_step() -> None:
    assert {a.split(".")[0] for a in stack_arguments(Keys("", ""))} == set(RESOURCES), "a resource is missing"
    for type_name in RESOURCES:
        stepped = {s.attribute for s in STEPS if s.type_name == type_name}
        assert stepped == arguments_of(type_name), (
            f"{type_name}: arguments without a step {sorted(arguments_of(type_name) - stepped)}, "
            f"steps of no argument {sorted(stepped - arguments_of(type_name))}"
        )
    for step in STEPS:
        conditional = is_conditional(step.type_name, step.attribute)
        assert (step.outcome is not None) == conditional, (
            f"{step.id}: name the outcome exactly for conditional rules; derive the others from the schema"
        )
    for attribute in OfferFilter.search_fields():
        outcomes = {s.outcome for s in STEPS if s.type_name == "lium_pod" and s.attribute == attribute}
        assert "update" in outcomes and outcomes - {"update"}, f"{attribute}: needs a kept and a broken case"


def test_the_applied_stack_plans_no_change(stack_live: LiveStack) -> None:
    plan = saved_plan(stack_live.tf)
    if plan.crashes or plan.returncode != 0:
        pytest.fail(f"planning the applied stack failed:\n{plan.errors}")
    actions = {address: change.action for address, change in plan.changes.items()}
    assert actions == dict.fromkeys(stack_live.arguments, "keep")


@pytest.mark.parametrize("step", STEPS, ids=lambda step: step.id)
def test_one_change_plans_what_the_schema_declares(stack_live: LiveStack, step: Step) -> None:
    value = step.value(stack_live.live)
    arguments = stack_live.arguments
    changed = {**arguments[step.address], **dict(step.companions), step.attribute: value}
    write_stack(stack_live.tf, {**arguments, step.address: changed})
    plan = saved_plan(stack_live.tf, "-refresh=false")  # nothing drifted: the steps test the plan rules
    expected = expected_outcome(step)
    case = f" ({step.case})" if step.case else ""
    what = f"{step.address}: {step.attribute} = {json.dumps(value)}{case}: expected {expected}"
    if plan.crashes:
        pytest.fail(f"{what}, but the plan crashed ({', '.join(plan.crashes)}):\n{plan.errors}")
    if expected == NO_OFFER:
        if plan.returncode == 0 or NO_OFFER_ERROR not in plan.stderr or step.attribute not in plan.stderr:
            pytest.fail(
                f"{what}: the plan must fail with {NO_OFFER_ERROR!r} at {step.attribute}:\n{plan.errors}"
            )
        return
    if plan.returncode != 0:
        pytest.fail(f"{what}, but the plan failed:\n{plan.errors}")
    change = plan.changes[step.address]
    planned = f"planned {change.action} {list(change.actions)}, replace_paths {[list(p) for p in change.replace_paths]}"
    assert change.action == expected, f"{what}, {planned}, changed {change.changed_attributes()}"
    if expected == "replace":
        assert (step.attribute,) in change.replace_paths, f"{what}, {planned}: not naming {step.attribute}"
    else:
        collateral = {
            a: c.action for a, c in plan.changes.items() if a != step.address and c.action != "keep"
        }
        assert collateral == dict(step.collateral), (
            f"{what}; an in-place change must leave the rest alone, but it also plans {collateral}"
        )


# -- import, then plan -----------------------------------------------------------------------------------


def import_refusal(type_name: str, import_id: str) -> str | None:
    """The error summary the resource's ``import_state`` gives for ``import_id``, or None when it imports."""
    try:
        RESOURCES[type_name]().import_state(Context(CancelToken(), Logger("tests")), import_id)
    except TFError as exc:
        return exc.summary
    return None


@pytest.mark.parametrize("type_name", sorted(RESOURCES))
def test_import_then_plan(stack_live: LiveStack, type_name: str, tmp_path: Path) -> None:
    address = IMPORTED[type_name]
    live = stack_live.live.state[address]
    example = adapt_example(type_name, live)
    tf = Terraform(tmp_path / "import", dict(stack_live.tf.env))
    tf.write(PROVIDER_BLOCK, "providers.tf")
    tf.write(example.text, "main.tf")
    target = f"{type_name}.{example.name}"
    tf.write(f'import {{\n  to = {target}\n  id = "{live["id"]}"\n}}\n', "import.tf")
    tf.init()
    plan = saved_plan(tf)
    what = f"{address} imported as {target} with its example\n--- config\n{example.text}---"
    if plan.crashes:
        pytest.fail(f"{what}\nthe plan crashed ({', '.join(plan.crashes)}):\n{plan.errors}")
    refusal = import_refusal(type_name, live["id"])
    if refusal is not None:
        if plan.returncode != 0 and refusal in plan.stderr:
            return
        pytest.fail(f"{what}\nexpected the import to fail with {refusal!r}:\n{plan.errors}")
    if plan.returncode != 0:
        pytest.fail(f"{what}\nthe plan failed:\n{plan.errors}")
    change = plan.changes[target]
    assert change.importing, f"{what}\n{target} is not imported"
    unreadable = NOT_READ_BACK.get(type_name, frozenset()) & example.arguments
    expected = ("update", sorted(unreadable)) if unreadable else ("keep", [])
    differing = sorted(set(change.changed_attributes()) & arguments_of(type_name))
    assert (change.action, differing) == expected, (
        f"{what}\nexpected {expected[0]} of {expected[1]}, planned {change.action} of {differing}, "
        f"replace_paths {[list(p) for p in change.replace_paths]}"
    )
