"""Where the gateway keeps the count of each rate limit and budget (Redis key names). The gateway's
limiter charges them; the console and the API read them to show what is spent and what is left.

Every counter of a tenant carries the tenant's hash tag (`{t<id>}`): the limiter checks and charges
all of a call's counters in one script, which a Redis Cluster runs only on keys of one slot."""

from __future__ import annotations

from apps.kernel.identity import Budget, Limit


def bucket_key(limit: Limit) -> str:
    """The rate limit's bucket: one Redis string, its theoretical arrival time."""
    return f"gw:rl:{{t{limit.tenant_id}}}:{limit.scope}:{limit.name}"


def budget_key(budget: Budget) -> str:
    """The budget's spending: one Redis hash, what was spent on the current UTC day and month."""
    return f"gw:bg:{{t{budget.tenant_id}}}:{budget.scope}:{budget.name}"
