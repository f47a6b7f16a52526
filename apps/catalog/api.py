"""The catalog's REST API (DRF): OpenAPI spec uploads, their version history (publishing a held
version, rolling back to an earlier one), and the backend's egress credential (write-only: its
secret is never answered).

Views are thin: each reads the request, calls one service or selector and shapes the answer.
Domain errors (Django `ValidationError`s from the services) answer 400 `{"detail": ...}`."""

from __future__ import annotations

import codecs
from urllib.parse import quote

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from apps.catalog import selectors
from apps.catalog.credentials import egress_credential_clear, egress_credential_set
from apps.catalog.models import Backend, SpecVersion
from apps.catalog.serializers import (
    EgressCredentialInputSerializer,
    EgressCredentialStateSerializer,
    SpecVersionDetailSerializer,
    SpecVersionSummarySerializer,
    spec_version_path,
)
from apps.catalog.specs import spec_upload, spec_version_publish, spec_version_rollback
from apps.tenants.api_base import TenantAPIView
from apps.tenants.models import Tenant

# Content types whose body is the document itself; multipart carries it in the field `file`.
RAW_SPEC_CONTENT_TYPES = ("application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/plain")
MULTIPART = "multipart/form-data"


class SpecUploadMultipartSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="The OpenAPI document (JSON or YAML).")
    allow_removals = serializers.BooleanField(required=False, help_text="As the query parameter.")


class SpecUploadOptionsSerializer(serializers.Serializer):
    """What an upload's query string (and a multipart body's other fields) may say."""

    filename = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False)
    allow_removals = serializers.BooleanField(required=False, default=False)


class CatalogAPIView(TenantAPIView):
    # The views read bodies themselves (see SpecUploadView); DRF's parsers are never consulted.
    parser_classes: list[type] = []


def _backend_or_404(tenant: Tenant, backend_id: int) -> Backend:
    backend = selectors.backend_get(tenant=tenant, backend_id=backend_id)
    if backend is None:
        raise Http404(f"no backend with id {backend_id}")
    return backend


def _detail(message: str, status_code: int) -> Response:
    return Response({"detail": message}, status=status_code)


def _too_large(limit: int) -> Response:
    return _detail(f"the document is larger than the limit of {limit:,} bytes", status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)


def _version_context(request: Request, backend: Backend) -> dict[str, object]:
    backend.refresh_from_db(fields=["active_spec"])
    active = backend.active_spec
    return {"request": request, "active_spec_id": backend.active_spec_id, "active_number": active and active.number}


def _accepted(request: Request, backend: Backend, version: SpecVersion) -> Response:
    """202 with the version as the database has it now (the request committed; with eager Celery
    it has compiled) and `Location` pointing at it."""
    current = selectors.spec_version_get(backend=backend, number=version.number) or version
    data = SpecVersionDetailSerializer(current, context=_version_context(request, backend)).data
    location = request.build_absolute_uri(spec_version_path(current))
    return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": location})


class SpecUploadView(CatalogAPIView):
    """`POST /api/v1/tenants/<tenant>/backends/<id>/spec`: upload a new spec version of an OpenAPI backend.

    The body is the document (JSON or YAML; see RAW_SPEC_CONTENT_TYPES; `?filename=` names it) or
    `multipart/form-data` with the document in the field `file`. Answers 202 with the version as
    it is in the database after commit (pending, or already ready/held/failed when compiled
    eagerly) and `Location` pointing at it; 413 over GATEWAY_SPEC_MAX_BYTES; 415 for other content
    types; 400 for what the service refuses (an MCP backend, an empty document).

    A version that would remove more than half of the tools served is `held` (compiled, not
    published) unless `allow_removals=true` (query parameter, or a multipart field)."""

    @extend_schema(
        request={
            "application/json": OpenApiTypes.OBJECT, "application/yaml": OpenApiTypes.STR,
            "multipart/form-data": SpecUploadMultipartSerializer,
        },
        parameters=[
            OpenApiParameter("filename", OpenApiTypes.STR, description="Names a raw document."),
            OpenApiParameter("allow_removals", OpenApiTypes.BOOL, description=(
                "Publish even when the version removes more than half of the tools served (else it is held).")),
        ],
        responses={202: SpecVersionDetailSerializer},
    )
    def post(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        limit: int = settings.GATEWAY_SPEC_MAX_BYTES
        django_request = request._request
        content_type = django_request.content_type or ""
        given = dict(request.query_params.items())
        if content_type == MULTIPART and "allow_removals" in django_request.POST:
            given["allow_removals"] = django_request.POST["allow_removals"]
        options = SpecUploadOptionsSerializer(data=given)
        if not options.is_valid():
            problems = [f"{field}: {message}" for field, messages in options.errors.items() for message in messages]
            return _detail("; ".join(problems), status.HTTP_400_BAD_REQUEST)
        if content_type == MULTIPART:
            upload = django_request.FILES.get("file")
            if upload is None:
                return _detail("send the document in the multipart field 'file'", status.HTTP_400_BAD_REQUEST)
            if upload.size is not None and upload.size > limit:
                return _too_large(limit)
            document, filename = upload.read(limit + 1), upload.name or ""
        elif content_type in RAW_SPEC_CONTENT_TYPES:
            declared = django_request.META.get("CONTENT_LENGTH") or ""
            if declared.isdigit() and int(declared) > limit:
                return _too_large(limit)
            # Read the stream ourselves, bounded: `request.body` would refuse anything over
            # DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB), far below real specs, and that global limit
            # protects every other form and JSON view.
            document, filename = django_request.read(limit + 1), options.validated_data["filename"]
        else:
            accepted = ", ".join([*RAW_SPEC_CONTENT_TYPES, MULTIPART])
            return _detail(
                f"unsupported content type {content_type or '(none)'!r}; send the document as one of: {accepted}",
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            )
        if len(document) > limit:
            return _too_large(limit)
        try:
            version = spec_upload(
                backend=backend, document=document, filename=filename, uploaded_by=request.user.get_username(),
                allow_removals=options.validated_data["allow_removals"],
            )
        except ValidationError as exc:
            return _detail("; ".join(exc.messages), status.HTTP_400_BAD_REQUEST)
        return _accepted(request, backend, version)


class SpecVersionListView(CatalogAPIView):
    """`GET /api/v1/tenants/<tenant>/backends/<id>/specs`: the backend's versions, newest first, without documents."""

    @extend_schema(operation_id="tenants_backends_specs_list", responses=SpecVersionSummarySerializer(many=True))
    def get(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        versions = selectors.spec_version_list(backend=backend)
        return Response(SpecVersionSummarySerializer(versions, many=True, context=_version_context(request, backend)).data)


class SpecVersionDetailView(CatalogAPIView):
    """`GET /api/v1/tenants/<tenant>/backends/<id>/specs/<number>`: one version with its errors, warnings and changes."""

    @extend_schema(responses=SpecVersionDetailSerializer)
    def get(self, request: Request, tenant: str, backend_id: int, number: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        version = selectors.spec_version_get(backend=backend, number=number)
        if version is None:
            raise Http404(f"backend {backend.name!r} has no spec version {number}")
        return Response(SpecVersionDetailSerializer(version, context=_version_context(request, backend)).data)


def _version_or_404(backend: Backend, number: int) -> SpecVersion:
    version = selectors.spec_version_get(backend=backend, number=number)
    if version is None:
        raise Http404(f"backend {backend.name!r} has no spec version {number}")
    return version


class SpecVersionPublishView(CatalogAPIView):
    """`POST /api/v1/tenants/<tenant>/backends/<id>/specs/<number>/publish`: publish a held version
    anyway (whatever it removes). Answers 202 with the version, compiling again (already `ready`
    when compiled eagerly); 400 when it is not held or a later version has been published since."""

    @extend_schema(request=None, responses={202: SpecVersionDetailSerializer})
    def post(self, request: Request, tenant: str, backend_id: int, number: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        _version_or_404(backend, number)
        try:
            version = spec_version_publish(backend=backend, number=number)
        except ValidationError as exc:
            return _detail("; ".join(exc.messages), status.HTTP_400_BAD_REQUEST)
        return _accepted(request, backend, version)


class SpecVersionRollbackView(CatalogAPIView):
    """`POST /api/v1/tenants/<tenant>/backends/<id>/specs/<number>/rollback`: serve ready version
    `number` again. Its document becomes the backend's next version (`restores: number`), compiled
    with the current options and published whatever it removes; answers 202 with that new version
    and `Location`; 400 when `number` is not ready or is the version served."""

    @extend_schema(request=None, responses={202: SpecVersionDetailSerializer})
    def post(self, request: Request, tenant: str, backend_id: int, number: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        _version_or_404(backend, number)
        try:
            version = spec_version_rollback(backend=backend, number=number, uploaded_by=request.user.get_username())
        except ValidationError as exc:
            return _detail("; ".join(exc.messages), status.HTTP_400_BAD_REQUEST)
        return _accepted(request, backend, version)


class SpecVersionDocumentView(CatalogAPIView):
    """`GET /api/v1/tenants/<tenant>/backends/<id>/specs/<number>/document`: the document exactly as uploaded,
    `application/json` when it starts with `{`, else `application/yaml`."""

    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT, (200, "application/yaml"): OpenApiTypes.STR})
    def get(self, request: Request, tenant: str, backend_id: int, number: int) -> HttpResponse:
        backend = _backend_or_404(self.tenant, backend_id)
        found = selectors.spec_version_document_get(backend=backend, number=number)
        if found is None:
            raise Http404(f"backend {backend.name!r} has no spec version {number}")
        document, filename = found
        is_json = document.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"{"
        response = HttpResponse(document, content_type="application/json" if is_json else "application/yaml")
        if filename:
            # `inline`: a browser shows it; the name only matters when someone saves it.
            response["Content-Disposition"] = f"inline; filename*=UTF-8''{quote(filename, safe='')}"
        return response


class EgressCredentialView(CatalogAPIView):
    """`/api/v1/tenants/<tenant>/backends/<id>/credential`: how the gateway authenticates to a backend.

    `PUT` a JSON object sets or replaces it and answers 200 with its state: where the value goes
    (`kind`, `name`, `username`; `kind` "" or absent = as an OpenAPI spec's security scheme says,
    bearer for an MCP backend) and where it comes from (`source`: `static` with `secret`;
    `tenant_secret` naming one; `per_identity` with `identities: [{subject_kind, subject_name,
    issuer, secret}]` (`issuer` for token subjects only, optional) and an optional default `secret`;
    `oauth_client_credentials` with `token_url`, `client_id`, `secret`, `scope`, `audience`,
    `client_auth`; `token_exchange` with the same and `subject_issuer`, one of the tenant's token
    issuers, whose callers' tokens are exchanged). `GET` answers the state, 404 when
    there is none; `DELETE` removes it (204; 404 when there is none). The state never holds a
    secret. 400 for what the service refuses, with its message."""

    parser_classes = [JSONParser]

    @extend_schema(responses=EgressCredentialStateSerializer)
    def get(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        state = selectors.egress_credential_state(backend=backend)
        if state is None:
            raise Http404(f"backend {backend.name!r} has no credential")
        return Response(EgressCredentialStateSerializer(state).data)

    @extend_schema(request=EgressCredentialInputSerializer, responses=EgressCredentialStateSerializer)
    def put(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        given = EgressCredentialInputSerializer(data=request.data)
        if not given.is_valid():
            problems = [f"{field}: {message}" for field, messages in given.errors.items() for message in messages]
            return _detail("; ".join(problems), status.HTTP_400_BAD_REQUEST)
        try:
            egress_credential_set(backend=backend, **given.validated_data)
        except ValidationError as exc:
            return _detail("; ".join(exc.messages), status.HTTP_400_BAD_REQUEST)
        state = selectors.egress_credential_state(backend=backend)
        return Response(EgressCredentialStateSerializer(state).data)

    @extend_schema(request=None, responses={204: OpenApiResponse(description="Removed.")})
    def delete(self, request: Request, tenant: str, backend_id: int) -> Response:
        backend = _backend_or_404(self.tenant, backend_id)
        if selectors.egress_credential_state(backend=backend) is None:
            raise Http404(f"backend {backend.name!r} has no credential")
        egress_credential_clear(backend=backend)
        return Response(status=status.HTTP_204_NO_CONTENT)
