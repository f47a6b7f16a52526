"""`tool_search`: the tool the gateway itself offers on a virtual host (docs/tool-search.md).

An agent facing thousands of tools asks for the few it needs: `tool_search(query, also, k, expand)` answers
with the best `k` tools the caller may call, as the objects `tools/list` shows them (exposed names,
best first), shortened to fit a byte budget, and the tools they need first, in brief
(`tool_search_answers.py`). The tool index (`ports.ToolFinder`) is asked with the caller's view of the
host — every tool of a backend it sees whole, and the exact names otherwise — so a hidden tool can
never be found and a short view still fills `k`.

The name is the host's to choose (`ToolSearchConfig.name`), is answered before the naming contract
applies (`names.py`), and is listed and callable whatever the host's access policy says: it only
ever shows tools the caller may see. A host may list nothing else (`only`): its other tools remain
callable by name. Calls are audited, rate-limited and charged like any other `tools/call`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apps.gateway.pipeline.host_lists import HostLists
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import ToolFinder
from apps.gateway.pipeline.tool_search_answers import (
    ExpandUnknown,
    Shortened,
    answer_build,
    answer_bytes,
    answer_result,
)
from apps.gateway.pipeline.values import BackendInfo, BackendView, VirtualHostView
from apps.gateway.protocol import jsonrpc
from apps.kernel.identity import Principal
from apps.kernel.search_tool import (
    DEFAULT_K,
    MAX_ALSO,
    MAX_ALSO_CHARS,
    MAX_EXPAND,
    MAX_K,
    MAX_QUERY_CHARS,
    Found,
    search_tool,
)


@dataclass(frozen=True, slots=True)
class _View:
    """A caller's view of a host's tools, as the index is asked about it."""

    backends: tuple[int, ...]  # seen whole, under their own names
    restricted: tuple[tuple[int, tuple[str, ...]], ...]
    shown: Mapping[tuple[int, str], Mapping[str, Any]]  # (backend id, upstream name) -> listed entry


#: The backend a `tool_search` call is audited under (no real backend has id 0).
SEARCH_BACKEND_NAME = "gateway"


class ToolSearch:
    """Answers `tool_search` calls. Views are built once per merged list (a configuration, a
    backend's list or the caller's visibility changes: another list) and kept for the most recent
    hosts and callers."""

    _VIEWS_MAX = 256
    _ANSWERS_MAX = 1024
    _ANSWERS_MAX_BYTES = 64 * 1024 * 1024  # answers fit ANSWER_BUDGET (32 KiB) unless tools are expanded

    def __init__(self, lists: HostLists, finder: ToolFinder, counters: Counters | None = None) -> None:
        self._lists = lists
        self._counters = counters or Counters()
        self._finder = finder
        self._views: OrderedDict[int, tuple[object, _View]] = OrderedDict()
        # (host, caller's view, query, also, k, expand) -> the encoded answer and its size. A host is a
        # configuration snapshot's object and a view is one list of one caller class, so a new
        # configuration (a change of the index bumps it too), a changed backend list or another
        # caller never meets an old answer. The key's objects are held by the entry, so their ids
        # cannot be reused while it lives.
        self._answers: OrderedDict[tuple[int, int, str, tuple[str, ...], int, tuple[str, ...]],
                                   tuple[object, object, dict[str, Any], int]] = (
            OrderedDict())
        self._answer_bytes = 0
        # What the index found, by the answer's key without `expand`: asking to expand some of an
        # answer's prerequisites builds another answer from the same finding, without searching again.
        self._found: OrderedDict[tuple[int, int, str, tuple[str, ...], int], tuple[object, object, Found]] = OrderedDict()
        self._shortened = Shortened()

    def server(self, vhost: VirtualHostView) -> SearchServer:
        """The search tool of `vhost` as a tool server (`ports.ToolServer`), for `local.LocalTools`."""
        return SearchServer(self, vhost)

    async def result(self, vhost: VirtualHostView, principal: Principal, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The `CallToolResult` of a `tool_search` call; bad arguments are a result with `isError`."""
        query = arguments.get("query")
        k = arguments.get("k", DEFAULT_K)
        expand = arguments.get("expand", [])
        also = arguments.get("also", [])
        problem = _arguments_problem(arguments, query, k, expand)
        if problem is None and "also" in arguments:
            problem = _also_problem(also)
        if problem is not None:
            return _error(problem)
        assert isinstance(query, str) and isinstance(k, int) and isinstance(expand, list) and isinstance(also, list)
        view = await self._view(vhost, principal)
        alternatives = tuple(" ".join(text.split()) for text in also)
        key = (id(vhost), id(view), " ".join(query.split()), alternatives, k, tuple(sorted(set(expand))))
        cached = self._answers.get(key)
        if cached is not None and cached[0] is vhost and cached[1] is view:
            self._answers.move_to_end(key)
            self._counters.increment("cache", cache="tool_search", result="hit")
            return cached[2]
        self._counters.increment("cache", cache="tool_search", result="miss")
        found = await self._find(vhost, view, key[:5], query, alternatives, k)
        try:
            answer = answer_result(answer_build(found, view.shown, expand=expand, shortened=self._shortened))
        except ExpandUnknown as exc:
            return _error(str(exc))
        size = answer_bytes(answer)
        replaced = self._answers.pop(key, None)
        self._answer_bytes += size - (replaced[3] if replaced is not None else 0)
        self._answers[key] = (vhost, view, answer, size)
        while len(self._answers) > self._ANSWERS_MAX or self._answer_bytes > self._ANSWERS_MAX_BYTES:
            self._answer_bytes -= self._answers.popitem(last=False)[1][3]
        return answer

    async def _find(self, vhost: VirtualHostView, view: _View, key: tuple[int, int, str, tuple[str, ...], int],
                    query: str, also: tuple[str, ...], k: int) -> Found:
        cached = self._found.get(key)
        if cached is not None and cached[0] is vhost and cached[1] is view:
            self._found.move_to_end(key)
            return cached[2]
        found = Found([], {})
        if view.backends or view.restricted:
            found = await self._finder.find(
                tenant_id=vhost.tenant_id, backends=view.backends, restricted=view.restricted, query=query, k=k,
                also=also,
            )
        self._found[key] = (vhost, view, found)
        if len(self._found) > self._ANSWERS_MAX:
            self._found.popitem(last=False)
        return found

    async def _view(self, vhost: VirtualHostView, principal: Principal) -> _View:
        visible = await self._lists.visible_tools(vhost, principal)
        merged = visible.merged
        cached = self._views.get(id(merged))
        if cached is not None and cached[0] is merged:
            self._views.move_to_end(id(merged))
            return cached[1]
        shown: dict[tuple[int, str], Mapping[str, Any]] = {}
        per_backend: dict[int, list[str]] = {}
        for identity, item in zip(merged.identities, merged.items, strict=True):
            target = vhost.naming.route_tool(identity)
            backend = vhost.mounts.get(target[0]) if target is not None else None
            if backend is None or target is None:
                continue
            key = (backend.id, target[1])
            if key not in shown:  # a tool under several aliases: found once, shown under the first
                shown[key] = item
                per_backend.setdefault(backend.id, []).append(target[1])
        whole = tuple(sorted(b for b, names in per_backend.items() if len(names) == visible.listed.get(b, -1)))
        restricted = tuple((b, tuple(sorted(names))) for b, names in sorted(per_backend.items()) if b not in whole)
        view = _View(whole, restricted, shown)
        self._views[id(merged)] = (merged, view)
        if len(self._views) > self._VIEWS_MAX:
            self._views.popitem(last=False)
        return view


def _error(problem: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": problem}], "isError": True}


def _arguments_problem(arguments: Mapping[str, Any], query: object, k: object, expand: object) -> str | None:
    unknown = sorted(set(arguments) - {"query", "also", "k", "expand"})
    if unknown:
        return f"Unknown argument(s): {', '.join(unknown)}; tool_search takes 'query', 'also', 'k' and 'expand'."
    if not isinstance(query, str) or not query.strip():
        return "'query' must be a non-empty string: what you want to do, or the id of what you want to act on."
    if len(query) > MAX_QUERY_CHARS:
        return f"'query' is {len(query)} characters long; at most {MAX_QUERY_CHARS} are allowed."
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        return f"'k' must be an integer from 1 to {MAX_K}."
    if not isinstance(expand, list) or not all(isinstance(n, str) and 0 < len(n) <= MAX_QUERY_CHARS for n in expand):
        return (f"'expand' must be a list of tool names as the answer shows them (strings of 1 to {MAX_QUERY_CHARS} "
                "characters).")
    if len(expand) > MAX_EXPAND:
        return f"'expand' names {len(expand)} tools; at most {MAX_EXPAND} can be expanded at once."
    return None


def _also_problem(also: object) -> str | None:
    if not isinstance(also, list) or not 1 <= len(also) <= MAX_ALSO:
        return (f"'also' must be a list of 1 to {MAX_ALSO} other phrasings or keywords of what you want to do "
                "(or left out).")
    for i, text in enumerate(also):
        if not isinstance(text, str) or not text.strip():
            return f"'also'[{i}] must be a non-empty string: another phrasing or a few keywords."
        if len(text) > MAX_ALSO_CHARS:
            return f"'also'[{i}] is {len(text)} characters long; at most {MAX_ALSO_CHARS} are allowed."
    return None


class SearchServer:
    """One host's search tool as a `ports.ToolServer`."""

    def __init__(self, search: ToolSearch, vhost: VirtualHostView) -> None:
        assert vhost.tool_search is not None
        self._search = search
        self._vhost = vhost
        self._name = vhost.tool_search.name
        self.backend = BackendView(id=0, name=SEARCH_BACKEND_NAME, transport="", urls=(), timeout=30.0, kind="gateway",
                                   server=self)

    @property
    def info(self) -> BackendInfo:
        return BackendInfo(None, {"tools": {}}, (), {"tools": {}}, {}, None)

    def tools_json(self) -> bytes:
        return jsonrpc.dumps([search_tool(self._name)])

    def has_tool(self, name: str) -> bool:
        return name == self._name

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        headers: Sequence[tuple[str, str]] = (),
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        assert principal is not None
        return await self._search.result(self._vhost, principal, arguments)
