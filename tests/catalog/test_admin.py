"""The Django admin pages of the catalog's generated records: viewable, never edited there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.catalog.models import SpecVersion, Tool
from apps.catalog.specs import spec_upload
from tests.backends.specs import as_json, service_spec
from tests.factories import openapi_backend_factory

pytestmark = pytest.mark.django_db


def test_spec_versions_and_tools_are_listed_read_only(client: Client, django_capture_on_commit_callbacks) -> None:
    client.force_login(get_user_model().objects.create_superuser("root", "", "pw"))
    backend = openapi_backend_factory()
    with django_capture_on_commit_callbacks(execute=True):
        version = spec_upload(backend=backend, document=as_json(service_spec(title="Admin view")))
    tool = Tool.objects.filter(backend=backend).first()
    listing = client.get("/admin/catalog/specversion/")
    assert listing.status_code == 200 and backend.name in listing.content.decode()
    detail = client.get(f"/admin/catalog/specversion/{version.pk}/change/")
    assert detail.status_code == 200 and "/matrix/{point}" not in detail.content.decode()  # no document
    assert client.get(f"/admin/catalog/tool/{tool.pk}/change/").status_code == 200
    for model in ("specversion", "tool"):
        assert client.get(f"/admin/catalog/{model}/add/").status_code == 403
    assert client.post(f"/admin/catalog/specversion/{version.pk}/delete/", {"post": "yes"}).status_code == 403
    assert SpecVersion.objects.filter(pk=version.pk).exists()
