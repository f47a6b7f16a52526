"""One rate limit check (`apps.policies.services.rate_limit_check`) behind every face that sets a
limit: the service, the REST API, the console and a configuration document refuse a bad number with
the same words, and store nothing."""

from __future__ import annotations

import html
import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from apps.policies.models import RateLimit
from apps.policies.services import rate_limit_check, rate_limit_set
from tests.factories import api_key_factory, tenant_factory

pytestmark = pytest.mark.django_db

BIG = 2_147_483_648  # one past what the database's integer column holds
CASES = [
    ({"limit": 0, "window_seconds": 60}, "limit must be a whole number from 1 to 2147483647"),
    ({"limit": BIG, "window_seconds": 60}, "limit must be a whole number from 1 to 2147483647"),
    ({"limit": 10, "window_seconds": -1}, "window_seconds must be a whole number from 1 to 2147483647"),
]
IDS = ["limit-0", "limit-too-big", "window-negative"]


def test_the_check_names_each_wrong_number() -> None:
    assert rate_limit_check(limit=10, window_seconds=60) == []
    assert [p.field for p in rate_limit_check(limit=True, window_seconds="60")] == ["limit", "window_seconds"]


@pytest.mark.parametrize(("numbers", "words"), CASES, ids=IDS)
def test_the_service_refuses_it(numbers: dict[str, int], words: str) -> None:
    key = api_key_factory()
    with pytest.raises(ValidationError) as refused:
        rate_limit_set(tenant=key.api_key.tenant, scope="key", name=key.api_key.name, **numbers)
    assert words in refused.value.messages and not RateLimit.objects.exists()


@pytest.mark.parametrize(("numbers", "words"), CASES, ids=IDS)
def test_the_api_refuses_it(admin_client: Client, numbers: dict[str, int], words: str) -> None:
    key = api_key_factory()
    url = f"/api/v1/tenants/{key.api_key.tenant.slug}/rate-limits/key/{key.api_key.name}"
    response = admin_client.put(url, numbers, content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"], response.json()
    assert not RateLimit.objects.exists()


@pytest.mark.parametrize(("numbers", "words"), CASES, ids=IDS)
def test_the_console_refuses_it(admin_client: Client, numbers: dict[str, int], words: str) -> None:
    key = api_key_factory()
    response = admin_client.post(f"/console/t/{key.api_key.tenant.slug}/limits/",
                                 {"subject": f"key:{key.api_key.name}", **numbers})
    assert response.status_code == 400 and html.escape(words) in response.content.decode()
    assert not RateLimit.objects.exists()


@pytest.mark.parametrize(("numbers", "words"), CASES, ids=IDS)
def test_a_configuration_document_refuses_it(numbers: dict[str, int], words: str) -> None:
    tenant = tenant_factory()
    document = {"tenants": [{"slug": tenant.slug, "name": tenant.name, "keys": [{"name": "ci"}]}],
                "rate_limits": [{"tenant": tenant.slug, "scope": "key", "name": "ci", **numbers}]}
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=json.dumps(document), prune=False)
    assert words in str(refused.value) and not RateLimit.objects.exists()
