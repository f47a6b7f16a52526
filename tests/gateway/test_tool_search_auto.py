"""`tool_search: auto`, the mode of new hosts, through the gateway: a host of a few tools lists
them and has no search tool (the threshold's switch itself: tests/gateway/adapters/test_snapshot_directory.py)."""

from __future__ import annotations

import pytest
from django.conf import settings

from apps.catalog.models import VirtualHost
from tests.backends.specs import OPERATIONS
from tests.gateway.test_tool_search import make_cloud

pytestmark = pytest.mark.slow


def test_a_new_host_of_a_few_tools_lists_them_without_a_search_tool(
    transactional_db: None, indexing_on: None, gateway_url: str, recording_service_url: str
) -> None:
    cloud = make_cloud(gateway_url, recording_service_url, mode="auto")
    assert VirtualHost.objects.get(pk=cloud.host.pk).tool_search == "auto"
    assert len(OPERATIONS) <= settings.GATEWAY_TOOL_SEARCH_AUTO_TOOLS
    assert sorted(tool["name"] for tool in cloud.tools()) == sorted(OPERATIONS)
    refused = cloud.request("tools/call", {"name": "tool_search", "arguments": {"query": "subnets"}})
    assert refused["error"]["code"] == -32602
