"""Which Terraform command this provider process serves, for the decisions the protocol cannot carry.

``terraform destroy`` (and ``plan``/``apply -destroy``) first refreshes with a normal plan, and any error
a resource's plan raises there aborts the destroy (Terraform 1.11, ``Context.destroyPlan``): nothing
in ``PlanResourceChange`` tells that plan from an ordinary one. A resource that refuses a plan (an
object another stack owns, a damaged id) but must never block a destroy asks :func:`destroying`.

The answer comes from the Terraform process's command line and the ``TF_CLI_ARGS`` variables it
honours (its environment is this process's): Terraform is the launcher's parent, whose pid the
launcher passes on (``TFBRIDGE_TERRAFORM_PID``), else this process's parent. When neither can be read
(another user's process, a ``hidepid`` /proc) the answer is False: a refusal then blocks the destroy,
which fails safe, never deleting what it should not.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from tfbridge.serving.constants import TERRAFORM_PID_ENV

DESTROY_COMMAND = "destroy"
DESTROY_FLAG = "destroy"
TARGET_FLAG = "target"
# What Go's flag package (strconv.ParseBool) reads as true in ``-destroy=<value>``.
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
# The subcommands whose TF_CLI_ARGS_<name> may add -destroy.
_PLANNING_COMMANDS = ("plan", "apply")


def subcommand_of(argv: list[str]) -> str:
    """The subcommand of a Terraform command line without the program (``-chdir=…`` may come first)."""
    return next((w for w in argv if not w.startswith("-")), "")


def destroy_requested(argv: list[str], environment: dict[str, str]) -> bool:
    """Whether a Terraform command line (without the program) and its environment ask for a destroy."""
    subcommand = subcommand_of(argv)
    if subcommand == DESTROY_COMMAND:
        return True
    if subcommand not in _PLANNING_COMMANDS:
        return False
    words = _arguments(argv, environment)
    settings = [setting for word in words if (setting := _destroy_setting(word)) is not None]
    return bool(settings) and settings[-1]  # as in Go's flag package, the last one counts


def _arguments(argv: list[str], environment: dict[str, str]) -> list[str]:
    """The subcommand's arguments as Terraform reads them: ``TF_CLI_ARGS``, then
    ``TF_CLI_ARGS_<command>``, right after the subcommand, then the command line's own."""
    subcommand = subcommand_of(argv)
    words: list[str] = []
    for variable in ("TF_CLI_ARGS", f"TF_CLI_ARGS_{subcommand}"):
        try:
            words += shlex.split(environment.get(variable, ""))
        except ValueError:  # unbalanced quotes: Terraform itself refuses to run with them
            continue
    return words + argv[argv.index(subcommand) + 1 :]


def _destroy_setting(word: str) -> bool | None:
    """What one argument sets ``-destroy`` to (``-destroy``, ``--destroy=1``, ``-destroy=false``…), or
    None when it is another argument."""
    name, has_value, value = word.lstrip("-").partition("=")
    if not word.startswith("-") or name != DESTROY_FLAG:
        return None
    return not has_value or value in GO_TRUE


def _terraform_argv() -> list[str] | None:
    pid = os.environ.get(TERRAFORM_PID_ENV, "")
    if not pid.isdigit():
        pid = str(os.getppid())
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    argv = [os.fsdecode(a) for a in raw.split(b"\0") if a]
    return argv[1:] if argv else None


def destroying() -> bool:
    """Whether the Terraform command this process serves is a destroy (see the module's docstring).

    Read at each call, never cached: a zygote's fork must not inherit an answer made for another run."""
    argv = _terraform_argv()
    return argv is not None and destroy_requested(argv, dict(os.environ))


def destroys_everything(argv: list[str], environment: dict[str, str]) -> bool:
    """Whether a Terraform command line (without the program) and its environment destroy everything its
    state holds and go on to delete (``destroy``, ``apply -destroy``): not a speculative ``plan
    -destroy``, and not one narrowed by ``-target``."""
    if subcommand_of(argv) not in (DESTROY_COMMAND, "apply") or not destroy_requested(argv, environment):
        return False
    flags = (
        word.lstrip("-").partition("=")[0] for word in _arguments(argv, environment) if word.startswith("-")
    )
    return TARGET_FLAG not in flags


def whole_destroy() -> bool:
    """:func:`destroys_everything` for the Terraform command this process serves. Read at each call."""
    argv = _terraform_argv()
    return argv is not None and destroys_everything(argv, dict(os.environ))


def terraform_command() -> str | None:
    """The Terraform subcommand this process serves (``plan``, ``apply``, ``test``…), None when its
    command line cannot be read. Read at each call, like :func:`destroying`."""
    argv = _terraform_argv()
    return None if argv is None else subcommand_of(argv)
