"""What a new tenant does before its first call, for the hint on the dashboard and the Connect page:
add a backend, put it on a virtual host, issue a key, connect a client. Each step says whether the
tenant has done it; the hint shows while one is not done."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef
from django.urls import reverse

from apps.audit.models import AuditMinute
from apps.catalog.models import Backend, VirtualHost
from apps.tenants.models import ApiKey, Tenant
from apps.tenants.selectors import api_key_usable


@dataclass(frozen=True)
class FirstStep:
    """`admin_only`: a step only a tenant admin can take (a member is told to ask one)."""

    name: str  # a stable id: backend, vhost, key, connect
    label: str
    url: str
    done: bool
    admin_only: bool = False


def first_steps_list(*, tenant: Tenant) -> list[FirstStep]:
    """The steps, in order, each done or not (one query)."""
    live_keys = ApiKey.objects.filter(api_key_usable(), tenant=OuterRef("pk"))
    found = Tenant.objects.filter(pk=tenant.pk).values(
        backend=Exists(Backend.objects.filter(tenant=OuterRef("pk"))),
        vhost=Exists(VirtualHost.objects.filter(tenant=OuterRef("pk"), mounts__isnull=False)),
        key=Exists(live_keys),
        connect=Exists(AuditMinute.objects.filter(tenant_id=OuterRef("pk"))),
    ).first() or {}

    def url(name: str) -> str:
        return reverse(name, kwargs={"tenant": tenant.slug})

    return [
        FirstStep("backend", "Add a backend: an MCP server or an OpenAPI document", url("console:backend-list"),
                  bool(found.get("backend")), admin_only=True),
        FirstStep("vhost", "Make a virtual host that mounts it: the endpoint clients connect to",
                  url("console:vhost-new"), bool(found.get("vhost")), admin_only=True),
        FirstStep("key", "Issue an API key for the client", url("console:key-create"), bool(found.get("key"))),
        FirstStep("connect", "Connect a client and make a first call", url("console:connect"),
                  bool(found.get("connect"))),
    ]
