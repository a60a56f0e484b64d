"""``Idempotency-Key`` on rent (docs/lium-api.md#idempotency): per account, 24 h retention, 300 s in-flight lock.

A key's record is ``in_flight`` while its first request runs, ``completed`` once that request's answer
(2xx body or 4xx refusal) is stored, and ``pending`` when the request ended without a recorded answer
(the client never learnt the outcome; e.g. the connection dropped after the commit). Repeats get the
stored answer with ``Idempotent-Replayed: true``, 409 ``idempotency_in_progress``, or 409
``idempotency_outcome_unknown``; a repeat with a different body gets 422 ``idempotency_key_reused``.
"""

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, Literal

from lium_emulator.errors import ApiError
from lium_emulator.records.entities import IdempotencyRecord
from lium_emulator.records.state import EmulatorState

RETENTION = timedelta(hours=24)
IN_FLIGHT_LOCK = timedelta(seconds=300)


def request_fingerprint(executor_id: str, body: Any) -> str:
    """SHA-256 of the target and the JSON body, independent of key order and whitespace."""
    canonical = json.dumps({"executor_id": executor_id, "body": body}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class IdempotencyLedger:
    """Looks up, reserves and settles rent idempotency records of ``EmulatorState``."""

    def __init__(self, state: EmulatorState) -> None:
        self._state = state
        # A request that was in flight when the emulator stopped will never record its answer.
        for record in state.idempotency.values():
            if record.state == "in_flight":
                self._settle(record, "pending")

    def lookup(self, user_id: str, key: str, fingerprint: str, now: datetime) -> IdempotencyRecord | None:
        """The completed record to replay, None for a new (or expired) key; raises the 409/422 answers."""
        record = self._state.idempotency.get((user_id, key))
        if record is None or now - record.created_at >= RETENTION:
            return None
        if record.request_sha256 != fingerprint:
            raise ApiError(
                422,
                "idempotency_key_reused",
                "This Idempotency-Key was already used with a different request.",
                hint="Send a new Idempotency-Key for a different request.",
            )
        if record.state == "in_flight" and now - record.created_at >= IN_FLIGHT_LOCK:
            self._settle(record, "pending")
        if record.state == "in_flight":
            raise ApiError(
                409,
                "idempotency_in_progress",
                "A request with this Idempotency-Key is still being processed.",
                hint="Wait, then resend the same request with the same key.",
            )
        if record.state == "pending":
            raise ApiError(
                409,
                "idempotency_outcome_unknown",
                "The outcome of the request with this Idempotency-Key is unknown.",
                hint="List your pods and events to find out whether the rent happened.",
            )
        return record

    def reserve(self, user_id: str, key: str, fingerprint: str, now: datetime) -> IdempotencyRecord:
        """Start a new record for a first request (replacing an expired one)."""
        record = IdempotencyRecord(
            user_id=user_id, key=key, request_sha256=fingerprint, state="in_flight", created_at=now
        )
        self._state.idempotency[(user_id, key)] = record
        self._state.save(record)
        return record

    def complete(self, record: IdempotencyRecord, status_code: int, body: dict[str, Any]) -> None:
        """Store the answer the client received."""
        record.status_code, record.body = status_code, body
        self._settle(record, "completed")

    def abandon(self, record: IdempotencyRecord) -> None:
        """The client did not receive an answer: the key's outcome is unknown for good."""
        self._settle(record, "pending")

    def _settle(self, record: IdempotencyRecord, state: Literal["pending", "completed"]) -> None:
        record.state = state
        self._state.save(record)
