"""Spec uploads, their compilation and publication (the services)."""

from __future__ import annotations

import copy
import datetime

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.catalog.models import Backend, SpecVersion, Tool
from apps.catalog.services import backend_update
from apps.catalog.specs import (
    COMPILE_STALE_SECONDS,
    spec_upload,
    spec_version_compile,
    spec_versions_requeue,
)
from tests.backends.specs import as_json, as_yaml, service_spec, swagger_spec
from tests.factories import backend_factory, openapi_backend_factory

pytestmark = pytest.mark.django_db


def upload(backend: Backend, document: bytes, capture) -> SpecVersion:  # noqa: ANN001 - pytest-django fixture
    with capture(execute=True):
        version = spec_upload(backend=backend, document=document, filename="spec.json", uploaded_by="test")
    version.refresh_from_db()
    backend.refresh_from_db()
    return version


def tool_names(backend: Backend) -> list[str]:
    return sorted(Tool.objects.filter(backend=backend).values_list("name", flat=True))


def test_an_upload_compiles_and_publishes_every_operation(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    version = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    assert version.status == SpecVersion.Status.READY
    assert version.number == 1 and version.openapi_version == "3.0" and version.title == "Recording service"
    assert backend.active_spec == version
    assert version.tool_count == len(tool_names(backend)) == 13
    assert version.changes == {"added": tool_names(backend), "removed": [], "changed": []}
    assert version.security_schemes == [{"name": "key", "kind": "api_key_header", "parameter": "X-API-Key"}]
    assert version.errors == [] and len(version.sha256) == 64 and version.size > 0


def test_yaml_and_swagger_documents_compile(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    version = upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks)
    assert version.status == SpecVersion.Status.READY and version.openapi_version == "2.0"
    assert tool_names(backend) == ["getItem", "listItems"]


def test_a_reupload_reports_added_removed_and_changed_tools(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    first = service_spec()
    upload(backend, as_json(first), django_capture_on_commit_callbacks)
    second = copy.deepcopy(first)
    del second["paths"]["/text"]  # getText removed
    second["paths"]["/binary"]["get"]["summary"] = "Bytes, now described differently"  # getBinary changed
    second["paths"]["/new"] = {"get": {"operationId": "brandNew", "responses": {"200": {"description": "ok"}}}}
    second["paths"]["/forms"]["post"]["x-moved"] = True  # an extension only: no change a caller sees
    version = upload(backend, as_json(second), django_capture_on_commit_callbacks)
    assert version.number == 2
    assert version.changes == {"added": ["brandNew"], "removed": ["getText"], "changed": ["getBinary"]}
    assert "getText" not in tool_names(backend) and "brandNew" in tool_names(backend)
    assert set(Tool.objects.filter(backend=backend).values_list("spec_version", flat=True)) == {version.pk}


@pytest.mark.parametrize(
    ("document", "pointer", "words"),
    [
        (b"{not json", "", "JSON"),
        (b"openapi: 3.0.0\ninfo: [unclosed", "", "YAML"),
        (as_json({"openapi": "3.0.0", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"$ref": "https://example.com/remote.json#/Pet"}}}}}}}}}),
         "/paths/~1a/get/responses/200/content/application~1json/schema/$ref", "remote"),
        (as_json({"openapi": "3.0.0", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {
            "parameters": [{"$ref": "#/components/parameters/Nope"}], "responses": {}}}}}),
         "/paths/~1a/get/parameters/0/$ref", "Nope"),
        (as_json({"openapi": "9.9.9", "paths": {}}), "/openapi", "9.9.9"),
    ],
)
def test_a_broken_spec_fails_with_pointers_and_the_previous_version_keeps_serving(
    django_capture_on_commit_callbacks, document: bytes, pointer: str, words: str
) -> None:
    backend = openapi_backend_factory()
    good = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    before = tool_names(backend)
    bad = upload(backend, document, django_capture_on_commit_callbacks)
    assert bad.status == SpecVersion.Status.FAILED
    assert any(e["pointer"] == pointer and words.lower() in e["message"].lower() for e in bad.errors), bad.errors
    assert backend.active_spec == good
    assert tool_names(backend) == before


def test_uploads_are_refused_for_mcp_backends_and_empty_or_oversized_documents(settings) -> None:
    with pytest.raises(ValidationError, match="only OpenAPI backends"):
        spec_upload(backend=backend_factory(), document=as_json(service_spec()))
    backend = openapi_backend_factory()
    with pytest.raises(ValidationError, match="empty"):
        spec_upload(backend=backend, document=b"  \n")
    settings.GATEWAY_SPEC_MAX_BYTES = 100
    with pytest.raises(ValidationError, match="the limit is 100"):
        spec_upload(backend=backend, document=as_json(service_spec()))
    assert not SpecVersion.objects.filter(backend=backend).exists()


def test_compiling_twice_changes_nothing(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    version = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    ids = set(Tool.objects.filter(backend=backend).values_list("pk", flat=True))
    assert spec_version_compile(spec_version_id=version.pk).status == SpecVersion.Status.READY
    assert set(Tool.objects.filter(backend=backend).values_list("pk", flat=True)) == ids


def test_an_older_version_compiled_late_does_not_replace_a_newer_one(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    older = spec_upload(backend=backend, document=as_json(service_spec()))  # not compiled yet (no commit)
    newer = upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks)
    spec_version_compile(spec_version_id=older.pk)
    backend.refresh_from_db()
    older.refresh_from_db()
    assert backend.active_spec == newer and tool_names(backend) == ["getItem", "listItems"]
    assert older.status == SpecVersion.Status.READY and older.changes == {"superseded_by": newer.number}


def test_changing_the_compile_options_compiles_the_active_spec_again(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    spec = service_spec()
    spec["paths"]["/old"] = {"get": {"operationId": "oldButStillThereWithAVeryLongOperationName", "deprecated": True,
                                     "responses": {"200": {"description": "ok"}}}}
    upload(backend, as_json(spec), django_capture_on_commit_callbacks)
    assert "oldButStillThereWithAVeryLongOperationName" not in tool_names(backend)
    with django_capture_on_commit_callbacks(execute=True):
        backend_update(backend=backend, kind="openapi", transport=backend.transport, urls=[],
                       timeout_seconds=backend.timeout_seconds, base_url=backend.base_url,
                       tool_name_max_length=20, include_deprecated=True)
    backend.refresh_from_db()
    version = backend.active_spec
    assert version.number == 2 and version.uploaded_by == "recompile: compile options changed"
    long_names = [name for name in tool_names(backend) if name.startswith("oldButStill")]
    assert len(long_names) == 1 and len(long_names[0]) == 20
    assert version.changes["added"] == long_names and version.changes["removed"] == []


def test_nul_characters_in_a_spec_are_stored_safely(django_capture_on_commit_callbacks) -> None:
    # PostgreSQL refuses NUL in text and jsonb; a spec may still carry them (JSON "\u0000").
    backend = openapi_backend_factory()
    spec = service_spec(title="Evil\u0000title")
    spec["paths"]["/text"]["get"]["description"] = "before\u0000after"
    # (A NUL in a parameter's name is a compile error: tests/security/test_spec_smuggling.py.)
    spec["paths"]["/text"]["get"]["parameters"] = [
        {"name": "q", "in": "query", "schema": {"type": "string", "description": "nul\u0000here"}}]
    version = upload(backend, as_json(spec), django_capture_on_commit_callbacks)
    assert version.status == SpecVersion.Status.READY, version.errors
    assert version.title == "Evil\ufffdtitle"
    tool = Tool.objects.get(backend=backend, name="getText")
    assert "\u0000" not in tool.description and "before\ufffdafter" in tool.description
    assert "nul\ufffdhere" in str(tool.input_schema)


def test_a_publish_the_database_refuses_fails_the_version(django_capture_on_commit_callbacks, monkeypatch) -> None:
    from django.db import DataError

    from apps.catalog import specs

    backend = openapi_backend_factory()
    good = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)

    def refuse(**_: object) -> None:
        raise DataError("value too long")

    monkeypatch.setattr(specs, "_tools_insert", refuse)
    bad = upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks)
    assert bad.status == SpecVersion.Status.FAILED and "DataError: value too long" in bad.errors[0]["message"]
    assert backend.active_spec == good and len(tool_names(backend)) == 13


def test_integers_beyond_64_bits_compile_as_floats_with_a_warning(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    spec = swagger_spec()
    spec["paths"]["/items"]["get"]["parameters"][0]["maximum"] = 2**70
    version = upload(backend, as_yaml(spec), django_capture_on_commit_callbacks)
    assert version.status == SpecVersion.Status.READY, version.errors
    assert any("64 bits" in w["message"] for w in version.warnings)
    assert tool_names(backend) == ["getItem", "listItems"]


def test_a_version_is_compiled_by_one_worker_only(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    first = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    second = spec_upload(backend=backend, document=as_yaml(swagger_spec()))
    SpecVersion.objects.filter(pk=second.pk).update(status=SpecVersion.Status.COMPILING, started_at=timezone.now())
    # Another worker got the same message (a redelivery): it must leave the claimed version alone.
    assert spec_version_compile(spec_version_id=second.pk).status == SpecVersion.Status.COMPILING
    backend.refresh_from_db()
    assert backend.active_spec == first
    # The claiming worker died: once stale, the version is compiled again.
    SpecVersion.objects.filter(pk=second.pk).update(
        started_at=timezone.now() - datetime.timedelta(seconds=COMPILE_STALE_SECONDS + 1))
    again = spec_version_compile(spec_version_id=second.pk)
    assert again.status == SpecVersion.Status.READY
    assert again.changes["added"] == ["getItem", "listItems"] and len(again.changes["removed"]) == 13


def test_left_behind_versions_are_queued_again(django_capture_on_commit_callbacks, monkeypatch) -> None:
    from apps.catalog import tasks

    def broker_down(*_: object) -> None:
        raise ConnectionError("broker unreachable")

    backend = openapi_backend_factory()
    monkeypatch.setattr(tasks.spec_compile, "delay", broker_down)
    version = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    assert version.status == SpecVersion.Status.PENDING  # the upload stands
    monkeypatch.undo()
    assert spec_versions_requeue() == 0  # not yet a minute old
    SpecVersion.objects.filter(pk=version.pk).update(created_at=timezone.now() - datetime.timedelta(minutes=2))
    assert spec_versions_requeue() == 1  # eager in tests: compiled right here
    version.refresh_from_db()
    assert version.status == SpecVersion.Status.READY
