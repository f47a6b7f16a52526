"""Structured logs: one JSON object per line (`GATEWAY_LOG_FORMAT=json`).

Every line has `timestamp` (UTC, ISO 8601), `level`, `logger` and `message`; a line logged while an
MCP request is served also has `request_id`, and `session_id` and `trace_id` / `span_id` when
the request has them (contextvars the pipeline sets, `apps/gateway/pipeline/tracing.py`). An
exception is an `exception` object (type, message, traceback); fields given with `extra=` are kept.

Credentials in query strings are redacted from every line, in both formats (`apps/common/log_redaction.py`):
the message, and fields such as the `request` of Django's request log records, whose text is the
request's full path."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import orjson

from apps.common.log_redaction import redact_text
from apps.gateway.pipeline import tracing

#: What every LogRecord has: not repeated as fields of their own.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class RedactCredentials(logging.Filter):
    """A handler's filter: the record's message with credential-like query parameters redacted
    (formatted once, here, rather than by every formatter)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted is not message:
            record.msg, record.args = redacted, None
        return True


def _field(value: object) -> object:
    return redact_text(value) if isinstance(value, str) else value


def _default(value: object) -> str:
    return redact_text(repr(value))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        if request_id := tracing.request_id.get():
            entry["request_id"] = request_id
        if session_id := tracing.session_id.get():
            entry["session_id"] = session_id
        if (context := tracing.current()) is not None:
            entry["trace_id"] = context.trace_id
            entry["span_id"] = context.span_id
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in entry and not name.startswith("_"):
                entry[name] = _field(value)
        if record.exc_info and record.exc_info[0] is not None:
            kind, error, _ = record.exc_info
            entry["exception"] = {
                "type": kind.__name__,
                "message": str(error),
                "traceback": self.formatException(record.exc_info),
            }
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=_default).decode()
