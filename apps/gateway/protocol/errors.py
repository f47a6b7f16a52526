"""Errors the gateway answers with. Each maps to exactly one JSON-RPC error and HTTP status
(docs/architecture.md); `HttpError`s are answered at the HTTP layer with no JSON-RPC id."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
POLICY_DENIED = -32003
BACKEND_UNAVAILABLE = -32004
RATE_LIMITED = -32005
#: A host's interceptor refused the call's request or its result (`data.interceptor` names it).
INTERCEPTOR_REFUSED = -32006
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: 2025-11-25 only: the request needs the user to visit URLs first (`data.elicitations`).
URL_ELICITATION_REQUIRED = -32042


class ErrorObject(TypedDict):
    """The `error` member of a JSON-RPC error response."""

    code: int
    message: str
    data: NotRequired[Any]


class GatewayError(Exception):
    """A JSON-RPC error answered by the gateway itself."""

    code: int = INTERNAL_ERROR
    http_status: int = 200

    def __init__(self, message: str, *, data: Any = None, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if http_status is not None:
            self.http_status = http_status

    def to_error(self) -> ErrorObject:
        error: ErrorObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(GatewayError):
    code = PARSE_ERROR
    http_status = 400


class InvalidRequest(GatewayError):
    code = INVALID_REQUEST
    http_status = 400


class MethodNotFound(GatewayError):
    code = METHOD_NOT_FOUND


class InvalidParams(GatewayError):
    code = INVALID_PARAMS


class HeaderMismatch(GatewayError):
    code = HEADER_MISMATCH
    http_status = 400


class MissingClientCapability(GatewayError):
    """The request needs a capability (or extension) its client did not declare (SEP-2575);
    `data.requiredCapabilities` names it, shaped like the client's capabilities."""

    code = MISSING_REQUIRED_CLIENT_CAPABILITY
    http_status = 400


class UnsupportedProtocolVersion(GatewayError):
    code = UNSUPPORTED_PROTOCOL_VERSION
    http_status = 400


class PolicyDenied(GatewayError):
    code = POLICY_DENIED


class RateLimited(GatewayError):
    code = RATE_LIMITED


class InterceptorRefused(GatewayError):
    code = INTERCEPTOR_REFUSED


class BackendUnavailable(GatewayError):
    code = BACKEND_UNAVAILABLE


class UrlElicitationRequired(GatewayError):
    code = URL_ELICITATION_REQUIRED


class HttpError(Exception):
    """Answered at the HTTP layer: a status, optional headers and an optional id-less JSON-RPC error."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        headers: tuple[tuple[str, str], ...] = (),
        code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.code = code
