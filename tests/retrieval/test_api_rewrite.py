"""The applied query rewrite in the tool-search answer, and `GET /api/v1/tenants/<tenant>/rewrite-rules`."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.tenants.services import membership_set
from tests.console.test_retrieval import hosts_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def hosts(settings: Any, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    return hosts_make(settings, django_capture_on_commit_callbacks)


def test_the_answer_says_how_ids_in_the_query_were_read(admin_client: Client, hosts: dict) -> None:
    url = f"/api/v1/tenants/acme/virtual-hosts/{hosts['mine'].pk}/tool-search"
    body = admin_client.get(url, {"query": "vpc-0a1b2c3d", "k": 3}).json()
    assert body["rewrite"]["text"] == "Vpc" and body["rewrite"]["weak"] is True
    assert body["rewrite"]["matches"][0]["token"] == "vpc-0a1b2c3d" and body["rewrite"]["matches"][0]["type"] == "Vpc"
    assert body["results"][0]["name"] == "DescribeVpcs" and "rewrite" in body["results"][0]["paths"]
    plain = admin_client.get(url, {"query": "DescribeSubnets please", "k": 3}).json()
    assert plain["rewrite"] == {"text": "DescribeSubnets Describe Subnets please", "weak": False, "matches": []}


def test_the_rules_are_paginated_and_the_tenants_own(client: Client, hosts: dict, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="mia", password="pw")
    membership_set(tenant=hosts["mine"].tenant, user=user, role="member")
    assert client.get("/api/v1/tenants/acme/rewrite-rules").status_code in (401, 403)
    client.force_login(user)
    body = client.get("/api/v1/tenants/acme/rewrite-rules", {"limit": 1}).json()
    assert body["count"] >= 2 and len(body["results"]) == 1 and body["next"]
    everything = client.get("/api/v1/tenants/acme/rewrite-rules").json()["results"]
    vpc = next(rule for rule in everything if rule["type"] == "Vpc")
    assert vpc["weight"] >= 2 and {"backend": "cloud", "name": "DescribeVpcs"} in vpc["describing_tools"]
    assert client.get("/api/v1/tenants/other/rewrite-rules").status_code == 404


def test_the_command_line_describes_the_same_rules(hosts: dict) -> None:
    from apps.retrieval.search import rewrite_rules_describe, rewrite_rules_list

    lines = rewrite_rules_describe(tenant_slug="acme")
    rules = rewrite_rules_list(tenant_id=hosts["mine"].tenant_id)
    assert lines[0] == f"{len(rules)} resource types" and len(lines) == len(rules) + 1
    assert any(line.startswith("Vpc (ids taken by ") and line.endswith("cloud:DescribeVpcs") for line in lines)
    assert rewrite_rules_describe(tenant_slug="acme", explain=["vpc-0a1b2c3d"])[0].startswith("vpc-0a1b2c3d: Vpc (score")
