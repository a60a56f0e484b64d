"""Stack identity (``lium_provider.domain.stack``): derived from Terraform's backend cache and workspace files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lium_provider.domain.stack import (
    TEST_RUN_SUFFIX,
    lium_pod_name,
    local_state_file,
    parse_lium_pod_name,
    recorded_tag,
    rent_digest,
    stack_identity,
    stack_tag,
    tags_of,
    this_stacks_tag,
)

SECRETS = ("s3cr3t-pass", "tok-123456", "AKIAEXAMPLE")


def workdir(
    tmp_path: Path, name: str, backend: dict[str, Any] | None = None, workspace: str | None = None
) -> Path:
    """A root module directory as ``terraform init`` leaves it: ``.terraform/terraform.tfstate`` holds
    the backend cache, ``.terraform/environment`` the selected workspace."""
    root = tmp_path / name
    data = root / ".terraform"
    data.mkdir(parents=True)
    if backend is not None:
        (data / "terraform.tfstate").write_text(json.dumps({"version": 3, "backend": backend}))
    if workspace is not None:
        (data / "environment").write_text(workspace)
    return root


PG = {
    "type": "pg",
    "config": {
        "conn_str": "postgres://alice:s3cr3t-pass@db.example:5433/tfstate?sslmode=disable",
        "schema_name": "team",
    },
}


def test_a_remote_backend_gives_the_same_identity_on_every_machine(tmp_path: Path) -> None:
    laptop = workdir(tmp_path, "laptop", PG)
    runner = workdir(
        tmp_path,
        "ci/checkout",
        {
            **PG,
            "config": {
                **PG["config"],
                "conn_str": PG["config"]["conn_str"].replace("alice:s3cr3t-pass", "ci:tok-123456"),
            },
        },
    )
    assert stack_identity(environ={}, cwd=laptop) == stack_identity(environ={}, cwd=runner)
    identity = stack_identity(environ={}, cwd=laptop)
    assert "db.example" in identity and "tfstate" in identity and "team" in identity
    other_schema = workdir(tmp_path, "other", {**PG, "config": {**PG["config"], "schema_name": "other"}})
    assert stack_identity(environ={}, cwd=other_schema) != identity


@pytest.mark.parametrize(
    "backend",
    [
        PG,
        {
            "type": "pg",
            "config": {"conn_str": "host=db.example dbname=tfstate user=alice password=s3cr3t-pass"},
        },
        {
            "type": "s3",
            "config": {"bucket": "b", "key": "k", "access_key": "AKIAEXAMPLE", "secret_key": "s3cr3t-pass"},
        },
        {
            "type": "remote",
            "config": {"organization": "o", "workspaces": {"name": "w"}, "token": "tok-123456"},
        },
        {"type": "http", "config": {"address": "https://state.example/x", "password": "s3cr3t-pass"}},
        {
            "type": "future",
            "config": {"url": "https://alice:s3cr3t-pass@state.example/x", "api_token": "tok-123456"},
        },
    ],
)
def test_no_secret_of_the_backend_configuration_is_in_the_identity(
    tmp_path: Path, backend: dict[str, Any]
) -> None:
    identity = stack_identity(environ={}, cwd=workdir(tmp_path, "w", backend))
    assert identity.startswith(backend["type"] + ":")
    for secret in SECRETS:
        assert secret not in identity


def test_the_workspace_is_part_of_the_identity(tmp_path: Path) -> None:
    root = workdir(tmp_path, "w", PG)
    default = stack_identity(environ={}, cwd=root)
    (root / ".terraform" / "environment").write_text("staging")
    staging = stack_identity(environ={}, cwd=root)
    assert (
        default != staging and default.endswith("workspace=default") and staging.endswith("workspace=staging")
    )
    assert stack_identity(environ={"TF_WORKSPACE": "prod"}, cwd=root).endswith("workspace=prod")


def test_tf_data_dir_moves_the_files_read(tmp_path: Path) -> None:
    root = tmp_path / "w"
    moved = root / "elsewhere"
    moved.mkdir(parents=True)
    (moved / "terraform.tfstate").write_text(json.dumps({"backend": PG}))
    (moved / "environment").write_text("blue")
    identity = stack_identity(environ={"TF_DATA_DIR": "elsewhere"}, cwd=root)
    assert identity.startswith("pg:") and identity.endswith("workspace=blue")


def test_local_state_is_its_directory_on_this_machine(tmp_path: Path) -> None:
    first = workdir(tmp_path, "a")
    second = workdir(tmp_path, "b", {"type": "local", "config": {"path": None, "workspace_dir": None}})
    one, two = stack_identity(environ={}, cwd=first), stack_identity(environ={}, cwd=second)
    assert one.startswith("local:") and str(first.resolve()) in one
    assert two.startswith("local:") and one != two
    custom = workdir(tmp_path, "c", {"type": "local", "config": {"path": "../shared.tfstate"}})
    assert str((tmp_path / "shared.tfstate").resolve()) in stack_identity(environ={}, cwd=custom)


def test_an_explicit_stack_wins_over_the_environment_and_the_derived_identity(tmp_path: Path) -> None:
    root = workdir(tmp_path, "w", PG)
    assert stack_identity("team-a", environ={"LIUM_STACK": "env"}, cwd=root) == "stack:team-a"
    assert stack_identity(environ={"LIUM_STACK": "env"}, cwd=root) == "stack:env"


def test_terraform_test_runs_are_a_stack_of_their_own_that_sweep_and_adoption_still_name(
    tmp_path: Path,
) -> None:
    for explicit, root in ((None, workdir(tmp_path, "pg", PG)), ("team-a", workdir(tmp_path, "local"))):
        applied = stack_identity(explicit, environ={}, cwd=root, command="apply")
        tested = stack_identity(explicit, environ={}, cwd=root, command="test")
        assert stack_identity(explicit, environ={}, cwd=root) == applied
        assert stack_tag(tested) != stack_tag(applied)
        assert stack_identity(explicit, environ={}, cwd=root, command="test") == tested  # the next run's
    assert tags_of("team-a") >= {
        stack_tag(stack_identity("team-a", environ={})),
        stack_tag(stack_identity("team-a", environ={}, command="test")),
    }


def test_the_tag_is_short_stable_and_recovers_from_a_lium_name() -> None:
    tag = stack_tag("stack:team-a")
    assert tag == stack_tag("stack:team-a") and len(tag) == 8 and tag != stack_tag("stack:team-b")
    tested = stack_tag("stack:team-a (terraform test)")
    assert tags_of("team-a") == {tag, tested} and tag in tags_of(tag)
    # A name shaped like a tag means both: the stack of that name (and its test runs), and the tag itself.
    assert tags_of("training") == {
        stack_tag("stack:training"),
        stack_tag("stack:training (terraform test)"),
        "training",
    }
    digest = rent_digest("template-1", 1, None, None, None)
    assert len(digest) == 3 and digest != rent_digest("template-2", 1, None, None, None)
    assert parse_lium_pod_name(lium_pod_name("p0", tag, digest)) == ("p0", tag, digest)
    assert parse_lium_pod_name("p0") is None and parse_lium_pod_name("p0-short1") is None


def test_long_names_fit_lium_and_stay_distinct() -> None:
    tag = stack_tag("stack:x")
    a, b = lium_pod_name("n" * 60 + "a", tag, "xyz"), lium_pod_name("n" * 60 + "b", tag, "xyz")
    assert len(a) == len(b) == 63 and a != b
    assert parse_lium_pod_name(a) is not None and parse_lium_pod_name(a)[1:] == (tag, "xyz")  # type: ignore[index]


def test_backend_settings_given_in_the_environment_name_the_state_too(tmp_path: Path) -> None:
    root = workdir(tmp_path, "w", {"type": "pg", "config": {"conn_str": None, "schema_name": None}})

    def identity(**env: str) -> str:
        return stack_identity(environ=env, cwd=root)

    first = identity(PG_CONN_STR="postgres://alice:s3cr3t-pass@db.example/dbx")
    assert "dbx" in first and "s3cr3t-pass" not in first
    assert identity(PG_CONN_STR="postgres://bob@db.example/dby") != first, "two databases, one stack"
    assert identity(PG_CONN_STR="postgres://bob@db.example/dbx") == first, "the user is not the state"
    assert identity(PG_CONN_STR="postgres://bob@db.example/dbx", PG_SCHEMA_NAME="team") != first
    http = workdir(tmp_path, "h", {"type": "http", "config": {"address": None}})
    assert stack_identity(environ={"TF_HTTP_ADDRESS": "https://a.example/s"}, cwd=http) != stack_identity(
        environ={"TF_HTTP_ADDRESS": "https://b.example/s"}, cwd=http
    )


def state_with(*tags: str | None) -> dict[str, Any]:
    """A Terraform state whose Lium objects record ``tags`` (None: an object that records none)."""
    instances = [{"attributes": {"id": f"i{n}", "stack_tag": tag}} for n, tag in enumerate(tags)]
    return {
        "version": 4,
        "resources": [
            {"mode": "managed", "type": "lium_pod", "name": "p", "instances": instances},
            {"mode": "managed", "type": "null_resource", "name": "n", "instances": [{"attributes": {}}]},
        ],
    }


def test_the_tag_a_state_records_is_the_one_most_of_its_objects_record() -> None:
    a, b = stack_tag("stack:a"), stack_tag("stack:b")
    assert recorded_tag(state_with(a, b, b, None)) == b
    assert recorded_tag(state_with(a, b)) == min(a, b), "a tie is settled the same way every time"
    assert recorded_tag(state_with(None, "not a tag")) is None and recorded_tag(None) is None


def test_a_moved_local_state_keeps_the_tag_its_objects_record(tmp_path: Path) -> None:
    first = workdir(tmp_path, "first")
    new_tag = this_stacks_tag(environ={}, cwd=first)
    assert new_tag == stack_tag(stack_identity(environ={}, cwd=first)), "a new state's tag is derived"
    (first / "terraform.tfstate").write_text(json.dumps(state_with(new_tag)))
    moved = tmp_path / "moved"
    first.rename(moved)
    assert stack_identity(environ={}, cwd=moved) != stack_identity(environ={}, cwd=tmp_path / "first")
    assert this_stacks_tag(environ={}, cwd=moved) == new_tag
    assert this_stacks_tag("named", environ={}, cwd=moved) == stack_tag("stack:named"), "a name still wins"
    tested = this_stacks_tag(environ={}, cwd=moved, command="test")
    assert tested == stack_tag(stack_identity(environ={}, cwd=moved) + TEST_RUN_SUFFIX)


def test_the_local_state_file_is_the_workspace_s_and_none_for_a_remote_backend(tmp_path: Path) -> None:
    plain = workdir(tmp_path, "plain")
    assert local_state_file(environ={}, cwd=plain) == plain / "terraform.tfstate"
    assert local_state_file(environ={"TF_WORKSPACE": "dev"}, cwd=plain) == (
        plain / "terraform.tfstate.d" / "dev" / "terraform.tfstate"
    )
    configured = workdir(
        tmp_path, "configured", {"type": "local", "config": {"path": "s/x.tfstate", "workspace_dir": "ws"}}
    )
    assert local_state_file(environ={}, cwd=configured) == configured / "s" / "x.tfstate"
    assert local_state_file(environ={"TF_WORKSPACE": "dev"}, cwd=configured) == (
        configured / "ws" / "dev" / "terraform.tfstate"
    )
    assert local_state_file(environ={}, cwd=workdir(tmp_path, "remote", PG)) is None


def test_an_empty_or_broken_state_file_falls_back_to_the_derived_tag(tmp_path: Path) -> None:
    root = workdir(tmp_path, "w")
    derived = stack_tag(stack_identity(environ={}, cwd=root))
    for text in ("", "{not json", "[]"):
        (root / "terraform.tfstate").write_text(text)
        assert this_stacks_tag(environ={}, cwd=root) == derived, text
