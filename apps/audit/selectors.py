"""Reading the audit log: filtered pages (keyset pagination), the export, and the dashboard's
numbers. Every function takes the tenant and reads only its rows."""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from apps.audit.models import LATENCY_BOUNDS, AuditMinute, AuditRecord
from apps.tenants.models import Tenant

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
#: A page is first read from the day next to its cursor (or to now) only: PostgreSQL plans a query
#: of the log over every daily partition its `created_at` bounds leave (~100: ~10 ms of planning),
#: and over two of them in well under one. Only when that day holds less than a page is the rest read.
_NEAR = datetime.timedelta(days=1)


@dataclass(frozen=True)
class AuditFilter:
    """What the log is narrowed to; None (or "") is "any". `since` is inclusive, `until` exclusive.
    The same filter narrows a query (`apply`) and the live tail's rows (`matches`)."""

    api_key_id: int | None = None
    team: str = ""
    tool: str = ""
    backend: str = ""
    outcome: str = ""
    since: datetime.datetime | None = None
    until: datetime.datetime | None = None
    origin: str = ""  # mcp | console
    trace_id: str = ""  # one call's (the console's tool tester links its row so, with `since`)

    def apply(self, rows: QuerySet[AuditRecord]) -> QuerySet[AuditRecord]:
        if self.api_key_id is not None:
            rows = rows.filter(api_key_id=self.api_key_id)
        for name, value in (("team", self.team), ("exposed_name", self.tool), ("backend", self.backend),
                            ("outcome", self.outcome), ("origin", self.origin), ("trace_id", self.trace_id)):
            if value:
                rows = rows.filter(**{name: value})
        if self.since is not None:
            rows = rows.filter(created_at__gte=self.since)
        if self.until is not None:
            rows = rows.filter(created_at__lt=self.until)
        return rows

    def matches(self, row: AuditRecord) -> bool:
        return (
            (self.api_key_id is None or row.api_key_id == self.api_key_id)
            and (not self.team or row.team == self.team)
            and (not self.tool or row.exposed_name == self.tool)
            and (not self.backend or row.backend == self.backend)
            and (not self.outcome or row.outcome == self.outcome)
            and (not self.origin or row.origin == self.origin)
            and (not self.trace_id or row.trace_id == self.trace_id)
            and (self.since is None or row.created_at >= self.since)
            and (self.until is None or row.created_at < self.until)
        )


@dataclass(frozen=True)
class AuditPage:
    """Rows newest first; `older`/`newer`: cursors of the neighbouring pages (None at either end)."""

    rows: list[AuditRecord]
    older: str | None
    newer: str | None


def _cursor(row: AuditRecord, direction: str) -> str:
    raw = f"{direction}|{row.created_at.isoformat()}|{row.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _cursor_parse(cursor: str) -> tuple[str, datetime.datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        direction, at, pk = raw.split("|")
        parsed = (direction, datetime.datetime.fromisoformat(at), int(pk))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationError("This page link is not valid: start again from the first page.") from None
    if direction not in {"older", "newer"} or parsed[1].tzinfo is None:
        raise ValidationError("This page link is not valid: start again from the first page.")
    return parsed


def audit_record_page(
    *, tenant: Tenant, filters: AuditFilter = AuditFilter(), cursor: str = "", size: int = PAGE_SIZE
) -> AuditPage:
    """One page of the tenant's filtered log by (created_at, id), newest first, starting after
    `cursor` (from a previous page; "" for the newest rows). Each page is one index range scan,
    as fast on the millionth row as on the first; two when the day next to the cursor holds less
    than a page (`_NEAR`). ValidationError for a cursor this did not make."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    rows = filters.apply(AuditRecord.objects.filter(tenant_id=tenant.pk))
    direction, at = "older", timezone.now()
    if cursor:
        direction, at, pk = _cursor_parse(cursor)
        if direction == "older":  # `created_at <=` lets the index bound the scan; the OR breaks ties
            rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=pk), created_at__lte=at)
        else:
            rows = rows.filter(Q(created_at__gt=at) | Q(created_at=at, pk__gt=pk), created_at__gte=at)
    ordering = ["-created_at", "-pk"] if direction == "older" else ["created_at", "pk"]
    rows = rows.order_by(*ordering)
    found: list[AuditRecord] = []
    if filters.since is None and filters.until is None:  # else those bounds rule partitions out
        # Every row past the day is further from the cursor than any in it: a full page there is the page.
        near = rows.filter(created_at__gte=at - _NEAR) if direction == "older" else rows.filter(
            created_at__lte=at + _NEAR)
        found = list(near[: size + 1])
    if len(found) <= size:
        found = list(rows[: size + 1])
    more = len(found) > size
    found = found[:size]
    if direction == "newer":
        found.reverse()
    if not found:
        return AuditPage([], None, None)
    has_older = more if direction == "older" else True
    has_newer = bool(cursor) if direction == "older" else more
    return AuditPage(
        found,
        older=_cursor(found[-1], "older") if has_older else None,
        newer=_cursor(found[0], "newer") if has_newer else None,
    )


def audit_record_export(*, tenant: Tenant, filters: AuditFilter = AuditFilter()) -> Iterator[AuditRecord]:
    """Every filtered row, newest first, read in chunks through a server-side cursor (memory stays
    bounded whatever the count)."""
    rows = filters.apply(AuditRecord.objects.filter(tenant_id=tenant.pk)).order_by("-created_at", "-pk")
    return rows.iterator(chunk_size=2000)


# --- The dashboard ----------------------------------------------------------------------------------

WINDOWS: dict[str, tuple[datetime.timedelta, datetime.timedelta]] = {
    "hour": (datetime.timedelta(hours=1), datetime.timedelta(minutes=1)),
    "day": (datetime.timedelta(days=1), datetime.timedelta(minutes=15)),
}


@dataclass
class Bin:
    """The calls of one bin (a minute, or 15 minutes) of the window."""

    start: datetime.datetime
    calls: int = 0
    errors: int = 0
    denied: int = 0
    rate_limited: int = 0
    over_budget: int = 0
    latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS) + 1))
    p50: float | None = None
    p99: float | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class ToolCount:
    tool: str
    calls: int
    errors: int


@dataclass(frozen=True)
class Dashboard:
    window: str
    start: datetime.datetime
    end: datetime.datetime
    bin_seconds: int
    bins: list[Bin]
    total: Bin
    top_tools: list[ToolCount]


def _percentile(histogram: list[int], fraction: float) -> float | None:
    """The upper bound of the bucket holding the `fraction` quantile (the slowest bucket reports its
    lower bound); None without calls."""
    count = sum(histogram)
    if not count:
        return None
    rank = fraction * count
    seen = 0
    for i, n in enumerate(histogram):
        seen += n
        if seen >= rank and n:
            return LATENCY_BOUNDS[min(i, len(LATENCY_BOUNDS) - 1)]
    return LATENCY_BOUNDS[-1]


def _add(into: Bin, calls: int, errors: int, denied: int, rate_limited: int, over_budget: int,
         latency: list[int] | None) -> None:
    into.calls += calls
    into.errors += errors
    into.denied += denied
    into.rate_limited += rate_limited
    into.over_budget += over_budget
    for i, n in enumerate(latency or ()):
        into.latency[i] += n


def audit_dashboard_get(*, tenant: Tenant, window: str = "hour", top: int = 10) -> Dashboard:
    """Calls, errors, refusals and latency percentiles over the last hour (per minute) or day (per
    15 minutes), and the most called tools, from the per-minute counts the audit writer keeps (at
    most 1,440 rows, whatever the call volume). Percentiles are read from a histogram whose buckets
    are ~19% wide. ValidationError for a window other than "hour" or "day"."""
    if window not in WINDOWS:
        raise ValidationError(f"window must be one of: {', '.join(WINDOWS)}")
    length, step = WINDOWS[window]
    step_seconds = int(step.total_seconds())
    now = timezone.now()
    end = datetime.datetime.fromtimestamp(now.timestamp() // step_seconds * step_seconds + step_seconds, tz=datetime.UTC)
    start = end - length
    bins = [Bin(start + i * step) for i in range(int(length / step))]
    total = Bin(start)
    minutes = AuditMinute.objects.filter(tenant_id=tenant.pk, tool="", minute__gte=start, minute__lt=end).values_list(
        "minute", "calls", "errors", "denied", "rate_limited", "over_budget", "latency"
    )
    for minute, *counts in minutes:
        _add(bins[int((minute - start).total_seconds()) // step_seconds], *counts)
    for b in bins:
        b.p50, b.p99 = _percentile(b.latency, 0.5), _percentile(b.latency, 0.99)
        _add(total, b.calls, b.errors, b.denied, b.rate_limited, b.over_budget, b.latency)
    total.p50, total.p99 = _percentile(total.latency, 0.5), _percentile(total.latency, 0.99)
    tools = (
        AuditMinute.objects.filter(tenant_id=tenant.pk, tool__gt="", minute__gte=start, minute__lt=end)
        .values("tool").annotate(n=Sum("calls"), e=Sum("errors")).order_by("-n", "tool")[:top]
    )
    return Dashboard(
        window=window, start=start, end=end, bin_seconds=step_seconds, bins=bins, total=total,
        top_tools=[ToolCount(t["tool"], t["n"], t["e"]) for t in tools],
    )
