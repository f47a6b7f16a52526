"""Is a backend reachable, and what does it say it is? A short check of each replica for the console's
live health and "Test connection" (and the REST API's health and test-connection).

An MCP replica over Streamable HTTP gets an `initialize` (then its session, if any, is ended with a
DELETE); an HTTP+SSE replica must open its event stream and name its message endpoint; an OpenAPI
backend's base URL must answer HTTP at all (any status: the service's routes are the spec's, not
ours to guess). MCP checks carry the credential the gateway's own requests carry (the backend's
default egress credential), so a backend that wants one is checked as the gateway reaches it. Each check has a 2-second budget. Results are cached in Redis for a few seconds so
that several people watching the same page do not multiply the probes."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from functools import partial

import httpx

from apps.catalog.models import Backend
from apps.common.guarded_http import address_refusal, guarded_client
from apps.common.redis import redis_client
from apps.common.replica_health import ReplicaDown, replicas_down_read
from apps.gateway.adapters.egress_credentials import OAuthTokens, egress_plan_build

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 2.0
CACHE_SECONDS = 5
PROBE_PROTOCOL_VERSION = "2025-11-25"
_CLIENT_INFO = {"name": "mcp-gateway-console", "version": "1"}


@dataclass(frozen=True)
class ReplicaProbe:
    """One replica's answer. `up` with `server_name`/`server_version`/`protocol_version` from an MCP
    `initialize` (empty when the check was not an initialize); otherwise `error` says what failed."""

    url: str
    up: bool
    latency_ms: int
    error: str = ""
    server_name: str = ""
    server_version: str = ""
    protocol_version: str = ""
    detail: str = ""  # what an up replica said besides (an HTTP status, an SSE endpoint)


@dataclass(frozen=True)
class BackendProbe:
    backend_id: int
    checked_at: float
    replicas: list[ReplicaProbe] = field(default_factory=list)
    note: str = ""  # why nothing could be checked (an OpenAPI backend without a base URL)

    @property
    def up(self) -> bool:
        return any(r.up for r in self.replicas)


def _cache_key(backend_id: int) -> str:
    return f"catalog:probe:{backend_id}"


def backend_probe(*, backend: Backend, fresh: bool = False) -> BackendProbe:
    """Every replica of the backend checked now (`fresh`), or the result of a check of the last few
    seconds. Never raises for an unreachable or misbehaving backend: that is what the result says."""
    redis = redis_client()
    if not fresh:
        cached = redis.get(_cache_key(backend.pk))
        if cached is not None:
            data = json.loads(cached)
            return BackendProbe(
                backend_id=data["backend_id"], checked_at=data["checked_at"], note=data["note"],
                replicas=[ReplicaProbe(**r) for r in data["replicas"]],
            )
    probe = _probe(backend)
    redis.set(_cache_key(backend.pk), json.dumps(asdict(probe)), ex=CACHE_SECONDS)
    return probe


def gateways_down(*, backend: Backend, probe: BackendProbe) -> dict[str, ReplicaDown] | None:
    """The gateways' own view beside the probe: which replicas the gateway instances have marked
    down (since when, by which instance). None when they track none: an OpenAPI backend, or an MCP
    backend with one replica (each request tries it)."""
    if backend.kind != Backend.Kind.MCP or len(probe.replicas) < 2:
        return None
    return replicas_down_read(urls=[replica.url for replica in probe.replicas])


def _probe(backend: Backend) -> BackendProbe:
    now = time.time()
    if backend.kind == Backend.Kind.OPENAPI:
        if not backend.base_url:
            return BackendProbe(backend.pk, now, note="No base URL is set: the spec's servers are used.")
        return BackendProbe(backend.pk, now, [_check(backend.base_url, _http_reachable, backend=backend)])
    check = _sse_endpoint if backend.transport == Backend.Transport.SSE else _mcp_initialize
    check = partial(check, headers=dict(_gateway_headers(backend)))
    return BackendProbe(
        backend.pk, now, [_check(replica.url, check, backend=backend) for replica in backend.replicas.all()]
    )


def _gateway_headers(backend: Backend) -> tuple[tuple[str, str], ...]:
    """The headers of the gateway's own requests to the backend (its credential's default); none
    when it has no credential or it cannot be had (the backend's answer then says so)."""
    try:
        plan = egress_plan_build(
            backend=backend, tokens=OAuthTokens(None), allow_private=backend.tenant.private_networks_allowed
        )
        return asyncio.run(plan.headers(None)) if plan is not None else ()
    except Exception as exc:  # noqa: BLE001 - an OAuth token endpoint down, a secret unreadable: probe without
        log.info("backend %s: probing without its credential: %s", backend.name, exc)
        return ()


def _check(url: str, check: object, *, backend: Backend) -> ReplicaProbe:
    started = time.monotonic()
    try:
        # Probes connect where the gateway would: only to addresses the SSRF guard allows.
        with guarded_client(allow_private=backend.tenant.private_networks_allowed,
                            timeout=PROBE_TIMEOUT_SECONDS) as client:
            facts = check(client, url)  # type: ignore[operator]
    except httpx.TimeoutException:
        return ReplicaProbe(url, False, _since(started), f"no answer within {PROBE_TIMEOUT_SECONDS:g} s")
    except httpx.HTTPError as exc:
        if (refusal := address_refusal(exc)) is not None:
            return ReplicaProbe(url, False, _since(started), f"the address is not allowed: {refusal}")
        return ReplicaProbe(url, False, _since(started), f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    except ProbeError as exc:
        return ReplicaProbe(url, False, _since(started), str(exc))
    return ReplicaProbe(url, True, _since(started), **facts)


def _since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


class ProbeError(Exception):
    """The replica answered, but not as it should: the message says how."""


def _http_reachable(client: httpx.Client, url: str) -> dict[str, str]:
    response = client.get(url)
    return {"detail": f"HTTP {response.status_code}"}


def _mcp_initialize(client: httpx.Client, url: str, headers: dict[str, str]) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROBE_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": _CLIENT_INFO},
    }
    headers = {**headers, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            text = response.read().decode("utf-8", "replace")[:200].strip()
            raise ProbeError(f"HTTP {response.status_code} to initialize" + (f": {text}" if text else ""))
        message = _first_message(response)
        session = response.headers.get("mcp-session-id")
    if session:  # end the session we opened; a server that does not support DELETE may refuse it
        try:
            client.delete(url, headers={**headers, "mcp-session-id": session})
        except httpx.HTTPError:
            pass
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        raise ProbeError(f"initialize refused: {error.get('message', message['error'])} (code {error.get('code')})")
    result = message.get("result")
    if not isinstance(result, dict):
        raise ProbeError("initialize answered without a result")
    info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
    return {
        "server_name": str(info.get("name", "")), "server_version": str(info.get("version", "")),
        "protocol_version": str(result.get("protocolVersion", "")),
    }


def _first_message(response: httpx.Response) -> dict:
    """The JSON-RPC answer of a Streamable HTTP POST: the body itself, or the first `message` event
    of an event stream that carries an id (notifications before it are skipped)."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip()
    if content_type == "application/json":
        try:
            message = json.loads(response.read())
        except ValueError as exc:
            raise ProbeError(f"initialize answered invalid JSON: {exc}") from None
        if not isinstance(message, dict):
            raise ProbeError("initialize answered JSON that is not an object")
        return message
    if content_type != "text/event-stream":
        raise ProbeError(f"initialize answered {content_type or 'no content type'}, not MCP")
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line == "" and data:
            try:
                message = json.loads("\n".join(data))
            except ValueError:
                message = None
            data = []
            if isinstance(message, dict) and "id" in message:
                return message
    raise ProbeError("the event stream ended without an answer to initialize")


def _sse_endpoint(client: httpx.Client, url: str, headers: dict[str, str]) -> dict[str, str]:
    """An HTTP+SSE (2024-11-05) server names its message endpoint in the first event of its stream."""
    with client.stream("GET", url, headers={**headers, "Accept": "text/event-stream"}) as response:
        if response.status_code != 200:
            raise ProbeError(f"HTTP {response.status_code} opening the event stream")
        event = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "endpoint":
                return {"detail": f"message endpoint {line[5:].strip()}"}
    raise ProbeError("the event stream named no message endpoint")
