"""What `config_apply` did, as values, and how that reads as text."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from apps.catalog.models import SpecVersion


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
    #: Ids of the OpenAPI spec versions uploaded and queued for compilation.
    spec_versions: tuple[int, ...] = ()

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


def spec_report_lines(versions: Iterable[SpecVersion]) -> list[str]:
    """How each uploaded OpenAPI spec compiled: tools and changes, or every error with its pointer."""
    lines: list[str] = []
    for v in versions:
        name = f"{v.backend.tenant.slug}/{v.backend.name} v{v.number}"
        if v.status == SpecVersion.Status.READY:
            changes = v.changes
            lines.append(
                f"spec {name}: ready, {v.tool_count} tools (+{len(changes.get('added', []))} "
                f"-{len(changes.get('removed', []))} ~{len(changes.get('changed', []))}), "
                f"{len(v.warnings)} warning(s)"
            )
        elif v.status == SpecVersion.Status.HELD:
            changes = v.changes
            lines.append(
                f"spec {name}: held, not published: it would remove {len(changes.get('removed', []))} of the "
                f"{changes.get('served', 0)} tools served; the previous version keeps serving. To publish it, apply "
                f"again with --allow-removals (or allow_removals: true on the backend)"
            )
            lines.extend(f"  removed: {tool}" for tool in changes.get("removed", [])[:20])
        elif v.status == SpecVersion.Status.FAILED:
            lines.append(f"spec {name}: failed with {len(v.errors)} error(s); the previous version keeps serving")
            lines.extend(f"  {e['pointer'] or '(document)'}: {e['message']}" for e in v.errors)
        else:
            lines.append(f"spec {name}: still {v.status} (is a Celery worker running?)")
    return lines
