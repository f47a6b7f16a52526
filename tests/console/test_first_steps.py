"""A new tenant's dashboard and Connect page say what to do next, with links, until the tenant has a
backend, a virtual host that mounts it, a usable key and its first call."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from apps.tenants.services import api_key_revoke
from tests.audit.factories import audit_rows_create
from tests.factories import api_key_factory, backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db

STEPS = {
    "backend": "/console/t/new/backends/",
    "vhost": "/console/t/new/virtual-hosts/new/",
    "key": "/console/t/new/keys/new/",
    "connect": "/console/t/new/connect/",
}


def _steps(page: str) -> dict[str, tuple[str, str | None]]:
    """Each step shown: (done or todo, its link when it has one)."""
    found = re.findall(r'<li class="step (done|todo)" id="step-([a-z]+)">(.*?)</li>', page, re.S)
    return {name: (state, (re.findall(r'href="([^"]+)"', body) or [None])[0]) for state, name, body in found}


def test_a_new_tenant_is_shown_the_next_steps_until_its_first_call(admin_client: Client) -> None:
    tenant = tenant_factory(slug="new")
    page = admin_client.get("/console/t/new/dashboard/").content.decode()
    assert "Getting started" in page
    assert _steps(page) == {name: ("todo", url) for name, url in STEPS.items()}

    backend = backend_factory(tenant=tenant)
    virtual_host_factory(tenant=tenant, mounts={"main": backend})
    api_key_revoke(api_key=api_key_factory(tenant=tenant).api_key)  # a revoked key is no key to connect with
    steps = _steps(admin_client.get("/console/t/new/dashboard/").content.decode())
    assert {name: state for name, (state, _) in steps.items()} == {
        "backend": "done", "vhost": "done", "key": "todo", "connect": "todo"}

    api_key_factory(tenant=tenant)
    audit_rows_create(tenant=tenant, count=1)
    page = admin_client.get("/console/t/new/dashboard/").content.decode()
    assert "Getting started" not in page and _steps(page) == {}


def test_the_connect_page_of_a_tenant_without_hosts_or_keys_links_the_steps(admin_client: Client) -> None:
    tenant_factory(slug="new")
    page = admin_client.get("/console/t/new/connect/").content.decode()
    steps = _steps(page)
    assert steps["backend"] == ("todo", STEPS["backend"]) and steps["key"] == ("todo", STEPS["key"])
    assert "connect" not in steps  # this page is that step


def test_members_are_told_which_steps_need_an_admin(client: Client, acme: Any) -> None:
    page = client.get("/console/t/acme/dashboard/").content.decode()
    steps = _steps(page)
    assert steps["backend"] == ("todo", None) and steps["vhost"] == ("todo", None)  # no link to a form they may not use
    assert steps["key"] == ("todo", "/console/t/acme/keys/new/")
    assert "ask a tenant admin" in page


def test_a_platform_admin_without_tenants_is_shown_how_to_create_the_first(admin_client: Client) -> None:
    page = admin_client.get("/console/").content.decode()
    assert "Create the first tenant" in page and 'href="/console/tenants/new/"' in page
    assert "Ask a tenant admin" not in page
