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
    spec_version_publish,
    spec_version_rollback,
    spec_versions_requeue,
)
from apps.common.config_version import config_version_get
from tests.backends.specs import as_json, as_yaml, service_spec, swagger_spec
from tests.factories import backend_factory, openapi_backend_factory

pytestmark = pytest.mark.django_db


def upload(backend: Backend, document: bytes, capture, *, allow_removals: bool = False) -> SpecVersion:  # noqa: ANN001 - pytest-django fixture
    with capture(execute=True):
        version = spec_upload(backend=backend, document=document, filename="spec.json", uploaded_by="test",
                              allow_removals=allow_removals)
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
    bad = upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks, allow_removals=True)
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
    second = spec_upload(backend=backend, document=as_yaml(swagger_spec()), allow_removals=True)
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


# --- The rules of the standard (openapi/conformance.py), where the worker compiles -----------------

def test_a_spec_missing_what_the_standard_requires_fails_with_pointers(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    good = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    spec = service_spec()
    del spec["info"]
    del spec["paths"]["/text"]["get"]["responses"]
    bad = upload(backend, as_json(spec), django_capture_on_commit_callbacks)
    assert bad.status == SpecVersion.Status.FAILED and bad.tool_count == 0
    assert bad.errors == [
        {"pointer": "/info", "message": "the field 'info' is missing; OpenAPI 3.0 requires it"},
        {"pointer": "/paths/~1text/get/responses", "message": "the field 'responses' is missing; OpenAPI 3.0 requires it"},
    ]
    assert backend.active_spec == good and len(tool_names(backend)) == 13


def test_the_standards_warnings_join_the_compilers_each_place_once(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    spec = service_spec()
    spec["paths"]["/text"]["get"]["cache"] = True  # the compiler warns of it too, in its words
    spec["paths"]["/text"]["get"]["responses"]["200"] = {"content": {}}  # no description: the standard's only
    version = upload(backend, as_json(spec), django_capture_on_commit_callbacks)
    assert version.status == SpecVersion.Status.READY, version.errors
    assert [w for w in version.warnings if w["pointer"] == "/paths/~1text/get/cache"] == [
        {"pointer": "/paths/~1text/get/cache", "message": "unknown operation field 'cache'; ignored"}]
    assert {"pointer": "/paths/~1text/get/responses/200/description",
            "message": "the field 'description' is missing; OpenAPI 3.0 requires it"} in version.warnings


# --- The removal guard ---------------------------------------------------------------------------

def _config_version(backend: Backend) -> int:
    return config_version_get(tenant_id=backend.tenant_id)


def _without(spec: dict, *paths: str) -> dict:
    smaller = copy.deepcopy(spec)
    for path in paths:
        del smaller["paths"][path]
    return smaller


def test_a_version_removing_more_than_half_of_the_tools_is_held_and_the_old_one_keeps_serving(
    django_capture_on_commit_callbacks, clean_redis: None
) -> None:
    backend = openapi_backend_factory()
    first = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    served, moved = tool_names(backend), _config_version(backend)
    empty = service_spec()
    empty["paths"] = {}
    held = upload(backend, as_json(empty), django_capture_on_commit_callbacks)
    assert held.status == SpecVersion.Status.HELD and held.tool_count == 0 and held.errors == []
    assert held.changes == {"added": [], "removed": served, "changed": [], "served": 13}
    assert backend.active_spec == first and tool_names(backend) == served
    assert _config_version(backend) == moved  # the gateways keep their snapshot


def test_removing_half_or_less_is_published_and_more_with_allow_removals(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    spec = service_spec()
    upload(backend, as_json(spec), django_capture_on_commit_callbacks)
    paths = [path for path in spec["paths"] if path != "/pets/{petId}"]  # 2 tools there, 11 elsewhere
    half = upload(backend, as_json(_without(spec, *paths[:5])), django_capture_on_commit_callbacks)
    assert half.status == SpecVersion.Status.READY and backend.active_spec == half
    served = len(tool_names(backend))
    more = _without(spec, *paths)  # only getPet and deletePet are left
    assert len(set(tool_names(backend)) - {"getPet", "deletePet"}) * 2 > served
    held = upload(backend, as_json(more), django_capture_on_commit_callbacks)
    assert held.status == SpecVersion.Status.HELD and backend.active_spec == half
    allowed = upload(backend, as_json(more), django_capture_on_commit_callbacks, allow_removals=True)
    assert allowed.status == SpecVersion.Status.READY and backend.active_spec == allowed
    assert tool_names(backend) == ["deletePet", "getPet"]


def test_a_held_version_is_published_anyway_on_request(django_capture_on_commit_callbacks, clean_redis: None) -> None:
    backend = openapi_backend_factory()
    upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    held = upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks)
    assert held.status == SpecVersion.Status.HELD
    moved = _config_version(backend)
    with django_capture_on_commit_callbacks(execute=True):
        published = spec_version_publish(backend=backend, number=held.number)
    published.refresh_from_db()
    backend.refresh_from_db()
    assert published.pk == held.pk and published.status == SpecVersion.Status.READY and published.allow_removals
    assert backend.active_spec == published and tool_names(backend) == ["getItem", "listItems"]
    assert len(published.changes["removed"]) == 13 and "served" not in published.changes
    assert _config_version(backend) > moved
    with pytest.raises(ValidationError, match="is ready: only a held version waits to be published"):
        spec_version_publish(backend=backend, number=held.number)


def test_a_held_version_overtaken_by_a_later_one_is_not_published(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    held = upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks)
    later = upload(backend, as_json(service_spec(title="Later")), django_capture_on_commit_callbacks)
    with pytest.raises(ValidationError, match="version 3 has been published since version 2 was held"):
        spec_version_publish(backend=backend, number=held.number)
    held.refresh_from_db()
    backend.refresh_from_db()
    assert held.status == SpecVersion.Status.HELD and backend.active_spec == later


# --- Rollback ------------------------------------------------------------------------------------

def test_rolling_back_serves_an_earlier_versions_tools_again_as_a_new_version(
    django_capture_on_commit_callbacks, clean_redis: None
) -> None:
    backend = openapi_backend_factory()
    first = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    v1_tools = tool_names(backend)
    upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks, allow_removals=True)
    moved = _config_version(backend)
    with django_capture_on_commit_callbacks(execute=True):
        restored = spec_version_rollback(backend=backend, number=first.number, uploaded_by="alice")
    restored.refresh_from_db()
    backend.refresh_from_db()
    assert restored.number == 3 and restored.restores == 1 and restored.uploaded_by == "alice"
    assert restored.status == SpecVersion.Status.READY and backend.active_spec == restored
    assert bytes(restored.document) == bytes(first.document) and restored.filename == first.filename
    assert tool_names(backend) == v1_tools  # all 13 back, though the rollback removed both of v2's
    assert restored.changes["removed"] == ["getItem", "listItems"] and len(restored.changes["added"]) == 13
    assert set(Tool.objects.filter(backend=backend).values_list("spec_version", flat=True)) == {restored.pk}
    assert _config_version(backend) > moved  # the gateways read the new snapshot


def test_rollback_is_refused_to_a_version_that_is_not_ready_or_is_served(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    served = upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    failed = upload(backend, b"{not json", django_capture_on_commit_callbacks)
    with pytest.raises(ValidationError, match="version 2 is failed: only a version that compiled"):
        spec_version_rollback(backend=backend, number=failed.number)
    with pytest.raises(ValidationError, match="version 1 is the version being served"):
        spec_version_rollback(backend=backend, number=served.number)
    with pytest.raises(ValidationError, match="has no spec version 9"):
        spec_version_rollback(backend=backend, number=9)
    assert backend.spec_versions.count() == 2


def test_a_document_accepted_before_the_rules_can_be_rolled_back_to(django_capture_on_commit_callbacks) -> None:
    # Version 1 was published before the standard's rules were checked: rolling back to it must
    # restore what was served, not fail on them (they become warnings).
    backend = openapi_backend_factory()
    spec = service_spec()
    del spec["info"]
    old = SpecVersion.objects.create(
        backend=backend, number=1, status=SpecVersion.Status.READY, document=as_json(spec), sha256="0" * 64,
        size=1, tool_count=13)
    upload(backend, as_yaml(swagger_spec()), django_capture_on_commit_callbacks)
    assert upload(backend, as_json(spec), django_capture_on_commit_callbacks).status == SpecVersion.Status.FAILED
    with django_capture_on_commit_callbacks(execute=True):
        restored = spec_version_rollback(backend=backend, number=old.number)
    restored.refresh_from_db()
    assert restored.status == SpecVersion.Status.READY and restored.errors == []
    assert {"pointer": "/info", "message": "the field 'info' is missing; OpenAPI 3.0 requires it"} in restored.warnings
    assert len(tool_names(backend)) == 13


def test_a_recompile_after_the_options_change_is_published_whatever_it_renames(
    django_capture_on_commit_callbacks,
) -> None:
    backend = openapi_backend_factory()
    upload(backend, as_json(service_spec()), django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        backend_update(backend=backend, kind="openapi", transport=backend.transport, urls=[],
                       timeout_seconds=backend.timeout_seconds, base_url=backend.base_url,
                       tool_name_max_length=4, include_deprecated=False)
    backend.refresh_from_db()
    assert backend.active_spec.number == 2 and backend.active_spec.status == SpecVersion.Status.READY
    assert all(len(name) <= 4 for name in tool_names(backend))


def test_a_recompile_keeps_a_document_accepted_before_the_standards_rules(
    django_capture_on_commit_callbacks,
) -> None:
    backend = openapi_backend_factory()
    spec = service_spec()
    del spec["info"]
    old = SpecVersion.objects.create(
        backend=backend, number=1, status=SpecVersion.Status.READY, document=as_json(spec), sha256="0" * 64,
        size=1, tool_count=13)
    backend.active_spec = old
    backend.save(update_fields=["active_spec"])
    with django_capture_on_commit_callbacks(execute=True):
        backend_update(backend=backend, kind="openapi", transport=backend.transport, urls=[],
                       timeout_seconds=backend.timeout_seconds, base_url=backend.base_url,
                       tool_name_max_length=40, include_deprecated=False)
    backend.refresh_from_db()
    recompiled = backend.active_spec
    assert (recompiled.number, recompiled.status, recompiled.errors) == (2, SpecVersion.Status.READY, [])
    assert {"pointer": "/info", "message": "the field 'info' is missing; OpenAPI 3.0 requires it"} in recompiled.warnings
