"""Reading the stored prerequisite chains (derived in `prerequisites.py`, stored by
`indexing.prerequisites_sync`): a tool's closure, and the ids it needs with the tool that makes
each and the read-only tool that finds an existing one (docs/tool-search.md, "Prerequisite
chains")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from apps.catalog.models import Backend, Tool
from apps.kernel.search_tool import IdNeed
from apps.retrieval.models import IndexedTool

Key = tuple[int, str]


def prerequisites_get(*, tenant_id: int, keys: Sequence[Key]) -> dict[Key, tuple[Key, ...]]:
    """The stored prerequisite closure of each of `keys` and of every tool in those closures
    (dependencies first); tools with none are left out. One query, however deep the chains."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE wanted(backend_id, name) AS ("
            " SELECT * FROM unnest(%s::bigint[], %s::text[])"
            " UNION"  # not UNION ALL: a tool met again is not followed again, so cycles end
            " SELECT (member->>0)::bigint, member->>1 FROM wanted"
            " JOIN retrieval_indexedtool AS tool USING (backend_id, name),"
            " jsonb_array_elements(tool.prerequisites) AS member WHERE tool.tenant_id = %s)"
            " SELECT tool.backend_id, tool.name, tool.prerequisites FROM wanted"
            " JOIN retrieval_indexedtool AS tool USING (backend_id, name)"
            " WHERE tool.tenant_id = %s AND jsonb_array_length(tool.prerequisites) > 0",
            [[b for b, _ in wanted], [n for _, n in wanted], tenant_id, tenant_id],
        )
        rows = cursor.fetchall()
    found: dict[Key, tuple[Key, ...]] = {}
    for backend_id, name, closure in rows:
        found[(backend_id, name)] = tuple((int(b), str(n)) for b, n in _json(closure))
    return found


def needs_get(*, tenant_id: int, keys: Sequence[Key]) -> dict[Key, tuple[IdNeed, ...]]:
    """The stored needs of each of `keys` (the ids it cannot work without, each with its producer
    and its lookup); tools with none are left out. One query."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT backend_id, name, needs FROM retrieval_indexedtool WHERE tenant_id = %s"
            " AND (backend_id, name) IN (SELECT * FROM unnest(%s::bigint[], %s::text[]))"
            " AND jsonb_array_length(needs) > 0",
            [tenant_id, [b for b, _ in wanted], [n for _, n in wanted]],
        )
        rows = cursor.fetchall()
    return {(backend_id, name): tuple(_need(item) for item in _json(needs)) for backend_id, name, needs in rows}


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value  # Django has psycopg hand jsonb over as text


def _need(item: dict[str, Any]) -> IdNeed:
    def key(value: Any) -> Key | None:
        return (int(value[0]), str(value[1])) if value else None

    return IdNeed(str(item["parameter"]), key(item.get("producer")), key(item.get("lookup")))


@dataclass(frozen=True, slots=True)
class Prerequisite:
    tool_id: int | None  # the catalog row, when the tool still has one
    backend_name: str
    name: str


@dataclass(frozen=True, slots=True)
class NeedRef:
    """One id a catalog tool cannot work without, with the tools named as the REST view shows them."""

    parameter: str
    producer: Prerequisite | None
    lookup: Prerequisite | None


def tool_prerequisites_list(*, tool: Tool) -> list[Prerequisite]:
    """The stored prerequisite chain of a catalog tool, dependencies first."""
    entry = IndexedTool.objects.filter(backend_id=tool.backend_id, name=tool.name).values_list("prerequisites", flat=True)
    chain = [(int(b), str(n)) for b, n in (entry.first() or ())]
    refs = _refs(chain)
    return [refs[key] for key in chain]


def tool_needs_list(*, tool: Tool) -> list[NeedRef]:
    """The stored needs of a catalog tool, in its schema's order: each id it cannot work without,
    the tool that makes one and the read-only tool that finds one (None where none is known)."""
    needs = needs_get(tenant_id=tool.backend.tenant_id, keys=[(tool.backend_id, tool.name)]).get(
        (tool.backend_id, tool.name), ())
    refs = _refs([key for need in needs for key in (need.producer, need.lookup) if key is not None])
    return [NeedRef(need.parameter, refs.get(need.producer) if need.producer else None,
                    refs.get(need.lookup) if need.lookup else None) for need in needs]


def _refs(keys: Sequence[Key]) -> dict[Key, Prerequisite]:
    """Each key with its backend's name and its catalog row's id. Two queries (none for no keys)."""
    if not keys:
        return {}
    backends = dict(Backend.objects.filter(pk__in={b for b, _ in keys}).values_list("pk", "name"))
    rows = {(b, n): pk for pk, b, n in Tool.objects.filter(
        backend_id__in=backends.keys(), name__in={n for _, n in keys}).values_list("pk", "backend_id", "name")}
    return {key: Prerequisite(rows.get(key), backends.get(key[0], ""), key[1]) for key in keys}
