"""Messages of a virtual host whose names are rewritten (`VirtualHostView.composed`), on their way to
one backend and back (docs/virtual-hosts.md).

- A routed request (`names.ROUTED_METHODS`) reaches exactly one backend, with its identifier in the
  backend's own terms; an identifier that names nothing is -32602 (a resource: -32002 before 2026).
- Everything a backend sends back is shown in the client's terms (`BackendMessages`): resource URIs in
  results and in `notifications/resources/updated`, and the ids of the backend's own requests to the
  client (sampling, elicitation, roots), which become `gw/<map key>/<JSON of the id>` so two
  backends' `id: 0` never meet and the client's answer finds the backend that asked
  (`backend_request_of`). Client request ids and progress tokens go to a backend unchanged: the
  client keeps them unique within its session, and each backend session serves one client session.
- `list_changed` notifications make the backend's cached lists stale (`host_lists.py`).
- Event ids of what a session's client reads (a call's answer stream, the merged GET stream) name
  each backend's last event id (`stream_event_id`), so a client resuming with `Last-Event-ID`
  resumes every backend's stream where it was (`stream_positions`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.host_lists import HostLists
from apps.gateway.pipeline.task_ids import RELATED_TASK
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import GatewayError, InvalidParams, PolicyDenied
from apps.gateway.protocol.jsonrpc import Kind, Message, RequestId
from apps.kernel.identity import Principal
from apps.kernel.names import Naming

RESOURCE_NOT_FOUND = -32002  # handshake-era revisions; 2026-07-28 uses -32602 (SEP-2164)
_SERVER_ID_PREFIX = "gw/"
_EVENT_ID_PREFIX = "gw1."
_NAMED = {"tools/call": ("name", "tool"), "prompts/get": ("name", "prompt"), "resources/read": ("uri", "resource"),
          "resources/subscribe": ("uri", "resource"), "resources/unsubscribe": ("uri", "resource")}


class ResourceNotFound(GatewayError):
    code = RESOURCE_NOT_FOUND


@dataclass(frozen=True, slots=True)
class Routed:
    """A request on its way to one backend: `message` in the backend's terms, encoded as `body`."""

    map_key: str
    backend: BackendView
    message: Message
    exposed_name: str
    body: bytes


def route(vhost: VirtualHostView, message: Message, *, modern: bool, body: bytes = b"") -> Routed:
    """Where a routed request goes; raises InvalidParams (or ResourceNotFound) when it names nothing.
    `body`: the request as received, sent on unchanged when routing changes nothing in it (a single
    backend under a policy)."""
    method = message.method or ""
    params = message.params
    target = vhost.naming.route_request(method, params)
    field, what = _NAMED.get(method, ("ref", "completion reference"))
    value = params.get(field)
    if target is None or target[0] not in vhost.mounts:
        shown = value if isinstance(value, str) else jsonrpc.dumps(value).decode() if value is not None else ""
        if what == "resource" and not modern and isinstance(value, str):
            raise ResourceNotFound(f"Resource not found: {value}", data={"uri": value})
        if value is None:
            raise InvalidParams(f"Invalid params: {method} needs '{field}'")
        raise InvalidParams(f"Unknown {what}: {shown}", data={field: value})
    map_key, upstream_params = target
    exposed = value if isinstance(value, str) else ""
    if body and upstream_params == params:
        return Routed(map_key, vhost.mounts[map_key], message, exposed, body)
    raw = {**message.raw, "params": upstream_params}
    return Routed(map_key, vhost.mounts[map_key], Message(Kind.REQUEST, raw, method=method, id=message.id),
                  exposed, jsonrpc.dumps(raw))


async def admit(lists: HostLists, vhost: VirtualHostView, principal: Principal, routed: Routed) -> str:
    """Check a routed `tools/call` against the host's access policy (`policy.py`): a tool the caller
    cannot see is unknown, exactly like a missing one (-32602); a call the rules refuse with these
    arguments is PolicyDenied (-32003 naming the rule). Returns the id of the rule that allowed it
    ('' when the default did, or there is no policy)."""
    policy = vhost.policy
    if policy is None or routed.message.method != "tools/call":
        return ""
    name = routed.exposed_name
    # Unknown (None: the backend's list could not be had) is decided by the rules alone.
    if await lists.tool_listed(vhost, principal, name, routed.map_key) is False:
        raise InvalidParams(f"Unknown tool: {name}", data={"name": name})
    arguments = routed.message.params.get("arguments")
    decision = policy.decide(principal, name, routed.message.params["name"], arguments if isinstance(arguments, dict) else {})
    if not decision.allowed:
        raise PolicyDenied(f"Denied: {decision.reason}", data={"rule": decision.rule})
    return decision.rule or ""


def client_request_id(map_key: str, backend_id: RequestId) -> str:
    """The id a backend's request to the client carries downstream."""
    return f"{_SERVER_ID_PREFIX}{map_key}/{jsonrpc.dumps(backend_id).decode()}"


def backend_request_of(client_id: object) -> tuple[str, RequestId] | None:
    """(map key, the backend's own id) for the id of a client's answer; None if no backend made it."""
    if not isinstance(client_id, str) or not client_id.startswith(_SERVER_ID_PREFIX):
        return None
    map_key, slash, encoded = client_id[len(_SERVER_ID_PREFIX) :].partition("/")
    if not slash:
        return None
    try:
        backend_id = jsonrpc.loads(encoded)
    except ValueError:
        return None
    if isinstance(backend_id, bool) or not isinstance(backend_id, str | int):
        return None
    return map_key, backend_id


class BackendMessages:
    """Messages from the backend under `map_key` as the client must see them (see the module
    docstring). Returns the message (the same object when nothing changed), or None to drop it."""

    def __init__(
        self, naming: Naming, map_key: str, on_list_changed: Callable[[str], object], *, drop_list_changed: bool = False,
        tasks: Callable[[str], str] | None = None,
    ) -> None:
        """`on_list_changed(method)` hears every `list_changed`; with `drop_list_changed` the
        notification itself is left out (a merged stream gets it from `change_fanin.ListChanges`).
        `tasks(upstream_id)` is a task id as the client sees it (`task_ids.py`; None: as it is)."""
        self._naming = naming
        self._drop_list_changed = drop_list_changed
        self._map_key = map_key
        self._on_list_changed = on_list_changed
        self._rewrite_uris = naming.single_key is None
        self._tasks = tasks

    def __call__(self, message: dict[str, Any]) -> dict[str, Any] | None:
        shown = self._shown(message)
        return shown if shown is None or self._tasks is None else _with_task_ids(shown, self._tasks)

    def _shown(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:  # the backend's request to the client
                return {**message, "id": client_request_id(self._map_key, message["id"])}
            params = message.get("params")
            if method == "notifications/cancelled" and isinstance(params, Mapping) and "requestId" in params:
                # The backend cancels one of its own requests to the client, which knows it by our id.
                shown_id = client_request_id(self._map_key, params["requestId"])
                return {**message, "params": {**params, "requestId": shown_id}}
            if method.endswith("/list_changed"):
                self._on_list_changed(method)
                return None if self._drop_list_changed else message
            if isinstance(params, Mapping) and method == "notifications/resources/updated":
                exposed = self._naming.expose_notification(self._map_key, method, params)
                return None if exposed is None else message if exposed is params else {**message, "params": exposed}
            if method == "notifications/tasks" and self._rewrite_uris and isinstance(params, dict):
                shown_params = self._result(params)  # a task's status, its result maybe inlined
                return message if shown_params is params else {**message, "params": shown_params}
            return message
        result = message.get("result")
        if self._rewrite_uris and isinstance(result, dict):
            exposed_result = self._result(result)
            if exposed_result is not result:
                return {**message, "result": exposed_result}
        return message

    def _result(self, result: dict[str, Any]) -> dict[str, Any]:
        """URIs a result shows: `contents` of `resources/read`, and resource links and embedded
        resources in tool results (`content`) and prompt messages (`messages[].content`); and a
        task's result where the task inlines it (2026-07-28 `tasks/get`, `notifications/tasks`)."""
        changed = False
        out = dict(result)
        for field in ("contents", "content"):
            items = result.get(field)
            if isinstance(items, list):
                exposed = [self._item(item) for item in items]
                if any(a is not b for a, b in zip(exposed, items, strict=True)):
                    out[field] = exposed
                    changed = True
        messages = result.get("messages")
        if isinstance(messages, list):
            exposed_messages = [
                {**m, "content": c} if isinstance(m, dict) and (c := self._item(m.get("content"))) is not m.get("content") else m
                for m in messages
            ]
            if any(a is not b for a, b in zip(exposed_messages, messages, strict=True)):
                out["messages"] = exposed_messages
                changed = True
        inlined = result.get("result")
        if isinstance(inlined, dict) and "status" in result and (shown := self._result(inlined)) is not inlined:
            out["result"] = shown
            changed = True
        return out if changed else result

    def _item(self, item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        if isinstance(item.get("resource"), dict):  # an embedded resource
            inner = self._item(item["resource"])
            return item if inner is item["resource"] else {**item, "resource": inner}
        uri = item.get("uri")
        if isinstance(uri, str):
            exposed = self._naming.expose_uri(self._map_key, uri)
            if exposed is not None and exposed != uri:
                return {**item, "uri": exposed}
        return item


def with_related_task(message: dict[str, Any], rename: Callable[[str], str | None]) -> dict[str, Any]:
    """`message` with the task named in `_meta` of its result or params (`RELATED_TASK`: a client's
    answer to a request a task made) renamed by `rename` (None: left as it is)."""
    for part in ("result", "params"):
        body = message.get(part)
        if isinstance(body, dict) and (meta := _related_renamed(body, rename)) is not None:
            return {**message, part: {**body, "_meta": meta}}
    return message


def _related_renamed(body: dict[str, Any], rename: Callable[[str], str | None]) -> dict[str, Any] | None:
    """The `_meta` of `body` with its related task renamed; None when it names none (or `rename` keeps it)."""
    meta = body.get("_meta")
    related = meta.get(RELATED_TASK) if isinstance(meta, dict) else None
    if not (isinstance(related, dict) and isinstance(related.get("taskId"), str)):
        return None
    renamed = rename(related["taskId"])
    return None if renamed is None else {**meta, RELATED_TASK: {**related, "taskId": renamed}}


def _with_task_ids(message: dict[str, Any], expose: Callable[[str], str]) -> dict[str, Any]:
    """`message` with every task id a backend gave in it exposed: a created task's (`result.task`),
    a task's own (`tasks/get`, `tasks/cancel`, `notifications/tasks/status`), a list's
    (`tasks/list`), and the related task in `_meta` of any message."""
    for part in ("result", "params"):
        body = message.get(part)
        if isinstance(body, dict):
            exposed = _task_body(body, expose)
            if exposed is not body:
                return {**message, part: exposed}
    return message


def _task_body(body: dict[str, Any], expose: Callable[[str], str]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if isinstance(task_id := body.get("taskId"), str) and "status" in body:
        changes["taskId"] = expose(task_id)
    task = body.get("task")
    if isinstance(task, dict) and isinstance(task.get("taskId"), str):
        changes["task"] = {**task, "taskId": expose(task["taskId"])}
    tasks = body.get("tasks")
    if isinstance(tasks, list):
        changes["tasks"] = [{**t, "taskId": expose(t["taskId"])} if isinstance(t, dict) and isinstance(t.get("taskId"), str)
                            else t for t in tasks]
    if (meta := _related_renamed(body, expose)) is not None:
        changes["_meta"] = meta
    return {**body, **changes} if changes else body


def stream_event_id(positions: Mapping[str, str]) -> str | None:
    """The event id a session's client sees for a stream position: each backend's last event id,
    by map key (None for none)."""
    if not positions:
        return None
    return _EVENT_ID_PREFIX + base64.urlsafe_b64encode(jsonrpc.dumps(dict(positions))).decode().rstrip("=")


def stream_positions(value: str | None) -> dict[str, str]:
    """Each backend's last event id from an event id `stream_event_id` made; {} for anything else."""
    if not value or not value.startswith(_EVENT_ID_PREFIX):
        return {}
    token = value[len(_EVENT_ID_PREFIX) :]
    try:
        decoded = jsonrpc.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {key: value for key, value in decoded.items() if isinstance(key, str) and isinstance(value, str)}
