"""The audit log as CSV, produced line by line (a StreamingHttpResponse sends it as it is made)."""

from __future__ import annotations

import csv
import datetime
from collections.abc import Iterable, Iterator

from apps.audit.models import AuditRecord

COLUMNS = (
    "created_at", "virtual_host", "principal", "api_key_id", "team", "backend", "method", "exposed_name",
    "upstream_name", "outcome", "error_code", "latency_ms", "bytes_in", "bytes_out", "cost", "session_id",
    "trace_id", "rule", "limit_state", "task_id", "task_ended_at", "origin", "console_user",
)
#: A spreadsheet runs a cell starting with one of these as a formula (CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class _Line:
    """A file-like object whose `write` returns what it was given: csv.writer makes one line."""

    def write(self, value: str) -> str:
        return value


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _moment(value: object) -> object:
    """A time as ISO 8601; anything else as it is."""
    return value.isoformat() if isinstance(value, datetime.datetime) else value


def audit_csv_lines(rows: Iterable[AuditRecord]) -> Iterator[str]:
    """The header, then one CSV line per row; text a spreadsheet would run as a formula is
    prefixed with a quote. Numbers are written as numbers (a negative error code stays one)."""
    writer = csv.writer(_Line())
    yield writer.writerow(COLUMNS)
    for row in rows:
        values = [_moment(value) for value in (getattr(row, column) for column in COLUMNS)]
        yield writer.writerow([_cell(v) if isinstance(v, str) else ("" if v is None else v) for v in values])
