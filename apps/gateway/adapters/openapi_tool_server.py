"""OpenAPI backends on the hot path: the `ToolServer` the pipeline calls, built per configuration
snapshot from the backend's active spec version.

Compiled tools are immutable per spec version, so a process loads each version's tools once
(`toolset_get`) and every snapshot shares them. Requests go through the gateway's pooled HTTP/1.1
client, one pool per backend and origin, per event loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import orjson
from django.conf import settings

from apps.catalog.models import Backend
from apps.catalog.openapi import (
    InvokeError,
    build_request,
    check_structured,
    shape_result,
    validate_arguments,
)
from apps.catalog.openapi.invoke import has_builder, prepare_builder
from apps.catalog.openapi.model import CompiledTool
from apps.catalog.openapi.outgoing import Exchange, exchanges, redacted
from apps.catalog.openapi.records import tool_from_record
from apps.catalog.selectors import tool_records_list
from apps.common.egress_headers import header_denied
from apps.gateway.adapters.egress_credentials import EgressPlan
from apps.gateway.adapters.http_pool import BodyTooLarge, HttpPool, RequestRefused, Target, UpstreamHttpError
from apps.gateway.pipeline.ports import UpstreamUnavailable
from apps.gateway.pipeline.values import BackendInfo
from apps.gateway.protocol.versions import LATEST_LEGACY, MODERN_VERSIONS
from apps.kernel.identity import Principal

log = logging.getLogger(__name__)

_MAX_TOOLSETS = 64
_ACCEPT = ("Accept", "application/json, */*;q=0.8")


def _tool_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _latin1(text: str) -> bool:
    """Whether HTTP/1.1 can carry `text` in its head (as the client encodes it: ISO-8859-1)."""
    if text.isascii():
        return True
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _wire_headers(
    built: Sequence[tuple[str, str]], added: Sequence[tuple[str, str]]
) -> list[tuple[str, str]] | str:
    """The headers to send, each name once: those the invoker built (the last of a name wins: the
    body's Content-Type and the Cookie of the cookie parameters come after header arguments of that
    name), then the gateway's `added` ones for names still missing. Reserved names are dropped.
    A string is the problem that keeps the request from being sent."""
    chosen: dict[str, tuple[str, str]] = {}
    for name, value in built:
        key = name.lower()
        if header_denied(key):  # the client writes them, or they would change framing or routing
            continue
        if not (_latin1(name) and _latin1(value)):
            return (f"The header {name!r} holds characters an HTTP header cannot carry (only ISO-8859-1 text "
                    "can be sent); nothing was sent.")
        chosen[key] = (name, value)
    for name, value in added:
        chosen.setdefault(name.lower(), (name, value))
    return list(chosen.values())


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ToolSet:
    """The tools of one spec version: compiled (for the invoker) and as `tools/list` entries."""

    tools: Mapping[str, CompiledTool]
    #: The `tools/list` entries, encoded once: EC2's 765 tools are 5 MB, 40-50 ms to encode.
    listing_json: bytes

    @classmethod
    def of(cls, tools: Sequence[CompiledTool]) -> ToolSet:
        listing = []
        for tool in tools:
            entry: dict[str, Any] = {"name": tool.name, "description": tool.description,
                                     "inputSchema": tool.input_schema}
            if tool.output_schema is not None:
                entry["outputSchema"] = tool.output_schema
            if tool.annotations:
                entry["annotations"] = tool.annotations
            listing.append(entry)
        return cls({tool.name: tool for tool in tools}, orjson.dumps(listing))


EMPTY_TOOLSET = ToolSet({}, b"[]")


class ToolSetCache:
    """Tool sets by spec version id, shared by every snapshot of the process: every set still in
    use somewhere (snapshots hold theirs), plus the `size` most recently used ones, so that a
    version dropped and taken up again soon is not loaded twice."""

    def __init__(self, size: int = _MAX_TOOLSETS) -> None:
        self._size = size
        self._recent: OrderedDict[int, ToolSet] = OrderedDict()
        # However many versions are in use, each is loaded once while any snapshot holds it.
        self._alive: weakref.WeakValueDictionary[int, ToolSet] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()  # snapshots are built in worker threads

    def get(self, version_id: int) -> ToolSet | None:
        with self._lock:
            found = self._recent.get(version_id)
            if found is None:
                found = self._alive.get(version_id)
            if found is not None:
                self._remember(version_id, found)
            return found

    def put(self, version_id: int, toolset: ToolSet) -> None:
        with self._lock:
            self._alive[version_id] = toolset
            self._remember(version_id, toolset)

    def _remember(self, version_id: int, toolset: ToolSet) -> None:
        self._recent[version_id] = toolset
        self._recent.move_to_end(version_id)
        while len(self._recent) > self._size:
            self._recent.popitem(last=False)


toolsets = ToolSetCache()


class OpenApiHttp:
    """Keep-alive pools for OpenAPI services, per backend and origin. Bound to one event loop."""

    def __init__(self) -> None:
        self._pools: dict[tuple[int, str, bool], HttpPool] = {}

    def pool(self, backend_id: int, url: str, *, allow_private: bool = False) -> tuple[HttpPool, str]:
        scheme, _, rest = url.partition("://")
        authority, _, path = rest.partition("/")
        key = (backend_id, f"{scheme}://{authority}", allow_private)
        pool = self._pools.get(key)
        if pool is None:
            target = Target.from_url(f"{scheme}://{authority}/")
            pool = self._pools[key] = HttpPool(target, allow_private=allow_private)
        return pool, "/" + path

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


_preparing: set[int] = set()
_codegen: ThreadPoolExecutor | None = None
_codegen_lock = threading.Lock()


def _codegen_executor() -> ThreadPoolExecutor:
    """One thread of its own: builder generation must not queue up in front of (or behind) the
    snapshot loads that use the loop's default executor."""
    global _codegen
    with _codegen_lock:
        if _codegen is None:
            _codegen = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openapi-codegen")
        return _codegen


def _prepare_soon(tool: CompiledTool) -> None:
    """Generate the tool's request builder in a worker thread: a called tool is likely called
    again, and generating costs milliseconds that must not block the event loop."""
    if id(tool) in _preparing:
        return
    _preparing.add(id(tool))
    future = asyncio.get_running_loop().run_in_executor(_codegen_executor(), prepare_builder, tool)
    future.add_done_callback(partial(_prepared, tool))


def _prepared(tool: CompiledTool, future: asyncio.Future[None]) -> None:
    _preparing.discard(id(tool))
    if future.cancelled():
        return
    if (error := future.exception()) is not None:
        # The tool keeps the generic builder (it is settled, so this is logged once per tool).
        log.warning("tool %s: generating its request builder failed, the generic one is used: %r", tool.name, error,
                    exc_info=error)


class OpenApiServer:
    """The `ToolServer` of one OpenAPI backend as of one configuration snapshot."""

    def __init__(
        self,
        *,
        backend_id: int,
        name: str,
        toolset: ToolSet,
        base_url: str | None,
        egress: EgressPlan | None,
        timeout: float,
        max_response_bytes: int,
        http: OpenApiHttp,
        title: str = "",
        api_version: str = "",
        allow_private: bool = False,
    ) -> None:
        self._backend_id = backend_id
        self._allow_private = allow_private
        self._name = name
        self._toolset = toolset
        self._base_url = base_url
        self._egress = egress
        self._timeout = timeout
        self._max_response = max_response_bytes
        self._http = http
        capabilities = {"tools": {}}
        self.info = BackendInfo(
            legacy_version=LATEST_LEGACY,
            legacy_capabilities=capabilities,
            modern_versions=MODERN_VERSIONS,
            modern_capabilities=capabilities,
            server_info={"name": name, "title": title or name, "version": api_version or "0"},
            instructions=None,
        )

    def tools_json(self) -> bytes:
        return self._toolset.listing_json

    def has_tool(self, name: str) -> bool:
        return name in self._toolset.tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        headers: Sequence[tuple[str, str]] = (),
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        tool = self._toolset.tools[name]
        credential = None if self._egress is None else await self._egress.credential(principal)
        try:
            validate_arguments(tool, arguments)
            request = build_request(tool, arguments, base_url=self._base_url, credential=credential)
        except InvokeError as exc:
            return _tool_result(exc.message)
        except UnicodeError:  # lone surrogates: JSON parsers refuse them, a hand-made call may not
            return _tool_result("the arguments hold text that cannot be encoded as UTF-8")
        if not has_builder(tool):
            _prepare_soon(tool)
        wire_headers = _wire_headers(request.headers, (_ACCEPT, *headers))
        if isinstance(wire_headers, str):
            return _tool_result(wire_headers)
        try:
            if not _latin1(request.url):  # e.g. a server URL with a non-ASCII host or path in the spec
                raise ValueError("characters outside ISO-8859-1")
            pool, target = self._http.pool(self._backend_id, request.url, allow_private=self._allow_private)
        except ValueError as exc:
            # From the spec's servers or the backend's base URL, not from the arguments. The
            # message names no address: callers of a tool need not know where its service runs.
            log.warning("backend %s: unusable service URL: %s", self._name, exc)  # the URL may hold a key
            return _tool_result("The service URL of this tool is not usable (it needs http or https, a host, "
                                "a valid port and ISO-8859-1 text); the backend's base URL or the spec's "
                                "servers need fixing.")
        exchange = None
        if (shown := exchanges.get()) is not None:  # the console's tool tester asks what was sent
            exchange = Exchange(redacted(replace(request, headers=tuple(wire_headers)), credential))
            shown.append(exchange)
        try:
            async with asyncio.timeout(self._timeout):
                response = await pool.request(request.method, target, wire_headers, request.body, timeout=self._timeout)
                if exchange is not None:
                    exchange.status = response.status
                body = await response.read(self._max_response)
        except BodyTooLarge:
            return _tool_result(
                f"The service's response is larger than {self._max_response:,} bytes, the gateway's limit; "
                "narrow the request (filters, page size)."
            )
        except RequestRefused as exc:
            # Strings of the spec (a tool stored before the compiler refused them) that would add
            # header lines or a second request: a defect of the tool, not of the service.
            log.warning("backend %s: tool %s: %s", self._name, name, exc)
            return _tool_result(f"This tool's request cannot be sent: {exc}. Nothing was sent; the backend's "
                                "spec needs fixing.")
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None
        result = shape_result(response.status, response.headers.get("content-type", ""), body)
        structured = result.get("structuredContent")
        if tool.output_schema is not None and not result["isError"]:
            problem = "the response has no JSON body" if structured is None else check_structured(tool, structured)
            if problem is not None:
                # Clients check structured results against outputSchema (the spec says they
                # MUST conform): report the mismatch with the body instead of breaking them.
                result.pop("structuredContent", None)
                result["isError"] = True
                result["content"].insert(0, {"type": "text", "text": (
                    f"The service answered HTTP {response.status}, but the response does not match the "
                    f"tool's output schema: {problem}"
                )})
        return result


def toolset_get(*, spec_version_id: int | None) -> ToolSet:
    """The tools of a spec version, loaded from the database on first use (call from a thread)."""
    if spec_version_id is None:
        return EMPTY_TOOLSET
    toolset = toolsets.get(spec_version_id)
    if toolset is None:
        toolset = ToolSet.of([tool_from_record(r) for r in tool_records_list(spec_version_id=spec_version_id)])
        toolsets.put(spec_version_id, toolset)
    return toolset


def openapi_server_build(
    *, backend: Backend, http: OpenApiHttp, egress: EgressPlan | None, allow_private: bool
) -> OpenApiServer:
    """The tool server of an OpenAPI backend (its `active_spec` fetched), authenticating with `egress`;
    `allow_private`: its tenant allows private addresses."""
    spec = backend.active_spec
    return OpenApiServer(
        backend_id=backend.pk,
        name=backend.name,
        toolset=toolset_get(spec_version_id=spec.pk if spec else None),
        base_url=backend.base_url or None,
        egress=egress,
        timeout=backend.timeout_seconds,
        max_response_bytes=settings.GATEWAY_OPENAPI_MAX_RESPONSE_BYTES,
        http=http,
        title=spec.title if spec else "",
        api_version=spec.api_version if spec else "",
        allow_private=allow_private,
    )
