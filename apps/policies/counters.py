"""Where the gateway keeps the count of each rate limit and budget (Redis key names). The gateway's
limiter charges them; the console and the API read them to show what is spent and what is left."""

from __future__ import annotations

from apps.kernel.identity import Budget, Limit


def bucket_key(limit: Limit) -> str:
    """The rate limit's bucket: one Redis string, its theoretical arrival time."""
    return f"gw:rl:{limit.tenant_id}:{limit.scope}:{limit.name}"


def budget_key(budget: Budget) -> str:
    """The budget's spending: one Redis hash, what was spent on the current UTC day and month."""
    return f"gw:bg:{budget.tenant_id}:{budget.scope}:{budget.name}"
