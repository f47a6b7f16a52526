"""An MCP server's tools indexed again for `tool_search` when it announces that they changed
(`notifications/tools/list_changed`), soon rather than at the next periodic refresh.

Asked by the gateway instance that saw the notification (`changes.RedisChangeFeed.publish`), never
by those that hear of it, and debounced for the whole fleet through one Redis key per backend."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis
import redis.asyncio

from apps.retrieval.indexing import tool_index_queue_in

log = logging.getLogger(__name__)

TOOLS_CHANGED = "notifications/tools/list_changed"


def reindex_key(backend_id: int) -> str:
    """Present (with a lifetime) while an indexing run of the backend is queued and not yet started."""
    return f"gw:tool-reindex:{backend_id}"


class ToolReindex:
    """Contract: a tools list change seen at time t is indexed by a run that starts after t.

    The first change takes the backend's key (`SET NX`) for `delay_seconds` and queues one run
    with that same countdown, so the run starts no earlier than the key's end. A change that finds
    the key taken asks for nothing: it came before the key's end, so before the queued run starts,
    and that run's `tools/list` sees it. A backend announcing 50 changes in a second is therefore
    indexed once or twice, `delay_seconds` after its first change (every instance sharing Redis).

    `enqueue(backend_id, countdown)` is synchronous (Celery writes to its broker): it runs on a
    thread. Nothing here raises: a failure is logged, the key is given back so the next change asks
    again, and the periodic refresh remains."""

    def __init__(
        self, client: redis.asyncio.Redis, *, delay_seconds: float, enqueue: Callable[[int, float], None]
    ) -> None:
        self._redis = client
        self._delay = delay_seconds
        self._enqueue = enqueue

    async def changed(self, backend_id: int, notification: str) -> bool:
        """Ask for the backend's tools to be indexed again if `notification` says they changed;
        True when this call queued the run."""
        if notification != TOOLS_CHANGED:
            return False
        key = reindex_key(backend_id)
        try:
            if not await self._redis.set(key, b"1", nx=True, px=max(1, round(self._delay * 1000))):
                return False  # a queued run starts after this change
        except (redis.RedisError, OSError) as exc:
            log.warning("could not ask for the tools of backend %s to be indexed again: %s", backend_id, exc)
            return False
        try:
            await asyncio.to_thread(self._enqueue, backend_id, self._delay)
        except Exception:
            log.warning("could not queue the indexing of backend %s", backend_id, exc_info=True)
            try:
                await self._redis.delete(key)
            except (redis.RedisError, OSError):
                pass  # the key ends by itself
            return False
        return True


def tool_reindex_enqueue(backend_id: int, countdown: float) -> None:
    """Queue the Celery task that indexes the backend's tools, to start in `countdown` seconds."""
    tool_index_queue_in(backend_id=backend_id, seconds=countdown)
