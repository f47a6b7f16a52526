"""The document checked against the rules of its OpenAPI version: which findings refuse a spec,
which only warn, where they point, and that checking fetches nothing (no database needed)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest

from apps.catalog.openapi import conformance
from apps.catalog.openapi.conformance import MAX_LISTED, spec_conformance

CATALOG = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "catalog" / "openapi"
OK = {"200": {"description": "ok"}}


def check(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    found = spec_conformance(orjson.dumps(doc), max_bytes=10**8)
    return [str(p) for p in found.errors], [str(p) for p in found.warnings]


def oas(version: str = "3.0.3", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"openapi": version, "info": {"title": "T", "version": "1"},
                           "paths": {"/a": {"get": {"responses": OK}}}}
    doc.update(fields)
    return {key: value for key, value in doc.items() if value is not None}


def swagger(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"swagger": "2.0", "info": {"title": "T", "version": "1"},
                           "paths": {"/a": {"get": {"responses": OK}}}}
    doc.update(fields)
    return {key: value for key, value in doc.items() if value is not None}


def test_a_valid_document_has_no_findings() -> None:
    assert check(oas()) == ([], [])
    assert check(swagger()) == ([], [])
    assert check(oas("3.1.0")) == ([], [])


@pytest.mark.parametrize(("doc", "error"), [
    (oas(info=None), "/info: the field 'info' is missing; OpenAPI 3.0 requires it"),
    (oas(info={"version": "1"}), "/info/title: the field 'title' is missing; OpenAPI 3.0 requires it"),
    (oas(info={"title": "T"}), "/info/version: the field 'version' is missing; OpenAPI 3.0 requires it"),
    (oas(info="Pets"), "/info: must be an object, not a string (OpenAPI 3.0)"),
    (oas(paths={"/a": {"get": {"summary": "no responses"}}}),
     "/paths/~1a/get/responses: the field 'responses' is missing; OpenAPI 3.0 requires it"),
    (oas(paths={"/a": {"get": {"responses": {}}}}),
     "/paths/~1a/get/responses: has no response; OpenAPI 3.0 requires at least one"),
    (oas(paths={"/a": {"get": {"responses": []}}}), "/paths/~1a/get/responses: must be an object, not an array (OpenAPI 3.0)"),
    (swagger(info={"title": "T"}), "/info/version: the field 'version' is missing; Swagger 2.0 requires it"),
    (swagger(paths={"/a": {"post": {}}}),
     "/paths/~1a/post/responses: the field 'responses' is missing; Swagger 2.0 requires it"),
    (swagger(paths={"/a": {"get": {"responses": {"x-note": 1}}}}),
     "/paths/~1a/get/responses: has no response; Swagger 2.0 requires at least one"),
    (oas("3.1.0", paths=None), "(document): needs one of 'components', 'paths' or 'webhooks' (OpenAPI 3.1)"),
])
def test_what_the_standard_requires_of_the_skeleton_is_an_error(doc: dict[str, Any], error: str) -> None:
    errors, _ = check(doc)
    assert errors == [error]


def test_31_made_responses_optional_and_paths_one_of_three() -> None:
    assert check(oas("3.1.0", paths={"/a": {"get": {"summary": "fire and forget"}}})) == ([], [])
    assert check(oas("3.1.0", paths=None, components={"schemas": {}})) == ([], [])


def test_a_document_without_paths_is_left_to_the_compiler() -> None:
    # The compiler refuses it in its own words ("document has no 'paths'"); said once is enough.
    assert check(oas(paths=None)) == ([], [])


@pytest.mark.parametrize(("doc", "warning"), [
    (oas(paths={"/a": {"get": {"responses": OK, "cache": True}}}),
     "/paths/~1a/get/cache: unknown field 'cache'; OpenAPI 3.0 does not define it here"),
    (oas(paths={"/a": {"get": {"responses": {"200": {}}}}}),
     "/paths/~1a/get/responses/200/description: the field 'description' is missing; OpenAPI 3.0 requires it"),
    (oas(info={"title": "T", "version": 1.0}), "/info/version: must be a string, not a number (1.0) (OpenAPI 3.0)"),
    (oas(paths={"/a": {"get": {"responses": OK, "parameters": [
        {"name": "q", "in": "query", "required": "false", "schema": {"type": "string"}}]}}}),
     "/paths/~1a/get/parameters/0/required: must be a boolean, not a string ('false') (OpenAPI 3.0)"),
    (oas(paths={"/a/{id}": {"get": {"responses": OK, "parameters": [
        {"name": "id", "in": "path", "schema": {"type": "string"}}]}}}),
     "/paths/~1a~1{id}/get/parameters/0/required: the field 'required' is missing; OpenAPI 3.0 requires it"),
    (oas(paths={"/a": {"post": {"responses": OK, "requestBody": {"content": {"application/json": {
        "schema": {"type": "object", "additionalProperties": "true"}}}}}}}),
     "/paths/~1a/post/requestBody/content/application~1json/schema/additionalProperties: "
     "must be an object or a boolean, not a string ('true') (OpenAPI 3.0)"),
    (swagger(paths={"/a": {"get": {"responses": OK, "parameters": [
        {"name": "q", "in": "query", "type": "string", "collectionFormat": "commas"}]}}}),
     "/paths/~1a/get/parameters/0/collectionFormat: must be one of 'csv', 'ssv', 'tsv', 'pipes' or 'multi', "
     "not a string ('commas') (Swagger 2.0)"),
])
def test_other_defects_are_warnings_at_their_own_pointer(doc: dict[str, Any], warning: str) -> None:
    assert check(doc) == ([], [warning])


def test_a_parameter_is_read_as_the_form_it_is_meant_as() -> None:
    # A parameter or a reference; a path, query, header or cookie parameter: only the form the
    # value is meant as speaks (not "'$ref' is a required property" for a plain parameter).
    errors, warnings = check(swagger(paths={"/a": {"get": {"responses": OK, "parameters": [
        {"name": "q", "type": "string"}]}}}))
    assert errors == [] and warnings == ["/paths/~1a/get/parameters/0/in: the field 'in' is missing; Swagger 2.0 requires it"]


def test_many_findings_are_listed_up_to_a_cap_and_counted() -> None:
    operation = {"responses": OK, **{f"field{i}": 1 for i in range(MAX_LISTED + 30)}}
    _, warnings = check(oas(paths={"/a": {"get": operation}}))
    assert len(warnings) == MAX_LISTED + 1
    assert warnings[-1] == "(document): … and 30 more findings of the OpenAPI 3.0 rules"


def test_duplicate_parameters_are_left_to_the_compiler() -> None:
    # The metaschema's uniqueItems compares objects pairwise (quadratic): it is not checked here.
    parameter = {"name": "q", "in": "query", "schema": {"type": "string"}}
    assert check(oas(paths={"/a": {"get": {"responses": OK, "parameters": [parameter, parameter]}}})) == ([], [])


def test_yaml_aliases_that_expand_past_the_limit_are_refused_unwalked() -> None:
    lines = ["openapi: 3.0.3", "info: {title: T, version: '1'}", "paths: {}", "x-bomb:", "  l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10^9 values
    found = spec_conformance("\n".join(lines).encode(), max_bytes=10**6)
    assert [p.message for p in found.errors] == [
        f"the document expands to more than {conformance.MAX_NODES:,} values (YAML aliases); it cannot be checked"]


def test_unreadable_or_unidentified_documents_have_no_findings() -> None:
    # The compiler says what is wrong with them; the rules cannot be chosen.
    assert spec_conformance(b"{not json", max_bytes=100) == conformance.Conformance()
    assert spec_conformance(b'{"openapi": "9.9"}', max_bytes=100) == conformance.Conformance()
    assert spec_conformance(b'{"info": {}}', max_bytes=100) == conformance.Conformance()


def test_checking_fetches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    connections: list[Any] = []

    def connect(self: socket.socket, address: Any) -> None:
        connections.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: connect(None, address))  # type: ignore[arg-type]
    # jsonschema-rs does its own I/O: what it would retrieve goes through the retriever it is given.
    monkeypatch.setattr(conformance, "_not_fetched", lambda uri: connections.append(uri))
    conformance._checker.cache_clear()  # the metaschemas are read, and their validators built, here
    remote = {"$ref": "http://127.0.0.1:9/schema.json"}
    for doc in (
        oas(paths={"/a": {"get": {"responses": {"200": {"$ref": "http://127.0.0.1:9/r.json"}},
                                  "parameters": [{"$ref": "file:///etc/passwd"}]}}},
            components={"schemas": {"A": remote, "B": {"$ref": "https://example.com/x.json#/B"}}}),
        swagger(definitions={"A": remote}),
        oas("3.1.0", components={"schemas": {"A": remote}}),
    ):
        check(doc)
    assert connections == []
    conformance._checker.cache_clear()  # not to keep the recording retriever


def test_every_real_catalog_spec_passes_with_at_most_warnings() -> None:
    # 430 real specs; only RestBench's two, real upstream specs that do not pass strict validation, warn.
    warned = []
    for path in sorted(p for p in CATALOG.rglob("*.json") if p.is_file()):
        found = spec_conformance(path.read_bytes(), max_bytes=10**9)
        assert found.errors == (), (path, found.errors)
        if found.warnings:
            warned.append(path.name)
    assert warned == ["spotify.json", "tmdb.json"]


def test_json_and_yaml_give_the_same_findings() -> None:
    import yaml

    doc = oas(info={"title": "T"}, paths={"/a": {"get": {"responses": OK, "cache": 1}}})
    as_json = spec_conformance(json.dumps(doc).encode(), max_bytes=10**6)
    as_yaml = spec_conformance(yaml.safe_dump(doc).encode(), max_bytes=10**6)
    assert as_json == as_yaml and as_json.errors and as_json.warnings
