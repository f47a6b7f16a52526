"""The shapes of `tool_search` (docs/tool-search.md): its `tools/list` entry and argument limits, and
what the tool index finds. The search runs in `apps/gateway/pipeline/tool_search.py`, its answers are
shaped in `tool_search_answers.py`, the index lives in `apps/retrieval`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_K = 15
MAX_K = 50
MAX_QUERY_CHARS = 1000
MAX_ALSO = 3
MAX_ALSO_CHARS = 200
#: The most tool names one call may ask to `expand`.
MAX_EXPAND = 5


def search_tool(name: str) -> dict[str, Any]:
    """The `tools/list` entry of the search tool."""
    return {
        "name": name,
        "title": "Find tools",
        "description": (
            "Find the tools for a task among every tool this server offers. Describe what you want to do "
            "in a few words, a sentence or a resource id; optionally add up to 3 other phrasings or API "
            "keywords of the same need in `also` (e.g. the operation names you expect). The answer's `tools` "
            "are the best matches, best first, callable by name as listed; long ones are shortened to fit (_meta[\"gateway/shortened\"]: "
            "optional details left out). `prerequisites` are the tools that must run first to produce the ids "
            "they need, in brief, each with the parameters it produces (_meta[\"gateway/produces\"]); each "
            "tool's _meta[\"gateway/prerequisites\"] names its chain, and _meta[\"gateway/lookups\"] the "
            "read-only tool that finds an existing resource for each id it needs. To see tools whole, call "
            "again with the same query, also and k and their names in `expand`."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                          "description": "What you want to do, or the id of what you want to act on."},
                "also": {"type": "array", "minItems": 1, "maxItems": MAX_ALSO,
                         "items": {"type": "string", "minLength": 1, "maxLength": MAX_ALSO_CHARS},
                         "description": "Other phrasings or keywords of the same need, searched too; "
                                        "they count less than `query`."},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": DEFAULT_K,
                      "description": "How many tools to return."},
                "expand": {"type": "array", "maxItems": MAX_EXPAND,
                           "items": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                           "description": "Names of tools of the answer (found or prerequisites) to return whole."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"type": "object"}},
                           "prerequisites": {"type": "array", "items": {"type": "object"}}},
            "required": ["tools", "prerequisites"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }


@dataclass(frozen=True, slots=True)
class IdNeed:
    """An id a tool cannot work without (a required id parameter): the tool that makes one when
    none exists yet, and the read-only tool that finds an existing one; either may be unknown."""

    parameter: str  # as the tool's input schema names it; dotted for a nested member ("Placement.GroupId")
    producer: tuple[int, str] | None
    lookup: tuple[int, str] | None


@dataclass(frozen=True, slots=True)
class Found:
    """What the tool index found: the best tools, best first, as (backend id, upstream name), and
    the prerequisite chain (dependencies first) of each of them and of each tool in those chains
    (tools with none are left out), with the ids each of those tools needs (`needs`, same keys)."""

    hits: list[tuple[int, str]]
    prerequisites: Mapping[tuple[int, str], tuple[tuple[int, str], ...]]
    needs: Mapping[tuple[int, str], tuple[IdNeed, ...]] = field(default_factory=dict)
