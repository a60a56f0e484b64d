"""What one chaos scenario did and found: the record its test report carries to the run's summary."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    """What a scenario did and found. ``problems`` fail the scenario; the counters feed the summary table."""

    name: str
    category: str
    seconds: float = 0.0
    faults_injected: int = 0
    orphaned_providers: int = 0
    orphaned_sandboxes: int = 0
    extra_destroys: int = 0  # converge destroy runs needed beyond the first
    leaks: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    cross_stack: list[str] = field(default_factory=list)  # one stack touched another stack's object
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [
            *self.leaks,
            *self.duplicates,
            *self.secrets,
            *self.crashes,
            *self.cross_stack,
            *self.problems,
        ]
