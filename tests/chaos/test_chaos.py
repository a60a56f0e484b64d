"""The seeded chaos scenarios (``LIUM_CHAOS_SCENARIOS``, default 30; ``LIUM_CHAOS_SEED``): see harness.py."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.images import image_catalog
from lium_emulator.launcher import RunningEmulator
from tests.chaos.conftest import chaos_count, chaos_seed
from tests.chaos.harness import Outcome, RestartableEmulator, ScenarioRun
from tests.chaos.scenarios import Scenario, generate, render
from tests.support.lium import PROVIDER_BLOCK, Account, new_account, ssh_keypair
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

PRIVATE = next(image for image in image_catalog() if image.private)


def run(
    scenario: Scenario,
    account: Account,
    make_terraform: Callable[..., Terraform],
    emulator: RestartableEmulator | None,
) -> Outcome:
    password = PRIVATE.registry_password or ""
    body = render(scenario.stack, f"chaos{scenario.index:03d}", PRIVATE.reference)
    tf = make_terraform(PROVIDER_BLOCK + body, **account.env, TF_VAR_registry_password=password)
    tf.init()
    secrets_to_hide = {
        "the API key": account.api_key,
        "the registry password": password,
        "the SSH private key": account.key_file.read_text(),
    }
    return ScenarioRun(scenario, tf, account, secrets_to_hide, emulator).execute()


@pytest.mark.parametrize("scenario", generate(chaos_seed(), chaos_count()), ids=lambda s: s.name)
def test_scenario(
    scenario: Scenario,
    shared_emulator: RunningEmulator,
    make_terraform: Callable[..., Terraform],
    tmp_path: Path,
    chaos_log: list[Outcome],
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
            outcome = run(scenario, account, make_terraform, None)
    chaos_log.append(outcome)
    print(f"{scenario.name}: {outcome.seconds:.1f} s; " + "; ".join(outcome.steps + outcome.notes))
    assert not outcome.failures, (
        f"{scenario}\n" + "\n".join(outcome.failures) + "\nnotes: " + "; ".join(outcome.notes)
    )
