"""Task ids on a host with several backends (docs/virtual-hosts.md, "Tasks"), and the names of the
task requests and capabilities of both eras. The id a backend gives
a task (2025-11-25 experimental tasks, and the 2026-07-28 tasks extension) is shown to the client as
one that names the backend, so that the requests that follow the task reach the backend that runs it.

An exposed id is `gwt.<base64url of [map key, upstream id]>.<tag>`, the tag an HMAC over the tenant,
the virtual host, the caller (its key) and the rest, keyed by a secret all instances share (like list
cursors): any instance routes it, and an id made up, altered, shown on another host or to another
caller routes nowhere. Nothing is stored."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Mapping

_PREFIX = "gwt."
_DOMAIN = b"mcp-gateway/task-id/v1"
_TAG_BYTES = 12
MAX_ID = 2048  # characters of an exposed id; longer is refused before any decoding


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TaskIds:
    def __init__(self, secret: bytes) -> None:
        self._key = hmac.digest(secret, _DOMAIN, "sha256")

    def _tag(self, tenant_id: int, vhost: str, caller: int, body: str) -> str:
        message = f"{tenant_id}\0{vhost}\0{caller}\0{body}".encode()
        return _b64(hmac.digest(self._key, message, "sha256")[:_TAG_BYTES])

    def expose(self, tenant_id: int, vhost: str, caller: int, map_key: str, upstream: str) -> str:
        """The id the client sees for the task `upstream` of the backend under `map_key`, made for
        the caller whose key id is `caller` (tasks are the caller's: the backend sees only the
        gateway, so it cannot tell two callers' tasks apart)."""
        body = _b64(json.dumps([map_key, upstream], separators=(",", ":")).encode())
        return f"{_PREFIX}{body}.{self._tag(tenant_id, vhost, caller, body)}"

    def route(self, tenant_id: int, vhost: str, caller: int, exposed: object) -> tuple[str, str] | None:
        """(map key, the backend's own id) of an exposed id; None for one this host never showed
        this caller."""
        if not isinstance(exposed, str) or len(exposed) > MAX_ID or not exposed.startswith(_PREFIX):
            return None
        body, dot, tag = exposed[len(_PREFIX) :].rpartition(".")
        if not dot or not exposed.isascii() or not hmac.compare_digest(tag, self._tag(tenant_id, vhost, caller, body)):
            return None  # (compare_digest refuses text that is not ASCII: no id of ours is)
        try:
            map_key, upstream = json.loads(_unb64(body))
        except (ValueError, TypeError, binascii.Error):  # signed by us, so only a bug gets here
            return None
        return (map_key, upstream) if isinstance(map_key, str) and isinstance(upstream, str) else None


#: Requests that name a task by `params.taskId`: 2025-11-25's, and the 2026-07-28 extension's.
TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/cancel"})
EXTENSION_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: The 2026-07-28 tasks extension (SEP-2663), as named in `capabilities.extensions`.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: Where a message names the task it belongs to.
RELATED_TASK = "io.modelcontextprotocol/related-task"


def offers_tasks(capabilities: object) -> bool:
    """Whether capabilities (a server's, or a stateless request's client capabilities) declare the
    2026-07-28 tasks extension."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions
