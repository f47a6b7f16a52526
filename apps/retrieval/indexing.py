"""Keeping the tool index in step with the catalog (docs/tool-search.md, "The index").

A backend's entries are brought up to date as a whole (`tool_index_sync`): entries of tools that
are gone are deleted, and only tools whose indexed text changed are embedded again, so republishing
a spec with one changed operation embeds one tool. It runs in Celery, queued when a backend's tools
change (`tool_index_queue`); searches read the index as it is meanwhile."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from apps.catalog.models import Backend, Tool
from apps.common.config_version import config_version_bump
from apps.common.redis import redis_client
from apps.gateway.tool_lists import mcp_tools_fetch
from apps.retrieval.embeddings import embedder
from apps.retrieval.models import IndexedTool
from apps.retrieval.prerequisites import Chain, ToolNeed, ToolSchemas, prerequisite_chains
from apps.retrieval.text import IndexText, ToolText, index_text, parameter_names
from apps.tenants.models import Tenant

log = logging.getLogger(__name__)

#: Tools embedded and written per batch: bounds memory and the length of each write transaction.
BATCH = 256


@dataclass(frozen=True, slots=True)
class IndexChange:
    embedded: int  # entries added or changed
    removed: int
    unchanged: int


def index_version_key(tenant_id: int) -> str:
    """The Redis counter that moves whenever the tenant's index changes (what is derived from the
    whole index, such as the id-reading rules, is rebuilt when it does)."""
    return f"gw:tool-index:{tenant_id}"


def tool_index_queue(*, backend_id: int) -> None:
    """Index the backend's tools in Celery once the current transaction commits (now if there is
    none). Does nothing when indexing is turned off (`GATEWAY_TOOL_INDEX`)."""
    if not settings.GATEWAY_TOOL_INDEX:
        return
    from apps.retrieval.tasks import tool_index  # the task module imports this one

    def send() -> None:
        try:
            tool_index.delay(backend_id)
        except Exception:  # the broker is down: searches keep the previous entries until the next change
            log.warning("could not queue the indexing of backend %s", backend_id, exc_info=True)

    transaction.on_commit(send)


def tool_index_queue_in(*, backend_id: int, seconds: float) -> None:
    """Queue the indexing of the backend's tools to start in `seconds`, now (no transaction to wait
    for: an MCP server announced a change, `apps.gateway.reindex`). Synchronous, it writes to the
    broker: keep it off an event loop. Raises what the broker raises."""
    from apps.retrieval.tasks import tool_index  # the task module imports this one

    tool_index.apply_async((backend_id,), countdown=seconds)


def backend_tool_texts(*, backend: Backend) -> list[ToolText] | None:
    """What the index reads of the backend's current tools: an OpenAPI backend's catalog rows, or
    what an MCP server lists now. None when an MCP server cannot be asked (its entries stay)."""
    if backend.kind == Backend.Kind.OPENAPI:
        title = backend.active_spec.title if backend.active_spec is not None else ""
        rows = Tool.objects.filter(backend=backend).values_list("name", "description", "input_schema").order_by("name")
        return [ToolText(name, description, schema or {}, backend.name, title) for name, description, schema in rows]
    try:
        listed = mcp_tools_fetch(backend=backend)
    except Exception as exc:  # noqa: BLE001 - unreachable, refusing, malformed: the index keeps what it had
        log.warning("tools of backend %s not indexed: %s", backend.name, exc)
        return None
    texts = {}
    for tool in listed:
        name = tool.get("name")
        if not isinstance(name, str) or not name or len(name) > 128 or name in texts:
            continue
        words = [tool.get("title"), tool.get("description")]
        schema = tool.get("inputSchema")
        texts[name] = ToolText(name, " ".join(w for w in words if isinstance(w, str)), schema if isinstance(schema, dict)
                               else {}, backend.name)
    return [texts[name] for name in sorted(texts)]


def mcp_tool_indexes_refresh() -> int:
    """Queue the indexing of every MCP backend (run periodically: an MCP server's tools change
    without the gateway's configuration changing). Returns how many were queued."""
    ids = list(Backend.objects.filter(kind=Backend.Kind.MCP).values_list("pk", flat=True))
    for backend_id in ids:
        tool_index_queue(backend_id=backend_id)
    return len(ids)


def tool_index_sync(*, backend_id: int, chains: bool = True) -> IndexChange:
    """Bring the backend's index entries in line with its current tools, and (`chains`) the
    tenant's prerequisite chains. Safe to run twice or concurrently: a run that finds the backend's
    tools replaced while it embedded writes nothing (the run queued by that change does it)."""
    backend = Backend.objects.select_related("active_spec").filter(pk=backend_id).first()
    if backend is None:
        return IndexChange(0, 0, 0)  # deleted: its entries went with it
    seen_spec = backend.active_spec_id
    model = settings.GATEWAY_EMBEDDING_MODEL
    listed = backend_tool_texts(backend=backend)
    if listed is None:
        return IndexChange(0, 0, 0)
    tools = {tool.name: tool for tool in listed}
    texts = {name: index_text(tool) for name, tool in tools.items()}
    parameters = {name: list(parameter_names(tool.input_schema)) for name, tool in tools.items()}
    # An MCP tool's schema is kept for deriving chains; an OpenAPI tool's is its catalog row's.
    schemas = {name: dict(tool.input_schema) if backend.kind == Backend.Kind.MCP else {} for name, tool in tools.items()}
    digests = {name: text.digest(model) for name, text in texts.items()}
    stored = {name: (digest, params, description, schema) for name, digest, params, description, schema in
              IndexedTool.objects.filter(backend_id=backend_id).values_list(
                  "name", "digest", "parameters", "description", "input_schema")}
    stale = [name for name in texts if stored.get(name, ("",))[0] != digests[name]]
    gone = [name for name in stored if name not in texts]
    # Entries from before these were kept, or whose schema changed with no text changing: filled in
    # without embedding anything again.
    filled = [n for n in texts if n in stored and n not in stale
              and stored[n][1:] != (parameters[n], texts[n].description, schemas[n])]
    for name in filled:
        IndexedTool.objects.filter(backend_id=backend_id, name=name).update(
            parameters=parameters[name], description=texts[name].description, input_schema=schemas[name])
    for start in range(0, len(stale), BATCH):
        names = stale[start:start + BATCH]
        vectors = embedder().encode([texts[name].document() for name in names])
        with transaction.atomic():
            if not _still_current(backend_id, seen_spec):
                return IndexChange(start, 0, len(texts) - len(stale))
            _upsert(backend, [(name, texts[name], digests[name], parameters[name], schemas[name], vector)
                              for name, vector in zip(names, vectors, strict=True)])
    with transaction.atomic():
        if gone and _still_current(backend_id, seen_spec):
            IndexedTool.objects.filter(backend_id=backend_id, name__in=gone).delete()
    # Always: a changed response schema changes who produces what, with no text changing.
    rechained = prerequisites_sync(tenant_id=backend.tenant_id) if chains else 0
    if stale or gone or filled or rechained:
        _index_changed(tenant_id=backend.tenant_id)
    return IndexChange(len(stale), len(gone), len(texts) - len(stale))


def _index_changed(*, tenant_id: int) -> None:
    # Gateways keep tool_search answers per configuration snapshot: a new index is a new one.
    config_version_bump(tenant_id=tenant_id)
    redis_client().incr(index_version_key(tenant_id))


def prerequisites_sync(*, tenant_id: int) -> int:
    """Derive the prerequisite chains of the tenant's indexed tools from their schemas
    (`prerequisites.py`) and store each entry's closure and needs; returns how many entries changed.
    The chains span backends (an EKS cluster wants an IAM role), so they are derived for the whole
    tenant."""
    chains = tenant_chains_derive(tenant_id=tenant_id)
    changed = 0
    with transaction.atomic():
        for entry in IndexedTool.objects.filter(tenant_id=tenant_id).only(
                "pk", "backend_id", "name", "prerequisites", "needs"):
            chain = chains.get((entry.backend_id, entry.name))
            closure = [list(key) for key in chain.closure] if chain is not None else []
            needs = [_need_row(need) for need in chain.needs] if chain is not None else []
            if entry.prerequisites != closure or entry.needs != needs:
                IndexedTool.objects.filter(pk=entry.pk).update(prerequisites=closure, needs=needs)
                changed += 1
    return changed


def _need_row(need: ToolNeed) -> dict[str, object]:
    """A need as `IndexedTool.needs` holds it (keys as [backend id, name] lists, as jsonb gives them back)."""
    return {"parameter": need.parameter, "producer": list(need.producer) if need.producer else None,  # type: ignore[call-overload]
            "lookup": list(need.lookup) if need.lookup else None}  # type: ignore[call-overload]


def tenant_chains_derive(*, tenant_id: int) -> dict[tuple[int, str], Chain]:
    """The prerequisite chains of the tenant's tools, derived from their schemas: an OpenAPI
    backend's catalog rows (input and response schemas), an MCP server's index entries (the input
    schema it listed). Reads, writes nothing."""
    rows = Tool.objects.filter(backend__tenant_id=tenant_id, backend__kind=Backend.Kind.OPENAPI).values_list(
        "backend_id", "name", "input_schema", "output_schema")
    tools = [ToolSchemas((b, name), b, name, inputs or {}, outputs) for b, name, inputs, outputs in rows.iterator()]
    served = IndexedTool.objects.filter(tenant_id=tenant_id, backend__kind=Backend.Kind.MCP).values_list(
        "backend_id", "name", "input_schema")
    tools += [ToolSchemas((b, name), b, name, inputs or {}, None) for b, name, inputs in served.iterator()]
    return prerequisite_chains(tools)  # type: ignore[return-value]


def _still_current(backend_id: int, seen_spec: int | None) -> bool:
    """Whether the backend still serves the tools read (its row locked until the transaction ends,
    so a publication waits for this write rather than interleaving with it)."""
    current = Backend.objects.select_for_update().filter(pk=backend_id).values_list("active_spec_id", flat=True).first()
    return current == seen_spec


_UPSERT = """
INSERT INTO retrieval_indexedtool (tenant_id, backend_id, name, document, description, parameters, prerequisites,
                                   needs, input_schema, digest, search, embedding, updated_at)
VALUES (%(tenant)s, %(backend)s, %(name)s, %(document)s, %(description)s, %(parameters)s::jsonb, '[]'::jsonb,
        '[]'::jsonb, %(schema)s::jsonb, %(digest)s,
        setweight(to_tsvector('english', %(name_words)s), 'A')
        || setweight(to_tsvector('english', %(service)s), 'B')
        || setweight(to_tsvector('english', %(parameter_words)s), 'C')
        || setweight(to_tsvector('english', %(description)s), 'D'),
        %(embedding)s::vector, clock_timestamp())
ON CONFLICT (backend_id, name) DO UPDATE SET
    document = EXCLUDED.document, description = EXCLUDED.description, parameters = EXCLUDED.parameters,
    input_schema = EXCLUDED.input_schema, digest = EXCLUDED.digest, search = EXCLUDED.search,
    embedding = EXCLUDED.embedding, updated_at = EXCLUDED.updated_at
"""


def _upsert(backend: Backend, entries: Sequence[tuple[str, IndexText, str, list[str], dict[str, object], object]]) -> None:
    rows = [
        {
            "tenant": backend.tenant_id, "backend": backend.pk, "name": name, "document": text.document(),
            "parameters": json.dumps(params), "schema": json.dumps(schema), "digest": digest, "name_words": text.name, "service": text.service, "parameter_words": text.parameters,
            "description": text.description, "embedding": vector_literal(vector),
        }
        for name, text, digest, params, schema, vector in entries
    ]
    with connection.cursor() as cursor:
        cursor.executemany(_UPSERT, rows)


def vector_literal(vector: object) -> str:
    """pgvector's text form of a vector (`[0.1,0.2,...]`)."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"  # type: ignore[attr-defined]


def tool_indexes_sync(*, tenant_slug: str | None = None) -> list[tuple[Backend, IndexChange]]:
    """`tool_index_sync` for every backend (of one tenant, if named), now: for a first
    index, or after changing the embedding model. ValueError for an unknown tenant."""
    backends = Backend.objects.select_related("tenant").order_by("tenant__slug", "name")
    if tenant_slug is not None:
        tenant = Tenant.objects.filter(slug=tenant_slug).first()
        if tenant is None:
            raise ValueError(f"no tenant {tenant_slug!r}")
        backends = backends.filter(tenant=tenant)
    done = [(backend, tool_index_sync(backend_id=backend.pk, chains=False)) for backend in backends]
    for tenant_id in sorted({backend.tenant_id for backend, _ in done}):  # once per tenant, not per backend
        if prerequisites_sync(tenant_id=tenant_id):
            _index_changed(tenant_id=tenant_id)
    return done
