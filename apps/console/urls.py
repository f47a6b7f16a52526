"""The console's URLs: sign-in, the start page, the platform pages under `/console/` and each
area's pages under `/console/t/<tenant>/` (listed in each area's module as `urls`)."""

from __future__ import annotations

from django.urls import include, path

from apps.console.auth import ConsoleLoginView, ConsoleLogoutView
from apps.console.views import (
    accounts,
    audit,
    backend_specs,
    backends,
    connect,
    dashboard,
    grants,
    home,
    interceptors,
    keys,
    limits,
    members,
    policies,
    retrieval,
    sessions,
    tenants,
    tokens,
    tool_tester,
    tools,
    vhost_tools,
    vhosts,
)

tenant_urls = [
    *backends.urls,
    *audit.urls, *dashboard.urls, *sessions.urls,
    *tools.urls, *tool_tester.urls, *retrieval.urls,
    *policies.urls,
    *limits.urls,
    *keys.urls,
    *members.urls,
    *backend_specs.urls,
    *vhosts.urls,
    *interceptors.urls,
    *vhost_tools.urls,
    *connect.urls,
    *grants.urls,
    *accounts.urls,
]

platform_urls: list = [
    *tenants.platform_urls,
    *tokens.platform_urls,
]

console_urls = (
    [
        path("login/", ConsoleLoginView.as_view(), name="login"),
        path("logout/", ConsoleLogoutView.as_view(), name="logout"),
        path("", home.home, name="home"),
        *platform_urls,
        path("t/<slug:tenant>/", include(tenant_urls)),
    ],
    "console",
)
