"""The `ToolFinder` port on the tool index (apps.retrieval): searches run on worker threads, since
they query PostgreSQL and embed the query (the model loads on the first search of a process)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, close_old_connections

from apps.gateway.pipeline.ports import UpstreamUnavailable
from apps.kernel.search_tool import Found
from apps.retrieval.chains import needs_get, prerequisites_get
from apps.retrieval.embeddings import embedder
from apps.retrieval.search import SearchScope, tool_index_search

log = logging.getLogger(__name__)


def _warm() -> None:
    try:
        embedder().encode_soon("warm up").result()
    except Exception:  # noqa: BLE001 — a search will report the same failure to its caller
        log.warning("tool_search: the embedding model could not be loaded ahead of a search", exc_info=True)


def _search(tenant_id: int, scope: SearchScope, query: str, k: int, also: tuple[str, ...]) -> Found:
    close_old_connections()
    try:
        hits = [(hit.backend_id, hit.name)
                for hit in tool_index_search(tenant_id=tenant_id, scope=scope, query=query, k=k, also=also)]
        chains = prerequisites_get(tenant_id=tenant_id, keys=hits)
        members = [*hits, *(key for chain in chains.values() for key in chain)]
        return Found(hits, chains, needs_get(tenant_id=tenant_id, keys=members))
    finally:
        close_old_connections()


class IndexFinder:
    def __init__(self) -> None:
        self._search = sync_to_async(_search, thread_sensitive=False)
        self._prepared = False

    def prepare(self) -> None:
        # Importing torch, loading the model and tracing its query encoder (~10 s together) on a
        # thread of their own, once, when a host that has tool_search is first listed: not at
        # start-up (most processes never search) and not in the first caller's search.
        if self._prepared:
            return
        self._prepared = True
        threading.Thread(target=_warm, name="tool-search-warm-up", daemon=True).start()

    async def find(
        self,
        *,
        tenant_id: int,
        backends: Sequence[int],
        restricted: Sequence[tuple[int, Sequence[str]]],
        query: str,
        k: int,
        also: Sequence[str] = (),
    ) -> Found:
        scope = SearchScope(tuple(backends), tuple((b, tuple(names)) for b, names in restricted))
        try:
            return await self._search(tenant_id, scope, query, k, tuple(also))
        except (DatabaseError, ImproperlyConfigured) as exc:
            log.warning("tool_search failed: %s", exc)
            raise UpstreamUnavailable(f"the tool index cannot be searched: {exc}") from exc
