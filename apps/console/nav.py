"""The console's navigation: (label, URL name). Tenant entries take the current tenant's slug (the
first is where `/console/` and the tenant menu lead); platform entries are shown to platform admins
only. Every user's own pages (their API tokens) are linked from the header itself."""

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
    ("Signed-in apps", "console:grant-list"),
    ("Accounts", "console:account-list"),  # each person's connected accounts at backends
]

PLATFORM_NAV: list[tuple[str, str]] = [
    ("Tenants", "console:tenant-list"),
    ("Plans", "console:plan-list"),
]
