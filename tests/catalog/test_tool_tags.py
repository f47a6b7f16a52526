"""An OpenAPI tool keeps its operation's tags (what a host's curation selects by tag), and migration
catalog 0012 gives them to tools compiled before the tags were kept."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from django.apps import apps as django_apps

from apps.catalog.models import Tool
from apps.catalog.specs import spec_upload
from tests.backends.specs import as_json, service_spec
from tests.factories import openapi_backend_factory

pytestmark = pytest.mark.django_db


def _tagged_spec() -> dict:
    spec = service_spec(security=False)
    for path_item in spec["paths"].values():
        for operation in path_item.values():
            operation["tags"] = ["pets", "pets", 7, "read"] if "Pet" in operation["operationId"] else []
    return spec


def test_compiled_tools_keep_their_tags_and_the_migration_fills_old_ones(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    backend = openapi_backend_factory()
    with django_capture_on_commit_callbacks(execute=True):  # the compile is queued on commit
        spec_upload(backend=backend, document=as_json(_tagged_spec()), filename="service.json")
    tags = dict(Tool.objects.filter(backend=backend).values_list("operation_id", "tags"))
    assert tags["getPet"] == ["pets", "read"]  # strings only, once each, in order
    assert tags["matrixPoint"] == []
    Tool.objects.filter(backend=backend).update(tags=[])
    migration = importlib.import_module("apps.catalog.migrations.0012_tool_tags_fill")
    migration.tags_fill(django_apps, None)
    assert dict(Tool.objects.filter(backend=backend).values_list("operation_id", "tags")) == tags
