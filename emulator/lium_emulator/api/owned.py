"""The API routes' one ownership rule: an caller reaches only its own records.

Another caller's record answers the same 404 as a missing one, so an id never tells a caller that it
exists. Every route that creates a record for the caller, looks one up by id, or lists the caller's
records goes through here.
"""

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar
from uuid import UUID

from lium_emulator.api.caller import Caller
from lium_emulator.errors import ApiError
from lium_emulator.records.timeutil import utcnow


class _OwnedRecord(Protocol):
    @property
    def user_id(self) -> str | None: ...


R = TypeVar("R", bound=_OwnedRecord)


def _not_found(what: str) -> ApiError:
    """Lium's 404 for a missing ``what`` ("Docker credential" → ``docker_credential_not_found``)."""
    return ApiError(404, f"{what.lower().replace(' ', '_')}_not_found", f"{what} not found.")


def new_owned(caller: Caller) -> dict[str, Any]:
    """The fields a record the caller creates starts with: a fresh UUID, the caller as its owner, and
    now as both its creation and update time."""
    now = utcnow()
    return {"id": str(uuid.uuid4()), "user_id": caller.workspace_id, "created_at": now, "updated_at": now}


def owned(table: Mapping[str, R], caller: Caller, record_id: UUID | str, what: str) -> R:
    """``table[record_id]`` if ``caller`` owns it, else the 404 of a missing ``what``."""
    record = table.get(str(record_id))
    if record is None or record.user_id != caller.workspace_id:
        raise _not_found(what)
    return record


def owned_by(records: Iterable[R], caller: Caller) -> list[R]:
    """The records of ``records`` that ``caller`` owns, in their order."""
    return [record for record in records if record.user_id == caller.workspace_id]
