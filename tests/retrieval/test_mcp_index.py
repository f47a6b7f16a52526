"""MCP servers' tools in the index: listed by the real server (the official SDK's), indexed when the
backend is created or changed, and kept when the server cannot be asked."""

from __future__ import annotations

import pytest

from apps.catalog.models import Backend
from apps.catalog.services import backend_update
from apps.retrieval.indexing import IndexChange, mcp_tool_indexes_refresh, tool_index_sync
from apps.retrieval.models import IndexedTool
from apps.retrieval.search import SearchScope, tool_index_search
from tests.factories import backend_factory
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def test_an_mcp_backend_is_indexed_from_what_its_server_lists(
    indexing_on, django_capture_on_commit_callbacks, demo_backend_url: str
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        backend = backend_factory(name="demo", urls=[demo_backend_url])
    entries = dict(IndexedTool.objects.filter(backend=backend).values_list("name", "document"))
    assert set(entries) == {"add", "echo", "utc_now", "countdown"}
    assert entries["add"] == "add (demo) Add two numbers."
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=SearchScope(backends=(backend.pk,)),
                             query="sum of two values", k=2)
    assert hits[0].name == "add"
    with django_capture_on_commit_callbacks(execute=True) as queued:
        assert mcp_tool_indexes_refresh() == 1  # the periodic refresh queues every MCP backend
    assert len(queued) == 1
    assert tool_index_sync(backend_id=backend.pk) == IndexChange(embedded=0, removed=0, unchanged=4)


def test_a_server_that_cannot_be_asked_leaves_its_entries(
    indexing_on, django_capture_on_commit_callbacks, demo_backend_url: str
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        backend = backend_factory(name="demo", urls=[demo_backend_url])
    with django_capture_on_commit_callbacks(execute=True):  # moved to where nothing listens
        backend_update(backend=backend, kind=Backend.Kind.MCP, transport=backend.transport,
                       urls=[f"http://127.0.0.1:{free_port()}/mcp"], timeout_seconds=5)
    assert IndexedTool.objects.filter(backend=backend).count() == 4


def test_an_http_sse_backend_is_indexed_too(indexing_on, django_capture_on_commit_callbacks, sse_backend_url: str) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        backend = backend_factory(name="old", urls=[sse_backend_url], transport="sse")
    names = set(IndexedTool.objects.filter(backend=backend).values_list("name", flat=True))
    assert {"test_simple_text", "test_sampling", "test_tool_with_progress"} <= names
