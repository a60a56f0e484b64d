"""The one table of which scope each route family needs (docs/lium-api.md#scopes).

``caller.authorize`` enforces it on every request; ``GET /keys/scopes`` renders it. A route that is not
in the table is refused (500) rather than let through, and a test checks that every route of the app is
in it.
"""

from dataclasses import dataclass
from typing import Any

from lium_emulator.records.access import Scope


@dataclass(frozen=True)
class RouteFamily:
    """Routes that need the same scope. ``scope`` None: no credential is looked at (public routes).

    ``other_key_scope``: the scope a key needs instead when the pod (or cluster) was rented by another
    key — a key removes the pods it created with ``rent`` and anyone else's with ``manage``.
    """

    name: str
    scope: Scope | None
    routes: tuple[str, ...]  # "METHOD /path" as the routes are declared, without the /api prefix
    other_key_scope: Scope | None = None


FAMILIES: tuple[RouteFamily, ...] = (
    RouteFamily(
        "public",
        None,
        ("GET /public/v1/nodes", "GET /version", "GET /keys/scopes", "POST /users/login"),
    ),
    RouteFamily("account: read", "read", ("GET /users/me", "GET /users/me/events")),
    RouteFamily(
        "nodes and offers: read",
        "read",
        (
            "GET /executors",
            "GET /machines",
            "GET /executors/default-docker-image",
            "GET /executors/deployment-estimate",
            "GET /executors/{executor_id}/quote",
            "GET /executors/infiniband-clusters",
        ),
    ),
    RouteFamily(
        "pods: read",
        "read",
        ("GET /pods", "GET /pods/{pod_id}", "GET /pods/{pod_id}/events", "GET /pods/{pod_id}/logs"),
    ),
    RouteFamily("billing statement: read", "read", ("GET /billing/statement",)),
    RouteFamily(
        "backups: read",
        "read",
        (
            "GET /backup-configs",
            "GET /backup-configs/pod/{pod_id}",
            "GET /backup-logs/pod/{pod_id}",
            "GET /backup-logs/",
            "GET /backup-logs/{backup_id}",
            "GET /pods/{pod_id}/restore-logs",
        ),
    ),
    RouteFamily(
        "templates, credentials, volumes, SSH keys: read",
        "read",
        (
            "GET /templates",
            "GET /templates/{template_id}",
            "GET /docker-credentials/",
            "GET /volumes",
            "GET /volumes/{volume_id}",
            "GET /ssh-keys",
        ),
    ),
    RouteFamily(
        "workspaces: read",
        "read",
        ("GET /workspaces", "GET /workspaces/{workspace_id}", "GET /workspaces/{workspace_id}/members"),
    ),
    RouteFamily(
        "API keys: read (a key reads only its own refusal ledger; the rest needs a browser session)",
        "read",
        ("GET /keys", "GET /keys/{key_id}", "GET /keys/{key_id}/refusals"),
    ),
    RouteFamily(
        "rent",
        "rent",
        ("POST /executors/{executor_id}/rent", "POST /executors/cluster/rent"),
    ),
    RouteFamily(
        "pod removal (the key's own pods)",
        "rent",
        (
            "DELETE /pods/{pod_id}",
            "POST /pods/{pod_id}/schedule-removal",
            "DELETE /pods/{pod_id}/schedule-removal",
            "POST /pods/{pod_id}/feedback",
            "DELETE /clusters/{cluster_id}",
        ),
        other_key_scope="manage",
    ),
    RouteFamily(
        "pods: reboot, switch template, install Jupyter",
        "manage",
        (
            "POST /pods/{pod_id}/reboot",
            "PUT /pods/{pod_id}/switch-template",
            "POST /pods/{pod_id}/install-jupyter",
        ),
    ),
    RouteFamily(
        "templates, credentials, volumes, SSH keys: write",
        "manage",
        (
            "POST /templates",
            "PUT /templates/{template_id}",
            "DELETE /templates/{template_id}",
            "POST /docker-credentials/",
            "PUT /docker-credentials/{credential_id}",
            "DELETE /docker-credentials/{credential_id}",
            "POST /volumes",
            "PUT /volumes/{volume_id}",
            "DELETE /volumes/{volume_id}",
            "POST /ssh-keys",
            "PUT /ssh-keys/{key_id}",
            "DELETE /ssh-keys/{key_id}",
        ),
    ),
    RouteFamily(
        "backups: configure, back up, restore, cancel, delete",
        "manage",
        (
            "POST /backup-configs",
            "PUT /backup-configs/{config_id}",
            "DELETE /backup-configs/{config_id}",
            "POST /pods/{pod_id}/backup",
            "POST /backup-logs/{backup_id}/cancel",
            "DELETE /backup-logs/{backup_id}",
            "POST /pods/{pod_id}/restore",
            "POST /restore-logs/{restore_id}/cancel",
        ),
    ),
    RouteFamily(
        "API keys and workspaces: write (browser session only)",
        "manage",
        (
            "POST /keys",
            "PATCH /keys/{key_id}",
            "DELETE /keys/{key_id}",
            "POST /workspaces",
            "DELETE /workspaces/{workspace_id}",
            "POST /workspaces/{workspace_id}/invitations",
            "DELETE /workspaces/{workspace_id}/members/{user_id}",
            "POST /workspaces/{workspace_id}/billing-owner/transfer",
        ),
    ),
)

# The routes that move money: none in the emulator (no top-ups, no card payments, no transfers).
MONEY_ROUTES: tuple[str, ...] = ()

_SCOPE_TEXT: dict[Scope, tuple[str, str, tuple[str, ...], bool]] = {
    "read": (
        "Read",
        "Read the account, its pods, events, logs, billing statement, templates, volumes and keys' ledgers.",
        ("list and read pods, their events and logs", "read the account and its event log", "list offers"),
        True,
    ),
    "rent": (
        "Rent",
        "Rent pods and clusters, and delete or schedule the removal of the pods this key created.",
        ("rent a node or a cluster", "delete or schedule the removal of pods this key rented"),
        True,
    ),
    "manage": (
        "Manage",
        "Change everything else: templates, registry credentials, volumes, SSH keys; reboot or switch "
        "a pod; delete pods another key rented.",
        (
            "create, change and delete templates, credentials, volumes and SSH keys",
            "reboot, switch pods",
            "delete any pod the key sees",
        ),
        True,
    ),
    "billing": (
        "Billing",
        "The money routes (top-ups, transfers), and nothing else; this server has none.",
        ("move money (no such route on this server)",),
        False,
    ),
}

VISIBILITY_TEXT: dict[str, str] = {
    "own": "The key sees only the pods it created; any other pod answers 404 as a missing one.",
    "account": "The key sees every pod of its workspace.",
}

_BY_ROUTE: dict[str, RouteFamily] = {route: family for family in FAMILIES for route in family.routes}


def family_of(method: str, path: str) -> RouteFamily | None:
    """The family of the route declared as ``path`` (without the /api prefix), or None."""
    return _BY_ROUTE.get(f"{method.upper()} {path}")


def scopes_document() -> dict[str, Any]:
    """The body of ``GET /keys/scopes``, rendered from the table."""
    scopes = []
    for scope, (title, description, can, default) in _SCOPE_TEXT.items():
        families = [f.name for f in FAMILIES if f.scope == scope or f.other_key_scope == scope]
        scopes.append(
            {
                "scope": scope,
                "title": title,
                "description": description,
                "can": list(can),
                "route_families": families,
                "routes": [r for f in FAMILIES if f.scope == scope for r in f.routes],
                "default": default,
            }
        )
    return {
        "scopes": scopes,
        "pod_visibility": [{"value": v, "description": d} for v, d in VISIBILITY_TEXT.items()],
        "money_routes": list(MONEY_ROUTES),
    }
