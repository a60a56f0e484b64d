"""What a container cannot start with is refused at plan, naming the attribute, before any request.

Linux bounds one process start (one argument or ``KEY=value`` string at most 128 KiB, all of them a few
MiB); a NUL cannot be in either; a shell-style command line needs its quotes closed; a port is mapped
once; an id is a lower-case UUID. Each used to be found only when the pod started (BROKEN) or at apply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from lium_provider.resources.backup_config import BackupConfigModel
from lium_provider.resources.inputs import COMMAND_LINE_BYTES, ENVIRONMENT_BYTES, EXEC_STRING_BYTES
from lium_provider.resources.pod import PodModel
from lium_provider.resources.runner import RunnerModel
from lium_provider.resources.template import TemplateModel
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, pod_block, sleeping_template
from tests.support.terraform import Terraform, flat
from tfbridge.schema import validate

TEMPLATE = {"name": "t", "image": "python:3.11-slim"}
POD = {"name": "p", "template_id": "3f1c2b9e-8d4a-4e6f-9a1b-2c3d4e5f6a7b"}
RUNNER = {"pod_id": "3f1c2b9e-8d4a-4e6f-9a1b-2c3d4e5f6a7b", "ssh_host_key": "ssh-ed25519 AAAA"}


def refused(model: type[BaseModel], config: dict[str, Any]) -> list[tuple[tuple[str | int, ...] | None, str]]:
    return [(d.path, d.detail) for d in validate(model, config)]


@pytest.mark.parametrize(
    ("extra", "attribute", "words"),
    [
        ({"environment": {"BIG": "x" * EXEC_STRING_BYTES}}, "environment", "one variable may have at most"),
        (
            {"environment": {f"V{i}": "x" * (EXEC_STRING_BYTES - 10) for i in range(9)}},
            "environment",
            f"at most {ENVIRONMENT_BYTES}",
        ),
        ({"environment": {"A=B": "c"}}, "environment", "cannot be an environment variable's name"),
        ({"environment": {"A": "b\0c"}}, "environment", "NUL"),
        ({"startup_commands": "-c 'echo hi\0'"}, "startup_commands", "control character"),
        ({"startup_commands": "-c 'echo \x1b[2J'"}, "startup_commands", "control character"),
        ({"startup_commands": "-c 'unclosed"}, "startup_commands", "close every quote"),
        (
            {"startup_commands": " ".join(["x" * 1000] * 300)},
            "startup_commands",
            f"at most {COMMAND_LINE_BYTES}",
        ),
        ({"entrypoint": "/bin/sh\n-x"}, "entrypoint", "control character"),
        ({"internal_ports": [22, 22]}, "internal_ports", "listed twice"),
        ({"docker_credential_id": "registry-login"}, "docker_credential_id", "not a Lium id"),
    ],
)
def test_a_template_a_container_cannot_start_with_is_refused(
    extra: dict[str, Any], attribute: str, words: str
) -> None:
    problems = refused(TemplateModel, {**TEMPLATE, **extra})
    assert [path[0] if path else None for path, _ in problems] == [attribute], problems
    assert words in problems[0][1], problems


def test_what_a_shell_script_may_hold_is_accepted() -> None:
    fine = {
        "startup_commands": "-c 'set -e\n\tpip install -r req.txt\n\texec python train.py'",
        "entrypoint": "/bin/bash -l",
        "environment": {"PATH": "/usr/bin", "JSON": '{"a": "b c"}', "EMPTY": ""},
        "internal_ports": [22, 10022, 8888],
    }
    assert refused(TemplateModel, {**TEMPLATE, **fine}) == []


@pytest.mark.parametrize(
    ("model", "config", "attribute"),
    [
        (PodModel, {**POD, "executor_id": "node-7"}, "executor_id"),
        (PodModel, {**POD, "executor_id": "3F1C2B9E-8D4A-4E6F-9A1B-2C3D4E5F6A7B"}, "executor_id"),
        (PodModel, {**POD, "template_id": "python"}, "template_id"),
        (PodModel, {**POD, "volume_id": ""}, "volume_id"),
        (RunnerModel, {**RUNNER, "pod_id": "pod-1"}, "pod_id"),
    ],
)
def test_an_id_that_is_not_a_lium_id_is_refused(
    model: type[BaseModel], config: dict[str, Any], attribute: str
) -> None:
    problems = refused(model, config)
    assert [path[0] for path, _ in problems if path] == [attribute], problems
    assert "not a Lium id" in problems[0][1]


@pytest.mark.parametrize(
    ("model", "config", "attribute", "words"),
    [
        (PodModel, {**POD, "restore_path": "restored"}, "restore_path", "absolute path"),
        (PodModel, {**POD, "restore_path": "/root/../etc"}, "restore_path", "without `..`"),
        (PodModel, {**POD, "jupyter_port": 22}, "jupyter_port", "sshd"),
        (PodModel, {**POD, "jupyter_port": 10022}, "jupyter_port", "runner's"),
        (BackupConfigModel, {"pod_id": POD["template_id"], "path": "ckpt"}, "path", "absolute path"),
        (
            BackupConfigModel,
            {"pod_id": POD["template_id"], "path": "/", "frequency_hours": 0},
            "frequency_hours",
            "",
        ),
        (
            BackupConfigModel,
            {"pod_id": POD["template_id"], "path": "/", "retention_days": 366},
            "retention_days",
            "",
        ),
    ],
)
def test_a_pod_path_port_or_schedule_lium_would_refuse_is_refused_at_plan(
    model: type[BaseModel], config: dict[str, Any], attribute: str, words: str
) -> None:
    problems = refused(model, config)
    assert [path[0] for path, _ in problems if path] == [attribute], problems
    assert words in problems[0][1], problems


@pytest.mark.terraform
def test_the_plan_refuses_an_oversized_environment_before_any_request(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    big = "x" * (EXEC_STRING_BYTES + 1)
    body = (
        PROVIDER_BLOCK
        + sleeping_template("limits", extra=f'environment = {{ BIG = "{big}" }}')
        + pod_block("p")
    )
    tf = make_terraform(body, **account.env)
    tf.init()
    result = tf.apply(check=False)
    assert result.returncode == 1, result.stdout
    message = flat(result.stderr)
    assert "Invalid value for environment" in message and "one variable may have at most" in message, message
    assert_nothing_left(account)
    assert account.report()["pods"] == [], "a pod was rented"
