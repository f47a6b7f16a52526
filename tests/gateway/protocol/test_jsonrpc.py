import pytest

from apps.gateway.protocol.errors import InvalidRequest, ParseError
from apps.gateway.protocol.jsonrpc import Kind, parse_message


def test_request_notification_response() -> None:
    request = parse_message(b'{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"cursor":"x"}}')
    assert (request.kind, request.method, request.id, request.params) == (Kind.REQUEST, "tools/list", "a", {"cursor": "x"})
    note = parse_message(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert (note.kind, note.id) == (Kind.NOTIFICATION, None)
    response = parse_message(b'{"jsonrpc":"2.0","id":3,"result":{}}')
    assert (response.kind, response.id) == (Kind.RESPONSE, 3)
    error = parse_message(b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}')
    assert error.kind is Kind.RESPONSE


def test_the_raw_object_is_kept() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"k":[1,2]}}}'
    assert parse_message(raw).raw["params"]["_meta"] == {"k": [1, 2]}


@pytest.mark.parametrize("body", [b"", b"{", b"nul", b'{"a":1}x', b"\xff"])
def test_parse_errors(body: bytes) -> None:
    with pytest.raises(ParseError) as info:
        parse_message(body)
    assert info.value.code == -32700 and info.value.http_status == 400


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'"x"',
        b'{"jsonrpc":"2.0"}',
        b'{"jsonrpc":"2","id":1,"method":"x"}',
        b'{"jsonrpc":"2.0","id":{},"method":"x"}',
        b'{"jsonrpc":"2.0","id":false,"method":"x"}',
        b'{"jsonrpc":"2.0","id":1,"method":""}',
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}',
        b'{"jsonrpc":"2.0","id":1,"result":{},"error":{}}',
        b'{"jsonrpc":"2.0","id":1,"error":"bad"}',
    ],
)
def test_invalid_requests(body: bytes) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_message(body)
    assert info.value.code == -32600


def test_a_batch_parses_each_element_on_its_own() -> None:
    from apps.gateway.protocol.jsonrpc import parse_body

    batch = parse_body(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"bad":1},{"jsonrpc":"2.0","method":"n"}]')
    assert isinstance(batch, list) and len(batch) == 3
    assert batch[0].kind is Kind.REQUEST and isinstance(batch[1], InvalidRequest) and batch[2].kind is Kind.NOTIFICATION
    with pytest.raises(InvalidRequest):
        parse_body(b"[]")
