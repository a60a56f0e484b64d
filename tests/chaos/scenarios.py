"""Chaos scenarios, generated deterministically from a seed: which stack, which fault, which moment.

A scenario is data only (the harness runs it). Generation puts a *coverage list* first, so that any seed's
first ``COVERED_WITHIN`` (33) scenarios include every fault kind the emulator can inject (faults.py) and every process fault
(Ctrl-C during apply and during destroy, SIGKILL of terraform, SIGKILL of the provider, an emulator stop by
SIGTERM and by SIGKILL) and every team case (two stacks of the same names in two directories and in two
workspaces, recovery from a fresh runner, a runner killed with a ``pg`` state, a state copied into another
stack, a pod host key change before destroy, a cluster stack hit mid-create), then every API route not
met yet (coverage faults fire for sure: on the first matches or always); after that, scenarios are drawn at random from the whole matrix. Every random choice
comes from ``random.Random(f"{seed}/{index}")``, so a scenario depends only on the seed and its index.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

Category = Literal[
    "fault",
    "sigint",
    "kill-terraform",
    "kill-provider",
    "restart",
    "twin-stacks",
    "fresh-runner",
    "pg-killed-runner",
    "copied-state",
    "host-key-change",
    "cluster",
    "moved-directory",
    "migrated-backend",
    "edited-id",
    "killed-cluster-create",
]
Phase = Literal["apply", "plan", "destroy"]
Twin = Literal["", "directories", "workspaces"]
# What hits a stack in the team categories when no fault rule does: a process fault of the harness.
# "kill-machine": terraform and every provider process of the stack at once, as when the runner dies.
Hit = Literal["", "sigint", "kill-terraform", "kill-provider", "kill-machine"]
# What hits a cluster stack: a member failing mid-create (a fault on the cluster rental, which befalls its
# last member), a kill during the create, or a kill followed by recovery from a fresh CI runner.
ClusterHit = Literal["member-fails", "kill-terraform", "kill-provider", "fresh-runner"]
# How a host-key-change scenario ends its stack: the command that must get past the changed key.
HostKeyExit = Literal["", "destroy", "destroy -refresh=false", "apply -replace"]
# The command run first in a stack that holds a copy of another stack's state.
CopyCommand = Literal["", "plan", "apply", "destroy"]
# How a cluster create dies in ``killed-cluster-create``: Terraform killed while Lium answers the rental
# slower than an abandoned create may take to undo it, or the runner's machine killed while the members'
# removal deadlines are being set.
KilledClusterCreate = Literal["slow-answer", "dead-runner"]
Backend = Literal["local", "pg"]

DEFAULT_SEED = 20260701
# Every seed's coverage list fits in this many scenarios: the default count of a run.
COVERED_WITHIN = 37

# Each API route the provider uses: (method, path pattern relative to /api), and the phases that send it.
ROUTES: dict[str, tuple[str, str]] = {
    "rent": ("POST", "/executors/*/rent"),
    "template-create": ("POST", "/templates"),
    "template-get": ("GET", "/templates/*"),
    "template-delete": ("DELETE", "/templates/*"),
    "credential-create": ("POST", "/docker-credentials/"),
    "credential-list": ("GET", "/docker-credentials/"),
    "credential-delete": ("DELETE", "/docker-credentials/*"),
    "volume-create": ("POST", "/volumes"),
    "volume-get": ("GET", "/volumes/*"),
    "volume-delete": ("DELETE", "/volumes/*"),
    "pods-list": ("GET", "/pods"),
    "pod-get": ("GET", "/pods/*"),
    "pod-delete": ("DELETE", "/pods/*"),
    "events": ("GET", "/users/me/events"),
    "feed": ("GET", "/public/v1/nodes"),
    "me": ("GET", "/users/me"),
}
ROUTE_PHASES: dict[str, tuple[Phase, ...]] = {
    "rent": ("apply",),
    "template-create": ("apply",),
    "template-get": ("plan", "destroy"),
    "template-delete": ("destroy",),
    "credential-create": ("apply",),
    "credential-list": ("plan", "destroy"),
    "credential-delete": ("destroy",),
    "volume-create": ("apply",),
    "volume-get": ("plan", "destroy"),
    "volume-delete": ("destroy",),
    "pods-list": ("apply", "plan", "destroy"),  # a refresh reads pods from the shared listing
    "pod-get": ("apply", "plan", "destroy"),
    "pod-delete": ("destroy",),
    "events": ("apply",),
    "feed": ("apply",),
    "me": ("apply",),  # sent only before the first create is planned (LiumSession.verify_access)
}
MUTATIONS = tuple(name for name, (method, _) in ROUTES.items() if method != "GET")

# Fault variants: the emulator's kinds, with ``status`` split by ``after_commit`` and ``garbage`` by body.
GENERIC_VARIANTS = (
    "status",
    "rate_limit",
    "latency",
    "drop_after_commit",
    "garbage-truncated",
    "garbage-wrong_type",
    "garbage-not_json",
)
RENT_VARIANTS = (
    "rent_refusal",
    "node_rent_in_progress",
    "node_unavailable",
    "stuck_pending",
    "creation_failed",
    "ssh_late",
)
VARIANT_ROUTES: dict[str, tuple[str, ...]] = {
    **{variant: tuple(ROUTES) for variant in GENERIC_VARIANTS},
    "status-after-commit": MUTATIONS,
    **{variant: ("rent",) for variant in RENT_VARIANTS},
    "slow_deleting": ("rent", "pod-delete"),
    "pod_state_conflict": ("pod-delete",),
}
VARIANTS = tuple(VARIANT_ROUTES)
PROCESS_CASES: tuple[tuple[Category, str], ...] = (
    ("sigint", "apply"),
    ("sigint", "destroy"),
    ("kill-terraform", "apply"),
    ("kill-provider", "apply"),
    ("restart", "SIGTERM"),
    ("restart", "SIGKILL"),
)
TWINS: tuple[Twin, ...] = ("directories", "workspaces")
TWIN_HITS: tuple[Hit, ...] = ("sigint", "kill-terraform", "kill-provider")
FRESH_RUNNER_HITS: tuple[Hit, ...] = ("kill-terraform", "kill-provider")
PG_RUNNER_HITS: tuple[Hit, ...] = ("kill-terraform", "kill-provider", "kill-machine")
COPY_COMMANDS: tuple[CopyCommand, ...] = ("plan", "apply", "destroy")
CLUSTER_HITS: tuple[ClusterHit, ...] = ("member-fails", "kill-terraform", "kill-provider", "fresh-runner")
# What hits a stack's destroy after its state moved (a directory moved, a backend migrated): nothing, or
# a process fault.
TRAVEL_HITS: tuple[Hit, ...] = ("", "sigint", "kill-terraform")
KILLED_CLUSTER_CREATES: tuple[KilledClusterCreate, ...] = ("slow-answer", "dead-runner")
# Longer than the grace an abandoned create gets to undo what it made (tfbridge.serving.handshake).
SLOW_RENTAL_SECONDS = 10
# How long a held request waits while its stack's machine is killed: longer than anything after it.
COMMAND_HOLD_SECONDS = 30
CLUSTER_RENT = ("POST", "/executors/cluster/rent")
CLUSTER_IMAGE = "daturaai/lium-cluster:1.2.0"
CLUSTER_NODES = 2
HOST_KEY_EXITS: tuple[HostKeyExit, ...] = ("destroy", "destroy -refresh=false", "apply -replace")
# Routes a twin stack (a template and pods, no credential or volume) sends while it applies.
TWIN_ROUTES = tuple(
    r for r in ROUTES if "apply" in ROUTE_PHASES[r] and r.split("-")[0] not in ("credential", "volume")
)
# The stack label a twin stack's template carries in its environment: what makes a template attributable
# to its stack in the emulator's report although both stacks use the same names.
STACK_LABEL_VARIABLE = "CHAOS_STACK"
TWIN_LABELS = ("a", "b")  # "a" is the bystander, "b" the stack the chaos hits
# Variants that stall a request as long as they fire (the provider waits out 429s for up to 15 minutes):
# they fire a bounded number of times, never always.
_BOUNDED = frozenset({"latency", "pod_state_conflict", "rate_limit"})
STUCK_RULE = "chaos-stuck"
STUCK_CREATE_TIMEOUT = 8
CREATE_TIMEOUT = 40
DELETE_TIMEOUT = 40


@dataclass(frozen=True)
class Stack:
    """What the scenario's Terraform configuration declares."""

    pods: int
    credential: bool
    volume: bool
    create_timeout: int
    runner: bool = False  # a lium_runner on the first pod
    delete_timeout: int = DELETE_TIMEOUT
    cluster: bool = False  # a two-node lium_cluster on Lium's cluster image (then no pod)


@dataclass(frozen=True)
class Scenario:
    """One seeded scenario. ``rules`` is the emulator fault plan's rule list for the faulted step.

    ``phase`` is the Terraform command the chaos hits. ``trigger`` says when ``delay`` starts counting:
    ``start`` (the command started) or ``rent`` (the first pod was rented). ``signal`` names the signal of
    process faults; ``downtime`` is how long a stopped emulator stays down. ``recover_by_apply`` converges
    by ``apply`` then ``destroy`` instead of destroy alone.

    Team categories: ``twin`` says where the second stack of the same names lives (another directory or
    another workspace of the same one) and ``concurrent`` whether the two apply at the same time (else the
    bystander applies first); ``hit`` is the process fault that hits a twin or fresh-runner stack (with no
    fault ``rules``); ``host_key_exit`` is the command that must get past a changed pod host key;
    ``backend`` where the state lives (``pg``: a PostgreSQL schema of the scenario's own, which Terraform
    writes only at intervals and at the end); ``copy_command`` what a stack holding a copy of another
    stack's state runs first (``copied-state``).
    """

    index: int
    seed: int
    category: Category
    phase: Phase
    stack: Stack
    rules: tuple[dict[str, Any], ...] = ()
    variant: str = ""
    route: str = ""
    trigger: Literal["start", "rent"] = "start"
    delay: float = 0.0
    signal: str = ""
    downtime: float = 0.0
    recover_by_apply: bool = False
    twin: Twin = ""
    concurrent: bool = False
    hit: Hit = ""
    host_key_exit: HostKeyExit = ""
    backend: Backend = "local"
    copy_command: CopyCommand = ""
    fresh_runner: bool = False  # recovery runs as a new CI runner (the fresh-runner and cluster categories)

    @property
    def action(self) -> str:
        """The process fault the harness applies: the category's own, or a team scenario's ``hit``."""
        return self.hit or self.category

    @property
    def name(self) -> str:
        """A readable, unique test id: index, category and what is hit."""
        detail = {
            "fault": f"{self.variant}@{self.route}",
            "sigint": f"{self.delay:.1f}s",
            "kill-terraform": f"rent+{self.delay:.1f}s",
            "kill-provider": f"rent+{self.delay:.1f}s",
            "restart": f"{self.signal}@{self.trigger}+{self.delay:.1f}s",
            "twin-stacks": f"{self.twin}-{'concurrent' if self.concurrent else 'interleaved'}-"
            + (f"{self.variant}@{self.route}" if self.variant else f"{self.hit}+{self.delay:.1f}s"),
            "fresh-runner": f"{self.hit}-rent+{self.delay:.1f}s",
            "pg-killed-runner": f"{self.hit}-rent+{self.delay:.1f}s",
            "copied-state": f"then-{self.copy_command}",
            "host-key-change": self.host_key_exit.replace(" ", ""),
            "cluster": (f"{self.hit}-rent+{self.delay:.1f}s" if self.hit else self.variant)
            + ("-fresh-runner" if self.fresh_runner and self.category == "cluster" else ""),
            "moved-directory": self.hit or "clean",
            "migrated-backend": self.hit or "clean",
            "edited-id": "then-destroy",
            "killed-cluster-create": self.variant,
        }[self.category]
        return f"{self.index:03d}-{self.category}-{self.phase}-{detail}"

    @property
    def fault_plan(self) -> dict[str, Any]:
        return {"seed": self.seed, "rules": list(self.rules)}


def generate(seed: int, count: int) -> list[Scenario]:
    """``count`` scenarios for ``seed``: the coverage list first (shuffled by the seed), then random ones."""
    cases = coverage_cases(seed)
    scenarios = []
    for index in range(count):
        rng = random.Random(f"{seed}/{index}")
        covering = index < len(cases)
        case = cases[index] if covering else _random_case(rng)
        scenarios.append(_build(index, seed, case, rng, sure=covering))
    return scenarios


Case = tuple[Category, str, str]  # (category, fault variant or process or team detail, route or "")


def coverage_cases(seed: int) -> list[Case]:
    """Every fault variant and process fault (shuffled), then the routes not met yet.

    Each variant takes a route no earlier variant took when it can, and each twin case a generic fault on
    a route nothing took yet, so the list stays within :data:`COVERED_WITHIN`.
    """
    rng = random.Random(f"{seed}/coverage")
    covered: set[str] = set()
    first: list[Case] = []
    claims = [("fault", variant, VARIANT_ROUTES[variant]) for variant in VARIANTS]
    claims += [("twin-stacks", twin, TWIN_ROUTES) for twin in TWINS]
    for category, what, allowed in sorted(claims, key=lambda c: len(c[2])):  # the most constrained first
        route = rng.choice([r for r in allowed if r not in covered] or list(allowed))
        covered.add(route)
        if category == "fault":
            first.append(("fault", what, route))
        else:
            first.append(("twin-stacks", f"{what}/{rng.choice(GENERIC_VARIANTS)}", route))
    first += [(category, detail, "") for category, detail in PROCESS_CASES]
    first += [("fresh-runner", rng.choice(FRESH_RUNNER_HITS), ""), ("host-key-change", "", "")]
    first += [
        ("pg-killed-runner", rng.choice(PG_RUNNER_HITS), ""),
        ("copied-state", rng.choice(COPY_COMMANDS), ""),
        ("cluster", rng.choice(CLUSTER_HITS), ""),
        ("moved-directory", rng.choice(TRAVEL_HITS), ""),
        ("migrated-backend", rng.choice(TRAVEL_HITS), ""),
        ("edited-id", "", ""),
        ("killed-cluster-create", rng.choice(KILLED_CLUSTER_CREATES), ""),
    ]
    rng.shuffle(first)
    routes: list[Case] = [
        ("fault", rng.choice(GENERIC_VARIANTS), route) for route in ROUTES if route not in covered
    ]
    return first + routes


def _random_case(rng: random.Random) -> Case:
    draw = rng.random()
    if draw < 0.3:
        category, detail = rng.choice(PROCESS_CASES)
        return (category, detail, "")
    if draw < 0.36:
        twin = rng.choice(TWINS)
        if rng.random() < 0.5:
            return ("twin-stacks", f"{twin}/{rng.choice(TWIN_HITS)}", "")
        return ("twin-stacks", f"{twin}/{rng.choice(GENERIC_VARIANTS)}", rng.choice(TWIN_ROUTES))
    if draw < 0.40:
        return ("fresh-runner", rng.choice(FRESH_RUNNER_HITS), "")
    if draw < 0.43:
        return ("host-key-change", "", "")
    if draw < 0.47:
        return ("pg-killed-runner", rng.choice(PG_RUNNER_HITS), "")
    if draw < 0.50:
        return ("copied-state", rng.choice(COPY_COMMANDS), "")
    if draw < 0.55:
        return ("cluster", rng.choice(CLUSTER_HITS), "")
    if draw < 0.57:
        return (rng.choice(("moved-directory", "migrated-backend")), rng.choice(TRAVEL_HITS), "")
    if draw < 0.58:
        return ("edited-id", "", "")
    if draw < 0.60:
        return ("killed-cluster-create", rng.choice(KILLED_CLUSTER_CREATES), "")
    variant = rng.choice(VARIANTS)
    return ("fault", variant, rng.choice(VARIANT_ROUTES[variant]))


def _build(index: int, seed: int, case: Case, rng: random.Random, *, sure: bool) -> Scenario:
    category, detail, route = case
    if category == "fault":
        return _fault(index, seed, detail, route, rng.choice(ROUTE_PHASES[route]), rng, sure=sure)
    if category == "twin-stacks":
        return _twin(index, seed, detail, route, rng, sure=sure)
    if category == "fresh-runner":
        return _fresh_runner(index, seed, detail, rng)
    if category == "host-key-change":
        return _host_key_change(index, seed, rng)
    if category == "pg-killed-runner":
        return _pg_killed_runner(index, seed, detail, rng)
    if category == "copied-state":
        return _copied_state(index, seed, detail, rng)
    if category == "cluster":
        return _cluster(index, seed, detail, rng)
    if category in ("moved-directory", "migrated-backend"):
        return _travelled(index, seed, category, detail, rng)
    if category == "edited-id":
        return Scenario(index, seed, "edited-id", "destroy", _stack(rng))
    if category == "killed-cluster-create":
        return _killed_cluster_create(index, seed, detail, rng)
    return _process(index, seed, category, detail, rng)


def _stack(rng: random.Random, *, route: str = "", stuck: bool = False) -> Stack:
    return Stack(
        pods=rng.choice((1, 1, 2)),
        credential=route.startswith("credential") or rng.random() < 0.3,
        volume=route.startswith("volume") or rng.random() < 0.25,
        create_timeout=STUCK_CREATE_TIMEOUT if stuck else CREATE_TIMEOUT,
    )


def _firing(variant: str, rng: random.Random, *, sure: bool) -> dict[str, Any]:
    """When the rule fires: on the first N matches, always, on every 2nd, or with probability 0.5.

    Most routes see one or two requests per run, so firing on the first matches or always is favoured;
    ``sure`` (coverage scenarios) allows only those two, so the fault certainly fires.
    """
    choices = ["first", "first", "always", "every", "probability"]
    if sure:
        choices = choices[:3]
    if variant in _BOUNDED:
        choices = [c for c in choices if c != "always"]
    how = rng.choice(choices)
    if how == "first":
        return {"first": rng.randint(1, 2)}
    if how == "every":
        return {"every": 2}
    if how == "probability":
        return {"probability": 0.5}
    return {}


def fault_rule(variant: str, route: str, rng: random.Random, *, sure: bool = False) -> dict[str, Any]:
    """The emulator rule for ``variant`` on ``route`` with seeded firing and parameters."""
    method, path = ROUTES[route]
    firing = _firing(variant, rng, sure=sure)
    rule: dict[str, Any] = {"name": f"chaos-{variant}", "method": method, "path": path, **firing}
    if variant.startswith("garbage-"):
        return {**rule, "kind": "garbage", "body": variant.removeprefix("garbage-")}
    if variant == "status":
        return {**rule, "kind": "status", "status": rng.choice((500, 502, 503, 504))}
    if variant == "status-after-commit":
        return {**rule, "kind": "status", "status": rng.choice((500, 502, 503)), "after_commit": True}
    if variant == "rate_limit":
        return {**rule, "kind": "rate_limit", "seconds": rng.choice((1, 2))}
    if variant == "latency":
        return {**rule, "kind": "latency", "seconds": round(rng.uniform(0.5, 2.0), 1)}
    if variant == "rent_refusal":
        status, code = rng.choice(((402, "API_KEY_BUDGET_EXCEEDED"), (400, "executor_maintenance")))
        return {**rule, "kind": "rent_refusal", "status": status, "code": code}
    if variant == "stuck_pending":
        return {**rule, "name": STUCK_RULE, "kind": "stuck_pending"}
    if variant == "creation_failed":
        return {**rule, "kind": "creation_failed", "message": "chaos: no space left on device"}
    if variant == "ssh_late":
        return {**rule, "kind": "ssh_late", "seconds": round(rng.uniform(1.0, 4.0), 1)}
    if variant == "slow_deleting":
        return {**rule, "kind": "slow_deleting", "seconds": round(rng.uniform(1.0, 3.0), 1)}
    if variant == "pod_state_conflict":
        return {**rule, "kind": "pod_state_conflict"}
    return {**rule, "kind": variant}  # drop_after_commit, node_rent_in_progress, node_unavailable


def _rules(variant: str, route: str, rng: random.Random, *, sure: bool) -> tuple[dict[str, Any], ...]:
    """The fault plan's rules for ``variant`` on ``route``."""
    rule = fault_rule(variant, route, rng, sure=sure)
    if route != "events":
        return (rule,)
    # The provider reads events to explain a failed creation: make one fail so the route is used.
    reason = {"name": "chaos-events-reason", "path": ROUTES["rent"][1], "kind": "creation_failed", "first": 1}
    return (rule, reason)


def _fault(
    index: int, seed: int, variant: str, route: str, phase: Phase, rng: random.Random, *, sure: bool
) -> Scenario:
    rules = _rules(variant, route, rng, sure=sure)
    stuck = variant == "stuck_pending"
    return Scenario(
        index=index,
        seed=seed,
        category="fault",
        phase=phase,
        stack=_stack(rng, route=route, stuck=stuck),
        rules=rules,
        variant=variant,
        route=route,
        recover_by_apply=rng.random() < 0.3,
    )


def _process(index: int, seed: int, category: Category, detail: str, rng: random.Random) -> Scenario:
    recover = rng.random() < 0.3
    if category == "sigint":
        phase: Phase = "destroy" if detail == "destroy" else "apply"
        delay = rng.uniform(0.2, 3.0) if phase == "apply" else rng.uniform(0.1, 2.5)
        return Scenario(
            index,
            seed,
            category,
            phase,
            _stack(rng),
            delay=round(delay, 2),
            signal="SIGINT",
            recover_by_apply=recover,
        )
    if category == "kill-provider":
        hold = rng.random() < 0.5  # sometimes hold the pod PENDING so the kill lands mid-wait for sure
        rules = (
            (
                {
                    "name": STUCK_RULE,
                    "method": "POST",
                    "path": ROUTES["rent"][1],
                    "kind": "stuck_pending",
                    "first": 1,
                },
            )
            if hold
            else ()
        )
        return Scenario(
            index,
            seed,
            category,
            "apply",
            _stack(rng),
            rules=rules,
            trigger="rent",
            delay=round(rng.uniform(0.0, 0.6), 2),
            signal="SIGKILL",
            recover_by_apply=recover,
        )
    if category == "kill-terraform":
        return Scenario(
            index,
            seed,
            category,
            "apply",
            _stack(rng),
            trigger="rent",
            delay=round(rng.uniform(0.0, 1.0), 2),
            signal="SIGKILL",
            recover_by_apply=recover,
        )
    trigger: Literal["start", "rent"] = rng.choice(("start", "rent"))
    delay = rng.uniform(0.3, 2.5) if trigger == "start" else rng.uniform(0.0, 0.8)
    return Scenario(
        index,
        seed,
        category,
        "apply",
        _stack(rng),
        trigger=trigger,
        delay=round(delay, 2),
        signal=detail,
        downtime=round(rng.uniform(0.0, 1.0), 2),
        recover_by_apply=recover,
    )


def _twin(index: int, seed: int, detail: str, route: str, rng: random.Random, *, sure: bool) -> Scenario:
    """Two stacks of the same names (template and pods only); the chaos hits the second one.

    ``detail`` is ``<twin>/<generic fault variant or process hit>``. Interleaved: the bystander applies
    first, then the hit stack under the fault or signal. Concurrent: both apply at once (a fault rule then
    hits both, a signal only the hit stack).
    """
    twin_text, what = detail.split("/")
    twin: Twin = "workspaces" if twin_text == "workspaces" else "directories"
    stack = Stack(pods=rng.choice((1, 1, 2)), credential=False, volume=False, create_timeout=CREATE_TIMEOUT)
    concurrent = rng.random() < 0.5
    recover = rng.random() < 0.3
    if route:
        return Scenario(
            index,
            seed,
            "twin-stacks",
            "apply",
            stack,
            rules=_rules(what, route, rng, sure=sure),
            variant=what,
            route=route,
            recover_by_apply=recover,
            twin=twin,
            concurrent=concurrent,
        )
    hit = next(h for h in TWIN_HITS if h == what)
    return Scenario(
        index,
        seed,
        "twin-stacks",
        "apply",
        stack,
        trigger="start" if hit == "sigint" else "rent",
        delay=round(rng.uniform(0.2, 3.0) if hit == "sigint" else rng.uniform(0.0, 0.8), 2),
        signal="SIGINT" if hit == "sigint" else "SIGKILL",
        recover_by_apply=recover,
        twin=twin,
        concurrent=concurrent,
        hit=hit,
    )


def _fresh_runner(index: int, seed: int, detail: str, rng: random.Random) -> Scenario:
    """A kill after the first rent of an apply; recovery runs as a new CI runner (fresh HOME and journal)."""
    hit = next(h for h in FRESH_RUNNER_HITS if h == detail)
    return Scenario(
        index,
        seed,
        "fresh-runner",
        "apply",
        _stack(rng),
        trigger="rent",
        delay=round(rng.uniform(0.0, 0.8), 2),
        signal="SIGKILL",
        recover_by_apply=rng.random() < 0.5,
        hit=hit,
    )


def _pg_killed_runner(index: int, seed: int, detail: str, rng: random.Random) -> Scenario:
    """The quickstart's shape (a template and pods created in one apply) with a ``pg`` state: a kill after
    the first rent, then a new CI runner (new checkout directory, HOME and journal; the same backend)
    applies and destroys. The state may hold nothing of the killed run."""
    hit = next(h for h in PG_RUNNER_HITS if h == detail)
    stack = Stack(
        pods=rng.choice((1, 1, 2)), credential=rng.random() < 0.3, volume=False, create_timeout=CREATE_TIMEOUT
    )
    return Scenario(
        index,
        seed,
        "pg-killed-runner",
        "apply",
        stack,
        trigger="rent",
        delay=round(rng.uniform(0.0, 0.8), 2),
        signal="SIGKILL",
        # Always an apply first: a killed run's completed creates may be in no state at all, and a destroy
        # of a state without them never starts the provider (docs/reliability.md, "what ends the pod").
        recover_by_apply=True,
        hit=hit,
        backend="pg",
    )


def _copied_state(index: int, seed: int, detail: str, rng: random.Random) -> Scenario:
    """A stack applies; its state file is copied into another stack's directory, which runs
    ``copy_command`` and then a destroy: the first stack's objects must be untouched throughout."""
    command = next(c for c in COPY_COMMANDS if c == detail)
    return Scenario(index, seed, "copied-state", "apply", _stack(rng), copy_command=command)


def _cluster(index: int, seed: int, detail: str, rng: random.Random) -> Scenario:
    """A two-node cluster stack: a member failing mid-create, or a kill after the rental (its last member's
    SSH held back so the kill lands mid-wait), then recovery, from a fresh CI runner for ``fresh-runner``."""
    hit = next(h for h in CLUSTER_HITS if h == detail)
    stack = Stack(pods=0, credential=False, volume=False, create_timeout=CREATE_TIMEOUT, cluster=True)
    recover = rng.random() < 0.5
    if hit == "member-fails":
        rule = {
            "name": "chaos-member-fails",
            "method": CLUSTER_RENT[0],
            "path": CLUSTER_RENT[1],
            "kind": "creation_failed",
            "message": "chaos: a cluster member failed to start",
            "first": 1,
        }
        return Scenario(
            index,
            seed,
            "cluster",
            "apply",
            stack,
            rules=(rule,),
            variant="member-fails",
            recover_by_apply=recover,
        )
    late = {
        "name": "chaos-member-late",
        "method": CLUSTER_RENT[0],
        "path": CLUSTER_RENT[1],
        "kind": "ssh_late",
        "seconds": round(rng.uniform(1.0, 4.0), 1),
        "first": 1,
    }
    killed: Hit = "kill-provider" if hit == "kill-provider" else "kill-terraform"
    if hit == "fresh-runner":
        killed = rng.choice(FRESH_RUNNER_HITS)
    return Scenario(
        index,
        seed,
        "cluster",
        "apply",
        stack,
        rules=(late,),
        trigger="rent",
        delay=round(rng.uniform(0.0, 0.8), 2),
        signal="SIGKILL",
        recover_by_apply=recover or hit == "fresh-runner",
        hit=killed,
        fresh_runner=hit == "fresh-runner",
    )


def _travelled(index: int, seed: int, category: Category, detail: str, rng: random.Random) -> Scenario:
    """A stack applies, then its state moves (its directory is moved, or its state migrated from local to
    ``pg``); its plan from there must be empty, and its destroy, hit by ``hit``, must leave nothing."""
    hit = next(h for h in TRAVEL_HITS if h == detail)
    return Scenario(
        index,
        seed,
        category,
        "destroy",
        _stack(rng),
        delay=round(rng.uniform(0.2, 2.0), 2),
        signal="SIGKILL" if hit == "kill-terraform" else "SIGINT" if hit else "",
        hit=hit,
    )


def _killed_cluster_create(index: int, seed: int, detail: str, rng: random.Random) -> Scenario:
    """A cluster stack whose template is applied first; its cluster's create then dies: Terraform killed
    while the rental's answer is slow, or the whole machine killed while the members' deadlines are being
    set. The destroy (after a recovery apply, or alone) must leave nothing."""
    variant = next(v for v in KILLED_CLUSTER_CREATES if v == detail)
    stack = Stack(pods=0, credential=False, volume=False, create_timeout=CREATE_TIMEOUT, cluster=True)
    if variant == "slow-answer":
        method, path, seconds = *CLUSTER_RENT, SLOW_RENTAL_SECONDS
    else:
        method, path, seconds = "POST", "/pods/*/schedule-removal", COMMAND_HOLD_SECONDS
    rule = {
        "name": "chaos-held",
        "method": method,
        "path": path,
        "kind": "latency",
        "seconds": seconds,
        "first": 1,
    }
    return Scenario(
        index,
        seed,
        "killed-cluster-create",
        "apply",
        stack,
        rules=(rule,),
        variant=variant,
        signal="SIGKILL",
        recover_by_apply=rng.random() < 0.5,
        hit="kill-terraform" if variant == "slow-answer" else "kill-machine",
    )


def _host_key_change(index: int, seed: int, rng: random.Random) -> Scenario:
    """A stack with a ``lium_runner``: after a clean apply the pod's host keys change, then it is ended.

    The public image only: the rotation runs ``ssh-keygen`` inside the pod.
    """
    volume = rng.random() < 0.25
    stack = Stack(pods=1, credential=False, volume=volume, create_timeout=CREATE_TIMEOUT, runner=True)
    return Scenario(
        index,
        seed,
        "host-key-change",
        "destroy",
        stack,
        host_key_exit=rng.choice(HOST_KEY_EXITS),
    )


PRIVATE_IMAGE_USER = "trainer-bot"


def render(stack: Stack, prefix: str, private_image: str, *, labelled: bool = False) -> str:
    """The Terraform configuration (without the provider block) for ``stack``; names start with ``prefix``.

    ``labelled`` (twin stacks): the template's environment carries ``STACK_LABEL_VARIABLE`` from the
    variable ``stack_label``, which each stack's process sets (``TF_VAR_stack_label``): two directories or
    two workspaces of one configuration then differ in nothing else.
    """
    parts = []
    template_extra = ""
    if labelled:
        parts.append('variable "stack_label" {\n  type = string\n}\n')
        template_extra = f"\n  environment      = {{ {STACK_LABEL_VARIABLE} = var.stack_label }}"
    if stack.cluster:
        return _render_cluster(stack, prefix)
    image = "python:3.11-slim"
    if stack.credential:
        image = private_image
        template_extra += "\n  docker_credential_id = lium_docker_credential.c.id"
        parts.append(
            'variable "registry_password" {\n  type      = string\n  sensitive = true\n  ephemeral = true\n}\n'
            'resource "lium_docker_credential" "c" {\n'
            f'  username            = "{PRIVATE_IMAGE_USER}"\n'
            "  password_wo         = var.registry_password\n"
            "  password_wo_version = 1\n}\n"
        )
    if stack.volume:
        parts.append(f'resource "lium_volume" "v" {{\n  name = "{prefix}-data"\n}}\n')
    parts.append(
        'resource "lium_template" "t" {\n'
        f'  name             = "{prefix}"\n'
        f'  image            = "{image}"\n'
        '  entrypoint       = "/bin/sh"\n'
        f"  startup_commands = \"-c 'exec sleep infinity'\"{template_extra}\n}}\n"
    )
    for number in range(stack.pods):
        volume = "\n  volume_id   = lium_volume.v.id" if stack.volume and number == 0 else ""
        parts.append(
            f'resource "lium_pod" "p{number}" {{\n'
            f'  name        = "{prefix}-{number}"\n'
            f"  template_id = lium_template.t.id{volume}\n"
            f'  timeouts {{\n    create = "{stack.create_timeout}s"\n    delete = "{stack.delete_timeout}s"\n  }}\n}}\n'
        )
    if stack.runner:
        parts.append(
            'resource "lium_runner" "r" {\n'
            "  pod_id       = lium_pod.p0.id\n"
            "  ssh_host_key = lium_pod.p0.ssh_host_key\n}\n"
        )
    return "".join(parts)


def _render_cluster(stack: Stack, prefix: str) -> str:
    """A cluster stack: a template of Lium's cluster image and a ``lium_cluster`` of two nodes on it."""
    return (
        'resource "lium_template" "t" {\n'
        f'  name             = "{prefix}"\n'
        f'  image            = "{CLUSTER_IMAGE}"\n'
        '  entrypoint       = "/bin/sh"\n'
        "  startup_commands = \"-c 'exec sleep infinity'\"\n}\n"
        'resource "lium_cluster" "c" {\n'
        f'  name        = "{prefix}"\n'
        f"  node_count  = {CLUSTER_NODES}\n"
        "  template_id = lium_template.t.id\n"
        f'  timeouts {{\n    create = "{stack.create_timeout}s"\n    delete = "{stack.delete_timeout}s"\n  }}\n}}\n'
    )
