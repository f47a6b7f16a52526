"""The tool index's URLs: the REST API (mounted under `api/v1/`)."""

from __future__ import annotations

from django.urls import path

from apps.retrieval import api

api_urls = (
    [
        path("virtual-hosts/<int:virtual_host_id>/tool-search", api.ToolSearchView.as_view(), name="tool-search"),
        path("tools/<int:tool_id>/prerequisites", api.ToolPrerequisitesView.as_view(), name="tool-prerequisites"),
        path("rewrite-rules", api.RewriteRuleListView.as_view(), name="rewrite-rule-list"),
    ],
    "retrieval-api",
)
