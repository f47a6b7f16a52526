"""The `tools/list` entry of `tool_search` (the search itself: `search.py`)."""

from __future__ import annotations

from typing import Any

DEFAULT_NAME = "tool_search"
DEFAULT_K = 15
MAX_K = 50
MAX_QUERY_CHARS = 1000


def search_tool(name: str) -> dict[str, Any]:
    """The `tools/list` entry of the search tool."""
    return {
        "name": name,
        "title": "Find tools",
        "description": (
            "Find the tools for a task among every tool this server offers. Describe what you want to do "
            "in a few words, a sentence or a resource id; the answer lists the best matching tools, best "
            "first, with their input schemas, followed by the tools that must run first to produce the ids "
            "they need (each tool's _meta[\"gateway/prerequisites\"] names them). Call the tools by name."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                          "description": "What you want to do, or the id of what you want to act on."},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": DEFAULT_K,
                      "description": "How many tools to return."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
            "required": ["tools"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }
