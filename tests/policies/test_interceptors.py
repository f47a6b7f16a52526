"""A host's interceptors through the REST API and the service: replaced whole and in order, each
checked by the one validator (a refusal names `<position>.<field>` and stores nothing), a webhook's
secret a tenant secret that cannot be deleted while it signs, the trial on sample content, and
tenant isolation."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from apps.catalog.credentials import tenant_secret_delete, tenant_secret_set
from apps.kernel.interceptors import InterceptorSpec
from apps.policies.models import Interceptor
from apps.policies.services import interceptors_set
from apps.tenants.services import membership_set
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    host = factories.virtual_host_factory(tenant=tenant, mounts={"calc": factories.backend_factory(tenant=tenant)})
    tenant_secret_set(tenant=tenant, name="hook-key", value="k" * 32)
    admin = django_user_model.objects.create_user(username=f"admin-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    member = django_user_model.objects.create_user(username=f"member-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=member, role="member")
    return {"tenant": tenant, "host": host, "admin": admin, "member": member}


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _url(world: dict[str, Any], suffix: str = "") -> str:
    return f"/api/v1/tenants/{world['tenant'].slug}/virtual-hosts/{world['host'].pk}/interceptors{suffix}"


CHAIN = [
    {"name": "secrets", "kind": "secrets"},
    {"name": "pii", "kind": "personal_data", "phases": ["result"], "settings": {"types": {"email": "refuse"}}},
    {"name": "review", "kind": "webhook", "targets": ["pay_*"],
     "settings": {"url": "https://hooks.example.com/mcp", "secret": "hook-key", "timeout_seconds": 1}},
]


def test_the_chain_is_replaced_whole_and_read_back_in_order(world: dict[str, Any]) -> None:
    client = _client(world["admin"])
    assert client.get(_url(world)).json() == []
    assert client.put(_url(world), CHAIN, format="json").json() == CHAIN
    assert client.get(_url(world)).json() == CHAIN
    assert list(Interceptor.objects.order_by("position").values_list("name", flat=True)) == ["secrets", "pii", "review"]
    reordered = [CHAIN[2], CHAIN[0]]
    assert client.put(_url(world), reordered, format="json").json() == reordered
    assert client.put(_url(world), [], format="json").json() == []
    assert not Interceptor.objects.exists()


@pytest.mark.parametrize(("chain", "detail"), [
    ([{"name": "x", "kind": "secrets", "settings": {"action": "burn"}}], "1.settings.action: "),
    ([CHAIN[0], {"name": "x", "kind": "injection", "phases": ["request"]}], "2.phases: phases must be one or more of: result"),
    ([CHAIN[0], {**CHAIN[0]}], "2.name: the name 'secrets' is used by another interceptor"),
    ([{"name": "h", "kind": "webhook", "settings": {"url": "https://x.example", "secret": "nope"}}],
     "1.settings.secret: the tenant has no secret named 'nope'"),
    ([{"name": "h", "kind": "webhook", "settings": {"url": "http://x.example", "secret": "hook-key"}}],
     "1.settings.url: url must be https"),
    ([{"name": "x", "kind": "clamav"}], "1.kind: kind must be one of"),
    ([{"name": "h", "kind": "webhook", "settings": {"url": "https://[::1/", "secret": "hook-key"}}],
     "1.settings.url: url must be an https URL"),
    ([{"name": "h", "kind": "webhook", "settings": {"url": "https://h.example:99999/", "secret": "hook-key"}}],
     "1.settings.url: url must be an https URL"),
    ([{"name": "h", "kind": "webhook", "settings": {"url": "https://h.example", "secret": "hook-key",
                                                    "failure": []}}], "1.settings.failure: failure must be open or closed"),
    ([{"kind": "secrets"}], "[0].name: This field is required."),
])
def test_a_bad_interceptor_is_refused_naming_where_and_nothing_changes(
    world: dict[str, Any], chain: list[dict[str, Any]], detail: str,
) -> None:
    client = _client(world["admin"])
    client.put(_url(world), [CHAIN[0]], format="json")
    response = client.put(_url(world), chain, format="json")
    assert response.status_code == 400 and detail in response.json()["detail"], response.json()
    assert list(Interceptor.objects.values_list("name", flat=True)) == ["secrets"]


def test_a_secret_that_signs_a_webhook_cannot_be_deleted(world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        InterceptorSpec("review", "webhook", settings={"url": "https://h.example", "secret": "hook-key"})])
    with pytest.raises(ValidationError) as refused:
        tenant_secret_delete(tenant=world["tenant"], name="hook-key")
    assert f"signs the requests of the webhook interceptor {world['host'].slug}/review" in str(refused.value)
    interceptors_set(virtual_host=world["host"], interceptors=[])
    tenant_secret_delete(tenant=world["tenant"], name="hook-key")


def test_the_trial_runs_the_stored_chain_over_sample_content(world: dict[str, Any]) -> None:
    client = _client(world["admin"])
    client.put(_url(world), CHAIN, format="json")
    response = {"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "text", "text": "key AKIAIOSFODNN7EXAMPLE for ops@example.com"}]}}
    trial = client.post(_url(world, "/try"), {"phase": "result", "target": "pay_now", "payload": response},
                        format="json").json()
    assert [(s["name"], s["action"]) for s in trial["steps"]] == [("secrets", "rewrite"), ("pii", "refuse")]
    assert trial["steps"][1]["findings"] == ["email"] and trial["refused_by"] == "pii" and trial["payload"] is None
    request = {"name": "pay_now", "arguments": {"note": "AKIAIOSFODNN7EXAMPLE"}}
    trial = client.post(_url(world, "/try"), {"phase": "request", "target": "pay_now", "payload": request},
                        format="json").json()
    assert [(s["name"], s["action"]) for s in trial["steps"]] == [("secrets", "rewrite"), ("review", "skipped")]
    assert trial["payload"]["arguments"] == {"note": "[REDACTED:aws-access-key]"}
    bad = client.post(_url(world, "/try"), {"phase": "result", "payload": [1]}, format="json")
    assert bad.status_code == 400 and bad.json()["detail"].startswith("payload: must be a JSON object")


def test_members_read_but_do_not_write_and_other_tenants_hosts_are_not_found(
    world: dict[str, Any], django_user_model: Any,
) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[InterceptorSpec("secrets", "secrets")])
    member = _client(world["member"])
    assert member.get(_url(world)).json() == [{"name": "secrets", "kind": "secrets"}]
    assert member.put(_url(world), [], format="json").status_code == 403
    stranger = factories.tenant_factory()
    outsider = django_user_model.objects.create_user(username="outsider", password="pw")
    membership_set(tenant=stranger, user=outsider, role="admin")
    theirs = f"/api/v1/tenants/{stranger.slug}/virtual-hosts/{world['host'].pk}/interceptors"
    assert _client(outsider).get(theirs).status_code == 404
    assert _client(outsider).put(theirs, [], format="json").status_code == 404
    assert Interceptor.objects.count() == 1
