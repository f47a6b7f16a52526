"""Which tool names a virtual host serves, for the console's preview and the REST API: each mounted
backend's tools (an OpenAPI backend's compiled catalog, or what an MCP server lists now) named by
the gateway's own naming contract (`apps.kernel.names.Naming`: aliases, map-key prefixes,
dropped names, the host's curation), plus the host's tool_search when it has one."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from operator import itemgetter

from django.db.models.functions import Left

from apps.catalog.curation import rule_describe
from apps.catalog.models import Backend, Tool, ToolAlias, ToolOverride, ToolRule, VirtualHost
from apps.catalog.selectors import indexed_tool_counts_get, tool_search_mode_effective, virtual_host_naming_get
from apps.catalog.tool_selectors import tool_match_rank, tool_search_words
from apps.common.redis import redis_client
from apps.gateway.tool_lists import mcp_tools_fetch

log = logging.getLogger(__name__)

LIST_TIMEOUT_SECONDS = 5.0
LIST_CACHE_SECONDS = 30


@dataclass(frozen=True)
class ExposedTool:
    name: str  # as the host lists it; empty when the host's curation hides it
    map_key: str
    backend: str
    upstream_name: str
    description: str = ""  # the start of the description the host shows
    described: bool = False  # the host's own description, not the backend's
    hidden: str = ""  # why the host's curation hides it (empty: served)


@dataclass(frozen=True)
class DroppedTool:
    map_key: str
    upstream_name: str
    reason: str


@dataclass(frozen=True)
class ExposedTools:
    """`tools` by exposed name (hidden ones, when asked for, after them by name); `dropped` the tools no
    name routes back to; `unavailable` map key -> why that backend's tools could not be had (an
    unreachable MCP server: its names are missing); `count` how many tools matched before paging."""

    tools: list[ExposedTool] = field(default_factory=list)
    dropped: list[DroppedTool] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    tool_search: str = ""  # the name of the gateway's own tool_search, when the host has it
    count: int = 0
    served: int = 0  # tools the host serves (before search and paging)
    hidden: int = 0  # tools its curation hides


#: The states a listing may be narrowed to.
STATES = ("served", "hidden", "all")
SUMMARY_CHARS = 240


def backend_tools_describe(*, backend: Backend) -> list[tuple[str, str]]:
    """The backend's upstream tools as (name, start of description): an OpenAPI backend's compiled
    tools, or what the MCP server lists (asked at most every LIST_CACHE_SECONDS). Raises when an
    MCP server cannot be asked."""
    if backend.kind == Backend.Kind.OPENAPI:
        rows = Tool.objects.filter(backend=backend).order_by("name").annotate(summary=Left("description", SUMMARY_CHARS))
        return list(rows.values_list("name", "summary"))
    key = f"catalog:tool-summaries:{backend.pk}:{backend.updated_at.timestamp()}"
    cached = redis_client().get(key)
    if cached is not None:
        return [tuple(pair) for pair in json.loads(cached)]
    listed = mcp_tools_fetch(backend=backend, timeout=LIST_TIMEOUT_SECONDS)
    found = {tool["name"]: str(tool.get("description") or "")[:SUMMARY_CHARS]
             for tool in listed if isinstance(tool.get("name"), str)}
    tools = sorted(found.items())
    redis_client().set(key, json.dumps(tools), ex=LIST_CACHE_SECONDS)
    return tools


#: The tools of spec versions this process has read, by version id, least recently used first: a
#: version's tools never change, so a host's listing worked out again reads only new versions.
_SPEC_TOOLS: OrderedDict[int, list[tuple[str, str]]] = OrderedDict()
_SPEC_TOOLS_MAX = 60_000  # tools kept over all versions (each ~0.3 KiB)


def _catalog_tools(spec_version_ids: list[int]) -> dict[int, list[tuple[str, str]]]:
    """The tools of these spec versions (OpenAPI backends' active ones) as `backend_tools_describe`
    gives them, by version id; those not kept read in one query."""
    found = {version: _SPEC_TOOLS[version] for version in spec_version_ids if version in _SPEC_TOOLS}
    for version in found:
        _SPEC_TOOLS.move_to_end(version)
    missing = [version for version in spec_version_ids if version not in found]
    if missing:
        read: dict[int, list[tuple[str, str]]] = {version: [] for version in missing}
        rows = Tool.objects.filter(spec_version_id__in=missing).order_by("spec_version_id", "name").annotate(
            summary=Left("description", SUMMARY_CHARS)).values_list("spec_version_id", "name", "summary")
        for version, name, summary in rows:
            read[version].append((name, summary))
        found.update(read)
        _SPEC_TOOLS.update(read)
        while sum(map(len, _SPEC_TOOLS.values())) > _SPEC_TOOLS_MAX and len(_SPEC_TOOLS) > 1:
            _SPEC_TOOLS.popitem(last=False)
    return found


@dataclass(frozen=True)
class _Listing:
    """Every tool of a host, named and judged: what each request then filters, ranks and pages."""

    served: list[_Row]  # by exposed name
    hidden: list[_Row]  # by map key and name
    dropped: list[DroppedTool]
    unavailable: dict[str, str]
    expires: float
    inputs: str  # `_inputs`'s digest of what it was made of
    #: id(row) -> its names and description in lower case, for a search's first pass (made by the first search)
    text: dict[int, str] = field(default_factory=dict)


#: An ExposedTool's fields as a tuple: 20,000 of them are made in a tenth of the time; only a page's
#: rows become ExposedTools.
_Row = tuple[str, str, str, str, str, bool, str]


#: Listings kept by this process, newest last: a search as one types re-reads none of 20,000 tools.
_LISTINGS: OrderedDict[int, _Listing] = OrderedDict()
_LISTED_TOOLS_MAX = 100_000  # tools kept over all hosts
_STILL_SECONDS = 3600  # a listing of OpenAPI backends only: kept while its inputs stay the same


def virtual_host_exposed_tools(
    *, virtual_host: VirtualHost, search: str = "", state: str = "served", map_key: str = "",
    offset: int = 0, limit: int | None = None,
) -> ExposedTools:
    """The tools `virtual_host` serves now (`state` served), hides (hidden) or both (all), as the
    gateway names them (see module docstring), perhaps of one `map_key`; with a `search`, only those
    whose names or description hold every word, most relevant first (`tool_match_rank`); then
    `limit` of them from `offset`. A host's listing is worked out again only when what it is made
    of changes (`_inputs`), and at most every LIST_CACHE_SECONDS when it mounts an MCP server
    (whose list changes without that)."""
    listing, backend_ids = _listing(virtual_host)
    mode = tool_search_mode_effective(  # (not kept with the listing: the index's size moves it)
        mode=virtual_host.tool_search, backend_ids=backend_ids,
        indexed=indexed_tool_counts_get(tenant_id=virtual_host.tenant_id) if virtual_host.tool_search == VirtualHost.ToolSearch.AUTO else {},
    )
    served = [row for row in listing.served if row[1] == map_key] if map_key else listing.served
    hidden = [row for row in listing.hidden if row[1] == map_key] if map_key else listing.hidden
    chosen = {"served": served, "hidden": hidden, "all": served + hidden}[state if state in STATES else "served"]
    words = tool_search_words(search)
    if words:  # most relevant first; the sort is stable, so ties keep the order above
        text = listing.text
        if not text:
            text.update((id(row), f"{row[0]} {row[3]} {row[4]}".lower()) for row in (*listing.served, *listing.hidden))
        ranked = [(rank, row) for row in chosen if all(word in text[id(row)] for word in words)
                  and (rank := tool_match_rank(words, (row[0], row[3]), row[4])) is not None]
        chosen = [row for _, row in sorted(ranked, key=lambda pair: pair[0])]
    elif search.strip():  # nothing searchable in it (only punctuation): nothing matches
        chosen = []
    unavailable = {k: v for k, v in listing.unavailable.items() if not map_key or k == map_key}
    return ExposedTools(
        tools=[ExposedTool(*row) for row in chosen[offset : None if limit is None else offset + limit]],
        dropped=[d for d in listing.dropped if not map_key or d.map_key == map_key], unavailable=unavailable,
        tool_search=virtual_host.tool_search_name if mode != VirtualHost.ToolSearch.OFF else "", count=len(chosen), served=len(served), hidden=len(hidden),
    )


def exposed_tools_forget() -> None:
    """Drop this process's listings (the next request of each host works its listing out again; the
    tools of spec versions it has read stay: they never change)."""
    _LISTINGS.clear()


def _inputs(virtual_host: VirtualHost) -> tuple[str, bool, list[int]]:
    """A digest of everything a host's listing is made of as stored — its mounts (with each backend's
    active spec and last change), aliases, rules and descriptions — and whether it mounts an MCP
    server (whose list changes without any of them), and the backends' ids. Four small queries: a
    change to another host or tenant leaves the listing as it is."""
    mounts = list(virtual_host.mounts.order_by("map_key").values_list(
        "map_key", "backend_id", "backend__kind", "backend__active_spec_id", "backend__updated_at"))
    parts = (
        mounts,
        list(ToolAlias.objects.filter(virtual_host=virtual_host).order_by("alias").values_list("alias", "map_key", "upstream_name")),
        list(ToolRule.objects.filter(virtual_host=virtual_host).order_by("pk").values_list("action", "match", "pattern", "map_key")),
        list(ToolOverride.objects.filter(virtual_host=virtual_host).order_by("pk").values_list(
            "map_key", "upstream_name", "description")),
    )
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()
    return digest, any(kind == Backend.Kind.MCP for _, _, kind, _, _ in mounts), [m[1] for m in mounts]


def _listing(virtual_host: VirtualHost) -> tuple[_Listing, list[int]]:
    inputs, live, backend_ids = _inputs(virtual_host)
    kept = _LISTINGS.get(virtual_host.pk)
    if kept is not None and kept.inputs == inputs and kept.expires > time.monotonic():
        _LISTINGS.move_to_end(virtual_host.pk)
        return kept, backend_ids
    listing = _listing_build(virtual_host, inputs, live)
    _LISTINGS[virtual_host.pk] = listing
    while sum(len(k.served) + len(k.hidden) for k in _LISTINGS.values()) > _LISTED_TOOLS_MAX and len(_LISTINGS) > 1:
        _LISTINGS.popitem(last=False)
    return listing, backend_ids


def _listing_build(virtual_host: VirtualHost, inputs: str, live: bool) -> _Listing:
    mounts = {m.map_key: m.backend for m in virtual_host.mounts.select_related("backend")}
    naming = virtual_host_naming_get(virtual_host=virtual_host)
    curation = naming.curation
    dropped: list[DroppedTool] = []
    unavailable: dict[str, str] = {}
    served: list[_Row] = []
    hidden: list[_Row] = []
    catalog = _catalog_tools([backend.active_spec_id for backend in mounts.values()
                              if backend.kind == Backend.Kind.OPENAPI and backend.active_spec_id is not None])
    for key, backend in sorted(mounts.items()):
        try:
            tools = catalog.get(backend.active_spec_id or 0, []) if backend.kind == Backend.Kind.OPENAPI else (
                backend_tools_describe(backend=backend))
        except Exception as exc:  # noqa: BLE001 - unreachable, refusing, malformed: say so, show the rest
            log.info("tools of backend %s not listed for the preview: %s", backend.name, exc)
            unavailable[key] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            continue
        unnamed = []
        for name, summary in tools:
            names = naming.tool_names(key, name)
            if names:
                described = curation.description(key, name) if curation is not None else None
                text = (summary if described is None else described)[:SUMMARY_CHARS]
                served.extend((exposed, key, backend.name, name, text, described is not None, "") for exposed in names)
            elif curation is not None and not curation.shows(key, name):
                rule = curation.hidden_by(key, name)
                why = f"hidden by the rule {rule_describe(rule)}" if rule else "left out by the include rules"
                hidden.append(("", key, backend.name, name, summary, False, why))
            else:
                unnamed.append({"name": name})
        if unnamed:  # the naming contract says why each is left out
            dropped.extend(DroppedTool(d.map_key, d.name, d.reason) for d in naming.expose_tools(key, unnamed)[1])
    served.sort(key=itemgetter(0))
    hidden.sort(key=itemgetter(1, 3))
    return _Listing(
        served=served, hidden=hidden, dropped=dropped, unavailable=unavailable,
        # An OpenAPI backend's tools change only with its active spec (in `inputs`); an MCP server's any time.
        expires=time.monotonic() + (0 if unavailable else LIST_CACHE_SECONDS if live else _STILL_SECONDS), inputs=inputs,
    )
