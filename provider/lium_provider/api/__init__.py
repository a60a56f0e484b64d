"""Lium REST API client: typed calls, safe errors, reconciled rent and offer search.

Modules: :mod:`.client` (``LiumClient``), :mod:`.transport` (retries), :mod:`.errors`, :mod:`.models`,
:mod:`.rent` (``rent_reconciled``), :mod:`.offers` (``find_offers``).

:mod:`.offers` is not re-exported here: it imports gpuhunt (about 50 ms), which only the offers data
source needs, and Terraform starts the provider several times per command.
"""

from lium_provider.api.client import RENT_IDEMPOTENCY, LiumClient
from lium_provider.api.errors import (
    NO_CAPACITY_CODES,
    LiumAuthError,
    LiumCancelled,
    LiumError,
    LiumNotFound,
    LiumProtocolError,
    LiumRateLimited,
    LiumUnavailable,
    LiumUncertainOutcome,
    is_definitive,
)
from lium_provider.api.models import (
    DELETED,
    DELETING,
    PENDING,
    RUNNING,
    TERMINAL_POD_STATES,
    DockerCredential,
    Event,
    Pod,
    RentRequest,
    Template,
    TemplateSpec,
    User,
    Volume,
)
from lium_provider.api.rent import RentAttempt, RentResult, rent_reconciled

__all__ = [
    "DELETED",
    "DELETING",
    "NO_CAPACITY_CODES",
    "PENDING",
    "RENT_IDEMPOTENCY",
    "RUNNING",
    "TERMINAL_POD_STATES",
    "DockerCredential",
    "Event",
    "LiumAuthError",
    "LiumCancelled",
    "LiumClient",
    "LiumError",
    "LiumNotFound",
    "LiumProtocolError",
    "LiumRateLimited",
    "LiumUnavailable",
    "LiumUncertainOutcome",
    "Pod",
    "RentAttempt",
    "RentRequest",
    "RentResult",
    "Template",
    "TemplateSpec",
    "User",
    "Volume",
    "is_definitive",
    "rent_reconciled",
]
