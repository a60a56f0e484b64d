"""Reconciled rent: turn a rent request into a known outcome without ever paying for a second pod.

A rent is a paid side effect whose answer can be lost (5xx, timeout, dropped connection). The rules follow
dstack's Lium backend (docs/lium-api.md#status-codes, #idempotency):

* a *definitive* refusal (HTTP < 500, not 408, not an idempotency "don't know" code) means no pod exists;
* otherwise the pod is looked for by ``pod_name`` + ``executor_id`` in ``GET /pods``, then in the account
  event log (which keeps pods that were already deleted);
* only if nothing is found, the server advertises ``rent_idempotency`` and the key is young enough, the
  *same* key and *same* body are resent; a refusal to that resend proves the first request failed only
  when it carries ``Idempotent-Replayed: true``;
* otherwise :class:`LiumUncertainOutcome` is raised: never rent with a new key while the first may exist.

The caller persists :class:`RentAttempt` (key, body, start time) *before* the first send, so a crash
between send and answer can be resolved later with ``rent_reconciled(client, attempt, resume=True)``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import ValidationError

from lium_provider.api.client import RENT_IDEMPOTENCY, LiumClient
from lium_provider.api.errors import (
    NO_CAPACITY_CODES,
    LiumError,
    LiumUncertainOutcome,
    is_definitive,
)
from lium_provider.api.models import CLOCK_SKEW, Pod, RentRequest

# Lium keeps a completed idempotency record 24 h (docs/lium-api.md#idempotency). Like the official SDK, stop replaying an
# hour earlier: a key that expires while the resend is in flight would rent a second pod.
REPLAY_WINDOW = timedelta(hours=23)
DEFAULT_ROUNDS = 6
_ATTEMPT_FORMAT = 1

RentOutcome = Literal["rented", "deleted", "no_capacity", "refused"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class RentAttempt:
    """Everything needed to send a rent again, or to find the pod it created. JSON-serialisable."""

    executor_id: str
    pod_name: str
    idempotency_key: str
    body: RentRequest
    started_at: datetime
    api_key_id: str | None = None
    """The API key that sent it, when known: a key that sees only its own pods cannot see what another
    key's attempt rented (docs/guides/api-keys.md)."""
    workspace_id: str | None = None
    """The workspace it rented in, when known: a key of another workspace sees nothing of it."""

    def __post_init__(self) -> None:
        if self.body.pod_name != self.pod_name:
            raise ValueError("RentAttempt.pod_name must equal body.pod_name")
        if not self.executor_id or not self.idempotency_key:
            raise ValueError("RentAttempt needs an executor_id and an idempotency_key")
        if self.started_at.tzinfo is None:
            self.started_at = self.started_at.replace(tzinfo=UTC)

    @classmethod
    def new(
        cls,
        executor_id: str,
        body: RentRequest,
        *,
        now: datetime | None = None,
        api_key_id: str | None = None,
        workspace_id: str | None = None,
    ) -> RentAttempt:
        """A fresh attempt with a random UUID4 idempotency key, started now (by the key ``api_key_id``, in
        the workspace ``workspace_id``)."""
        return cls(
            executor_id=executor_id,
            pod_name=body.pod_name,
            idempotency_key=str(uuid.uuid4()),
            body=body,
            started_at=now or _utcnow(),
            api_key_id=api_key_id,
            workspace_id=workspace_id,
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": _ATTEMPT_FORMAT,
                "executor_id": self.executor_id,
                "pod_name": self.pod_name,
                "idempotency_key": self.idempotency_key,
                "body": self.body.to_body(),
                "started_at": self.started_at.isoformat(),
                "api_key_id": self.api_key_id,
                "workspace_id": self.workspace_id,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> RentAttempt:
        """Parse :meth:`to_json` output; raise ValueError naming what is wrong with anything else."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise ValueError("saved rent attempt is not valid JSON") from None
        if not isinstance(data, dict) or data.get("format") != _ATTEMPT_FORMAT:
            raise ValueError(f"saved rent attempt is not in format {_ATTEMPT_FORMAT}")
        strings = {k: data.get(k) for k in ("executor_id", "pod_name", "idempotency_key", "started_at")}
        missing = sorted(k for k, v in strings.items() if not isinstance(v, str))
        if missing:
            raise ValueError(f"saved rent attempt lacks {', '.join(missing)}")
        try:
            body = RentRequest.model_validate(data.get("body"))
            started_at = datetime.fromisoformat(str(strings["started_at"]))
        except (ValidationError, ValueError) as exc:
            raise ValueError(
                f"saved rent attempt has an invalid body or start time: {type(exc).__name__}"
            ) from None
        return cls(
            executor_id=str(strings["executor_id"]),
            pod_name=str(strings["pod_name"]),
            idempotency_key=str(strings["idempotency_key"]),
            body=body,
            started_at=started_at,
            api_key_id=data["api_key_id"] if isinstance(data.get("api_key_id"), str) else None,
            workspace_id=data["workspace_id"] if isinstance(data.get("workspace_id"), str) else None,
        )


@dataclass(frozen=True)
class RentResult:
    """The known outcome of a rent.

    ``rented``: ``pod_id`` exists (in any state). ``deleted``: the rent created ``pod_id`` but the pod is
    already gone (nothing to pay, nothing to clean up). ``no_capacity``: a definitive refusal with a code
    in :data:`NO_CAPACITY_CODES` (try another offer). ``refused``: any other definitive refusal, in
    ``error``. ``reconciled`` tells that the answer came from reconciliation rather than the first send.
    """

    outcome: RentOutcome
    pod_id: str | None = None
    code: str | None = None
    error: LiumError | None = None
    reconciled: bool = False


def rent_reconciled(
    client: LiumClient,
    attempt: RentAttempt,
    *,
    resume: bool = False,
    rounds: int = DEFAULT_ROUNDS,
    now: Callable[[], datetime] = _utcnow,
) -> RentResult:
    """Rent as ``attempt`` describes and return the known outcome, or raise :class:`LiumUncertainOutcome`.

    ``resume=True`` is for an attempt persisted by an earlier process that may already have sent it: the
    first step is then reconciliation, never a send (on a server without idempotency a resend could rent
    a second pod). ``rounds`` bounds reconciliation; rounds are separated by the client's backoff, so a
    pod whose creation commits a little after a lost answer is still found.
    """
    last_error: LiumError | None = None
    if not resume:
        try:
            return RentResult("rented", pod_id=_send(client, attempt))
        except LiumError as exc:
            if is_definitive(exc):
                return _refusal(exc, reconciled=False)
            last_error = exc
    for round_number in range(rounds):
        try:
            found = find_rented_pod(client, attempt)
        except LiumError as exc:
            # The reads already retried; an idempotent resend below is still safe without them.
            found, last_error = None, exc
        if found is not None:
            return found
        if can_replay(client, attempt, now()):
            try:
                return RentResult("rented", pod_id=_send(client, attempt), reconciled=True)
            except LiumError as exc:
                # A fresh refusal may come from checks that run before the key lookup (auth, balance):
                # only a replayed one speaks for the first request.
                if is_definitive(exc) and exc.idempotent_replayed:
                    return _refusal(exc, reconciled=True)
                if exc.code == "idempotency_outcome_unknown":
                    raise _uncertain(
                        attempt, "the server lost the outcome of this idempotency key", exc
                    ) from None
                last_error = exc
        if round_number + 1 < rounds:
            client.http.pause(client.http.backoff(round_number))
    raise _uncertain(attempt, f"no pod found after {rounds} reconciliation rounds", last_error)


def find_rented_pod(client: LiumClient, attempt: RentAttempt) -> RentResult | None:
    """Look for the pod ``attempt`` created: live pods first, then the account event log."""
    earliest = attempt.started_at - CLOCK_SKEW
    for pod in client.list_pods():
        if pod.pod_name == attempt.pod_name and _could_be_ours(pod, attempt, earliest):
            return RentResult("rented", pod_id=pod.id, reconciled=True)
    # Events keep pods that are already gone; one GET per distinct pod id, not per event.
    deletion_seen: dict[str, bool] = {}
    for event in client.events(since=earliest):
        if event.pod_name == attempt.pod_name and event.pod_id:
            deletion_seen[event.pod_id] = deletion_seen.get(event.pod_id, False) or event.marks_deletion
    for pod_id, deleted in deletion_seen.items():
        current = client.get_pod(pod_id)
        if current is None and deleted:
            return RentResult("deleted", pod_id=pod_id, reconciled=True)
        if current is not None and _could_be_ours(current, attempt, earliest):
            return RentResult("rented", pod_id=current.id, reconciled=True)
    return None


def _could_be_ours(pod: Pod, attempt: RentAttempt, earliest: datetime) -> bool:
    """Same executor, and not created before the attempt started (that one belongs to someone else)."""
    return pod.executor_id == attempt.executor_id and (pod.created_at is None or pod.created_at >= earliest)


def can_replay(client: LiumClient, attempt: RentAttempt, now: datetime) -> bool:
    """True when resending the same key cannot rent a second pod (idempotent server, young key)."""
    if now - attempt.started_at >= REPLAY_WINDOW:
        return False
    return RENT_IDEMPOTENCY in client.version_features()


def _send(client: LiumClient, attempt: RentAttempt) -> str:
    return client.rent(attempt.executor_id, attempt.body, idempotency_key=attempt.idempotency_key)


def _refusal(error: LiumError, *, reconciled: bool) -> RentResult:
    outcome: RentOutcome = "no_capacity" if error.code in NO_CAPACITY_CODES else "refused"
    return RentResult(outcome, code=error.code, error=error, reconciled=reconciled)


def _uncertain(attempt: RentAttempt, why: str, last: LiumError | None) -> LiumUncertainOutcome:
    detail = f"; last error: {last}" if last is not None else ""
    return LiumUncertainOutcome(
        f"rent of pod {attempt.pod_name!r} on executor {attempt.executor_id}: outcome unknown ({why}). "
        f"A pod may exist: check Lium before renting again{detail}",
        method="POST",
        path=f"/executors/{attempt.executor_id}/rent",
        status=last.status if last is not None else None,
        code=last.code if last is not None else None,
    )
