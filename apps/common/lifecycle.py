"""Where this process is in its life: serving, or draining before it exits (SIGTERM; see
`apps.gateway.transports.shutdown`). Readiness reports a draining process as not ready."""

from __future__ import annotations

_draining = False


def draining() -> bool:
    """True once the process has begun to shut down: it takes no new connections and finishes
    what it has."""
    return _draining


def draining_begin() -> bool:
    """Mark the process as draining; False when it already was."""
    global _draining
    was, _draining = _draining, True
    return not was
