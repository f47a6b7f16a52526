"""Invoker core: arguments → HTTP request, HTTP response → CallToolResult (DB-free)."""

from __future__ import annotations

import base64

import orjson
import pytest

from apps.catalog.openapi import ArgumentError, Credential, InvokeError, build_request, shape_result
from apps.catalog.openapi.model import ArgumentBinding, CompiledTool, ToolBinding

from .helpers import oas3, run

ARRAY = ["blue", "black", "brown"]
OBJECT = {"R": 100, "G": 200, "B": 150}
SERVER = "https://api.example.com/v1"


def _tool(*args: ArgumentBinding, path: str = "/x", method: str = "GET", servers=(SERVER,), body_mode="none",
          body_content_type=None, body_required=False) -> CompiledTool:
    binding = ToolBinding(method, path, servers, args, body_mode, body_content_type, body_required)
    return CompiledTool("t", "", {}, None, {}, binding)


def _query(style, explode, value, **kw):
    tool = _tool(ArgumentBinding("color", "query", "color", False, style, explode, **kw))
    url = build_request(tool, {"color": value}).url
    return url.split("?", 1)[1] if "?" in url else ""


def _path(style, explode, value):
    tool = _tool(ArgumentBinding("color", "path", "color", True, style, explode), path="/c/{color}")
    return build_request(tool, {"color": value}).url.removeprefix(SERVER + "/c/")


# OpenAPI 3.1.1 "Style Examples" table.
@pytest.mark.parametrize(("style", "explode", "string", "array", "obj"), [
    ("matrix", False, ";color=blue", ";color=blue,black,brown", ";color=R,100,G,200,B,150"),
    ("matrix", True, ";color=blue", ";color=blue;color=black;color=brown", ";R=100;G=200;B=150"),
    ("label", False, ".blue", ".blue,black,brown", ".R,100,G,200,B,150"),
    ("label", True, ".blue", ".blue.black.brown", ".R=100.G=200.B=150"),
    ("simple", False, "blue", "blue,black,brown", "R,100,G,200,B,150"),
    ("simple", True, "blue", "blue,black,brown", "R=100,G=200,B=150"),
])
def test_path_styles(style, explode, string, array, obj):
    assert _path(style, explode, "blue") == string
    assert _path(style, explode, ARRAY) == array
    assert _path(style, explode, OBJECT) == obj


def test_path_empty_values_for_matrix_and_label():
    assert _path("matrix", False, "") == ";color"
    assert _path("label", False, "") == "."


@pytest.mark.parametrize(("style", "explode", "string", "array", "obj"), [
    ("form", False, "color=blue", "color=blue,black,brown", "color=R,100,G,200,B,150"),
    ("form", True, "color=blue", "color=blue&color=black&color=brown", "R=100&G=200&B=150"),
    ("spaceDelimited", False, "color=blue", "color=blue%20black%20brown", "color=R%20100%20G%20200%20B%20150"),
    ("pipeDelimited", False, "color=blue", "color=blue%7Cblack%7Cbrown", "color=R%7C100%7CG%7C200%7CB%7C150"),
])
def test_query_styles(style, explode, string, array, obj):
    assert _query(style, explode, "blue") == string
    assert _query(style, explode, ARRAY) == array
    assert _query(style, explode, OBJECT) == obj


def test_query_empty_deep_object_and_delimited_explode():
    assert _query("form", True, "") == "color="
    assert _query("form", False, "") == "color="
    assert _query("deepObject", True, OBJECT) == "color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150"
    assert _query("deepObject", True, {"a": {"b": 1}}) == "color%5Ba%5D%5Bb%5D=1"
    # explode: true is undefined for the delimited styles; it behaves like exploded form.
    assert _query("pipeDelimited", True, ARRAY) == "color=blue&color=black&color=brown"
    assert _query("tabDelimited", False, ARRAY) == "color=blue%09black%09brown"


def test_query_scalars_encoding_and_allow_reserved():
    assert _query("form", True, True) == "color=true"
    assert _query("form", True, 1.5) == "color=1.5"
    assert _query("form", True, -3) == "color=-3"
    assert _query("form", False, ["a,b", "c d"]) == "color=a%2Cb,c%20d"
    assert _query("form", True, "a/b:c?d&e=f#g+h") == "color=a%2Fb%3Ac%3Fd%26e%3Df%23g%2Bh"
    assert _query("form", True, "a/b:c?d&e=f#g+h", allow_reserved=True) == "color=a/b:c?d%26e%3Df%23g%2Bh"
    assert _query("form", True, "héllo") == "color=h%C3%A9llo"
    assert _query("form", True, [[1, 2]]) == "color=%5B1%2C2%5D"  # nested → JSON text


def test_path_percent_encoding_and_dot_segments():
    assert _path("simple", False, "a/b?c#d e%f") == "a%2Fb%3Fc%23d%20e%25f"
    assert _path("simple", False, ["a/b", "c,d"]) == "a%2Fb,c%2Cd"
    assert _path("simple", False, "..") == "%2E%2E"
    assert _path("simple", False, ".") == "%2E"
    assert _path("simple", False, "a.b~c-d_e") == "a.b~c-d_e"
    with pytest.raises(ArgumentError, match="must not be empty"):
        _path("simple", False, "")


def test_headers_and_cookies():
    tool = _tool(
        ArgumentBinding("h", "header", "X-Colors", False, "simple", False),
        ArgumentBinding("ho", "header", "X-Obj", False, "simple", True),
        ArgumentBinding("hi", "header", "X-Int", False, "simple", False),
        ArgumentBinding("c1", "cookie", "c1", False, "form", True),
        ArgumentBinding("c2", "cookie", "c2", False, "form", False),
        ArgumentBinding("c3", "cookie", "c3", False, "form", True),
    )
    req = build_request(tool, {"h": ARRAY, "ho": OBJECT, "hi": 7, "c1": "a b;c", "c2": ARRAY, "c3": ARRAY})
    assert req.headers == (
        ("X-Colors", "blue,black,brown"), ("X-Obj", "R=100,G=200,B=150"), ("X-Int", "7"),
        ("Cookie", "c1=a%20b%3Bc; c2=blue,black,brown; c3=blue; c3=black; c3=brown"),
    )
    assert req.url == SERVER + "/x" and req.body == b"" and req.content_type is None


@pytest.mark.parametrize("bad", ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b", ["ok", "x\ny"]])
def test_header_crlf_refused(bad):
    tool = _tool(ArgumentBinding("h", "header", "X-H", False, "simple", False))
    with pytest.raises(ArgumentError, match="CR, LF"):
        build_request(tool, {"h": bad})


def test_content_typed_parameters_are_json():
    tool = _tool(ArgumentBinding("f", "query", "filter", False, content_type="application/json"),
                 ArgumentBinding("h", "header", "X-F", False, content_type="application/json"))
    req = build_request(tool, {"f": {"a": 1}, "h": "x"})
    assert req.url == SERVER + "/x?filter=%7B%22a%22%3A1%7D"
    assert req.headers == (("X-F", '"x"'),)


def test_argument_errors_and_none():
    tool = _tool(ArgumentBinding("id", "path", "id", True, "simple", False),
                 ArgumentBinding("q", "query", "q", False, "form", True),
                 ArgumentBinding("r", "query", "r", True, "form", True), path="/i/{id}")
    with pytest.raises(ArgumentError, match="missing required arguments: id, r"):
        build_request(tool, {})
    with pytest.raises(ArgumentError, match="missing required argument: r"):
        build_request(tool, {"id": "1", "r": None})
    with pytest.raises(ArgumentError, match="unknown arguments: nope, zzz"):
        build_request(tool, {"id": "1", "r": 1, "zzz": 1, "nope": 2})
    with pytest.raises(ArgumentError, match="must be an object"):
        build_request(tool, ["id"])  # type: ignore[arg-type]
    assert build_request(tool, {"id": "1", "r": 2, "q": None}).url == SERVER + "/i/1?r=2"
    assert isinstance(ArgumentError("x"), InvokeError) and ArgumentError("x").message == "x"


def test_base_url_rules():
    absolute = _tool(path="/pets")
    assert build_request(absolute, {}).url == SERVER + "/pets"
    assert build_request(absolute, {}, base_url="http://localhost:8080/").url == "http://localhost:8080/pets"
    relative = _tool(path="/pets", servers=("/api/v3",))
    assert build_request(relative, {}, base_url="https://h.example").url == "https://h.example/api/v3/pets"
    with pytest.raises(InvokeError, match="base URL"):
        build_request(relative, {})
    with pytest.raises(InvokeError):
        build_request(_tool(servers=()), {})
    assert build_request(_tool(servers=()), {}, base_url="https://b").url == "https://b/x"


def _body_tool(content_type, mode="properties", required=False):
    if mode == "whole":
        args = (ArgumentBinding("body", "body", None, required),)
    else:
        args = (ArgumentBinding("name", "body", "name", False), ArgumentBinding("tags", "body", "tags", False),
                ArgumentBinding("meta", "body", "meta", False))
    return _tool(*args, method="POST", body_mode=mode, body_content_type=content_type, body_required=required)


def test_json_bodies():
    req = build_request(_body_tool("application/json"), {"name": "a", "tags": ["x"], "meta": None})
    assert orjson.loads(req.body) == {"name": "a", "tags": ["x"], "meta": None}
    assert req.content_type == "application/json" and ("Content-Type", "application/json") in req.headers
    assert build_request(_body_tool("application/json"), {}).body == b""  # optional, nothing given
    assert build_request(_body_tool("application/json", required=True), {}).body == b"{}"
    whole = _body_tool("application/vnd.api+json", "whole", required=True)
    req = build_request(whole, {"body": [1, 2]})
    assert req.body == b"[1,2]" and req.content_type == "application/vnd.api+json"
    with pytest.raises(ArgumentError, match="missing required argument: body"):
        build_request(whole, {})
    text = build_request(_body_tool("text/plain", "whole"), {"body": "héllo"})
    assert text.body == "héllo".encode() and text.content_type == "text/plain"


def test_form_urlencoded_body():
    req = build_request(_body_tool("application/x-www-form-urlencoded"),
                        {"name": "a b&c=d", "tags": ["x", "y"], "meta": {"k": 1}})
    assert req.body == b"name=a+b%26c%3Dd&tags=x&tags=y&meta=%7B%22k%22%3A1%7D"
    assert req.content_type == "application/x-www-form-urlencoded"


def test_multipart_body_with_fixed_and_counter_boundary():
    tool = _body_tool("multipart/form-data")
    req = build_request(tool, {"name": "a", "tags": ["x", "y"], "meta": {"k": 1}}, boundary="BND")
    assert req.content_type == "multipart/form-data; boundary=BND"
    assert req.body == (
        b'--BND\r\nContent-Disposition: form-data; name="name"\r\n\r\na\r\n'
        b'--BND\r\nContent-Disposition: form-data; name="tags"\r\n\r\nx\r\n'
        b'--BND\r\nContent-Disposition: form-data; name="tags"\r\n\r\ny\r\n'
        b'--BND\r\nContent-Disposition: form-data; name="meta"\r\nContent-Type: application/json\r\n\r\n'
        b'{"k":1}\r\n--BND--\r\n')
    first = build_request(tool, {"name": "a"}).content_type
    second = build_request(tool, {"name": "a"}).content_type
    assert first.startswith("multipart/form-data; boundary=mcpgw-boundary-") and first != second
    with pytest.raises(ArgumentError, match="boundary"):
        build_request(tool, {"name": "x--BNDy"}, boundary="BND")


@pytest.mark.parametrize(("credential", "url", "header"), [
    (Credential("api_key_header", "k1", name="X-Api-Key"), SERVER + "/x?q=1", ("X-Api-Key", "k1")),
    (Credential("api_key_query", "k 2", name="api_key"), SERVER + "/x?q=1&api_key=k%202", None),
    (Credential("api_key_cookie", "k3", name="sid"), SERVER + "/x?q=1", ("Cookie", "sid=k3")),
    (Credential("bearer", "tok"), SERVER + "/x?q=1", ("Authorization", "Bearer tok")),
    (Credential("basic", "p@ss", username="alice"), SERVER + "/x?q=1",
     ("Authorization", "Basic " + base64.b64encode(b"alice:p@ss").decode())),
])
def test_credentials(credential, url, header):
    tool = _tool(ArgumentBinding("q", "query", "q", False, "form", True),
                 ArgumentBinding("k", "header", "X-Api-Key", False, "simple", False))
    req = build_request(tool, {"q": 1, "k": "from-args"}, credential=credential)
    assert req.url == url
    if header is not None:
        assert header in req.headers
    if credential.kind == "api_key_header":
        assert ("X-Api-Key", "from-args") not in req.headers  # the credential wins
    assert "tok" not in repr(credential) and "p@ss" not in repr(credential)


def test_credential_validation_and_override_of_query():
    with pytest.raises(ValueError):
        Credential("api_key_header", "v")  # no name
    with pytest.raises(ValueError):
        Credential("bearer", "a\r\nb")
    with pytest.raises(ValueError):
        Credential("oauth", "v")  # type: ignore[arg-type]
    tool = _tool(ArgumentBinding("key", "query", "key", False, "form", True))
    req = build_request(tool, {"key": "mine"}, credential=Credential("api_key_query", "real", name="key"))
    assert req.url == SERVER + "/x?key=real"


def test_end_to_end_through_compiler():
    doc = oas3({"/stores/{store}/pets": {"post": {
        "operationId": "addPet",
        "parameters": [
            {"name": "store", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "ids", "in": "query", "style": "pipeDelimited", "explode": False,
             "schema": {"type": "array", "items": {"type": "integer"}}},
            {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
            {"name": "name", "in": "query", "schema": {"type": "string"}},
        ],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["name"], "properties": {"name": {"type": "string"},
                                                                   "age": {"type": "integer"}}}}}},
        "responses": {"200": {"description": "ok"}}}}}, servers=[{"url": "https://pets.example/api"}])
    tool = run(doc).tools[0]
    req = build_request(tool, {"store": "main st/1", "tags": ["a", "b"], "ids": [1, 2], "X-Trace": "t",
                               "name": "q", "body_name": "Rex", "age": 3}, credential=Credential("bearer", "T"))
    assert req.method == "POST"
    assert req.url == "https://pets.example/api/stores/main%20st%2F1/pets?tags=a&tags=b&ids=1%7C2&name=q"
    assert orjson.loads(req.body) == {"name": "Rex", "age": 3}
    assert req.headers == (("X-Trace", "t"), ("Authorization", "Bearer T"), ("Content-Type", "application/json"))
    with pytest.raises(ArgumentError, match="missing required arguments: store, body_name"):
        build_request(tool, {})
    assert build_request(tool, {"store": "s", "body_name": "R"}) is not None


def test_swagger2_collection_formats_end_to_end():
    doc = {"swagger": "2.0", "info": {"title": "T", "version": "1"}, "host": "h.example", "paths": {"/s": {"get": {
        "operationId": "s", "parameters": [
            {"name": fmt, "in": "query", "type": "array", "items": {"type": "string"}, "collectionFormat": fmt}
            for fmt in ("csv", "ssv", "tsv", "pipes", "multi")],
        "responses": {"200": {"description": "ok"}}}}}}
    tool = run(doc).tools[0]
    req = build_request(tool, {fmt: ["a", "b"] for fmt in ("csv", "ssv", "tsv", "pipes", "multi")})
    assert req.url == "https://h.example/s?csv=a,b&ssv=a%20b&tsv=a%09b&pipes=a%7Cb&multi=a&multi=b"


# --------------------------------------------------------------------------- shape_result

def test_shape_json_object_and_wrapped_values():
    result = shape_result(200, "application/json; charset=utf-8", b'{"a": 1}')
    assert result == {"content": [{"type": "text", "text": '{"a": 1}'}], "isError": False,
                      "structuredContent": {"a": 1}}
    assert shape_result(200, "application/problem+json", b"[1,2]")["structuredContent"] == {"result": [1, 2]}
    assert shape_result(201, "application/json", b"3")["structuredContent"] == {"result": 3}
    broken = shape_result(200, "application/json", b"{nope")
    assert "structuredContent" not in broken and broken["content"][0]["text"] == "{nope"


def test_shape_text_binary_and_empty():
    assert shape_result(200, "text/plain", b"hello")["content"] == [{"type": "text", "text": "hello"}]
    assert shape_result(200, "text/plain; charset=latin-1", "é".encode("latin-1"))["content"][0]["text"] == "é"
    assert shape_result(200, "application/xml", b"<a/>")["content"][0]["text"] == "<a/>"
    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    result = shape_result(200, "image/png", png)
    assert result["content"] == [{"type": "resource", "resource": {
        "uri": "openapi:response-body", "mimeType": "image/png", "blob": base64.b64encode(png).decode()}}]
    assert shape_result(200, "", b"\xff\xfe")["content"][0]["resource"]["mimeType"] == "application/octet-stream"
    assert shape_result(200, "", b"plain")["content"][0]["text"] == "plain"
    empty = shape_result(204, "", b"")
    assert empty["isError"] is False and "no body" in empty["content"][0]["text"]


def test_shape_truncation_and_errors():
    long = shape_result(200, "text/plain", b"x" * 50, max_text=10)["content"][0]["text"]
    assert long.startswith("x" * 10 + "\n") and "truncated" in long and "50" in long
    error = shape_result(404, "application/json", b'{"message": "no such pet"}')
    assert error["isError"] is True and "structuredContent" not in error
    assert error["content"][0]["text"] == 'HTTP 404 Not Found\n{"message": "no such pet"}'
    big = shape_result(500, "text/plain", b"e" * 10_000, max_error_text=100)["content"][0]["text"]
    assert big == "HTTP 500 Internal Server Error\n" + "e" * 100 + "\n… [truncated: the body has 10,000 bytes]"
    assert shape_result(503, "", b"")["content"][0]["text"] == "HTTP 503 Service Unavailable (empty response body)"
    assert shape_result(599, "", b"x")["content"][0]["text"] == "HTTP 599\nx"
