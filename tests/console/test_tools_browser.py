"""The tools pages and the retrieval playground in headless Chromium, as an admin uses them: search
the tools live, open one with a chain of prerequisites and follow the graph, and ask the playground
what tool_search finds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from apps.catalog.specs import spec_upload
from tests import factories
from tests.backends.specs import OPERATIONS, network_spec
from tests.browser import console_login, docs_screenshot, superuser_factory
from tests.console.test_tools import NETWORK

pytestmark = pytest.mark.slow

SEARCH_TIMEOUT_MS = 60_000  # the gateway loads the embedding model on its first search


def test_an_admin_browses_tools_follows_a_prerequisite_graph_and_asks_the_playground(
    transactional_db: None, gateway_url: str, page: Page, settings: Any
) -> None:
    settings.GATEWAY_TOOL_INDEX = True  # indexed here, as the spec is published (Celery is eager)
    tenant = factories.tenant_factory(slug="acme-cloud")
    ec2 = factories.openapi_backend_factory(tenant=tenant, name="ec2")
    operations = {**OPERATIONS, **NETWORK,
                  "DescribeInstances": ("Describes the specified instances or all instances.", []),
                  "DescribeNetworkInterfaces": ("Describes your network interfaces.", [])}
    spec_upload(backend=ec2, document=network_spec(operations, "Elastic Compute Cloud"))
    factories.virtual_host_factory(tenant=tenant, slug="cloud", mounts={"ec2": ec2})
    console_login(page, gateway_url, superuser_factory())

    page.goto(f"{gateway_url}/console/t/{tenant.slug}/tools/")
    results = page.locator("#tool-results")
    expect(results).to_contain_text(f"{len(operations)} tools")
    page.get_by_label("Search").fill("network inter")  # no button: the results follow the typing
    expect(results).to_contain_text("3 tools")
    expect(results).not_to_contain_text("CreateBucket")
    expect(page).to_have_url(re.compile(r"/tools/\?q=network(\+|%20)inter&backend=$"))  # kept in step
    docs_screenshot(page, "console-tools")

    results.get_by_role("link", name="AttachNetworkInterface").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("AttachNetworkInterface")
    graph = page.locator(".prereq-graph svg")
    expect(graph).to_be_visible()
    expect(graph.locator(".edge")).to_have_count(7)
    expect(page.locator("ol.chain li")).to_have_count(5)
    docs_screenshot(page, "console-tool-detail")
    graph.locator("a", has_text="CreateNetworkInterface").click()  # a node leads to its tool
    expect(page.get_by_role("heading", level=1)).to_have_text("CreateNetworkInterface")
    expect(page.locator("table.parameters")).to_contain_text("SecurityGroupId")

    page.get_by_role("link", name="Retrieval").click()
    page.get_by_label("Virtual host").select_option(label="cloud")
    page.get_by_label("Query").fill("attach an interface to i-0abc1234def")
    page.get_by_label("Results (k)").fill("5")
    page.get_by_role("button", name="Search").click()
    table = page.locator("table.search-results")
    expect(table).to_contain_text("AttachNetworkInterface", timeout=SEARCH_TIMEOUT_MS)
    expect(page.locator("#rewrite-matches")).to_contain_text("i-0abc1234def → Instance")
    expect(page).to_have_url(re.compile(r"/retrieval/\?host=\d+&query=attach(\+|%20)an.*&k=5$"))
    expect(page.locator("table.rules")).to_contain_text("Instance")
    docs_screenshot(page, "console-retrieval-playground")
