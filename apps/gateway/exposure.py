"""Which tool names a virtual host serves, for the console's preview and the REST API: each mounted
backend's tools (an OpenAPI backend's compiled catalog, or what an MCP server lists now) named by
the gateway's own naming contract (`apps.kernel.names.Naming`: aliases, map-key prefixes,
dropped names, the host's curation), plus the host's tool_search when it has one."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from django.db.models.functions import Left

from apps.catalog.curation import rule_describe, tool_rules_add
from apps.catalog.models import Backend, Tool, ToolAlias, ToolOverride, ToolRule, VirtualHost
from apps.catalog.selectors import indexed_tool_counts_get, tool_search_mode_effective, virtual_host_naming_get
from apps.catalog.tool_selectors import ToolText, tool_match_rank, tool_search_words
from apps.common.redis import redis_client
from apps.gateway.tool_lists import mcp_tools_fetch
from apps.kernel.curation import ToolRuleSpec
from apps.kernel.names import Naming
from apps.retrieval.text import name_words

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
    map_keys: tuple[str, ...] = ()  # the host's, in order: what `map_key` may name


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
#: Held while this module's kept listings, parts and spec tools are read or changed (requests run in
#: threads); never while a listing is worked out, so two hosts' listings are made side by side.
_KEPT_LOCK = threading.Lock()
_SPEC_TOOLS_MAX = 60_000  # tools kept over all versions (each ~0.3 KiB)


def _catalog_tools(spec_version_ids: list[int]) -> dict[int, list[tuple[str, str]]]:
    """The tools of these spec versions (OpenAPI backends' active ones) as `backend_tools_describe`
    gives them, by version id; those not kept read in one query."""
    with _KEPT_LOCK:
        found = {version: kept for version in spec_version_ids if (kept := _SPEC_TOOLS.get(version)) is not None}
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
        with _KEPT_LOCK:
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
    #: row -> its names and description in lower case, for a search's first pass, and its words, for
    #: ranking: made as searches first need them, and carried over to the host's next listing for the
    #: rows it has alike (most of them, after any change), so no search after a change splits them again
    text: dict[_Row, str] = field(default_factory=dict)
    words: dict[_Row, ToolText] = field(default_factory=dict)


@dataclass(frozen=True)
class _Part:
    """One mount's share of a host's listing: kept while what names its tools stays the same, so a
    change that touches one mount (hiding or describing one of its tools) names only its tools again."""

    served: list[_Row]  # by exposed name
    hidden: list[_Row]  # by name
    dropped: list[DroppedTool]
    expires: float
    inputs: str  # `_Inputs.parts`'s digest for its map key


#: A mount as `_inputs` reads it: map key, backend id, name, kind, active spec version id, last change.
_Mount = tuple[str, int, str, str, int | None, Any]


@dataclass(frozen=True)
class _Inputs:
    digest: str  # of everything the listing is made of
    live: bool  # it mounts an MCP server (whose list changes without any stored change)
    mounts: list[_Mount]
    parts: dict[str, str]  # map key -> a digest of what names its tools


#: An ExposedTool's fields as a tuple: 20,000 of them are made in a tenth of the time; only a page's
#: rows become ExposedTools.
_Row = tuple[str, str, str, str, str, bool, str]


#: Listings kept by this process, newest last: a search as one types re-reads none of 20,000 tools.
_LISTINGS: OrderedDict[int, _Listing] = OrderedDict()
#: Their parts by (host id, map key), newest last.
_PARTS: OrderedDict[tuple[int, str], _Part] = OrderedDict()
_LISTED_TOOLS_MAX = 100_000  # tools kept over all hosts (listings and parts each)
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
    listing, mounts = _listing(virtual_host)
    mode = tool_search_mode_effective(  # (not kept with the listing: the index's size moves it)
        mode=virtual_host.tool_search, backend_ids=[m[1] for m in mounts],
        indexed=indexed_tool_counts_get(tenant_id=virtual_host.tenant_id) if virtual_host.tool_search == VirtualHost.ToolSearch.AUTO else {},
    )
    served = [row for row in listing.served if row[1] == map_key] if map_key else listing.served
    hidden = [row for row in listing.hidden if row[1] == map_key] if map_key else listing.hidden
    chosen = {"served": served, "hidden": hidden, "all": served + hidden}[state if state in STATES else "served"]
    words = tool_search_words(search)
    if words:  # most relevant first; the sort is stable, so ties keep the order above
        chosen = _ranked(listing, chosen, words)
    elif search.strip():  # nothing searchable in it (only punctuation): nothing matches
        chosen = []
    unavailable = {k: v for k, v in listing.unavailable.items() if not map_key or k == map_key}
    return ExposedTools(
        tools=[ExposedTool(*row) for row in chosen[offset : None if limit is None else offset + limit]],
        dropped=[d for d in listing.dropped if not map_key or d.map_key == map_key], unavailable=unavailable,
        tool_search=virtual_host.tool_search_name if mode != VirtualHost.ToolSearch.OFF else "", count=len(chosen),
        served=len(served), hidden=len(hidden), map_keys=tuple(m[0] for m in mounts),
    )


def _ranked(listing: _Listing, rows: list[_Row], words: list[str]) -> list[_Row]:
    """The rows whose names or description hold every word, most relevant first (`tool_match_rank`)."""
    text = listing.text
    if len(text) < len(listing.served) + len(listing.hidden):  # its first search: the rows not carried over
        for row in (*listing.served, *listing.hidden):
            if row not in text:
                text[row] = f"{row[0]} {row[3]} {row[4]}".lower()
    if len(words) == 1:
        candidates = [row for row in rows if words[0] in text[row]]
    else:
        candidates = [row for row in rows if all(word in text[row] for word in words)]
    ranked = []
    kept = listing.words
    key_words: dict[str, tuple[str, ...]] = {}
    for row in candidates:
        searchable = kept.get(row)
        if searchable is None:
            searchable = kept[row] = _tool_text(row, key_words)
        rank = tool_match_rank(words, searchable)
        if rank is not None:
            ranked.append((rank, row))
    ranked.sort(key=itemgetter(0))
    return [row for _, row in ranked]


def _tool_text(row: _Row, key_words: dict[str, tuple[str, ...]]) -> ToolText:
    exposed, key, _, name, description = row[:5]
    own = name_words(name)
    if not exposed or exposed == name:
        return ToolText(name, len(own), frozenset(own), description)
    if exposed == f"{key}-{name}":  # the usual prefixed name: its words are the key's, then the name's
        if key not in key_words:
            key_words[key] = name_words(key)
        words = key_words[key] + own
    else:  # an alias
        words = name_words(exposed)
    return ToolText(exposed, len(words), frozenset((*words, *own)), description)


def exposed_tools_forget() -> None:
    """Drop this process's listings (the next request of each host works its listing out again; the
    tools of spec versions it has read stay: they never change)."""
    with _KEPT_LOCK:
        _LISTINGS.clear()
        _PARTS.clear()


def _inputs(virtual_host: VirtualHost) -> _Inputs:
    """What a host's listing is made of as stored — its mounts (with each backend's active spec and
    last change), aliases, rules and descriptions — digested whole and per map key (a mount's own
    row, rules and descriptions, and what every mount's names depend on: the map keys, the aliases,
    the rules of every backend). Four small queries: a change to another host or tenant leaves the
    listing as it is; a change to one mount's curation leaves the other mounts' parts."""
    mounts = list(virtual_host.mounts.order_by("map_key").values_list(
        "map_key", "backend_id", "backend__name", "backend__kind", "backend__active_spec_id", "backend__updated_at"))
    aliases = list(ToolAlias.objects.filter(virtual_host=virtual_host).order_by("alias").values_list(
        "alias", "map_key", "upstream_name"))
    rules = list(ToolRule.objects.filter(virtual_host=virtual_host).order_by("pk").values_list(
        "action", "match", "pattern", "map_key"))
    overrides = list(ToolOverride.objects.filter(virtual_host=virtual_host).order_by("pk").values_list(
        "map_key", "upstream_name", "description"))
    shared = _digest(repr(([m[0] for m in mounts], aliases, [r for r in rules if not r[3]])))
    own: dict[str, list[Any]] = {m[0]: [m] for m in mounts}
    for rule in rules:
        if rule[3] in own:
            own[rule[3]].append(rule)
    for override in overrides:
        if override[0] in own:
            own[override[0]].append(override)
    parts = {key: _digest(f"{shared}{mine!r}") for key, mine in own.items()}
    return _Inputs(
        digest=_digest(f"{shared}{sorted(parts.items())!r}"), live=any(m[3] == Backend.Kind.MCP for m in mounts),
        mounts=mounts, parts=parts,
    )


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _listing(virtual_host: VirtualHost) -> tuple[_Listing, list[_Mount]]:
    inputs = _inputs(virtual_host)
    with _KEPT_LOCK:
        kept = _LISTINGS.get(virtual_host.pk)
        if kept is not None and kept.inputs == inputs.digest and kept.expires > time.monotonic():
            _LISTINGS.move_to_end(virtual_host.pk)
            return kept, inputs.mounts
    listing = _listing_build(virtual_host, inputs, kept)
    with _KEPT_LOCK:
        _LISTINGS[virtual_host.pk] = listing
        _keep_at_most(_LISTINGS)
    return listing, inputs.mounts


def _keep_at_most(kept: OrderedDict[Any, _Listing] | OrderedDict[Any, _Part]) -> None:
    """Drop the least recently used entries until they hold at most _LISTED_TOOLS_MAX tools (but one).
    Called with _KEPT_LOCK held."""
    while sum(len(entry.served) + len(entry.hidden) for entry in kept.values()) > _LISTED_TOOLS_MAX and len(kept) > 1:
        kept.popitem(last=False)


def _listing_build(virtual_host: VirtualHost, inputs: _Inputs, before: _Listing | None) -> _Listing:
    """The listing from its parts: those kept with the same inputs as they are, the others named
    again; with what the listing `before` it had made for searches, for the rows alike."""
    now = time.monotonic()
    parts: dict[str, _Part] = {}
    stale = []
    with _KEPT_LOCK:
        for mount in inputs.mounts:
            part = _PARTS.get((virtual_host.pk, mount[0]))
            if part is not None and part.inputs == inputs.parts[mount[0]] and part.expires > now:
                _PARTS.move_to_end((virtual_host.pk, mount[0]))
                parts[mount[0]] = part
            else:
                stale.append(mount)
    unavailable: dict[str, str] = {}
    if stale:
        naming = virtual_host_naming_get(virtual_host=virtual_host)
        catalog = _catalog_tools([m[4] for m in stale if m[3] == Backend.Kind.OPENAPI and m[4] is not None])
        servers = {b.pk: b for b in Backend.objects.filter(pk__in=[m[1] for m in stale if m[3] == Backend.Kind.MCP])}
        for key, backend_id, name, kind, spec_id, _ in stale:
            try:
                tools = catalog.get(spec_id or 0, []) if kind == Backend.Kind.OPENAPI else (
                    backend_tools_describe(backend=servers[backend_id]))
            except Exception as exc:  # noqa: BLE001 - unreachable, refusing, malformed: say so, show the rest
                log.info("tools of backend %s not listed for the preview: %s", name, exc)
                unavailable[key] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            # An OpenAPI backend's tools change only with its active spec (in the inputs); an MCP server's any time.
            expires = now + (LIST_CACHE_SECONDS if kind == Backend.Kind.MCP else _STILL_SECONDS)
            parts[key] = _part_build(naming, key, name, tools, inputs.parts[key], expires)
            with _KEPT_LOCK:
                _PARTS[(virtual_host.pk, key)] = parts[key]
        with _KEPT_LOCK:
            _keep_at_most(_PARTS)
    ordered = [parts[key] for key in sorted(parts)]
    served = [row for part in ordered for row in part.served]
    served.sort(key=itemgetter(0))  # (runs already in order: little to do)
    hidden = [row for part in ordered for row in part.hidden]
    text: dict[_Row, str] = {}
    words: dict[_Row, ToolText] = {}
    if before is not None and before.text:
        # Copied first (at once): a search of the listing before may be adding to them meanwhile.
        said, split = before.text.copy(), before.words.copy()
        text = {row: found for row in (*served, *hidden) if (found := said.get(row)) is not None}
        words = {row: found for row, found in split.items() if row in text}
    return _Listing(
        served=served, hidden=hidden, text=text, words=words,
        dropped=[tool for part in ordered for tool in part.dropped], unavailable=unavailable,
        expires=0 if unavailable else min((part.expires for part in ordered), default=now + _STILL_SECONDS),
        inputs=inputs.digest,
    )


def _part_build(naming: Naming, key: str, backend: str, tools: list[tuple[str, str]], inputs: str, expires: float) -> _Part:
    """One mount's tools named by the host's naming contract, judged by its curation."""
    curation = naming.curation
    shown = curation.shown(key) if curation is not None else None
    served: list[_Row] = []
    hidden: list[_Row] = []
    unnamed = []
    for (name, summary), names in zip(tools, naming.tool_names_all(key, [name for name, _ in tools]), strict=True):
        if names:
            described = curation.description(key, name) if curation is not None else None
            text = (summary if described is None else described)[:SUMMARY_CHARS]
            for exposed in names:
                served.append((exposed, key, backend, name, text, described is not None, ""))
        elif shown is not None and curation is not None and not shown(name):
            rule = curation.hidden_by(key, name)
            why = f"hidden by the rule {rule_describe(rule)}" if rule else "left out by the include rules"
            hidden.append(("", key, backend, name, summary, False, why))
        else:
            unnamed.append({"name": name})
    # The naming contract says why each unnamed one is left out.
    dropped = [DroppedTool(d.map_key, d.name, d.reason) for d in naming.expose_tools(key, unnamed)[1]] if unnamed else []
    served.sort(key=itemgetter(0))
    hidden.sort(key=itemgetter(3))
    return _Part(served=served, hidden=hidden, dropped=dropped, expires=expires, inputs=inputs)


@dataclass(frozen=True)
class RuleEffect:
    """What adding curation rules did to the tools a host serves (of the rules' `map_key`, or all)."""

    served_before: int
    served_after: int
    map_key: str  # empty: the whole host
    known: bool  # False when some backend's tools could not be listed: the counts leave them out

    @property
    def warning(self) -> str:
        """Why the operator should look again (empty when the change is what a rule usually does)."""
        of = f" of {self.map_key}" if self.map_key else ""
        if not self.known:
            return ""
        if self.served_after == self.served_before:
            return "it changes nothing now: it matches no tool it would hide or serve (a typo, or tools to come)"
        if self.served_after == 0:
            return f"no tool{of} is served now"
        return ""

    def describe(self) -> str:
        of = f" of {self.map_key}" if self.map_key else ""
        if not self.known:
            return "some backend's tools could not be listed, so what it changes is not known"
        change = self.served_before - self.served_after
        if change > 0:
            said = f"{change:,} of the {self.served_before:,} served tools{of} are hidden now"
        elif change < 0:
            said = f"{-change:,} more tools{of} are served now"
        else:
            return self.warning
        return f"{said}; {self.warning}" if self.warning else said


def tool_rules_add_measured(*, virtual_host: VirtualHost, rules: Sequence[ToolRuleSpec]) -> tuple[list[ToolRule], RuleEffect]:
    """`tool_rules_add`, and how many tools the host served before and after, of the rules' one map
    key (when they all name the same) or in all: an include rule with a typo hides every tool of its
    backend, an exclude rule with one hides nothing, and neither is an error the rule's own check sees."""
    keys = {rule.map_key for rule in rules}
    map_key = keys.pop() if len(keys) == 1 else ""
    # (Another change made between the two counts would be counted as this one's: a report, not a guard.)
    before = virtual_host_exposed_tools(virtual_host=virtual_host, map_key=map_key, limit=0)
    added = tool_rules_add(virtual_host=virtual_host, rules=rules)
    after = virtual_host_exposed_tools(virtual_host=virtual_host, map_key=map_key, limit=0)
    return added, RuleEffect(
        served_before=before.served, served_after=after.served, map_key=map_key,
        known=not before.unavailable and not after.unavailable,
    )
