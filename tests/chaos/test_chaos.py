"""The seeded chaos scenarios (``LIUM_CHAOS_SCENARIOS``, default 32; ``LIUM_CHAOS_SEED``): see harness.py
(and twins.py for two stacks of the same names)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.catalogs.images import image_catalog
from lium_emulator.launcher import RunningEmulator
from tests.chaos.copies import CopiedStateRun
from tests.chaos.harness import RestartableEmulator, ScenarioRun
from tests.chaos.outcome import Outcome
from tests.chaos.scenarios import TWIN_LABELS, Scenario, generate, render
from tests.chaos.summary import chaos_count, chaos_seed
from tests.chaos.travels import TravellingRun
from tests.chaos.twins import STAGING, TwinRun
from tests.support.lium import PROVIDER_BLOCK, Account, new_account, ssh_keypair
from tests.support.postgres import PostgresServer
from tests.support.proxy import RecordingProxy
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

PRIVATE = next(image for image in image_catalog() if image.private)
TRAVELLING = ("moved-directory", "migrated-backend", "edited-id", "killed-cluster-create")


def secrets_of(account: Account) -> dict[str, str]:
    """What must appear in no output and no file a scenario leaves."""
    return {
        "the API key": account.api_key,
        "the registry password": PRIVATE.registry_password or "",
        "the SSH private key": account.key_file.read_text(),
    }


def backend_block(scenario: Scenario, postgres: PostgresServer | None) -> str:
    """The ``terraform`` block's backend for the scenario: none (local state), or a ``pg`` schema of its own."""
    if scenario.backend == "local":
        return ""
    assert postgres is not None, "a pg scenario needs the chaos PostgreSQL server"
    schema = f"chaos_{scenario.seed}_{scenario.index}"
    return f'  backend "pg" {{\n    conn_str    = "{postgres.conn_str}"\n    schema_name = "{schema}"\n  }}\n'


def run(
    scenario: Scenario,
    account: Account,
    make_terraform: Callable[..., Terraform],
    emulator: RestartableEmulator | None,
    postgres: PostgresServer | None = None,
) -> Outcome:
    password = PRIVATE.registry_password or ""
    body = render(scenario.stack, f"chaos{scenario.index:03d}", PRIVATE.reference)
    config = PROVIDER_BLOCK.replace("terraform {\n", "terraform {\n" + backend_block(scenario, postgres), 1)
    tf = make_terraform(config + body, **account.env, TF_VAR_registry_password=password)
    tf.init()
    if scenario.category in TRAVELLING:
        return TravellingRun(scenario, tf, account, secrets_of(account), postgres).execute()
    kind = CopiedStateRun if scenario.category == "copied-state" else ScenarioRun
    return kind(scenario, tf, account, secrets_of(account), emulator).execute()


def run_twins(scenario: Scenario, account: Account, make_terraform: Callable[..., Terraform]) -> Outcome:
    """Two stacks of one configuration (the same names), each behind its own proxy: in two directories,
    or in the default and the ``staging`` workspace of one."""
    body = PROVIDER_BLOCK + render(
        scenario.stack, f"chaos{scenario.index:03d}", PRIVATE.reference, labelled=True
    )
    with (
        RecordingProxy(account.emulator.root_url) as first,
        RecordingProxy(account.emulator.root_url) as second,
    ):
        proxies = dict(zip(TWIN_LABELS, (first, second), strict=True))
        env = {
            label: {**account.env, "LIUM_API_URL": f"{proxy.url}/api", "TF_VAR_stack_label": label}
            for label, proxy in proxies.items()
        }
        bystander, hit = TWIN_LABELS
        stacks = {bystander: make_terraform(body, **env[bystander])}
        stacks[bystander].init()
        if scenario.twin == "directories":
            stacks[hit] = make_terraform(body, **env[hit])
            stacks[hit].init()
        else:
            stacks[bystander].run("workspace", "new", STAGING)
            stacks[bystander].run("workspace", "select", "default")
            stacks[hit] = Terraform(
                stacks[bystander].workdir, {**stacks[bystander].env, **env[hit], "TF_WORKSPACE": STAGING}
            )
        return TwinRun(scenario, stacks, proxies, account, secrets_of(account)).execute()


@pytest.mark.parametrize("scenario", generate(chaos_seed(), chaos_count()), ids=lambda s: s.name)
def test_scenario(
    scenario: Scenario,
    shared_emulator: RunningEmulator,
    make_terraform: Callable[..., Terraform],
    tmp_path: Path,
    record_outcome: Callable[[Outcome], None],
    request: pytest.FixtureRequest,
) -> None:
    if scenario.category == "restart":
        emulator = RestartableEmulator(tmp_path / "emulator", "chaos-" + secrets.token_hex(12))
        try:
            account = Account(
                emulator.start(), emulator.api_key, ssh_keypair(tmp_path / "ssh"), tmp_path / "state"
            )
            outcome = run(scenario, account, make_terraform, emulator)
        finally:
            sandboxes_left = emulator.close()
        # An emulator bug, not the provider's: counted and reported, the processes are killed.
        outcome.orphaned_sandboxes = sandboxes_left
        if sandboxes_left:
            outcome.notes.append(
                f"{sandboxes_left} sandbox process(es) outlived the emulator and were killed"
            )
    else:
        account = new_account(shared_emulator, tmp_path)
        with account.faults():
            if scenario.category == "twin-stacks":
                outcome = run_twins(scenario, account, make_terraform)
            else:
                needs = scenario.backend == "pg" or scenario.category == "migrated-backend"
                postgres = request.getfixturevalue("chaos_postgres") if needs else None
                outcome = run(scenario, account, make_terraform, None, postgres)
    record_outcome(outcome)
    print(f"{scenario.name}: {outcome.seconds:.1f} s; " + "; ".join(outcome.steps + outcome.notes))
    assert not outcome.failures, (
        f"{scenario}\n" + "\n".join(outcome.failures) + "\nnotes: " + "; ".join(outcome.notes)
    )
