"""The scenario generator and the audit checks, without Terraform: fast, and able to fail."""

from __future__ import annotations

from typing import Any, get_args

from lium_emulator.faults import FaultKind, FaultPlan
from tests.chaos.audit import (
    duplicate_rentals,
    find_crashes,
    find_secrets,
    leftovers,
    overbilled,
    secret_needles,
)
from tests.chaos.scenarios import (
    DEFAULT_SEED,
    PROCESS_CASES,
    ROUTES,
    VARIANTS,
    Stack,
    generate,
    render,
)

PEM = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACDmF0y0tP0Jm2s8d1Vq2Qm8Zk2O9r2C4kq1yq6rZ6pYGQAAAJgx9v2qMfb9
-----END OPENSSH PRIVATE KEY-----
"""


def test_generation_is_deterministic_per_seed() -> None:
    assert generate(DEFAULT_SEED, 40) == generate(DEFAULT_SEED, 40)
    assert generate(DEFAULT_SEED, 40) != generate(DEFAULT_SEED + 1, 40)
    assert generate(DEFAULT_SEED, 40)[:10] == generate(DEFAULT_SEED, 10), "a longer run extends a shorter one"


def test_the_first_thirty_cover_every_fault_kind_route_and_process_fault() -> None:
    for seed in (DEFAULT_SEED, 1, 2, 3):
        scenarios = generate(seed, 30)
        assert {s.variant for s in scenarios if s.category == "fault"} == set(VARIANTS)
        processes = {(s.category, s.signal if s.category == "restart" else s.phase) for s in scenarios}
        assert set(PROCESS_CASES) <= processes
        assert {s.route for s in scenarios if s.category == "fault"} == set(ROUTES)
        assert len({s.name for s in scenarios}) == 30


def test_every_generated_fault_plan_is_valid_for_the_emulator() -> None:
    kinds = set()
    for scenario in generate(DEFAULT_SEED, 500):
        plan = FaultPlan.model_validate(scenario.fault_plan)
        kinds |= {rule.kind for rule in plan.rules}
        assert scenario.stack.pods in (1, 2)
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
