import pytest

from apps.gateway.protocol.envelope import (
    check_initialize_params,
    check_modern_request,
    decode_header_value,
    encode_header_value,
    is_modern_message,
    url_elicitation_supported,
)
from apps.gateway.protocol.errors import HeaderMismatch, InvalidParams, UnsupportedProtocolVersion
from apps.gateway.protocol.jsonrpc import classify

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _call(name: str = "add", meta: object = META) -> object:
    return classify({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "_meta": meta}})


def _headers(**extra: str) -> dict[str, str]:
    return {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "add", **extra}


def test_a_consistent_request_passes() -> None:
    envelope = check_modern_request(_call(), _headers())
    assert envelope.protocol_version == "2026-07-28" and envelope.client_capabilities == {}


@pytest.mark.parametrize("meta", [None, {}, {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, "x"])
def test_missing_envelope_is_invalid_params_400(meta: object) -> None:
    with pytest.raises(InvalidParams) as info:
        check_modern_request(_call(meta=meta), _headers())
    assert info.value.http_status == 400


@pytest.mark.parametrize(
    "headers",
    [
        {"mcp-protocol-version": "2025-11-25"},
        {"mcp-method": "tools/list"},
        {"mcp-name": "echo"},
        {"mcp-name": "=?base64?!!!?="},
    ],
)
def test_header_mismatch(headers: dict[str, str]) -> None:
    with pytest.raises(HeaderMismatch):
        check_modern_request(_call(), _headers(**headers))


def test_missing_version_header_is_a_mismatch() -> None:
    headers = _headers()
    del headers["mcp-protocol-version"]
    with pytest.raises(HeaderMismatch):
        check_modern_request(_call(), headers)


def test_unsupported_version_names_the_supported_ones() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2030-01-01"}
    with pytest.raises(UnsupportedProtocolVersion) as info:
        check_modern_request(_call(meta=meta), _headers(**{"mcp-protocol-version": "2030-01-01"}))
    assert info.value.data == {"supported": ["2026-07-28"], "requested": "2030-01-01"}
    assert (info.value.code, info.value.http_status) == (-32022, 400)


@pytest.mark.parametrize("value", ["add", "naïve ✓", " padded ", "=?base64?x?=", "line\nbreak"])
def test_header_values_round_trip(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.isascii() and "\n" not in encoded
    assert decode_header_value(encoded) == value


def test_era_detection() -> None:
    assert is_modern_message(_call())
    assert not is_modern_message(classify({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))


@pytest.mark.parametrize(("client", "message"), [
    ({"io.modelcontextprotocol/clientCapabilities": "all"}, "clientCapabilities'] must be an object"),
    ({"io.modelcontextprotocol/clientInfo": "me"}, 'clientInfo\'] must be an object with "name" and "version"'),
    ({"io.modelcontextprotocol/clientInfo": {"name": "me"}}, "clientInfo'] must be an object"),
])
def test_malformed_client_metadata_is_invalid_params_400(client: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParams, match=message) as info:
        check_modern_request(_call(meta={**META, **client}), _headers())
    assert info.value.http_status == 400


INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}


@pytest.mark.parametrize(("params", "message"), [
    ({}, 'needs "capabilities", an object'),
    ({"value": 9223372036854775807, "metadata": {"nested": "x"}}, 'needs "capabilities"'),
    ({**INITIALIZE, "capabilities": None}, 'needs "capabilities", an object'),
    ({**INITIALIZE, "capabilities": ["sampling"]}, 'needs "capabilities", an object'),
    ({k: v for k, v in INITIALIZE.items() if k != "clientInfo"}, 'needs "clientInfo", an object with "name"'),
    ({**INITIALIZE, "clientInfo": {"name": "c", "version": 1}}, 'needs "clientInfo"'),
])
def test_malformed_initialize_params_are_named(params: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        check_initialize_params(params)


def test_well_formed_initialize_params_pass() -> None:
    check_initialize_params(INITIALIZE)
    for version in ("1999-01-01", 20251125, None):  # negotiated, not refused
        check_initialize_params({**INITIALIZE, "protocolVersion": version})


@pytest.mark.parametrize(("version", "capabilities", "supported"), [
    ("2025-11-25", {"elicitation": {"url": {}}}, True),
    ("2026-07-28", {"elicitation": {"form": {}, "url": {}}}, True),
    ("2025-11-25", {"elicitation": {}}, False),  # form mode only: the spec's default
    ("2025-06-18", {"elicitation": {"url": {}}}, False),  # no URL mode before 2025-11-25
    ("2025-11-25", {"elicitation": True}, False),
    ("2025-11-25", None, False),
])
def test_a_client_can_be_sent_to_a_url_only_when_it_says_so(version: str, capabilities: object, supported: bool) -> None:
    assert url_elicitation_supported(version, capabilities) is supported
