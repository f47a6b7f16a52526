"""Daphne's access log (written to stdout from verbosity 1, `--access-log` otherwise) without
credentials: it logs each request's full target, query string included, so a client's
`?api_key=...` would be on disk in plain text. The target is redacted (apps/common/log_redaction.py)
before the line is written."""

from __future__ import annotations

from typing import Any

from apps.common.log_redaction import redact_text


def install() -> None:
    from daphne.access import AccessLogGenerator

    original = AccessLogGenerator.__call__
    if getattr(original, "_gateway_redacted", False):
        return

    def __call__(self: AccessLogGenerator, protocol: str, action: str, details: dict[str, Any]) -> None:
        path = details.get("path")
        if isinstance(path, str):
            details = {**details, "path": redact_text(path)}
        original(self, protocol, action, details)

    __call__._gateway_redacted = True  # type: ignore[attr-defined]
    AccessLogGenerator.__call__ = __call__  # type: ignore[method-assign]
