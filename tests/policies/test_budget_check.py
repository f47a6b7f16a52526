"""One budget check (`apps.policies.services.budget_check`) behind every face that sets a budget:
the service, the REST API, the console and a configuration document refuse bad caps with the same
words, and store nothing."""

from __future__ import annotations

import html
import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from apps.policies.models import Budget
from apps.policies.services import budget_check, budget_set
from tests.factories import api_key_factory, tenant_factory

pytestmark = pytest.mark.django_db

CASES = [
    ({"daily": -1}, "daily must be a whole number from 0 to 2147483647, or empty"),
    ({"daily": 10, "monthly": 2_147_483_648}, "monthly must be a whole number from 0 to 2147483647, or empty"),
    ({}, "a budget needs a daily cap, a monthly cap or both"),
    ({"daily": 5000, "monthly": 1000}, "the daily cap (5000) is above the monthly cap (1000): no day could spend it; "
     "lower the daily cap or raise the monthly one"),
]
IDS = ["daily-negative", "monthly-too-big", "no-cap", "daily-above-monthly"]


def test_the_check_names_each_wrong_cap() -> None:
    assert budget_check(daily=0, monthly=None) == []
    assert [p.field for p in budget_check(daily=True, monthly="5")] == ["daily", "monthly"]
    assert budget_check(daily=1000, monthly=1000) == []  # a month may be spent in a day
    assert [p.field for p in budget_check(daily=1001, monthly=1000)] == ["daily"]


@pytest.mark.parametrize(("caps", "words"), CASES, ids=IDS)
def test_the_service_refuses_it(caps: dict[str, int], words: str) -> None:
    key = api_key_factory()
    with pytest.raises(ValidationError) as refused:
        budget_set(tenant=key.api_key.tenant, scope="key", name=key.api_key.name,
                   daily=caps.get("daily"), monthly=caps.get("monthly"))
    assert words in refused.value.messages and not Budget.objects.exists()


@pytest.mark.parametrize(("caps", "words"), CASES, ids=IDS)
def test_the_api_refuses_it(admin_client: Client, caps: dict[str, int], words: str) -> None:
    key = api_key_factory()
    url = f"/api/v1/tenants/{key.api_key.tenant.slug}/budgets/key/{key.api_key.name}"
    response = admin_client.put(url, caps, content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"], response.json()
    assert not Budget.objects.exists()


@pytest.mark.parametrize(("caps", "words"), CASES, ids=IDS)
def test_the_console_refuses_it(admin_client: Client, caps: dict[str, int], words: str) -> None:
    key = api_key_factory()
    response = admin_client.post(f"/console/t/{key.api_key.tenant.slug}/limits/budgets/",
                                 {"subject": f"key:{key.api_key.name}", **caps})
    assert response.status_code == 400 and html.escape(words) in response.content.decode()
    assert not Budget.objects.exists()


@pytest.mark.parametrize(("caps", "words"), CASES, ids=IDS)
def test_a_configuration_document_refuses_it(caps: dict[str, int], words: str) -> None:
    tenant = tenant_factory()
    document = {"tenants": [{"slug": tenant.slug, "name": tenant.name, "keys": [{"name": "ci"}]}],
                "budgets": [{"tenant": tenant.slug, "scope": "key", "name": "ci", **caps}]}
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=json.dumps(document), prune=False)
    assert words in str(refused.value) and not Budget.objects.exists()
