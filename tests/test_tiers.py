"""The unit tier's guard: which command lines need a heavier tier, however they are spelled."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.tiers import tier_needed


@pytest.mark.parametrize(
    ("argv", "tier"),
    [
        (["terraform", "plan"], "terraform"),
        (["/usr/local/bin/terraform", "init"], "terraform"),
        (["sh", "-c", "cd /tmp && terraform apply -auto-approve"], "terraform"),
        (["bash -c 'terraform version'"], "terraform"),
        (["unshare", "--user", "true"], "sandbox"),
        (["env", "FOO=1", "nsenter", "-t", "1"], "sandbox"),
        ([sys.executable, "-m", "release"], "release"),
        ([sys.executable, "-I", "-m", "release"], "release"),
        (["lium-emulator", "serve", "--port", "0"], "sandbox"),
        ([sys.executable, "-X", "dev", "-m", "lium_emulator.cli", "serve"], "sandbox"),
        (["lium-emulator", "serve", "--help"], None),
        ([sys.executable, "-m", "lium_provider.cli", "sweep", "--help"], None),
        (["ssh-keygen", "-q", "-t", "ed25519"], None),
        (["sh", "-c", "echo 'unbalanced"], None),
        ([], None),
    ],
)
def test_a_command_needs_the_tier_of_any_guarded_program_in_it(argv: list[str], tier: str | None) -> None:
    assert tier_needed(argv) == tier


def test_a_unit_test_that_starts_terraform_through_a_shell_fails_naming_the_marker() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"mark it 'terraform'"):
        subprocess.run(["sh", "-c", "terraform version"], check=False)
