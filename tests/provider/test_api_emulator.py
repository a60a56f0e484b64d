"""The API client against a real emulator process: CRUD, rent reconciliation, rate limits, offers.

Every test gets its own account (its own API key), so pods and templates of one test never appear in
another's listings; fault plans are reset before and after each test. Timings are measured on the wire
with a recording transport around httpx's real HTTP transport. The emulator is started with its own
launcher (``lium_emulator.launcher``) and accounts with the shared ``tests.support.lium`` helper.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from lium_emulator.launcher import RunningEmulator
from lium_provider.api.client import LiumClient
from lium_provider.api.errors import (
    LiumAuthError,
    LiumError,
    LiumNotFound,
    LiumProtocolError,
    LiumRateLimited,
    LiumUncertainOutcome,
)
from lium_provider.api.models import RentRequest, TemplateSpec
from lium_provider.api.rent import RentAttempt, rent_reconciled
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.offers import find_offers
from tests.support import http
from tests.support.faults import put_fault_plan
from tests.support.forked_emulator import launch_forked
from tests.support.lium import FAST_TIMINGS, Account, new_account
from tests.support.procs import wait_for
from tfbridge import Cancelled

PUBLIC_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq3D6v1t2kzQ0i5Q2b7m9oZx7wQ1bq6bYV1m8s7YkPw test@lium-stacks"
)
RENT_PATH = "/executors/*/rent"


def fault_plan(*rules: dict[str, Any], rate_limits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"seed": 1, "rules": list(rules), "rate_limits": rate_limits or []}


def feed_url(emulator: RunningEmulator) -> str:
    return f"{emulator.api_url}/public/v1/nodes"


@pytest.fixture(scope="module")
def old_emulator() -> Iterator[RunningEmulator]:
    """An emulator like an older Lium: no ``rent_idempotency``, so a resent rent rents again."""
    with launch_forked([*FAST_TIMINGS, "--features", ""]) as server:
        yield server


NO_ANSWER = 0  # Exchange.status of a request whose connection broke before an answer


@dataclass
class Exchange:
    method: str
    path: str
    status: int
    sent_at: float
    answered_at: float


class RecordingTransport(httpx.HTTPTransport):
    """httpx's real network transport, timestamping every exchange."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Exchange] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent_at = time.monotonic()
        try:
            response = super().handle_request(request)
        except httpx.TransportError:
            self.record(request, NO_ANSWER, sent_at)
            raise
        self.record(request, response.status_code, sent_at)
        return response

    def record(self, request: httpx.Request, status: int, sent_at: float) -> None:
        self.log.append(Exchange(request.method, request.url.path, status, sent_at, time.monotonic()))


@dataclass
class Session:
    """A client on a fresh account of one emulator, with its wire log and the sleeps it asked for."""

    account: Account
    client: LiumClient
    wire: RecordingTransport
    sleeps: list[float]

    @property
    def emulator(self) -> RunningEmulator:
        return self.account.emulator

    def set_faults(self, *rules: dict[str, Any], rate_limits: list[dict[str, Any]] | None = None) -> None:
        put_fault_plan(self.emulator, fault_plan(*rules, rate_limits=rate_limits))

    def posts(self, suffix: str) -> list[Exchange]:
        return [e for e in self.wire.log if e.method == "POST" and e.path.endswith(suffix)]


@contextmanager
def open_session(
    server: RunningEmulator, directory: Path, cancel: threading.Event | None = None, timeout: float = 30.0
) -> Iterator[Session]:
    """A client on a new account whose sleep is cancellable like the provider's (it wakes up when
    ``cancel`` is set). On exit: faults cleared, the account's pods deleted and waited for."""
    sleeps: list[float] = []
    flag = cancel or threading.Event()

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        flag.wait(seconds)

    account = new_account(server, directory)
    wire = RecordingTransport()
    client = LiumClient(
        server.api_url,
        account.api_key,
        sleep=sleep,
        cancel=flag.is_set,
        timeout=timeout,
        rng=random.Random(3),
        transport=wire,
        max_retries=3,
    )
    try:
        with account.faults():
            yield Session(account, client, wire, sleeps)
    finally:
        with LiumClient(server.api_url, account.api_key) as cleaner:
            for pod in cleaner.list_pods():
                cleaner.delete_pod(pod.id)
            wait_for(lambda: not cleaner.list_pods(), "pods to be deleted")
        client.close()


@pytest.fixture
def session(emulator: RunningEmulator, tmp_path: Path) -> Iterator[Session]:
    with open_session(emulator, tmp_path) as current:
        yield current


@pytest.fixture
def old_session(old_emulator: RunningEmulator, tmp_path: Path) -> Iterator[Session]:
    with open_session(old_emulator, tmp_path) as current:
        yield current


@pytest.fixture
def impatient_session(emulator: RunningEmulator, tmp_path: Path) -> Iterator[Session]:
    """A client that gives up on an answer after 0.5 s, so a slow rent becomes an uncertain one."""
    with open_session(emulator, tmp_path, timeout=0.5) as current:
        yield current


def cheapest_executor(server: RunningEmulator) -> str:
    return find_offers(feed_url(server), OfferFilter(gpu_count=1))[0].executor_id


def new_attempt(session: Session) -> RentAttempt:
    template = session.client.create_template(
        TemplateSpec(
            name=f"t-{uuid.uuid4().hex[:8]}",
            docker_image="python:3.11-slim",
            internal_ports=[22],
            # The image's own CMD (python3) exits at once without a terminal; keep the container up.
            entrypoint="/bin/sh",
            startup_commands="-c 'exec sleep infinity'",
        )
    )
    body = RentRequest(
        pod_name=f"pod-{uuid.uuid4().hex[:12]}",
        template_id=template.id,
        user_public_key=PUBLIC_KEY,
        gpu_count=1,
        initial_port_count=2,
    )
    return RentAttempt.new(cheapest_executor(session.emulator), body)


def pods_named(session: Session, pod_name: str) -> list[str]:
    return [p.id for p in session.client.list_pods() if p.pod_name == pod_name]


# --- account, CRUD -----------------------------------------------------------------------------------


def test_me_version_and_bad_key(session: Session) -> None:
    assert session.client.me().id
    assert "rent_idempotency" in session.client.version_features()
    with (
        LiumClient(session.emulator.api_url, "not-a-key") as stranger,
        pytest.raises(LiumAuthError) as caught,
    ):
        stranger.me()
    assert caught.value.status == 401 and "not-a-key" not in str(caught.value)


def test_template_crud(session: Session) -> None:
    client = session.client
    spec = TemplateSpec(
        name="crud", docker_image="python:3.11-slim", environment={"A": "1"}, internal_ports=[22, 8080]
    )
    created = client.create_template(spec)
    assert created.name == "crud" and created.internal_ports == [22, 8080]
    assert created.id in {t.id for t in client.list_templates()}
    updated = client.update_template(created.id, spec.model_copy(update={"name": "crud-2"}))
    assert updated.id == created.id and updated.name == "crud-2"
    fetched = client.get_template(created.id)
    assert fetched is not None and fetched.name == "crud-2" and fetched.environment == {"A": "1"}
    client.delete_template(created.id)
    assert client.get_template(created.id) is None
    client.delete_template(created.id)  # already gone: still fine


def test_docker_credential_crud_never_leaks_the_password(session: Session) -> None:
    client = session.client
    created = client.create_docker_credential("bob", "first-Secret-pw")
    assert created.username == "bob" and "first-Secret-pw" not in created.model_dump_json()
    assert client.get_docker_credential(created.id) is not None
    updated = client.update_docker_credential(created.id, "alice", "second-Secret-pw")
    assert updated.id == created.id and updated.username == "alice"
    client.delete_docker_credential(created.id)
    assert client.get_docker_credential(created.id) is None
    client.delete_docker_credential(created.id)
    session.set_faults(
        {
            "method": "POST",
            "path": "/docker-credentials/",
            "kind": "status",
            "status": 400,
            "code": "bad_credential",
            "message": "password third-Secret-pw is weak",
        }
    )
    with pytest.raises(LiumError) as caught:
        client.create_docker_credential("bob", "third-Secret-pw")
    assert caught.value.code == "bad_credential" and "third-Secret-pw" not in str(caught.value)


def test_volume_crud(session: Session) -> None:
    client = session.client
    volume = client.create_volume("data-1", "training data")
    assert (volume.name, volume.description) == ("data-1", "training data")
    assert volume.id in {v.id for v in client.list_volumes()}
    renamed = client.update_volume(volume.id, name="data-2")
    assert renamed.name == "data-2"
    fetched = client.get_volume(volume.id)
    assert fetched is not None and fetched.name == "data-2"
    client.delete_volume(volume.id)
    assert client.get_volume(volume.id) is None
    client.delete_volume(volume.id)


def test_a_bare_404_on_a_delete_fails_while_the_listing_still_holds_the_object(session: Session) -> None:
    """A gateway's 404 (no Lium code) on a DELETE proves nothing: a destroy must not report a template,
    credential, volume or key gone while Lium still lists it."""
    client = session.client
    template = client.create_template(TemplateSpec(name="kept", docker_image="python:3.11-slim"))
    credential = client.create_docker_credential("bob", "a-Secret-pw")
    volume = client.create_volume("kept")
    key = client.create_ssh_key("kept", PUBLIC_KEY)
    deletions = [
        ("/templates/", template.id, client.delete_template),
        ("/docker-credentials/", credential.id, client.delete_docker_credential),
        ("/volumes/", volume.id, client.delete_volume),
        ("/ssh-keys/", key.id, client.delete_ssh_key),
    ]
    session.set_faults(
        *(
            {"method": "DELETE", "path": f"{prefix}{oid}", "kind": "status", "status": 404}
            for prefix, oid, _ in deletions
        )
    )
    for _, object_id, delete in deletions:
        with pytest.raises(LiumNotFound):
            delete(object_id)
    assert template.id in {t.id for t in client.list_templates()}
    session.set_faults()
    for _, object_id, delete in deletions:
        delete(object_id)
        delete(object_id)  # Lium's own 404: gone, no error
    assert template.id not in {t.id for t in client.list_templates()}
    assert volume.id not in {v.id for v in client.list_volumes()}


# --- pods and rent -----------------------------------------------------------------------------------


def test_rent_run_and_delete_a_pod(session: Session) -> None:
    client = session.client
    attempt = new_attempt(session)
    result = rent_reconciled(client, attempt)
    assert (result.outcome, result.reconciled) == ("rented", False) and result.pod_id
    pod = client.get_pod(result.pod_id)
    assert pod is not None and pod.pod_name == attempt.pod_name and pod.executor_id == attempt.executor_id
    assert pod.gpu_count == 1
    wait_for(
        lambda: (p := client.get_pod(result.pod_id or "")) is not None and p.ssh_host_port(), "SSH details"
    )
    running = client.get_pod(result.pod_id)
    assert running is not None and running.is_running
    host_port = running.ssh_host_port()
    assert host_port is not None and host_port[1] > 0
    client.delete_pod(result.pod_id)
    wait_for(lambda: client.get_pod(result.pod_id or "") is None, "the pod to be removed")
    client.delete_pod(result.pod_id)  # 404 is fine
    events = client.events(since=attempt.started_at - timedelta(minutes=1), pod_id=result.pod_id)
    assert any(e.marks_deletion for e in events)
    assert {e.pod_name for e in events} == {attempt.pod_name}


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "drop_after_commit"},
        {"kind": "status", "status": 503, "after_commit": True},
    ],
    ids=["dropped-connection", "503-after-commit"],
)
def test_lost_rent_answer_reconciles_to_exactly_one_pod(session: Session, fault: dict[str, Any]) -> None:
    attempt = new_attempt(session)
    session.set_faults({"method": "POST", "path": RENT_PATH, "first": 1, **fault})
    result = rent_reconciled(session.client, attempt)
    assert (result.outcome, result.reconciled) == ("rented", True)
    assert pods_named(session, attempt.pod_name) == [result.pod_id]
    assert len(session.posts("/rent")) == 1  # found by listing: never resent


def test_lost_rent_answer_without_idempotency_still_one_pod(old_session: Session) -> None:
    attempt = new_attempt(old_session)
    old_session.set_faults({"method": "POST", "path": RENT_PATH, "first": 1, "kind": "drop_after_commit"})
    result = rent_reconciled(old_session.client, attempt)
    assert result.outcome == "rented" and pods_named(old_session, attempt.pod_name) == [result.pod_id]
    assert len(old_session.posts("/rent")) == 1


def test_rent_refused_before_execution_is_replayed_with_the_same_key(session: Session) -> None:
    # A 503 *before* commit: nothing rented. The idempotent server lets the same key be resent safely.
    attempt = new_attempt(session)
    session.set_faults({"method": "POST", "path": RENT_PATH, "first": 1, "kind": "status", "status": 503})
    result = rent_reconciled(session.client, attempt)
    assert (result.outcome, result.reconciled) == ("rented", True)
    assert pods_named(session, attempt.pod_name) == [result.pod_id]
    assert len(session.posts("/rent")) == 2


def test_uncertain_rent_on_old_server_is_never_resent(old_session: Session) -> None:
    attempt = new_attempt(old_session)
    old_session.set_faults({"method": "POST", "path": RENT_PATH, "first": 1, "kind": "status", "status": 503})
    with pytest.raises(LiumUncertainOutcome, match="outcome unknown") as caught:
        rent_reconciled(old_session.client, attempt, rounds=2)
    assert caught.value.status == 503
    assert len(old_session.posts("/rent")) == 1 and pods_named(old_session, attempt.pod_name) == []


def test_rent_still_in_flight_is_waited_for_then_found(impatient_session: Session) -> None:
    attempt = new_attempt(impatient_session)
    impatient_session.set_faults(
        {"method": "POST", "path": RENT_PATH, "first": 1, "kind": "latency", "seconds": 1.5}
    )
    result = rent_reconciled(impatient_session.client, attempt)
    assert (result.outcome, result.reconciled) == ("rented", True)
    assert pods_named(impatient_session, attempt.pod_name) == [result.pod_id]
    statuses = [e.status for e in impatient_session.posts("/rent")]
    assert statuses[0] == NO_ANSWER and 409 in statuses  # timed out, then "idempotency_in_progress"


def test_refusal_whose_answer_was_lost_is_learnt_from_the_replay(impatient_session: Session) -> None:
    attempt = new_attempt(impatient_session)
    impatient_session.set_faults(
        {"method": "POST", "path": RENT_PATH, "first": 1, "kind": "latency", "seconds": 1.0},
        {"method": "POST", "path": RENT_PATH, "first": 1, "kind": "node_unavailable"},
    )
    result = rent_reconciled(impatient_session.client, attempt)
    assert (result.outcome, result.code, result.reconciled) == ("no_capacity", "node_unavailable", True)
    assert result.error is not None and result.error.idempotent_replayed
    assert impatient_session.client.list_pods() == []


def test_key_without_recorded_outcome_raises_uncertain(session: Session) -> None:
    attempt = new_attempt(session)
    session.set_faults(
        {"method": "POST", "path": RENT_PATH, "first": 1, "kind": "node_unavailable"},
        {"method": "POST", "path": RENT_PATH, "first": 1, "kind": "drop_after_commit"},
    )
    with pytest.raises(LiumUncertainOutcome, match="lost the outcome") as caught:
        rent_reconciled(session.client, attempt)
    assert caught.value.code == "idempotency_outcome_unknown"
    assert len(session.posts("/rent")) == 2 and session.client.list_pods() == []


def test_resume_after_a_crash_finds_the_pod_without_resending(session: Session) -> None:
    attempt = new_attempt(session)
    saved = attempt.to_json()  # persisted before the send, as the provider does
    session.set_faults({"method": "POST", "path": RENT_PATH, "first": 1, "kind": "drop_after_commit"})
    with pytest.raises(LiumUncertainOutcome):
        session.client.rent(attempt.executor_id, attempt.body, idempotency_key=attempt.idempotency_key)
    result = rent_reconciled(session.client, RentAttempt.from_json(saved), resume=True)
    assert result.outcome == "rented" and pods_named(session, attempt.pod_name) == [result.pod_id]
    assert len(session.posts("/rent")) == 1


def test_resume_of_a_deleted_pod_reports_deleted(session: Session) -> None:
    attempt = new_attempt(session)
    session.set_faults({"method": "POST", "path": RENT_PATH, "first": 1, "kind": "drop_after_commit"})
    with pytest.raises(LiumUncertainOutcome):
        session.client.rent(attempt.executor_id, attempt.body, idempotency_key=attempt.idempotency_key)
    pod_id = pods_named(session, attempt.pod_name)[0]
    session.client.delete_pod(pod_id)
    wait_for(lambda: session.client.get_pod(pod_id) is None, "the pod to be removed")
    result = rent_reconciled(session.client, attempt, resume=True)
    assert (result.outcome, result.pod_id) == ("deleted", pod_id)
    assert len(session.posts("/rent")) == 1


def test_older_pod_with_the_same_name_is_not_adopted(old_session: Session) -> None:
    first = new_attempt(old_session)
    assert rent_reconciled(old_session.client, first).outcome == "rented"
    # A later attempt reusing the name: the existing pod was created > 1 min before it started.
    later = RentAttempt(
        first.executor_id,
        first.pod_name,
        str(uuid.uuid4()),
        first.body,
        datetime.now(UTC) + timedelta(minutes=2),
    )
    with pytest.raises(LiumUncertainOutcome, match="no pod found"):
        rent_reconciled(old_session.client, later, resume=True, rounds=1)
    assert len(old_session.posts("/rent")) == 1


def test_expired_key_is_never_replayed(session: Session) -> None:
    attempt = new_attempt(session)
    stale = RentAttempt(
        attempt.executor_id,
        attempt.pod_name,
        attempt.idempotency_key,
        attempt.body,
        datetime.now(UTC) - timedelta(hours=25),
    )
    with pytest.raises(LiumUncertainOutcome, match="no pod found"):
        rent_reconciled(session.client, stale, resume=True, rounds=1)
    assert session.posts("/rent") == []


@pytest.mark.parametrize(
    ("fault", "outcome", "code"),
    [
        ({"kind": "node_unavailable"}, "no_capacity", "node_unavailable"),
        ({"kind": "node_rent_in_progress"}, "no_capacity", "node_rent_in_progress"),
        (
            {"kind": "rent_refusal", "status": 403, "code": "insufficient_balance"},
            "refused",
            "insufficient_balance",
        ),
    ],
)
def test_definitive_refusals(session: Session, fault: dict[str, Any], outcome: str, code: str) -> None:
    attempt = new_attempt(session)
    session.set_faults({"method": "POST", "path": RENT_PATH, **fault})
    result = rent_reconciled(session.client, attempt)
    assert (result.outcome, result.code, result.pod_id) == (outcome, code, None)
    assert result.error is not None and result.error.status == fault.get("status", result.error.status)
    assert session.client.list_pods() == [] and len(session.posts("/rent")) == 1


def test_more_gpus_than_free_is_no_capacity(session: Session) -> None:
    attempt = new_attempt(session)
    body = attempt.body.model_copy(update={"gpu_count": 64})
    result = rent_reconciled(session.client, RentAttempt.new(attempt.executor_id, body))
    assert result.outcome == "no_capacity" and result.code == "gpu_count_invalid"


# --- retries, rate limits, cancellation, garbage -----------------------------------------------------


def test_429_waits_exactly_retry_after_and_a_mutation_is_resent_once(session: Session) -> None:
    attempt = new_attempt(session)
    session.set_faults(
        {"method": "GET", "path": "/pods", "first": 1, "kind": "rate_limit", "seconds": 2},
        {"method": "POST", "path": RENT_PATH, "first": 1, "kind": "rate_limit", "seconds": 1},
    )
    assert session.client.list_pods() == []
    result = rent_reconciled(session.client, attempt)
    assert result.outcome == "rented" and pods_named(session, attempt.pod_name) == [result.pod_id]
    assert session.sleeps == [2.0, 1.0]
    for path, retry_after in (("/api/pods", 2.0), (f"/api/executors/{attempt.executor_id}/rent", 1.0)):
        limited, retried = [e for e in session.wire.log if e.path == path][:2]
        assert (limited.status, retried.status) == (429, 200)
        assert retried.sent_at - limited.answered_at >= retry_after  # never earlier than asked


def test_retry_after_holds_for_the_next_caller_of_the_same_request(session: Session) -> None:
    # The first caller gives up on its 429 (its operation's deadline); the pod watcher's next listing
    # comes from another thread, and must still wait out what Lium asked.
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            raise TimeoutError("past the first caller's deadline")
        time.sleep(seconds)

    wire = RecordingTransport()
    with LiumClient(session.emulator.api_url, session.account.api_key, sleep=sleep, transport=wire) as client:
        session.set_faults({"method": "GET", "path": "/pods", "first": 1, "kind": "rate_limit", "seconds": 2})
        with pytest.raises(TimeoutError):
            client.list_pods()
        assert client.list_pods() == []
    limited, retried = [e for e in wire.log if e.path == "/api/pods"]
    assert (limited.status, retried.status) == (429, 200)
    assert retried.sent_at - limited.answered_at >= 2.0
    assert sleeps[0] == 2.0 and 0 < sleeps[1] <= 2.0


def test_a_retry_after_too_long_to_wait_holds_the_next_caller_without_sending(session: Session) -> None:
    session.set_faults({"method": "GET", "path": "/pods", "first": 1, "kind": "rate_limit", "seconds": 300})
    with pytest.raises(LiumRateLimited, match="Retry after 300 seconds"):
        session.client.list_pods()
    sent = session.client.request_count
    with pytest.raises(LiumRateLimited, match="the server asks to wait"):
        session.client.list_pods()  # the fault fired once: only the hold refuses it
    assert session.client.request_count == sent


def test_sustained_429s_outlast_the_retry_count(session: Session) -> None:
    # max_retries is 3 for this client; a rate limit is not a failure, so 6 429s in a row still end well.
    session.set_faults({"method": "POST", "path": "/volumes", "first": 6, "kind": "rate_limit", "seconds": 1})
    volume = session.client.create_volume("patient", None)
    posts = session.posts("/volumes")
    assert [e.status for e in posts] == [429] * 6 + [200] and volume.name == "patient"
    assert session.sleeps == [1.0] * 6
    assert all(later.sent_at - earlier.answered_at >= 1.0 for earlier, later in itertools.pairwise(posts))


def test_rate_limit_from_a_bucket(session: Session) -> None:
    session.set_faults(rate_limits=[{"method": "GET", "path": "/templates", "per_minute": 60}])
    before = session.client.request_count
    for _ in range(62):
        session.client.list_templates()
    limited = [e for e in session.wire.log if e.path == "/api/templates" and e.status == 429]
    assert limited and all(s >= 1.0 for s in session.sleeps)
    assert session.client.request_count - before == 62 + len(limited)


def test_reads_retry_5xx_mutations_do_not(session: Session) -> None:
    session.set_faults(
        {"method": "GET", "path": "/volumes", "first": 2, "kind": "status", "status": 502},
        {
            "method": "POST",
            "path": "/volumes",
            "first": 1,
            "kind": "status",
            "status": 500,
            "after_commit": True,
        },
    )
    assert session.client.list_volumes() == []
    assert [e.status for e in session.wire.log if e.path == "/api/volumes"] == [502, 502, 200]
    with pytest.raises(LiumUncertainOutcome, match="fault; the request may or may not have taken effect"):
        session.client.create_volume("maybe")
    assert len(session.posts("/volumes")) == 1
    assert [v.name for v in session.client.list_volumes()] == ["maybe"]  # it did take effect


def test_cancel_interrupts_a_retry_wait(emulator: RunningEmulator, tmp_path: Path) -> None:
    cancelled = threading.Event()
    with open_session(emulator, tmp_path, cancel=cancelled) as current:
        current.set_faults({"method": "GET", "path": "/pods", "kind": "rate_limit", "seconds": 30})
        timer = threading.Timer(0.3, cancelled.set)
        started = time.monotonic()
        timer.start()
        try:
            with pytest.raises(Cancelled, match="the operation was cancelled"):
                current.client.list_pods()
        finally:
            timer.cancel()
        assert time.monotonic() - started < 20  # woke up long before the 30 s Retry-After
        assert current.client.request_count == 1 and current.sleeps == [30.0]


@pytest.mark.parametrize("body", ["truncated", "wrong_type", "not_json"])
def test_garbage_answers_are_protocol_errors(session: Session, body: str) -> None:
    session.set_faults({"method": "GET", "path": "/pods", "kind": "garbage", "body": body})
    with pytest.raises(LiumProtocolError) as caught:
        session.client.list_pods()
    assert str(caught.value).startswith("GET /pods: ")


# --- offers -----------------------------------------------------------------------------------------


def test_find_offers_over_the_emulator_feed(session: Session) -> None:
    feed = feed_url(session.emulator)
    offers = find_offers(feed, OfferFilter(), client=session.client)
    assert offers and [(o.price_per_hour, o.executor_id) for o in offers] == sorted(
        (o.price_per_hour, o.executor_id) for o in offers
    )
    assert all(o.gpu_count == 1 for o in offers)
    h100 = find_offers(feed, OfferFilter(gpu="h100", gpu_count=8, regions=["us"]))
    assert h100 and all(o.gpu == "H100" and o.region.startswith("us-") for o in h100)
    assert find_offers(feed, OfferFilter(gpu="RTX 3090", max_price_per_hour=0.01)) == []
    raw = http.get(feed, timeout=30).json()
    assert {o.executor_id for o in offers} <= {n["id"] for n in raw["nodes"]}


def test_feed_availability_follows_rentals(session: Session) -> None:
    attempt = new_attempt(session)
    feed = feed_url(session.emulator)

    def free_gpus() -> int:
        nodes = http.get(feed, timeout=30).json()["nodes"]
        return int(next((n["available_gpu_count"] for n in nodes if n["id"] == attempt.executor_id), 0))

    def offer_counts() -> set[int]:
        return {
            o.gpu_count
            for o in find_offers(feed, OfferFilter(gpu_count=1))
            if o.executor_id == attempt.executor_id
        }

    before = free_gpus()
    assert before >= 1 and offer_counts() == {1}
    assert rent_reconciled(session.client, attempt).outcome == "rented"
    assert free_gpus() == before - 1
