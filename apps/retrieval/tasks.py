"""Celery tasks of the tool index. Thin: each calls one service, by id."""

from __future__ import annotations

from celery import shared_task

from apps.common.task_metrics import task_timed
from apps.retrieval.indexing import mcp_tool_indexes_refresh, tool_index_sync


@shared_task(acks_late=True, ignore_result=True)
def tool_index(backend_id: int) -> None:
    with task_timed("tool_index"):
        tool_index_sync(backend_id=backend_id)


@shared_task(ignore_result=True)
def tool_index_refresh() -> None:
    """Periodic (Celery beat): MCP servers' tools change without the configuration changing."""
    mcp_tool_indexes_refresh()
