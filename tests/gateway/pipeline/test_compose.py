"""Routed requests and what comes back from a backend on a multi-backend virtual host (`compose.py`),
and the event ids of merged GET streams."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from apps.gateway.pipeline.compose import (
    BackendMessages,
    backend_request_of,
    client_request_id,
    route,
    stream_event_id,
    stream_positions,
)
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol.errors import GatewayError
from apps.gateway.protocol.jsonrpc import classify
from apps.kernel.names import Naming

BACKENDS = {key: BackendView(n, key, "streamable-http", (f"http://{key}",), 5.0)
            for n, key in enumerate(["gateway", "gateway-one", "files"])}
VHOST = VirtualHostView(1, "acme", "main", MappingProxyType(BACKENDS),
                        MappingProxyType({"Sum.Numbers_v2": ("gateway", "add")}))


def request(method: str, params: dict[str, Any]) -> Any:
    return classify({"jsonrpc": "2.0", "id": 5, "method": method, "params": params})


@pytest.mark.parametrize(("method", "params", "map_key", "upstream"), [
    ("tools/call", {"name": "gateway-one-increment", "arguments": {"n": 1}}, "gateway-one",
     {"name": "increment", "arguments": {"n": 1}}),
    ("tools/call", {"name": "Sum.Numbers_v2"}, "gateway", {"name": "add"}),
    ("prompts/get", {"name": "gateway-greet"}, "gateway", {"name": "greet"}),
    ("resources/read", {"uri": "files-file:///etc/motd"}, "files", {"uri": "file:///etc/motd"}),
    ("resources/subscribe", {"uri": "gateway-one-test://x"}, "gateway-one", {"uri": "test://x"}),
    ("completion/complete", {"ref": {"type": "ref/resource", "uri": "files-db://{table}"}, "argument": {}}, "files",
     {"ref": {"type": "ref/resource", "uri": "db://{table}"}, "argument": {}}),
])
def test_a_routed_request_reaches_one_backend_in_its_own_terms(
    method: str, params: dict[str, Any], map_key: str, upstream: dict[str, Any]
) -> None:
    routed = route(VHOST, request(method, params), modern=False)
    assert (routed.map_key, routed.backend) == (map_key, BACKENDS[map_key])
    assert routed.message.params == upstream
    assert routed.message.id == 5 and routed.message.method == method
    assert b'"id":5' in routed.body


@pytest.mark.parametrize(("method", "params", "modern", "code", "data"), [
    ("tools/call", {"name": "gateway-oneincrement"}, False, -32602, {"name": "gateway-oneincrement"}),
    ("tools/call", {"name": "gateway-add"}, True, -32602, {"name": "gateway-add"}),  # aliased: its alias only
    ("tools/call", {}, False, -32602, None),
    ("prompts/get", {"name": "nokey-x"}, False, -32602, {"name": "nokey-x"}),
    ("resources/read", {"uri": "nokey-x://y"}, False, -32002, {"uri": "nokey-x://y"}),
    ("resources/read", {"uri": "nokey-x://y"}, True, -32602, {"uri": "nokey-x://y"}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "x"}}, False, -32602, None),
])
def test_a_name_that_routes_nowhere_is_a_specific_error(
    method: str, params: dict[str, Any], modern: bool, code: int, data: Any
) -> None:
    with pytest.raises(GatewayError) as raised:
        route(VHOST, request(method, params), modern=modern)
    assert raised.value.code == code
    if data is not None:
        assert raised.value.data == data


@pytest.mark.parametrize("backend_id", [0, 17, "abc", "with/slash", "gw/x/1", ""])
def test_backend_request_ids_round_trip(backend_id: Any) -> None:
    client_id = client_request_id("gateway-one", backend_id)
    assert client_id.startswith("gw/gateway-one/")
    assert backend_request_of(client_id) == ("gateway-one", backend_id)


@pytest.mark.parametrize("client_id", [1, None, "plain", "gw/", "gw/key", "gw/key/not-json", "gw/key/true",
                                       "gw/key/[1]"])
def test_ids_no_backend_made_are_not_mapped(client_id: Any) -> None:
    assert backend_request_of(client_id) is None


def messages(drop: bool = False) -> tuple[BackendMessages, list[str]]:
    heard: list[str] = []
    return BackendMessages(VHOST.naming, "gateway-one", heard.append, drop_list_changed=drop), heard


def test_a_backend_request_to_the_client_gets_an_id_naming_the_backend() -> None:
    translate, _ = messages()
    shown = translate({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}})
    assert shown is not None and shown["id"] == "gw/gateway-one/0"


def test_list_changed_is_heard_and_passed_on_or_left_to_the_hub() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    translate, heard = messages()
    assert translate(note) is note
    dropping, heard_too = messages(drop=True)
    assert dropping(note) is None
    assert heard == heard_too == ["notifications/tools/list_changed"]


def test_resource_updates_carry_the_uri_the_client_was_shown() -> None:
    translate, _ = messages()
    updated = translate({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://w"}})
    assert updated is not None and updated["params"] == {"uri": "gateway-one-test://w"}
    # A URI the client can never have been shown (no scheme) is not passed on.
    assert translate({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "w"}}) is None
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p", "progress": 1}}
    assert translate(progress) is progress


def test_uris_in_results_are_shown_in_client_terms() -> None:
    translate, _ = messages()
    read = translate({"jsonrpc": "2.0", "id": 1, "result": {"contents": [{"uri": "test://a", "text": "x"}]}})
    assert read is not None and read["result"]["contents"][0]["uri"] == "gateway-one-test://a"
    call = translate({"jsonrpc": "2.0", "id": 2, "result": {"content": [
        {"type": "text", "text": "t"},
        {"type": "resource_link", "uri": "test://b", "name": "b"},
        {"type": "resource", "resource": {"uri": "test://c", "text": "c"}},
    ]}})
    assert call is not None
    assert [item.get("uri") or item.get("resource", {}).get("uri") for item in call["result"]["content"]] == [
        None, "gateway-one-test://b", "gateway-one-test://c"]
    prompt = translate({"jsonrpc": "2.0", "id": 3, "result": {"messages": [
        {"role": "user", "content": {"type": "resource", "resource": {"uri": "test://d", "text": "d"}}}]}})
    assert prompt is not None and prompt["result"]["messages"][0]["content"]["resource"]["uri"] == "gateway-one-test://d"
    plain = {"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "t"}]}}
    assert translate(plain) is plain  # nothing to change: the very same message


def test_a_single_backend_host_with_aliases_leaves_uris_alone() -> None:
    naming = Naming.build(["only"], {"Fancy.Name": ("only", "add")})
    translate = BackendMessages(naming, "only", lambda method: None)
    message = {"jsonrpc": "2.0", "id": 1, "result": {"contents": [{"uri": "test://a"}]}}
    assert translate(message) is message


def test_merged_stream_event_ids_carry_every_backends_position() -> None:
    last = {"gateway": "17", "gateway-one": "abc/def=="}
    encoded = stream_event_id(last)
    assert encoded is not None and encoded.startswith("gw1.") and "\n" not in encoded
    assert stream_positions(encoded) == last
    assert stream_event_id({}) is None
    for foreign in (None, "", "17", "gw1.!!!", "gw1.WzFd"):  # "WzFd" is base64 of [1]
        assert stream_positions(foreign) == {}


def test_a_backend_cancelling_its_own_request_names_the_id_the_client_knows() -> None:
    translate, _ = messages()
    shown = translate({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "x"}})
    assert shown is not None and shown["params"] == {"requestId": "gw/gateway-one/3", "reason": "x"}
