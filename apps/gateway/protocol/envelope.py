"""The 2026-07-28 per-request envelope: `_meta` fields and the routing headers that must mirror them
(spec 2026-07-28 basic/transports/streamable-http, SEP-2243). Checked in the spec's order: the
envelope is present, the headers agree with the body, then the version is one we serve."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps.gateway.protocol.errors import HeaderMismatch, InvalidParams, UnsupportedProtocolVersion
from apps.gateway.protocol.jsonrpc import Message, dumps
from apps.gateway.protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
)

#: Methods whose target travels in `Mcp-Name`, and the params field it mirrors (SEP-2243; the tasks
#: extension, SEP-2663, names the task so that follow-ups can be routed).
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}

_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$")
_PLAIN = re.compile(r"^[\x20-\x7e]*$")


def decode_header_value(value: str | None) -> str | None:
    """A header value as the client meant it: `=?base64?…?=` is decoded; a malformed one is None,
    so it never matches anything."""
    if value is None:
        return None
    match = _SENTINEL.match(value)
    if match is None:
        return value
    try:
        raw = base64.b64decode(match.group(1), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def encode_header_value(value: str) -> str:
    if _PLAIN.match(value) and value == value.strip() and not _SENTINEL.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


@dataclass(frozen=True, slots=True)
class ModernEnvelope:
    protocol_version: str
    client_capabilities: Any
    client_info: Any


def url_elicitation_supported(protocol_version: str, capabilities: Any) -> bool:
    """Whether a client can be asked to visit a URL (URL-mode elicitation, 2025-11-25 on): it says
    so with `elicitation.url` among its capabilities."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    return protocol_version >= "2025-11-25" and isinstance(elicitation, dict) and "url" in elicitation


def check_modern_request(message: Message, headers: Mapping[str, str]) -> ModernEnvelope:
    """Validate a 2026-07-28 request against its headers (lower-cased names)."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams(
            f"params._meta must be an object carrying {META_PROTOCOL_VERSION!r} and {META_CLIENT_CAPABILITIES!r}",
            http_status=400,
        )
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise InvalidParams(f"params._meta is missing {', '.join(missing)}", http_status=400)
    version = meta[META_PROTOCOL_VERSION]
    header_version = headers.get("mcp-protocol-version")
    if header_version is None or header_version != version:
        raise HeaderMismatch("MCP-Protocol-Version header does not match params._meta protocol version")
    if headers.get("mcp-method") != message.method:
        raise HeaderMismatch("Mcp-Method header does not match the request's method")
    field = NAME_BEARING.get(message.method or "")
    if field is not None:
        value = message.params.get(field)
        if value is not None and decode_header_value(headers.get("mcp-name")) != value:
            raise HeaderMismatch(f"Mcp-Name header does not match params.{field}")
    if not isinstance(version, str):
        raise InvalidParams("the protocol version in params._meta must be a string", http_status=400)
    if version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersion(
            "Unsupported protocol version",
            data={"supported": list(MODERN_VERSIONS), "requested": version},
        )
    capabilities, client_info = meta[META_CLIENT_CAPABILITIES], meta.get(META_CLIENT_INFO)
    problem = client_problem(capabilities, client_info, info_required=False)
    if problem is not None:
        name = META_CLIENT_CAPABILITIES if problem == "capabilities" else META_CLIENT_INFO
        raise InvalidParams(f"params._meta[{name!r}] must be {_SHAPES[problem]}", http_status=400)
    return ModernEnvelope(version, capabilities, client_info)


_SHAPES = {"capabilities": "an object", "clientInfo": 'an object with "name" and "version" strings'}


def client_problem(capabilities: object, client_info: object, *, info_required: bool) -> str | None:
    """Which of a client's capabilities and info (the spec's ClientCapabilities and Implementation)
    is malformed, if either: the gateway hands both on to every backend it initializes, whose
    refusal would otherwise surface later as an unavailable backend."""
    if not isinstance(capabilities, dict):
        return "capabilities"
    if client_info is None and not info_required:
        return None
    if not (isinstance(client_info, dict) and isinstance(client_info.get("name"), str)
            and isinstance(client_info.get("version"), str)):
        return "clientInfo"
    return None


def check_initialize_params(params: Mapping[str, Any], *, max_value_bytes: int = 0) -> None:
    """The `capabilities` and `clientInfo` of `initialize` params as the spec requires them
    (InitializeRequestParams), each at most `max_value_bytes` encoded as JSON (0: any size);
    InvalidParams naming the first that is missing, malformed or too big. Any `protocolVersion`
    is negotiated (one we do not serve gets our latest)."""
    problem = client_problem(params.get("capabilities"), params.get("clientInfo"), info_required=True)
    if problem is not None:
        raise InvalidParams(f'Invalid params: initialize needs "{problem}", {_SHAPES[problem]}')
    if max_value_bytes > 0:
        for name in ("capabilities", "clientInfo"):
            size = len(dumps(params[name]))
            if size > max_value_bytes:
                raise InvalidParams(
                    f'Invalid params: initialize "{name}" is {size} bytes as JSON; the gateway keeps at most '
                    f"{max_value_bytes} bytes of it for a session",
                    data={"field": name, "max_bytes": max_value_bytes},
                )


def is_modern_message(message: Message) -> bool:
    """Era detection per request: a `_meta` protocol version marks the stateless era."""
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
