"""The console's navigation: (label, URL name, who sees it). Tenant entries take the current
tenant's slug; "platform" entries are shown to platform admins only. An area adds its own line."""

from __future__ import annotations

TENANT_NAV: list[tuple[str, str]] = [
    # area: dashboard
    # area: keys
    ("Backends", "console:backend-list"),
    # area: vhosts
    # area: tools
    # area: policies
    # area: audit
]

PLATFORM_NAV: list[tuple[str, str]] = [
    # area: tenants
]
