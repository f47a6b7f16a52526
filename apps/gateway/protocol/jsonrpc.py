"""JSON-RPC 2.0 messages as the gateway sees them: parsed once, kept as the raw object so a
single-backend passthrough can forward the original bytes untouched."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import orjson

from apps.gateway.protocol.errors import ErrorObject, InvalidRequest, ParseError

RequestId = str | int


class ResultResponse(TypedDict):
    """A JSON-RPC response with a result, as the gateway sends it."""

    jsonrpc: Literal["2.0"]
    id: RequestId | None
    result: dict[str, Any]


class ErrorResponse(TypedDict):
    """A JSON-RPC error response, as the gateway sends it (`id` null: to a message it could not read)."""

    jsonrpc: Literal["2.0"]
    id: RequestId | None
    error: ErrorObject


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"


@dataclass(frozen=True, slots=True)
class Message:
    kind: Kind
    raw: dict[str, Any]
    method: str | None = None
    id: RequestId | None = None

    @property
    def params(self) -> dict[str, Any]:
        params = self.raw.get("params")
        return params if isinstance(params, dict) else {}


def _valid_id(value: object) -> bool:
    return (isinstance(value, str) or isinstance(value, int)) and not isinstance(value, bool)


def parse_body(body: bytes) -> Message | list[Message | InvalidRequest]:
    """Parse a POST body: one message, or a batch (a non-empty array, each element parsed on its own
    so one bad element does not spoil the rest). Raises ParseError for bytes that are not JSON and
    InvalidRequest for JSON that is neither."""
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"Parse error: {exc}") from None
    if not isinstance(raw, list):
        return classify(raw)
    if not raw:
        raise InvalidRequest("Invalid Request: an empty batch")
    batch: list[Message | InvalidRequest] = []
    for element in raw:
        try:
            batch.append(classify(element))
        except InvalidRequest as error:
            batch.append(error)
    return batch


def parse_message(body: bytes) -> Message:
    """Parse one JSON-RPC message; a batch is an InvalidRequest here."""
    parsed = parse_body(body)
    if isinstance(parsed, list):
        raise InvalidRequest("Invalid Request: JSON-RPC batches are not supported; send one message per POST")
    return parsed


def classify(raw: object) -> Message:
    if not isinstance(raw, dict):
        raise InvalidRequest("Invalid Request: a JSON-RPC message must be a JSON object")
    if raw.get("jsonrpc") != "2.0":
        raise InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"')
    method = raw.get("method")
    has_id = "id" in raw
    if method is not None:
        if not isinstance(method, str) or not method:
            raise InvalidRequest('Invalid Request: "method" must be a non-empty string')
        if not (method.isascii() and method.isprintable()) or " " in method:
            # Method names travel in HTTP headers (Mcp-Method) and upstream request lines.
            raise InvalidRequest('Invalid Request: "method" must be printable ASCII without spaces')
        params = raw.get("params")
        if params is not None and not isinstance(params, dict):
            raise InvalidRequest('Invalid Request: "params" must be an object')
        if not has_id:
            return Message(Kind.NOTIFICATION, raw, method=method)
        if not _valid_id(raw["id"]):
            raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
        return Message(Kind.REQUEST, raw, method=method, id=raw["id"])
    if has_id and (("result" in raw) != ("error" in raw)):
        if raw["id"] is not None and not _valid_id(raw["id"]):
            raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
        if "error" in raw and not isinstance(raw["error"], dict):
            raise InvalidRequest('Invalid Request: "error" must be an object')
        return Message(Kind.RESPONSE, raw, id=raw["id"])
    raise InvalidRequest('Invalid Request: expected a request ("method" and "id"), a notification or a response')


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def encoded(data: bytes) -> Any:
    """Already-encoded JSON, placed as is wherever `dumps` meets it (encode big, stable parts once)."""
    return orjson.Fragment(data)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def result_message(request_id: RequestId | None, result: dict[str, Any]) -> ResultResponse:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: ErrorObject) -> ErrorResponse:
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
