"""The scenario generator and the audit checks, without Terraform: fast, and able to fail."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from lium_emulator.faults import FaultKind, FaultPlan
from tests.chaos.audit import (
    cross_stack_effects,
    duplicate_rentals,
    find_crashes,
    find_secrets,
    leftovers,
    overbilled,
    secret_needles,
    stack_owners,
)
from tests.chaos.scenarios import (
    CLUSTER_HITS,
    COPY_COMMANDS,
    COVERED_WITHIN,
    DEFAULT_SEED,
    FRESH_RUNNER_HITS,
    HOST_KEY_EXITS,
    KILLED_CLUSTER_CREATES,
    PG_RUNNER_HITS,
    PROCESS_CASES,
    ROUTES,
    STACK_LABEL_VARIABLE,
    TRAVEL_HITS,
    TWIN_HITS,
    TWINS,
    VARIANTS,
    Stack,
    coverage_cases,
    generate,
    render,
)
from tests.support.proxy import Exchange
from tfbridge.serving.handshake import ABANDON_GRACE_SECONDS

pytestmark = pytest.mark.unit  # the generator and the audit alone: no terraform or emulator

PEM = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACDmF0y0tP0Jm2s8d1Vq2Qm8Zk2O9r2C4kq1yq6rZ6pYGQAAAJgx9v2qMfb9
-----END OPENSSH PRIVATE KEY-----
"""


def test_generation_is_deterministic_per_seed() -> None:
    assert generate(DEFAULT_SEED, 40) == generate(DEFAULT_SEED, 40)
    assert generate(DEFAULT_SEED, 40) != generate(DEFAULT_SEED + 1, 40)
    assert generate(DEFAULT_SEED, 40)[:10] == generate(DEFAULT_SEED, 10), "a longer run extends a shorter one"


def test_the_first_scenarios_cover_every_fault_kind_route_process_fault_and_team_case() -> None:
    for seed in (DEFAULT_SEED, 1, 2, 3):
        assert len(coverage_cases(seed)) <= COVERED_WITHIN
        scenarios = generate(seed, COVERED_WITHIN)
        assert {s.variant for s in scenarios if s.category == "fault"} == set(VARIANTS)
        processes = {(s.category, s.signal if s.category == "restart" else s.phase) for s in scenarios}
        assert set(PROCESS_CASES) <= processes
        routed = {
            s.route for s in scenarios if s.variant and s.category not in ("cluster", "killed-cluster-create")
        }
        assert routed == set(ROUTES)
        assert {s.twin for s in scenarios if s.category == "twin-stacks"} == set(TWINS)
        assert any(s.category == "fresh-runner" for s in scenarios)
        assert any(s.category == "host-key-change" for s in scenarios)
        assert {s.category for s in scenarios} >= {
            "pg-killed-runner",
            "copied-state",
            "cluster",
            "moved-directory",
            "migrated-backend",
            "edited-id",
            "killed-cluster-create",
        }
        assert len({s.name for s in scenarios}) == COVERED_WITHIN


def test_team_scenarios_are_well_formed() -> None:
    scenarios = generate(DEFAULT_SEED, 500)
    twins = [s for s in scenarios if s.category == "twin-stacks"]
    assert {s.concurrent for s in twins} == {True, False}
    assert {s.hit for s in twins if not s.variant} == set(TWIN_HITS)
    for twin in twins:
        assert bool(twin.rules) != bool(twin.hit), "a twin scenario is hit by a fault rule or a signal"
        assert not twin.stack.credential and not twin.stack.volume
    fresh = [s for s in scenarios if s.category == "fresh-runner"]
    assert {s.hit for s in fresh} == set(FRESH_RUNNER_HITS) and all(s.trigger == "rent" for s in fresh)
    pg = [s for s in scenarios if s.category == "pg-killed-runner"]
    assert {s.hit for s in pg} == set(PG_RUNNER_HITS) and all(
        s.backend == "pg" and s.trigger == "rent" for s in pg
    )
    assert all(s.backend == "local" for s in scenarios if s.category != "pg-killed-runner")
    copied = [s for s in scenarios if s.category == "copied-state"]
    assert {s.copy_command for s in copied} == set(COPY_COMMANDS)
    host_keys = [s for s in scenarios if s.category == "host-key-change"]
    assert {s.host_key_exit for s in host_keys} == set(HOST_KEY_EXITS)
    assert all(s.stack.runner and s.stack.pods == 1 and not s.stack.credential for s in host_keys)
    clusters = [s for s in scenarios if s.category == "cluster"]
    assert all(s.stack.cluster and s.stack.pods == 0 for s in clusters)
    assert {s.variant or ("fresh-runner" if s.fresh_runner else s.hit) for s in clusters} == set(CLUSTER_HITS)
    for cluster in clusters:
        assert bool(cluster.variant) != bool(cluster.hit), "a member fails, or a process is killed"
        assert all(rule["path"] == "/executors/cluster/rent" for rule in cluster.rules)
    assert not any(s.fresh_runner for s in scenarios if s.category != "cluster")
    travelled = [s for s in scenarios if s.category in ("moved-directory", "migrated-backend")]
    assert {s.hit for s in travelled} == set(TRAVEL_HITS) and all(s.phase == "destroy" for s in travelled)
    killed = [s for s in scenarios if s.category == "killed-cluster-create"]
    assert {s.variant for s in killed} == set(KILLED_CLUSTER_CREATES)
    for scenario in killed:
        (rule,) = scenario.rules
        assert scenario.stack.cluster and rule["kind"] == "latency" and rule["name"] == "chaos-held"
        # a slow rental answer outlasts the grace an abandoned create has to undo it
        assert scenario.variant != "slow-answer" or rule["seconds"] > ABANDON_GRACE_SECONDS


def test_every_generated_fault_plan_is_valid_for_the_emulator() -> None:
    kinds = set()
    for scenario in generate(DEFAULT_SEED, 500):
        plan = FaultPlan.model_validate(scenario.fault_plan)
        kinds |= {rule.kind for rule in plan.rules}
        assert scenario.stack.pods in ((0,) if scenario.stack.cluster else (1, 2))
        if scenario.route.startswith("credential"):
            assert scenario.stack.credential
    assert kinds == set(get_args(FaultKind)), "every kind the emulator can inject is generated"


def test_render_declares_what_the_stack_says() -> None:
    full = render(Stack(pods=2, credential=True, volume=True, create_timeout=8), "x", "private/image:1")
    assert full.count('resource "lium_pod"') == 2 and full.count("volume_id") == 1
    assert "ephemeral = true" in full and "password_wo         = var.registry_password" in full
    assert 'create = "8s"' in full and 'image            = "private/image:1"' in full
    bare = render(Stack(pods=1, credential=False, volume=False, create_timeout=40), "y", "private/image:1")
    assert "lium_docker_credential" not in bare and "lium_volume" not in bare and "python:3.11-slim" in bare
    assert "lium_runner" not in bare and STACK_LABEL_VARIABLE not in bare
    team = render(
        Stack(pods=1, credential=True, volume=False, create_timeout=40, runner=True),
        "z",
        "private/image:1",
        labelled=True,
    )
    assert f"{STACK_LABEL_VARIABLE} = var.stack_label" in team and 'variable "stack_label"' in team
    assert "docker_credential_id = lium_docker_credential.c.id" in team
    assert "pod_id       = lium_pod.p0.id" in team and "ssh_host_key = lium_pod.p0.ssh_host_key" in team


def test_secrets_are_found_whole_or_line_by_line() -> None:
    lines = PEM.splitlines()
    assert secret_needles(PEM) == [PEM.strip(), lines[1], lines[2]]
    secrets = {"key": PEM, "api key": "tf-0123456789abcdef"}
    assert find_secrets({"log": f"noise {lines[2]} noise"}, secrets) == ["key in log"]
    assert find_secrets({"out": "x-api-key: tf-0123456789abcdef"}, secrets) == ["api key in out"]
    assert find_secrets({"out": lines[0] + "\n" + lines[-1]}, secrets) == [], (
        "armour lines are not key material"
    )
    assert find_crashes({"out": "Traceback (most recent call last):"}) == ["'Traceback' in out"]


def pod(
    name: str, running_at: str | None, billed: float, key: str | None = None, status: str = "DELETED"
) -> dict[str, Any]:
    return {
        "id": f"{name}-{running_at}",
        "pod_name": name,
        "status": status,
        "running_at": running_at,
        "billed_seconds": billed,
        "idempotency_key": key,
    }


def account(pods: list[dict[str, Any]], keys: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "pods": pods,
        "idempotency_keys": keys or [],
        "templates": [],
        "docker_credentials": [],
        "volumes": [],
    }


def test_second_paid_pods_are_found() -> None:
    sequential = [pod("a", "2026-01-01T00:00:00+00:00", 10.0), pod("a", "2026-01-01T00:00:10.5+00:00", 5.0)]
    assert duplicate_rentals(account(sequential)) == []
    overlapping = [pod("a", "2026-01-01T00:00:00+00:00", 10.0), pod("a", "2026-01-01T00:00:05+00:00", 5.0)]
    assert len(duplicate_rentals(account(overlapping))) == 1
    never_ran = [pod("a", "2026-01-01T00:00:00+00:00", 10.0), pod("a", None, 0.0)]
    assert duplicate_rentals(account(never_ran)) == []
    assert duplicate_rentals(account([], [{"key": "k", "rent_count": 2}])) == [
        "idempotency key k rented 2 pods"
    ]


def test_leftovers_and_overbilling_are_found() -> None:
    report = account(
        [pod("a", None, 0.0, status="CREATION_FAILED"), pod("b", "2026-01-01T00:00:00+00:00", 61.0)]
    )
    report["templates"] = [{"id": "t1", "name": "tpl"}]
    assert leftovers(report) == ["pod a (a-None) is CREATION_FAILED", "template tpl (t1)"]
    assert overbilled(report, 60.0) == ["pod b billed 61.0 s in a 60.0 s scenario"]
    assert overbilled(report, 61.0) == []


def exchange(method: str, path: str, key: str = "", request: Any = None, response: Any = None) -> Exchange:
    return Exchange(method, path, key, request, 0.0, 200, 0.0, None, response, "")


def test_two_stacks_of_the_same_names_are_told_apart() -> None:
    report = account(
        [
            pod("p0", "2026-01-01T00:00:00+00:00", 10.0, key="ka") | {"id": "pod-a"},
            pod("p0", "2026-01-01T00:00:01+00:00", 10.0, key="kb") | {"id": "pod-b"},
        ]
    )
    report["templates"] = [{"id": "tpl-a", "environment": {STACK_LABEL_VARIABLE: "a"}}]
    own = {
        "a": [
            exchange("POST", "/api/executors/e1/rent", "ka", {"template_id": "tpl-a"}),
            exchange("DELETE", "/api/pods/pod-a"),
        ],
        "b": [
            exchange("POST", "/api/templates", response={"id": "tpl-b"}),
            exchange("POST", "/api/executors/e2/rent", "kb", {"template_id": "tpl-b"}),
            exchange("GET", "/api/pods/pod-a"),  # reads touch nothing
            exchange("DELETE", "/api/pods/pod-b"),
        ],
    }
    assert stack_owners(report, own) == {"tpl-a": "a", "tpl-b": "b", "pod-a": "a", "pod-b": "b"}
    assert cross_stack_effects(report, own, {}) == []
    assert duplicate_rentals(report, stack_owners(report, own)) == []
    assert len(duplicate_rentals(report)) == 1, "without owners the two p0 pods look like one name twice"

    crossed = {**own, "b": [*own["b"], exchange("DELETE", "/api/pods/pod-a?force=1")]}
    assert cross_stack_effects(report, crossed, {}) == ["stack b sent DELETE /api/pods/pod-a, stack a's"]
    deleted_template = {"a": own["a"], "b": [exchange("DELETE", "/api/templates/tpl-old")]}
    assert cross_stack_effects(report, deleted_template, {"tpl-old": "a"}) == [
        "stack b sent DELETE /api/templates/tpl-old, stack a's"
    ]
    stolen_key = {
        **own,
        "b": [*own["b"], exchange("POST", "/api/executors/e3/rent", "ka", {"template_id": "tpl-b"})],
    }
    assert cross_stack_effects(report, stolen_key, {}) == ["stacks a and b both sent rent key ka"]


def test_a_clusters_members_are_not_second_paid_pods_but_a_second_cluster_is() -> None:
    def member(pod_id: str, rank: int, cluster: str, start: str) -> dict[str, Any]:
        return {
            "id": pod_id,
            "pod_name": "train-abcdefgh123",
            "running_at": start,
            "billed_seconds": 60,
            "cluster_id": cluster,
            "cluster_node_index": rank,
        }

    one = [member("a", 0, "c1", "2026-12-01T00:00:00"), member("b", 1, "c1", "2026-12-01T00:00:00")]
    assert duplicate_rentals({"pods": one, "idempotency_keys": []}) == []
    two = [*one, member("c", 0, "c2", "2026-12-01T00:00:30"), member("d", 1, "c2", "2026-12-01T00:00:30")]
    assert len(duplicate_rentals({"pods": two, "idempotency_keys": []})) == 2
