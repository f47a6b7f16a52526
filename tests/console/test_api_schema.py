"""The REST API's OpenAPI schema (drf-spectacular): generated without a warning for any view (so
every endpoint's request and answer are described), valid OpenAPI, and served with its docs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_schema_generates_without_warnings_and_validates(tmp_path: Path) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out), "--validate", "--fail-on-warn")
    schema = yaml.safe_load(out.read_text())
    paths = schema["paths"]
    assert "/api/v1/tenants/{tenant}/backends/{backend_id}/spec" in paths
    assert schema["components"]["securitySchemes"]["adminToken"]["scheme"] == "bearer"
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert operation.get("responses"), f"{method.upper()} {path} describes no answer"


def test_the_schema_and_docs_are_served_to_signed_in_users(admin_client: Client, client: Client) -> None:
    assert client.get("/api/v1/schema").status_code in (401, 403)
    response = admin_client.get("/api/v1/schema")
    assert response.status_code == 200 and b"openapi: 3" in response.content
    docs: Any = admin_client.get("/api/v1/docs")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    assert b"cdn.jsdelivr" not in docs.content and b"unpkg" not in docs.content  # served from static/
