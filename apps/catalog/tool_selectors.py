"""Read-side queries for browsing a tenant's tools (the console's tools pages and
`/api/v1/tenants/<tenant>/tools`): the OpenAPI tools of the catalog and, for MCP backends, the
tools their servers listed when last indexed (`retrieval.IndexedTool`; nothing is fetched here).

Lists never load schemas: a row is (kind, id, backend id, name, a summary of the description),
in (backend id, name) order, which an index of each table serves (retrieval migration 0006)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import BooleanField, CharField, IntegerField, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left

from apps.catalog.models import Backend, Tool
from apps.retrieval.models import IndexedTool
from apps.retrieval.text import identifier_words
from apps.tenants.models import Tenant

#: The text a catalog tool is searched by: its name as written and split into words, and its
#: description. Exactly the expression of the index `catalog_tool_search` (retrieval 0006).
TOOL_SEARCH_SQL = (
    "to_tsvector('english'::regconfig, name || ' ' || regexp_replace(regexp_replace(regexp_replace("
    "name, '[^0-9A-Za-z]+', ' ', 'g'), '([a-z0-9])([A-Z])', '\\1 \\2', 'g'), '([A-Z])([A-Z][a-z])', '\\1 \\2', 'g')"
    " || ' ' || left(description, 20000))"
)
#: Characters of a description a list row carries.
SUMMARY_CHARS = 240
#: Words of a search that count; the rest are ignored.
MAX_SEARCH_WORDS = 8
MAX_SEARCH_CHARS = 200
_WORD = re.compile(r"[0-9A-Za-z]+")


@dataclass(frozen=True, slots=True)
class ToolBackend:
    id: int
    name: str
    kind: str


def tool_backends_list(*, tenant: Tenant) -> list[ToolBackend]:
    """The tenant's backends by name: what a tools list may be narrowed to."""
    rows = Backend.objects.filter(tenant=tenant).order_by("name").values_list("pk", "name", "kind")
    return [ToolBackend(pk, name, kind) for pk, name, kind in rows]


def tool_search_words(search: str) -> list[str]:
    """The words a search looks for: letters and digits, identifiers split (`DescribeVpcs` →
    Describe, Vpcs), at most MAX_SEARCH_WORDS."""
    words = [w for token in _WORD.findall(search[:MAX_SEARCH_CHARS]) for w in identifier_words(token)]
    return list(dict.fromkeys(word.lower() for word in words))[:MAX_SEARCH_WORDS]


class ToolText:
    """What a search matches a tool by: the words of its names (`first`, the name it ranks by, split
    into `first_words` words) and of its description (split when a search first needs them). A
    listing keeps one per tool, so a search as one types splits each text once."""

    __slots__ = ("first", "first_words", "names", "_description", "_text")

    def __init__(self, first: str, first_words: int, names: frozenset[str], description: str) -> None:
        self.first = first
        self.first_words = first_words
        self.names = names
        self._description = description
        self._text: frozenset[str] | None = None

    def text(self) -> frozenset[str]:
        if self._text is None:
            self._text = frozenset(w.lower() for token in _WORD.findall(self._description) for w in identifier_words(token))
        return self._text


def tool_match_rank(words: Sequence[str], tool: ToolText) -> tuple[int, int, str] | None:
    """How well a tool matches the search `words` (from `tool_search_words`), lower first; None when
    it does not (every word must start a word of one of its names or of its description). A tool
    whose names hold more of the words comes first, then the one with the fewer name words (the more
    specific), then by name: a search for `vpc` puts `DescribeVpcs` before a tool that only mentions
    VPCs in its description. `tool_list` ranks its rows the same way in SQL."""
    hits = 0
    for word in words:
        if any(found.startswith(word) for found in tool.names):
            hits += 1
        elif not any(found.startswith(word) for found in tool.text()):
            return None
    return (-hits, tool.first_words, tool.first)


def _tsquery(words: Sequence[str], weights: str = "") -> str:
    # Every word must match, each as a prefix (a live search sees words half typed). The words are
    # letters and digits only, so quoting them is safe.
    return " & ".join(f"'{word}':*{weights}" for word in words)


class ToolRows:
    """The rows of `tool_list`: the catalog's tools, then the MCP servers' — each part in (backend
    id, name) order, which an index serves — countable and sliceable like a queryset (for Django's
    Paginator and DRF's LimitOffsetPagination): a count is two queries, a slice at most two.

    Not one UNION query: PostgreSQL sorts a top-level UNION ALL as a whole (every one of 20,000
    rows, 60 ms) where each part alone reads just its page from the index (0.2 ms)."""

    def __init__(self, tools: QuerySet[Any], entries: QuerySet[Any]) -> None:
        self.parts = (tools, entries)
        self._counts: tuple[int, int] | None = None

    def counts(self) -> tuple[int, int]:
        if self._counts is None:
            self._counts = (self.parts[0].count(), self.parts[1].count())
        return self._counts

    def count(self) -> int:
        return sum(self.counts())

    __len__ = count

    def __getitem__(self, item: slice) -> list[dict[str, Any]]:
        if not isinstance(item, slice) or item.step is not None:
            raise TypeError("ToolRows take slices only")
        start, stop = item.start or 0, item.stop if item.stop is not None else self.count()
        first = self.counts()[0]
        rows: list[dict[str, Any]] = []
        if start < first and stop > start:
            rows += self._page(self.parts[0], start, min(stop, first))
        if stop > first and stop > start:
            rows += self._page(self.parts[1], max(0, start - first), stop - first)
        return rows

    @staticmethod
    def _page(part: QuerySet[Any], start: int, stop: int) -> list[dict[str, Any]]:
        # The page's ids first, from the narrow (backend, name, id) index alone, then their rows:
        # a deep offset then skips index entries, not rows with their descriptions.
        return list(part.filter(pk__in=part.values("pk")[start:stop]))


def tool_list(*, backends: Sequence[ToolBackend], search: str = "") -> ToolRows | QuerySet[Any]:
    """The tools of `backends` (the caller's tenant's, from `tool_backends_list`, perhaps narrowed
    to one) whose name or description holds every word of `search` (as a prefix), as dicts
    {kind, id, backend_id, name, summary}: catalog (OpenAPI) tools, then MCP tools, each by
    backend id and name; with a search, the matches most relevant first (`tool_match_rank`). An
    MCP tool's `id` is its index entry's."""
    words = tool_search_words(search)
    openapi = [b.id for b in backends if b.kind == Backend.Kind.OPENAPI]
    mcp = [b.id for b in backends if b.kind == Backend.Kind.MCP]
    fields = ("kind", "id", "backend_id", "name", "summary")
    tools = Tool.objects.filter(backend_id__in=openapi).annotate(
        kind=Value(Backend.Kind.OPENAPI.value, output_field=CharField()), summary=Left("description", SUMMARY_CHARS))
    entries = IndexedTool.objects.filter(backend_id__in=mcp).annotate(
        kind=Value(Backend.Kind.MCP.value, output_field=CharField()), summary=Left("description", SUMMARY_CHARS))
    if search.strip() and not words:
        tools, entries = tools.none(), entries.none()
    elif words:
        tools = tools.filter(RawSQL(f"{TOOL_SEARCH_SQL} @@ to_tsquery('english', %s)", [_tsquery(words)],
                                    output_field=BooleanField()))
        # The index's own tsvector: the name's words weigh A, the description D (B and C are the
        # service and the parameter names, which a search by name or description leaves out).
        entries = entries.filter(RawSQL("search @@ to_tsquery('english', %s)", [_tsquery(words, "AD")],
                                        output_field=BooleanField()))
    if not words:
        return ToolRows(tools.values(*fields).order_by("backend_id", "name"),
                        entries.values(*fields).order_by("backend_id", "name"))
    # Matches are ranked as `tool_match_rank` ranks them: more of the words in the name first, then
    # the shorter name. Only the matches (found by the full-text indexes) are ranked and sorted.
    ranked = [part.annotate(name_hits=_name_hits(words, part.model._meta.db_table),
                            name_len=RawSQL(_name_word_count(part.model._meta.db_table), [], output_field=IntegerField()))
              .values(*fields, "name_hits", "name_len").order_by() for part in (tools, entries)]
    return ranked[0].union(ranked[1], all=True).order_by("-name_hits", "name_len", "name", "kind", "id")


def _name_words(table: str) -> str:
    """A tool's name as its words, lower case, separated by spaces (`DescribeVPCs` -> `describe vpcs`):
    the split of TOOL_SEARCH_SQL."""
    name = f'"{table}"."name"'
    return (f"lower(regexp_replace(regexp_replace(regexp_replace({name}, '[^0-9A-Za-z]+', ' ', 'g'), "
            "'([a-z0-9])([A-Z])', '\\1 \\2', 'g'), '([A-Z])([A-Z][a-z])', '\\1 \\2', 'g'))")


def _name_word_count(table: str) -> str:
    return f"coalesce(array_length(regexp_split_to_array(trim({_name_words(table)}), ' +'), 1), 0)"


def _name_hits(words: Sequence[str], table: str) -> RawSQL:
    """How many of `words` start a word of the tool's name."""
    checks = " + ".join(f"(position(%s in ' ' || {_name_words(table)}) > 0)::int" for _ in words)
    return RawSQL(checks, [f" {word}" for word in words], output_field=IntegerField())


def tool_get(*, tenant: Tenant, tool_id: int) -> Tool | None:
    """The tenant's catalog tool with that id, its backend and spec version joined; None if there is none."""
    return (Tool.objects.filter(backend__tenant=tenant, pk=tool_id).select_related("backend", "spec_version")
            .defer("spec_version__document").first())


def mcp_tool_get(*, tenant: Tenant, entry_id: int) -> IndexedTool | None:
    """The index entry of one of the tenant's MCP servers' tools, without its embedding; None if there is none."""
    return (IndexedTool.objects.filter(tenant=tenant, backend__tenant=tenant, backend__kind=Backend.Kind.MCP, pk=entry_id)
            .select_related("backend").defer("embedding", "search").first())


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: str
    required: bool
    description: str


def schema_parameters(schema: Mapping[str, Any] | None) -> list[Parameter]:
    """The top-level properties of an object schema, required ones first, each with its type in
    words (`array of string`, `string (one of a, b)`)."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return []
    required = [name for name in schema.get("required") or () if name in schema["properties"]]
    names = [*required, *(name for name in schema["properties"] if name not in required)]
    return [Parameter(name, schema_type(schema["properties"][name]), name in required,
                      str(schema["properties"][name].get("description") or "") if isinstance(
                          schema["properties"][name], Mapping) else "")
            for name in names]


def schema_type(schema: Any) -> str:
    """A schema's type in a few words."""
    if not isinstance(schema, Mapping):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(str(k) for k in kind)
    elif kind == "array":
        text = f"array of {schema_type(schema.get('items'))}"
    elif kind:
        text = str(kind)
    elif any(key in schema for key in ("anyOf", "oneOf")):
        text = " or ".join(schema_type(s) for s in (schema.get("anyOf") or schema.get("oneOf")))
    elif "properties" in schema:
        text = "object"
    else:
        text = "any"
    if isinstance(schema.get("enum"), list):
        shown = ", ".join(str(v) for v in schema["enum"][:6])
        text += f" (one of {shown}{', …' if len(schema['enum']) > 6 else ''})"
    return text


def tool_refs_get(*, tenant: Tenant, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], tuple[str, int]]:
    """Where each (backend id, tool name) of the tenant is shown: (kind, id) of its catalog row
    (openapi) or index entry (mcp); keys with neither are left out. Two queries."""
    backends = {b for b, _ in keys}
    names = {n for _, n in keys}
    found: dict[tuple[int, str], tuple[str, int]] = {}
    for pk, backend_id, name in IndexedTool.objects.filter(
            tenant=tenant, backend__kind=Backend.Kind.MCP, backend_id__in=backends, name__in=names).values_list(
            "pk", "backend_id", "name"):
        found[(backend_id, name)] = (Backend.Kind.MCP, pk)
    for pk, backend_id, name in Tool.objects.filter(
            backend__tenant=tenant, backend_id__in=backends, name__in=names).values_list("pk", "backend_id", "name"):
        found[(backend_id, name)] = (Backend.Kind.OPENAPI, pk)
    return {key: found[key] for key in keys if key in found}
