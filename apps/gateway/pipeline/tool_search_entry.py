"""The `tools/list` entry of `tool_search` (the search itself: `tool_search.py`; its answers: `tool_search_answers.py`)."""

from __future__ import annotations

from typing import Any

from apps.gateway.pipeline.tool_search_answers import MAX_EXPAND

DEFAULT_K = 15
MAX_K = 50
MAX_QUERY_CHARS = 1000
MAX_ALSO = 3
MAX_ALSO_CHARS = 200


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
