"""Stack identity: which Terraform state (and workspace) a Lium object belongs to, in one place.

Recovery after a crash (:mod:`lium_provider.domain.journal`, the pod's adoption, orphan settling, ``lium-tf
sweep --stack``) may only ever touch objects of *this* stack. A stack is named by its **identity**, a
string that is the same wherever the same state is used (a laptop and a CI runner sharing one backend)
and different for different states (another directory with local state, another workspace, another
machine's local state). The identity is:

* the provider argument ``stack``, else the environment variable ``LIUM_STACK``, taken as it is;
* else, once a local state records objects, the tag they record (:func:`recorded_tag`): the identity
  travels with the state, so a moved or re-cloned directory, or a CI job that restores the state into
  another path, is the same stack;
* else derived from where the state lives, read from Terraform's own files in the working directory the
  provider inherits (the root module, also under ``-chdir``): the backend cache
  ``<data dir>/terraform.tfstate`` (``backend.type`` and ``backend.config``; the data dir is
  ``TF_DATA_DIR``, default ``.terraform``) and the workspace (``TF_WORKSPACE``, else
  ``<data dir>/environment``, absent = ``default``):

  - a remote backend: its type and the fields that name the state (:data:`STATE_NAMING_FIELDS`, also
    when given in the environment instead, :data:`BACKEND_ENVIRONMENT`, such as ``PG_CONN_STR``), never
    a password or token: a ``pg`` ``conn_str`` contributes its host, port and database only;
    a backend type not listed contributes its string fields whose names do not look secret;
  - local state (no backend cache, or ``local``): the resolved state path and the machine
    (``/etc/machine-id``, else the host name), because a local state file cannot be shared.

Under ``terraform test`` the identity is that of the directory's stack followed by
:data:`TEST_RUN_SUFFIX`: a stack of its own.

Which objects a state may act on is not decided here: a state's objects are its own, each with the tag
it recorded (:mod:`lium_provider.resources.ownership`); the identity names what this stack creates and
bounds recovery (adopting or ending what an interrupted run made) to its tag.

The **stack tag** (:func:`stack_tag`) is a short hash of the identity, the only form that goes on the
wire: pod names carry it (:func:`lium_pod_name`), templates and volumes carry it in their description
(:func:`described`), and it never reveals the identity itself. Pod names
also carry a **rent digest** (:func:`rent_digest`): a short hash of what the rent asks for, so that a
replacement (which changes one of those) never has the name of the pod it replaces.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

STACK_ENV = "LIUM_STACK"
# ``terraform test`` keeps its state in memory and runs in the directory of a real stack (and its backend
# cache): its objects form a stack of their own, so a test run never adopts, changes or deletes what the
# directory's stack manages, and the next test run there adopts what a killed one left.
TEST_COMMAND = "test"
TEST_RUN_SUFFIX = " (terraform test)"
ADOPT_STACKS_ENV = "LIUM_ADOPT_STACKS"
TAG_LENGTH = 8
DIGEST_LENGTH = 3
# The fields of each backend type that name the state: equal on every machine that shares it.
STATE_NAMING_FIELDS: dict[str, tuple[str, ...]] = {
    "s3": ("bucket", "key", "workspace_key_prefix", "region"),
    "gcs": ("bucket", "prefix"),
    "azurerm": ("storage_account_name", "container_name", "key"),
    "remote": ("hostname", "organization", "workspaces"),
    "cloud": ("hostname", "organization", "workspaces"),
    "http": ("address",),
    "kubernetes": ("namespace", "secret_suffix"),
    "consul": ("address", "path"),
    "oss": ("bucket", "prefix", "key"),
    "cos": ("bucket", "prefix", "key"),
}
# Settings a backend also reads from the environment when its configuration leaves them out (each
# backend's documentation; ``terraform init`` then caches null for them): they name the state just as
# the configured value would.
BACKEND_ENVIRONMENT: dict[str, dict[str, str]] = {
    "pg": {"conn_str": "PG_CONN_STR", "schema_name": "PG_SCHEMA_NAME"},
    "http": {"address": "TF_HTTP_ADDRESS"},
    "consul": {"address": "CONSUL_HTTP_ADDR"},
    "kubernetes": {"namespace": "KUBE_NAMESPACE"},
}
# A field of an unlisted backend whose name matches this is never part of the identity.
_SECRET_LOOKING = re.compile(
    r"pass|secret|token|credential|auth|private|sas|certificate|access_key|conn", re.I
)
# The line that carries the stack tag in a template's or volume's description (Lium has no labels).
STACK_MARKER = "lium-stacks stack"
_MAX_LIUM_NAME = 63
_TAG_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_LIUM_NAME = re.compile(
    rf"^(?P<base>.+)-(?P<tag>[{_TAG_ALPHABET}]{{{TAG_LENGTH}}})(?P<digest>[{_TAG_ALPHABET}]{{{DIGEST_LENGTH}}})$"
)
KEY_NAME_MARKER = ".lium-stacks-"
"""Between a key's name and its stack tag: no name a person gives a key has it by chance."""
KEY_NAME_ALPHABET = re.compile(r"^[A-Za-z0-9._@-]+$")
"""The alphabet of a key's name (an account SSH key's or an API key's) as Lium's SDK writes them
(`cli-<user>@<host>`)."""
KEY_NAME_MAX_LENGTH = 64 - len(KEY_NAME_MARKER) - TAG_LENGTH
"""The longest name a key may be given: 64 characters on Lium, with the stack's tag added."""


def check_key_name(value: str) -> str:
    """``value`` if it can name a key (:data:`KEY_NAME_ALPHABET`), else ValueError saying why."""
    if not KEY_NAME_ALPHABET.match(value):
        raise ValueError(f'"{value}" is not a valid key name: use only letters, digits and ._@-')
    return value


_TAGGED_NAME = re.compile(
    rf"^(?P<base>.+){re.escape(KEY_NAME_MARKER)}(?P<tag>[{_TAG_ALPHABET}]{{{TAG_LENGTH}}})$"
)
_DESCRIPTION_TAG = re.compile(
    rf"(?:^|\n){re.escape(STACK_MARKER)} (?P<tag>[{_TAG_ALPHABET}]{{{TAG_LENGTH}}})$"
)


def stack_identity(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    command: str | None = None,
) -> str:
    """This process's stack identity: ``explicit`` (the ``stack`` argument), ``LIUM_STACK``, or derived
    from the backend and workspace of the working directory (see the module docstring); under the
    Terraform ``command`` ``test``, that identity's test stack (:data:`TEST_RUN_SUFFIX`)."""
    identity = _configured_identity(explicit, environ, cwd)
    return identity + TEST_RUN_SUFFIX if command == TEST_COMMAND else identity


def stack_name(explicit: str | None, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The stack's name (the ``stack`` argument, else ``LIUM_STACK``); None when it is not named."""
    env = os.environ if environ is None else environ
    return explicit or env.get(STACK_ENV) or None


def this_stacks_tag(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    command: str | None = None,
) -> str:
    """The tag of what this process creates: the named stack's; under ``terraform test`` the test
    stack's; else the tag a local state's objects record (:func:`recorded_tag`); else the derived
    identity's (:func:`stack_identity`)."""
    if stack_name(explicit, environ=environ) is None and command != TEST_COMMAND:
        state = local_state_file(environ=environ, cwd=cwd)
        recorded = recorded_tag(_read_state(state)) if state is not None else None
        if recorded is not None:
            return recorded
    return stack_tag(stack_identity(explicit, environ=environ, cwd=cwd, command=command))


def _where_the_state_lives(
    environ: Mapping[str, str] | None, cwd: Path | None
) -> tuple[Mapping[str, str], Path, str, tuple[str, dict[str, Any]] | None]:
    """The environment, the root module's directory, the selected workspace (``TF_WORKSPACE``, else
    ``<data dir>/environment``, absent = ``default``) and the backend ``terraform init`` cached (None:
    none), read from Terraform's own files; the data dir is ``TF_DATA_DIR``, default ``.terraform``."""
    env = os.environ if environ is None else environ
    root = (cwd or Path.cwd()).resolve()
    data_dir = root / env.get("TF_DATA_DIR", ".terraform")
    workspace = env.get("TF_WORKSPACE") or _read_text(data_dir / "environment") or "default"
    return env, root, workspace, _backend(data_dir)


def _configured_identity(explicit: str | None, environ: Mapping[str, str] | None, cwd: Path | None) -> str:
    given = explicit or (os.environ if environ is None else environ).get(STACK_ENV)
    if given:
        return f"stack:{given}"
    env, root, workspace, backend = _where_the_state_lives(environ, cwd)
    if backend is None or backend[0] == "local":
        config = backend[1] if backend else {}
        path = config.get("path")
        state_path = (root / path).resolve() if isinstance(path, str) and path else root
        return f"local:{_machine()}:{state_path}|workspace={workspace}"
    kind, config = backend
    return f"{kind}:{json.dumps(_naming_fields(kind, config, env), sort_keys=True)}|workspace={workspace}"


def local_state_file(*, environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """The file that holds the selected workspace's state when it is local (no backend, or ``local``):
    the backend's ``path`` (default ``terraform.tfstate``) for the default workspace, else
    ``<workspace_dir>/<workspace>/terraform.tfstate`` (default ``terraform.tfstate.d``), as Terraform's
    local backend places them. None for a remote backend."""
    _, root, workspace, backend = _where_the_state_lives(environ, cwd)
    if backend is not None and backend[0] != "local":
        return None
    config = backend[1] if backend else {}
    if workspace == "default":
        path = config.get("path")
        return root / (path if isinstance(path, str) and path else "terraform.tfstate")
    directory = config.get("workspace_dir")
    directory = directory if isinstance(directory, str) and directory else "terraform.tfstate.d"
    return root / directory / workspace / "terraform.tfstate"


# Terraform rewrites a local state file in place while it applies: a read that lands mid-write is tried
# again a few times before the state counts as unreadable.
_STATE_READ_ATTEMPTS = 3
_STATE_READ_PAUSE_SECONDS = 0.05


def _read_state(path: Path) -> dict[str, Any] | None:
    """A local state file's JSON; None when it is missing, empty (Terraform makes it so before its first
    write) or cannot be read whole."""
    for attempt in range(_STATE_READ_ATTEMPTS):
        if attempt:
            time.sleep(_STATE_READ_PAUSE_SECONDS)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError:
            continue
        if not text:
            return None
        try:
            state = json.loads(text)
        except ValueError:
            continue
        return state if isinstance(state, dict) else None
    return None


def recorded_tag(state: Mapping[str, Any] | None) -> str | None:
    """The stack tag the Lium objects of a Terraform state record in ``stack_tag`` (the tag most of
    them record; of equally many, the first in alphabetical order), None when it records none."""
    tags: Counter[str] = Counter()
    for resource in (state or {}).get("resources") or []:
        if not isinstance(resource, dict) or not str(resource.get("type", "")).startswith("lium_"):
            continue
        for instance in resource.get("instances") or []:
            attributes = instance.get("attributes") if isinstance(instance, dict) else None
            tag = attributes.get("stack_tag") if isinstance(attributes, dict) else None
            if isinstance(tag, str) and is_tag(tag):
                tags[tag] += 1
    if not tags:
        return None
    most = max(tags.values())
    return min(tag for tag, count in tags.items() if count == most)


def is_tag(text: str) -> bool:
    """Whether ``text`` is shaped like a stack tag (8 characters of its base32 alphabet)."""
    return len(text) == TAG_LENGTH and all(c in _TAG_ALPHABET for c in text)


def _base32(text: str, length: int) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return base64.b32encode(digest[:5]).decode().lower()[:length]


def stack_tag(identity: str) -> str:
    """The identity's tag on the wire: 8 lower-case base32 characters of its SHA-256 (40 bits)."""
    return _base32(identity, TAG_LENGTH)


def rent_digest(*rent_fields: object) -> str:
    """3 base32 characters of what a rent asks for (template, GPU count, volume, chosen executor and
    key): a replacement changes one of them, so its pod's name differs from the replaced pod's."""
    return _base32(json.dumps(rent_fields, sort_keys=True, default=str), DIGEST_LENGTH)


def cluster_rent_digest(
    template_id: str | None,
    node_count: int | None,
    fabric_id: str | None,
    ssh_public_key: str | None,
    placement: Mapping[str, object] | None = None,
) -> str:
    """The rent digest of a cluster's members' Lium name: what the rental asks for (template, node count,
    a chosen fabric and key), marked as a cluster's so no pod's digest equals it. ``placement`` is the
    offer filter's set fields: a new filter replaces the cluster, and under ``create_before_destroy`` the
    replacement must not carry, and so adopt, the name of the cluster it replaces. Without one the digest
    is what it was before filters counted, so a cluster rented without a filter keeps proving its stack."""
    fields: tuple[object, ...] = ("cluster", template_id, node_count, fabric_id, ssh_public_key)
    return rent_digest(*fields, dict(placement)) if placement else rent_digest(*fields)


def lium_pod_name(name: str, tag: str, digest: str) -> str:
    """The pod name sent to Lium: ``<name>-<tag><digest>``, within Lium's 63 characters.

    A name too long for the suffix is cut and gets 4 hex characters of its hash, so two long names
    that share a beginning still differ.
    """
    suffix = f"-{tag}{digest}"
    if len(name) + len(suffix) <= _MAX_LIUM_NAME:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:4]
    return f"{name[: _MAX_LIUM_NAME - len(suffix) - 5]}~{digest}{suffix}"


def parse_lium_pod_name(lium_name: str) -> tuple[str, str, str] | None:
    """``(name, tag, digest)`` of a name :func:`lium_pod_name` made; None for any other name."""
    match = _LIUM_NAME.match(lium_name)
    if match is None:
        return None
    return match["base"], match["tag"], match["digest"]


def tag_in_pod_name(lium_name: str | None) -> str | None:
    """The stack tag a pod's Lium name carries, or None for a name :func:`lium_pod_name` did not make."""
    parsed = parse_lium_pod_name(lium_name or "")
    return parsed[1] if parsed else None


def is_named(lium_name: str, name: str, tag: str) -> bool:
    """Whether a pod Lium calls ``lium_name`` is the one called ``name``: that very name, or this
    stack's (``tag``) pod whose ``name`` attribute it is."""
    parsed = parse_lium_pod_name(lium_name)
    return lium_name == name or (parsed is not None and parsed[:2] == (name, tag))


def tagged_name(name: str, tag: str) -> str:
    """The name sent to Lium for an object with neither a description nor a rent digest (an account SSH
    key): ``<name>.lium-stacks-<tag>``, so a fresh runner finds it again and a refresh reads whose it is.
    The marker keeps a person's key (``cli-alice@desktop2``) from ever reading as a stack's."""
    return f"{name}{KEY_NAME_MARKER}{tag}"


def parse_tagged_name(lium_name: str) -> tuple[str, str] | None:
    """``(name, tag)`` of a name :func:`tagged_name` made; None for any other name."""
    match = _TAGGED_NAME.match(lium_name)
    return (match["base"], match["tag"]) if match else None


def described(description: str | None, tag: str) -> str:
    """A template's or volume's description as sent to Lium: the user's text (if any), then a line that
    names this stack's tag, so a fresh runner finds the object again (:func:`tag_in`)."""
    marker = f"{STACK_MARKER} {tag}"
    text = without_tag(description)
    return f"{text}\n{marker}" if text else marker


def tag_in(description: str | None) -> str | None:
    """The stack tag :func:`described` wrote into a description; None when it holds none."""
    match = _DESCRIPTION_TAG.search(description or "")
    return match["tag"] if match else None


def without_tag(description: str | None) -> str | None:
    """The user's part of a description :func:`described` made (None when nothing else is left)."""
    text = _DESCRIPTION_TAG.sub("", description or "").rstrip("\n")
    return text or None


def tags_of(stack_or_tag: str) -> frozenset[str]:
    """The tags a stack given by name or by tag can have (``lium-tf sweep --stack``, ``adopt_stacks``):
    the tags of the stack of that name and of its ``terraform test`` runs, and the value itself when it
    is shaped like a tag (``training`` is both a possible stack name and a possible tag, so both are
    meant)."""
    identity = stack_identity(stack_or_tag)
    tags = {stack_tag(identity), stack_tag(identity + TEST_RUN_SUFFIX)}
    if is_tag(stack_or_tag):
        tags.add(stack_or_tag)
    return frozenset(tags)


def adopted_tags(stacks: list[str] | None, *, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The tags of the stacks this stack takes over: the provider's ``adopt_stacks``, else
    ``LIUM_ADOPT_STACKS`` (comma-separated); each a stack value or a tag (:func:`tags_of`)."""
    env = os.environ if environ is None else environ
    given = stacks if stacks is not None else env.get(ADOPT_STACKS_ENV, "").split(",")
    return frozenset(tag for stack in given if stack.strip() for tag in tags_of(stack.strip()))


def _backend(data_dir: Path) -> tuple[str, dict[str, Any]] | None:
    """The ``(type, config)`` Terraform cached at ``terraform init``; None when there is no cache."""
    text = _read_text(data_dir / "terraform.tfstate")
    if not text:
        return None
    try:
        backend = json.loads(text).get("backend")
    except (ValueError, AttributeError):
        return None
    if not isinstance(backend, dict) or not isinstance(backend.get("type"), str):
        return None
    config = backend.get("config")
    return backend["type"], config if isinstance(config, dict) else {}


def _naming_fields(kind: str, config: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """What names the state in a remote backend's configuration (and the environment it falls back to,
    :data:`BACKEND_ENVIRONMENT`); nothing secret."""
    config = {
        **config,
        **{
            name: env[variable]
            for name, variable in BACKEND_ENVIRONMENT.get(kind, {}).items()
            if config.get(name) in (None, "") and env.get(variable)
        },
    }
    if kind == "pg":
        return {
            "schema_name": config.get("schema_name") or "terraform_remote_state",
            **_pg_database(config, env),
        }
    listed = STATE_NAMING_FIELDS.get(kind)
    if listed is not None:
        return {name: config[name] for name in listed if config.get(name) not in (None, "", [])}
    return {
        name: _without_userinfo(value)
        for name, value in config.items()
        if isinstance(value, str) and value and not _SECRET_LOOKING.search(name)
    }


def _pg_database(config: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Host, port and database of a pg backend's ``conn_str`` (URL or ``key=value`` form); never the
    user or password. Unset parts come from the libpq environment the backend also reads."""
    conn = config.get("conn_str")
    parts: dict[str, str] = {}
    if isinstance(conn, str) and "://" in conn:
        url = urlsplit(conn)
        parts = {"host": url.hostname or "", "port": str(url.port or ""), "dbname": url.path.lstrip("/")}
    elif isinstance(conn, str):
        pairs = (item.split("=", 1) for item in conn.split() if "=" in item)
        values = {key.strip(): value.strip().strip("'") for key, value in pairs}
        parts = {key: values.get(key, "") for key in ("host", "port", "dbname")}
    for key, variable in (("host", "PGHOST"), ("port", "PGPORT"), ("dbname", "PGDATABASE")):
        if not parts.get(key):
            parts[key] = env.get(variable, "")
    return parts


def _without_userinfo(value: str) -> str:
    """A URL-looking value without ``user:password@``."""
    return re.sub(r"(://)[^/@\s]+@", r"\1", value)


def _machine() -> str:
    return _read_text(Path("/etc/machine-id")) or socket.gethostname()


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
