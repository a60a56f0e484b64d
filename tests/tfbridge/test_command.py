"""Which Terraform command line asks for a destroy: the one fact a plan cannot get from the protocol."""

from __future__ import annotations

import pytest

from tfbridge.command import destroy_requested, destroys_everything, subcommand_of


@pytest.mark.parametrize(
    ("argv", "environment", "expected"),
    [
        (["destroy", "-auto-approve"], {}, True),
        (["-chdir=infra", "destroy"], {}, True),
        (["apply", "-destroy", "-auto-approve"], {}, True),
        (["plan", "-destroy", "-out=tfplan"], {}, True),
        (["plan", "-input=false"], {"TF_CLI_ARGS_plan": "-destroy"}, True),
        (["apply"], {"TF_CLI_ARGS": "-destroy -no-color"}, True),
        (["plan", "-input=false"], {}, False),
        (["apply", "-auto-approve", "tfplan"], {}, False),
        (["apply", "-destroy=false"], {}, False),
        (["apply", "-destroy=TRUE"], {}, True),
        (["apply", "--destroy=1"], {}, True),
        (["plan", "-destroy=t"], {}, True),
        (["apply", "-destroy", "-destroy=0"], {}, False),
        (["apply", "-destroy=false"], {"TF_CLI_ARGS_apply": "-destroy"}, False),
        (
            ["apply", "-auto-approve"],
            {"TF_CLI_ARGS": "-destroy=false", "TF_CLI_ARGS_apply": "-destroy"},
            True,
        ),
        (["plan", "-destroyer"], {}, False),
        (["plan"], {"TF_CLI_ARGS_apply": "-destroy"}, False),
        (["plan"], {"TF_CLI_ARGS_plan": "-destroy 'unbalanced"}, False),
        (["import", "lium_pod.p", "destroy"], {}, False),
        ([], {}, False),
    ],
)
def test_destroy_requested_reads_the_subcommand_its_flags_and_tf_cli_args(
    argv: list[str], environment: dict[str, str], expected: bool
) -> None:
    assert destroy_requested(argv, environment) is expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["test", "-verbose"], "test"),
        (["-chdir=modules/pod", "test"], "test"),
        (["plan", "-out=tfplan"], "plan"),
        (["-version"], ""),
        ([], ""),
    ],
)
def test_the_subcommand_is_the_first_word_that_is_not_a_flag(argv: list[str], expected: str) -> None:
    assert subcommand_of(argv) == expected


@pytest.mark.parametrize(
    ("argv", "environment", "expected"),
    [
        (["destroy", "-auto-approve"], {}, True),
        (["-chdir=infra", "apply", "-destroy", "-auto-approve"], {}, True),
        (["apply", "-auto-approve"], {"TF_CLI_ARGS_apply": "-destroy"}, True),
        (["plan", "-destroy"], {}, False),  # speculative: nothing is deleted after it
        (["destroy", "-target=lium_pod.p"], {}, False),
        (["destroy", "-target", "lium_pod.p"], {}, False),
        (["destroy"], {"TF_CLI_ARGS": "-target=lium_pod.p"}, False),
        (["apply", "plan.bin"], {}, False),
        (["apply", "-destroy=false"], {}, False),
    ],
)
def test_a_whole_destroy_deletes_everything_and_is_not_narrowed_by_target(
    argv: list[str], environment: dict[str, str], expected: bool
) -> None:
    assert destroys_everything(argv, environment) is expected
