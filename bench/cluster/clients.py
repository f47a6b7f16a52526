"""The harness's load: official-SDK clients (`mcp.Client`) of each protocol era and transport, making
mixed calls through the load balancer and checking every answer.

A client of a session-holding kind owns one gateway session, hence one backend session per backend:
its `increment` counter must advance by exactly one on every call, always on the same replica. A
stateless (2026-07-28) client shares the backend session the gateway holds for its key on each
instance, so only the answer's shape is checked for it.

To add a client kind, append a `ClientKind` to `KINDS` (or pass your own list to `run_load`);
`HTTP_SSE` is the legacy HTTP+SSE (2024-11-05) kind, used when `sse_served` says the gateway serves it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from bench.cluster.topology import BACKENDS

READ_TIMEOUT_SECONDS = 30.0
#: An HTTP+SSE client learns that an answer is lost (its POST was accepted by an instance that then
#: died, or failed and the SDK's writer stopped) only by waiting for it: not as long as the others.
SSE_READ_TIMEOUT_SECONDS = 5.0
T = TypeVar("T")
Connect = Callable[[str, str], AbstractAsyncContextManager[Client]]


@contextlib.asynccontextmanager
async def _streamable(url: str, key: str, mode: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=READ_TIMEOUT_SECONDS) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None,
                          read_timeout_seconds=READ_TIMEOUT_SECONDS) as client:
            yield client


def streamable_session(url: str, key: str) -> AbstractAsyncContextManager[Client]:
    """Legacy Streamable HTTP: initialize, MCP-Session-Id, the GET stream, DELETE at the end."""
    return _streamable(url, key, "legacy")


def stateless(url: str, key: str) -> AbstractAsyncContextManager[Client]:
    """2026-07-28: every request stands alone (`_meta` carries the protocol version)."""
    return _streamable(url, key, "2026-07-28")


class ResumableSse:
    """A legacy HTTP+SSE (2024-11-05) client: GET <host>/sse holds the stream, POSTs go to its
    `endpoint`. When a call fails (the instance holding its stream died, say), the next call first
    opens the stream again on the same session (`GET <host>/sse?session_id=`) and starts over with
    `initialize`, as the gateway lets such clients do; the failed call is not repeated."""

    def __init__(self, url: str, key: str) -> None:
        self._url = url
        self._headers = {"Authorization": f"Bearer {key}"}
        self._session_id: str | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._client: Client | None = None
        self.reconnects = 0

    async def _open(self) -> None:
        query = f"?session_id={self._session_id}" if self._session_id else ""
        transport = sse_client(f"{self._url}/sse{query}", headers=self._headers, timeout=READ_TIMEOUT_SECONDS,
                               on_session_created=self._created)
        self._stack = contextlib.AsyncExitStack()
        self._client = await self._stack.enter_async_context(
            Client(transport, mode="legacy", cache=None, read_timeout_seconds=SSE_READ_TIMEOUT_SECONDS))

    def _created(self, session_id: str) -> None:
        self._session_id = self._session_id or session_id

    @property
    def session_id(self) -> str | None:
        """The gateway session (its first part names the instance that opened the stream)."""
        return self._session_id

    async def _close(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):  # a broken stream may fail its own shutdown
                await stack.aclose()

    async def _call(self, call: Callable[[Client], Awaitable[T]]) -> T:
        if self._client is None:
            self.reconnects += 1
            await self._open()
        assert self._client is not None
        try:
            return await call(self._client)
        except Exception:
            await self._close()
            raise

    async def list_tools(self) -> Any:
        return await self._call(lambda client: client.list_tools())

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self._call(lambda client: client.call_tool(name, arguments))

    async def __aenter__(self) -> ResumableSse:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()


def http_sse(url: str, key: str) -> AbstractAsyncContextManager[Client]:
    return ResumableSse(url, key)  # type: ignore[return-value]  # a Client as far as the load uses one


@dataclass(frozen=True)
class ClientKind:
    name: str
    connect: Connect
    sessioned: bool  # holds its own backend sessions: counters advance by exactly one


STREAMABLE_SESSION = ClientKind("streamable-http session", streamable_session, sessioned=True)
STATELESS = ClientKind("stateless 2026-07-28", stateless, sessioned=False)
HTTP_SSE = ClientKind("http+sse", http_sse, sessioned=True)
KINDS: list[ClientKind] = [STREAMABLE_SESSION, STATELESS]


def sse_served(host_url: str, key: str) -> bool:
    """Whether GET <host>/sse answers 200 text/event-stream (the gateway serves HTTP+SSE)."""
    try:
        with httpx2.stream("GET", f"{host_url}/sse", headers={"Authorization": f"Bearer {key}"}, timeout=5) as response:
            return response.status_code == 200 and response.headers.get("content-type", "").startswith("text/event-stream")
    except httpx2.HTTPError:
        return False


@dataclass(frozen=True)
class CallRecord:
    kind: str
    client: int
    method: str  # "tools/call alpha-increment", "tools/list", "connect", "close"
    started: float  # time.monotonic()
    ms: float
    error: str | None = None


@dataclass
class Load:
    """Everything the clients did; `records` in completion order."""

    records: list[CallRecord] = field(default_factory=list)
    routing_hashes: dict[int, set[str | None]] = field(default_factory=dict)
    #: The HTTP+SSE clients by index, to see where their streams are and how often they reopened them.
    sse_clients: dict[int, ResumableSse] = field(default_factory=dict)

    def errors(self) -> list[CallRecord]:
        return [r for r in self.records if r.error is not None]

    def latencies(self, method: str = "tools/call", kind: str | None = None) -> list[float]:
        return [r.ms for r in self.records
                if r.error is None and r.method.startswith(method) and (kind is None or r.kind == kind)]


class _Checker:
    """What one client expects of its answers: per backend, the replica and the last count."""

    def __init__(self, sessioned: bool) -> None:
        self.sessioned = sessioned
        self.replica: dict[str, str] = {}
        self.count: dict[str, int] = {}
        self.uncertain: set[str] = set()  # the last increment failed: it may or may not have run

    def increment(self, backend: str, answer: dict[str, object]) -> str | None:
        replica, count = str(answer["replica"]), int(answer["count"])  # type: ignore[call-overload]
        if not replica.startswith(f"{backend}-"):
            return f"{backend}: answered by replica {replica}"
        if not self.sessioned:
            return None if count >= 1 else f"{backend}: count {count}"
        expected = self.count.get(backend, 0) + 1
        allowed = {expected, expected + 1} if backend in self.uncertain else {expected}
        self.uncertain.discard(backend)
        problem = None
        if self.replica.setdefault(backend, replica) != replica:
            problem = f"{backend}: session moved from {self.replica[backend]} to {replica}"
        elif count not in allowed:
            problem = f"{backend}: count {count}, expected {expected} (not the same backend session)"
        self.count[backend] = count
        return problem


async def _one_client(kind: ClientKind, index: int, url: str, key: str, prefixes: Sequence[str], calls: int | None,
                      until: float | None, load: Load) -> None:
    checker = _Checker(kind.sessioned)
    ops: list[tuple[str, str]] = [("increment", p) for p in prefixes] + [("list", ""), ("whoami", prefixes[-1])]
    hashes = load.routing_hashes.setdefault(index, set())

    def record(method: str, started: float, error: str | None) -> None:
        load.records.append(CallRecord(kind.name, index, method, started, (time.monotonic() - started) * 1000, error))

    phase, started = "connect", time.monotonic()
    try:
        async with kind.connect(url, key) as client:
            record("connect", started, None)
            if isinstance(client, ResumableSse):
                load.sse_clients[index] = client
            done = 0
            while (calls is None or done < calls) and (until is None or time.monotonic() < until):
                op, prefix = ops[done % len(ops)]
                done += 1
                backend = prefix.rstrip("-") or BACKENDS[0]
                method = "tools/list" if op == "list" else f"tools/call {prefix}{op}"
                started = time.monotonic()
                try:
                    if op == "list":
                        names = {tool.name for tool in (await client.list_tools()).tools}
                        wanted = {f"{p}{tool}" for p in prefixes for tool in ("increment", "whoami")}
                        problem = None if wanted <= names else f"tools/list lacks {sorted(wanted - names)}"
                    else:
                        result = await client.call_tool(f"{prefix}{op}", {})
                        if result.is_error:
                            raise RuntimeError(f"tool error: {result.content}")
                        answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
                        if op == "increment":
                            problem = checker.increment(backend, answer)
                        else:
                            hashes.add(answer["routing_hash"])
                            problem = None if str(answer["replica"]).startswith(f"{backend}-") else f"whoami: {answer}"
                except Exception as exc:  # noqa: BLE001 - every failure is a result to report
                    problem = f"{type(exc).__name__}: {exc}"
                    if op == "increment":
                        checker.uncertain.add(backend)
                record(method, started, problem)
            phase, started = "close", time.monotonic()
        record("close", started, None)
    except Exception as exc:  # noqa: BLE001 - opening or closing failed
        record(phase, started, f"{type(exc).__name__}: {exc}")


async def run_load(hosts: Sequence[tuple[str, Sequence[str]]], key: str, *, clients_per_kind: int,
                   calls: int | None = None, seconds: float | None = None,
                   kinds: Sequence[ClientKind] = KINDS, load: Load | None = None) -> Load:
    """Run `clients_per_kind` clients of every kind at once, spread over `hosts` (URL, tool-name
    prefixes), each making `calls` calls or calling for `seconds`. Returns what they did."""
    load = load if load is not None else Load()
    until = time.monotonic() + seconds if seconds is not None else None
    tasks = []
    for k, kind in enumerate(kinds):
        for n in range(clients_per_kind):
            index = k * clients_per_kind + n
            url, prefixes = hosts[index % len(hosts)]
            tasks.append(_one_client(kind, index, url, key, prefixes, calls, until, load))
    await asyncio.gather(*tasks)
    return load
