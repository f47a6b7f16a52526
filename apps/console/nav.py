"""The console's navigation: (label, URL name, who sees it). Tenant entries take the current
tenant's slug; "platform" entries are shown to platform admins only. An area adds its own line."""

from __future__ import annotations

TENANT_NAV: list[tuple[str, str]] = [
    ("Dashboard", "console:dashboard"),
    ("Keys", "console:key-list"),
    ("Teams", "console:team-list"),
    ("Members", "console:member-list"),
    ("Backends", "console:backend-list"),
    ("Virtual hosts", "console:vhost-list"),
    ("Connect", "console:connect"),
    ("Tools", "console:tool-list"),
    ("Retrieval", "console:retrieval-playground"),
    ("Access rules", "console:access-list"),
    ("Limits", "console:limit-list"),
    ("Audit log", "console:audit-list"),
    ("Sessions", "console:session-list"),
]

PLATFORM_NAV: list[tuple[str, str]] = [
    ("Tenants", "console:tenant-list"),
    ("Plans", "console:plan-list"),
    ("My API tokens", "console:token-list"),
]
