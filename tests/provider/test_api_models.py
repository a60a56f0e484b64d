"""Response models accept the variants servers send and name the field when they cannot."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from lium_provider.api.errors import LiumProtocolError
from lium_provider.api.models import (
    DEAD_POD_STATES,
    DELETED,
    DELETING,
    TERMINAL_POD_STATES,
    DockerCredential,
    Event,
    Pod,
    RentRequest,
    Template,
    TemplateSpec,
    User,
    parse_list,
    parse_object,
)
from lium_provider.session import workspace_mismatch

POD_ROW: dict[str, Any] = {
    "id": "6f1c9a52-2a57-4a39-9d0c-0a4b5d7e8f10",
    "pod_name": "train-1",
    "executor_id": "0d7e3b1a-1111-4c3b-8f0e-2b3c4d5e6f70",
    "status": "running",
    "ssh_connect_cmd": "ssh root@203.0.113.7 -p 40022",
    "ports_mapping": {"22": 40022, "10022": "40023"},
    "gpu_name": "RTX 4090",
    "gpu_count": "1",
    "price": "0.35",
    "created_at": "2026-09-06T10:28:00.123456",
    "template": {"id": "tpl-1", "name": "t"},
    "volume": None,
    "unknown_future_field": {"a": 1},
}


def parse_pod(row: dict[str, Any]) -> Pod:
    return parse_object(Pod, row, method="GET", path="/pods/x")


def test_pod_row_variants() -> None:
    pod = parse_pod(POD_ROW)
    assert pod.status == "RUNNING" and pod.is_running and not pod.is_terminal
    assert pod.gpu_count == 1 and pod.price == pytest.approx(0.35)
    assert pod.ports_mapping == {"22": 40022, "10022": 40023}
    assert pod.template_id == "tpl-1" and pod.volume_id is None
    assert pod.created_at == datetime(2026, 9, 6, 10, 28, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "dead", "terminal"),
    [
        ("stopped", True, True),
        ("CREATION_FAILED", True, True),
        ("DELETING", False, True),
        ("PENDING", False, False),
    ],
)
def test_dead_pods_still_exist_and_terminal_ones_include_the_removed(
    status: str, dead: bool, terminal: bool
) -> None:
    pod = parse_pod({**POD_ROW, "status": status})
    assert (pod.status in DEAD_POD_STATES, pod.is_terminal) == (dead, terminal)
    assert {DELETING, DELETED} == TERMINAL_POD_STATES - DEAD_POD_STATES


def test_executor_id_lifted_from_nested_executor() -> None:
    row = {**POD_ROW, "executor_id": None, "executor": {"id": "exec-9"}}
    assert parse_pod(row).executor_id == "exec-9"


def test_timestamp_with_offset_is_converted_to_utc() -> None:
    pod = parse_pod({**POD_ROW, "created_at": "2026-09-06T12:28:00+02:00"})
    assert pod.created_at == datetime(2026, 9, 6, 10, 28, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpu_count", "one", "Pod field 'gpu_count'"),
        ("id", "", "Pod field 'id'"),
        ("status", None, "Pod field 'status'"),
        ("ports_mapping", {"22": "x"}, "Pod field 'ports_mapping.*'"),
    ],
)
def test_bad_field_is_named(field: str, value: object, message: str) -> None:
    with pytest.raises(LiumProtocolError) as caught:
        parse_pod({**POD_ROW, field: value})
    assert message in str(caught.value)
    assert str(caught.value).startswith("GET /pods/x: ")


def test_missing_required_field_in_list_names_item() -> None:
    rows = [POD_ROW, {k: v for k, v in POD_ROW.items() if k != "pod_name"}]
    with pytest.raises(LiumProtocolError, match=r"item 1: Pod field 'pod_name'"):
        parse_list(Pod, rows, method="GET", path="/pods")


def test_list_and_object_shapes_are_enforced() -> None:
    with pytest.raises(LiumProtocolError, match="expected a JSON array, got an object"):
        parse_list(Pod, {"pods": []}, method="GET", path="/pods")
    with pytest.raises(LiumProtocolError, match="expected a JSON object, got an array"):
        parse_object(Pod, [], method="GET", path="/pods/1")
    with pytest.raises(LiumProtocolError, match="item 0: expected a JSON object, got a number"):
        parse_list(Pod, [3], method="GET", path="/pods")


def test_server_dict_key_never_reaches_the_message() -> None:
    secret = "sk-live-secret-key-value"
    with pytest.raises(LiumProtocolError) as caught:
        parse_pod({**POD_ROW, "ports_mapping": {secret: "not-a-port"}})
    assert secret not in str(caught.value)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ssh root@203.0.113.7 -p 40022", ("203.0.113.7", 40022)),
        ("ssh root@pod.example.net", ("pod.example.net", 22)),
        ("ssh -p 2222 root@[2001:db8::1]", ("2001:db8::1", 2222)),
        ("ssh root@127.0.0.1 -p2200", ("127.0.0.1", 2200)),
        ("ssh root@host -p 0", None),
        ("ssh root@host -p 70000", None),
        ("ssh root@host -p", None),
        ("ssh host -p 22", None),
        ("scp root@host -p 22", None),
        ("ssh 'root@host -p 22", None),
        ("", None),
        (None, None),
    ],
)
def test_ssh_host_port(command: str | None, expected: tuple[str, int] | None) -> None:
    assert parse_pod({**POD_ROW, "ssh_connect_cmd": command}).ssh_host_port() == expected


def test_rent_request_body_omits_unset_fields() -> None:
    body = RentRequest(pod_name="p", template_id="t", user_public_key="ssh-ed25519 AAAA", gpu_count=2)
    assert body.to_body() == {
        "pod_name": "p",
        "template_id": "t",
        "user_public_key": "ssh-ed25519 AAAA",
        "gpu_count": 2,
        "enable_volume_encryption": False,
        "enable_jupyter": False,
        "enable_backups": False,  # always sent: Lium's own default backs every new pod up
    }
    with pytest.raises(ValidationError):
        RentRequest(pod_name="p", template_id="t", user_public_key="k", gpu_cnt=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        RentRequest(pod_name="x" * 64, template_id="t", user_public_key="k")


def test_template_spec_body_and_response() -> None:
    spec = TemplateSpec(name="n", docker_image="python:3.11-slim", internal_ports=[22, 10022])
    body = spec.to_body()
    assert (
        body["environment"] == {} and body["docker_image_tag"] == "" and body["internal_ports"] == [22, 10022]
    )
    template = parse_object(
        Template, {"id": "t1", **body, "user_id": None, "extra": 1}, method="POST", path="/t"
    )
    assert template.docker_image == "python:3.11-slim" and template.internal_ports == [22, 10022]


def test_docker_credential_never_keeps_the_password() -> None:
    cred = parse_object(
        DockerCredential,
        {"id": "c1", "docker_username": "bob", "password": "hunter2"},
        method="POST",
        path="/docker-credentials/",
    )
    assert cred.username == "bob"
    assert "hunter2" not in repr(cred) and "hunter2" not in cred.model_dump_json()


def test_event_deletion_markers() -> None:
    assert Event(to_status="DELETED").marks_deletion
    assert Event(sub_event_type="pod-delete.success").marks_deletion
    assert not Event(sub_event_type="pod-create.success", to_status="RUNNING").marks_deletion


def test_event_free_text_is_kept_only_as_text() -> None:
    event = parse_object(
        Event, {"detail": {"exit": 1}, "error": "image pull failed"}, method="GET", path="/e"
    )
    assert (event.detail, event.error) == (None, "image pull failed")


def test_the_key_and_workspace_of_an_account_and_a_pod_row() -> None:
    me = User.model_validate(
        {
            "id": "u1",
            "api_key_id": "k1",
            "api_key_name": "ci",
            "pod_visibility": "own",
            "workspace": {"id": "w1", "name": "Research", "role": "owner"},
        }
    )
    assert me.sees_only_own_pods and me.workspace is not None and me.workspace.name == "Research"
    assert me.key_label() == "'ci' (k1)"
    older = User.model_validate({"id": "u1", "workspace": "w1"})
    assert older.workspace is None and not older.sees_only_own_pods and older.key_label() == "this API key"
    row = {"id": "p1", "pod_name": "x", "status": "RUNNING", "gpu_count": "1", "created_by_api_key_id": "k2"}
    assert Pod.model_validate(row).api_key_id == "k2"
    assert Pod.model_validate({**row, "api_key_id": "k3"}).api_key_id == "k3"


def test_workspace_check_accepts_its_name_or_id_and_names_a_mismatch() -> None:
    me = User.model_validate({"id": "u1", "api_key_id": "k1", "workspace": {"id": "w1", "name": "Research"}})
    assert workspace_mismatch(None, me) is None
    assert workspace_mismatch("research", me) is None
    assert workspace_mismatch("w1", me) is None
    wrong = workspace_mismatch("Platform", me)
    assert wrong is not None and "'Platform'" in wrong.detail and "'Research' (w1)" in wrong.detail
    no_workspaces = workspace_mismatch("Research", User.model_validate({"id": "u1"}))
    assert no_workspaces is not None and "no workspaces" in no_workspaces.summary
