"""Protocol revisions and version negotiation (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired, TypedDict

#: Revisions that open a session with `initialize`, oldest first.
LEGACY_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: Stateless revisions: every request carries its version in `_meta`.
MODERN_VERSIONS: Final = ("2026-07-28",)
ALL_VERSIONS: Final = LEGACY_VERSIONS + MODERN_VERSIONS
LATEST_LEGACY: Final = LEGACY_VERSIONS[-1]
LATEST_MODERN: Final = MODERN_VERSIONS[-1]
#: What a legacy request without `MCP-Protocol-Version` is assumed to speak (spec 2025-06-18).
DEFAULT_LEGACY_HEADER_VERSION: Final = "2025-03-26"

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"


class Implementation(TypedDict):
    """Who answers (`serverInfo`) or asks (`clientInfo`)."""

    name: str
    title: NotRequired[str]
    version: str


class InitializeResult(TypedDict):
    """The gateway's answer to `initialize` (the handshake revisions)."""

    protocolVersion: str
    capabilities: dict[str, Any]
    serverInfo: Implementation
    instructions: NotRequired[str]


class DiscoverResult(TypedDict):
    """The gateway's answer to `server/discover` (the stateless revisions); who answers is in `_meta`."""

    resultType: Literal["complete"]
    supportedVersions: list[str]
    capabilities: dict[str, Any]
    ttlMs: int
    cacheScope: Literal["private", "shared"]
    _meta: dict[str, Any]
    instructions: NotRequired[str]


def negotiate_legacy(requested: object, supported: tuple[str, ...] = LEGACY_VERSIONS) -> str:
    """The version to answer an `initialize` with: the client's own when supported, else our latest
    legacy revision (the client decides whether it can speak that)."""
    if isinstance(requested, str) and requested in supported:
        return requested
    return supported[-1]


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS
