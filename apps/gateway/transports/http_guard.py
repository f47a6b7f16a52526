"""Limits on what a client may send before the application sees a request, enforced in the HTTP/1.1
parser under Daphne (Twisted's `HTTPChannel`), where the request line and headers are known and no
byte of the body has been read.

Twisted reads every request body to its end — into a temporary file past 100 kB — before Daphne
hands the request to the application, so a limit that the application checks comes after the disk
has filled, and a client that stops half-way is held for Twisted's 60 s idle timeout. Here:

- a body is refused by its route's limit (`route_limit`): a declared `Content-Length` over it is
  answered 413 as soon as the headers end, before any of the body is read; a chunked body as its
  decoded bytes cross it. The connection is closed after the answer.
- a spec upload may be as large as GATEWAY_SPEC_MAX_BYTES only when its credential (an admin token
  or a console session) belongs to an admin of the URL's tenant. Telling needs the database, so for
  such a request (and only when its body is over the ordinary limit) the connection stops reading
  while a worker thread checks the credential; the reactor serves everyone else meanwhile.
- the request line and headers must arrive within `headers_seconds` of the request's first byte
  (however slowly they trickle), and a body that stalls for `body_idle_seconds` is cut, both with
  408.

A request that has fully arrived is not timed here: streams and long calls run as long as they
need. An idle keep-alive connection is still closed after Twisted's timeout (60 s), above the 50 s
nginx keeps idle connections to the gateway (docker/nginx.conf)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote

from twisted.internet.threads import deferToThread
from twisted.protocols import basic
from twisted.web import http

log = logging.getLogger(__name__)

#: `(tenant slug, Authorization header, Cookie header)` -> whether the caller may send a large spec.
UploadCheck = Callable[[str, str, str], bool]

#: POST targets that take OpenAPI documents (apps/catalog/urls.py, apps/console/views/backend_specs.py),
#: with Django's `slug` converter for the tenant.
_SPEC_ROUTES = (
    re.compile(r"^/api/v1/tenants/(?P<tenant>[-a-zA-Z0-9_]+)/backends/[0-9]+/spec/?$"),
    re.compile(r"^/console/t/(?P<tenant>[-a-zA-Z0-9_]+)/backends/[0-9]+/spec/$"),
)
#: Room for a multipart upload's boundaries and part headers around a document of the full size.
_MULTIPART_SLACK = 64 * 1024
#: How long a refused client may go on sending (read and dropped) after its answer, so that it reads
#: the answer rather than a connection reset.
_LINGER_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class TransportLimits:
    #: Largest body on the MCP endpoint (`/mcp/...`): GATEWAY_MAX_BODY_BYTES.
    mcp_bytes: int
    #: Largest body anywhere else (REST API, console, admin): GATEWAY_API_MAX_BODY_BYTES.
    api_bytes: int
    #: Largest OpenAPI document a tenant's admin may upload: GATEWAY_SPEC_MAX_BYTES.
    spec_bytes: int
    #: From a request's first byte to the end of its headers: GATEWAY_HTTP_HEADERS_TIMEOUT_SECONDS.
    headers_seconds: float
    #: Longest silence within a body: GATEWAY_HTTP_BODY_IDLE_SECONDS.
    body_idle_seconds: float

    def __post_init__(self) -> None:
        for name in ("mcp_bytes", "api_bytes", "spec_bytes", "headers_seconds", "body_idle_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class RouteLimit:
    """The largest body a request target may carry; for spec uploads also the tenant whose admins
    may send up to `upload_bytes`."""

    limit: int
    spec_tenant: str | None = None
    upload_bytes: int = 0


def route_limit(limits: TransportLimits, method: bytes, target: bytes) -> RouteLimit:
    """The body limit of a request line's method and target, judged on the decoded path as Daphne
    routes it (`/%6Dcp/...` is the MCP endpoint too). A target that names no route of its own gets
    the ordinary limit, so a spelling this misses only ever gets less."""
    path = unquote(target.split(b"?", 1)[0].decode("latin-1"))
    if path.startswith("/mcp/"):
        return RouteLimit(limits.mcp_bytes)
    if method == b"POST":
        for pattern in _SPEC_ROUTES:
            if (match := pattern.match(path)) is not None:
                return RouteLimit(limits.api_bytes, match["tenant"], limits.spec_bytes + _MULTIPART_SLACK)
    return RouteLimit(limits.api_bytes)


def _answer(status: int, reason: str, message: str) -> bytes:
    body = message.encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1") + body


class GuardedChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel with the limits above. States: between requests (Twisted's
    keep-alive timeout), receiving headers (one deadline for all of them), receiving a body (an
    idle timeout), handling (no timeout), refused (reading and dropping until closed)."""

    def __init__(self, limits: TransportLimits, may_upload: UploadCheck) -> None:
        super().__init__()
        self._limits = limits
        self._may_upload = may_upload
        self._keepalive: float | None = None
        self._receiving = False
        self._in_headers = False
        self._refused = False
        self._lost = False
        self._held: list[bytes] | None = None
        self._limit = 0
        self._counted = 0
        self._deliver: Callable[[bytes], None] | None = None

    def connectionMade(self) -> None:
        self._keepalive = self.timeOut  # set by the factory before the connection is made
        super().connectionMade()

    def connectionLost(self, reason: Any) -> None:
        self._lost = True
        super().connectionLost(reason)

    def dataReceived(self, data: bytes) -> None:
        if self._refused:
            return
        starting = not self._receiving and not self._handlingRequest
        if starting:
            self._receiving = self._in_headers = True
        basic.LineReceiver.dataReceived(self, data)
        if not self._receiving or self._refused or self._held is not None:
            return  # complete, refused, or paused while a spec upload's credential is checked
        # Only a request still incomplete after this read is timed: most arrive whole in one read,
        # and moving the connection's timer sooner costs a reactor reschedule (measured: ~2 % of
        # a call's CPU). All headers are due within one deadline from the first read, which later
        # reads do not push back; a body's idle timer restarts with every read.
        if not self._in_headers:
            self.setTimeout(self._limits.body_idle_seconds)
        elif starting:
            self.setTimeout(self._limits.headers_seconds)

    def rawDataReceived(self, data: bytes) -> None:
        if self._refused:
            return
        if self._held is not None:
            self._held.append(data)  # at most what one read brought: the transport is paused
            return
        super().rawDataReceived(data)

    def allHeadersReceived(self) -> None:
        self._in_headers = False
        length = self.length  # None: chunked
        if length == 0:  # nothing to limit (most GETs)
            super().allHeadersReceived()
            return
        route = route_limit(self._limits, self._command, self._path)
        if route.spec_tenant is not None and (length is None or length > route.limit):
            self._check_upload(route, length)
            return
        self._admit(route.limit, length)

    def allContentReceived(self) -> None:
        if self._refused:
            return
        self._receiving = False
        # Twisted keeps the timeout it finds here to restore once the response is done: make that
        # the keep-alive one, not the body's idle timeout.
        self.timeOut = self._keepalive
        super().allContentReceived()

    def timeoutConnection(self) -> None:
        if self._receiving and not self._refused and self.transport is not None:
            self._refused = True
            if self._in_headers:
                message = f"Request Timeout: the request's headers did not arrive within {self._limits.headers_seconds:g} s"
            else:
                message = f"Request Timeout: the request's body stalled for {self._limits.body_idle_seconds:g} s"
            self.transport.write(_answer(408, "Request Timeout", message))
        super().timeoutConnection()

    def _admit(self, limit: int, length: int | None) -> None:
        if length is not None and length > limit:
            self._refuse(f"Payload Too Large: the limit is {limit} bytes")
            return
        if length is None and self._transferDecoder is not None:
            self._limit, self._counted = limit, 0
            self._deliver = self._transferDecoder.dataCallback
            self._transferDecoder.dataCallback = self._count
        super().allHeadersReceived()

    def _count(self, data: bytes) -> None:
        if self._refused or self._deliver is None:
            return
        self._counted += len(data)
        if self._counted > self._limit:
            self._refuse(f"Payload Too Large: the limit is {self._limit} bytes")
            return
        self._deliver(data)

    def _check_upload(self, route: RouteLimit, length: int | None) -> None:
        assert route.spec_tenant is not None
        headers = self.requests[-1].requestHeaders
        authorization = b", ".join(headers.getRawHeaders(b"authorization") or []).decode("latin-1")
        cookie = b"; ".join(headers.getRawHeaders(b"cookie") or []).decode("latin-1")
        if not authorization and not cookie:
            self._refuse(self._upload_refusal(route))
            return
        self._held = []
        self._networkProducer.pauseProducing()
        self.setTimeout(None)  # the wait is ours, not the client's; bounded below
        checked = deferToThread(self._may_upload, route.spec_tenant, authorization, cookie)
        # The channel's own clock (TimeoutMixin's callLater): the reactor Daphne installed.
        checked.addTimeout(self._limits.headers_seconds, SimpleNamespace(callLater=self.callLater))

        def failed(failure: Any) -> bool:
            log.error("checking a spec upload's credential failed: %s", failure.getErrorMessage())
            return False

        checked.addErrback(failed)
        checked.addCallback(lambda allowed: self._upload_checked(bool(allowed), route, length))
        checked.addErrback(lambda failure: log.error("a spec upload's answer failed: %s", failure.getErrorMessage()))

    def resumeProducing(self) -> None:
        # Twisted resumes reading when the client drains an earlier response; while a credential
        # is checked nothing may be read, or the held bytes would grow without limit.
        if self._held is None:
            super().resumeProducing()

    def _upload_checked(self, allowed: bool, route: RouteLimit, length: int | None) -> None:
        if self._lost:
            return
        held, self._held = b"".join(self._held or []), None
        self._networkProducer.resumeProducing()
        self.setTimeout(self._limits.body_idle_seconds)
        if not allowed:
            self._refuse(self._upload_refusal(route))
            return
        self._admit(route.upload_bytes, length)
        if held and not self._refused:
            super().rawDataReceived(held)

    def _upload_refusal(self, route: RouteLimit) -> str:
        return (f"Payload Too Large: the limit is {route.limit} bytes; OpenAPI documents up to "
                f"{self._limits.spec_bytes} bytes are taken from an admin of the tenant "
                "(an admin token or a signed-in console session)")

    def _refuse(self, message: str) -> None:
        """Answer 413 and close: the write side at once (the client sees the end of the answer),
        the connection once the client stops sending or after _LINGER_SECONDS."""
        self._refused = True
        self._receiving = False
        if self.transport is None:
            return
        self.transport.write(_answer(413, "Payload Too Large", message))
        half_close = getattr(self.transport, "loseWriteConnection", None)
        if half_close is None:
            self.loseConnection()
            return
        half_close()
        self.setTimeout(_LINGER_SECONDS)


def install(*, limits: TransportLimits, may_upload: UploadCheck) -> None:
    """Serve every HTTP connection Daphne accepts from now on through GuardedChannel. `may_upload`
    runs on a worker thread."""
    from daphne.http_protocol import HTTPFactory

    def protocol(factory: HTTPFactory) -> Any:
        return http._GenericHTTPChannelProtocol(GuardedChannel(limits, may_upload))  # type: ignore[attr-defined]

    HTTPFactory.protocol = protocol  # type: ignore[assignment]
