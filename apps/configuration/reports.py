"""What `config_apply` did, as values, and how that reads as text."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Action(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Change:
    """One object the document names (or, when pruning, no longer names) and what became of it.
    `name` is qualified by tenant, e.g. `acme/main:demo` for a mount."""

    action: Action
    kind: str
    name: str
    detail: str = ""


@dataclass(frozen=True)
class GeneratedSecret:
    """The secret of a key the apply generated. It exists nowhere else: show it once."""

    tenant: str
    key: str
    secret: str = field(repr=False)


@dataclass(frozen=True)
class ApplyReport:
    changes: tuple[Change, ...]
    generated_secrets: tuple[GeneratedSecret, ...]
    dry_run: bool = False
    pruned: bool = False

    @property
    def changed(self) -> bool:
        """True when the apply wrote something (or, in a dry run, would have)."""
        return any(c.action is not Action.UNCHANGED for c in self.changes)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action is action)


def report_lines(report: ApplyReport) -> list[str]:
    """The report as lines for a terminal: one line per object, a summary, then generated secrets."""
    lines = [
        f"{change.action.value:<9}  {change.kind:<13} {change.name}" + (f"  ({change.detail})" if change.detail else "")
        for change in report.changes
    ]
    summary = ", ".join(f"{report.count(action)} {action.value}" for action in Action)
    if report.dry_run:
        lines.append(f"dry run: nothing was written; it would be {summary}")
    elif not report.changed:
        lines.append(f"nothing to change ({summary})")
    else:
        lines.append(summary)
    if report.generated_secrets:
        lines.append("generated key secrets (shown once, store them now):")
        lines.extend(f"  {s.tenant}/{s.key}: {s.secret}" for s in report.generated_secrets)
    return lines
