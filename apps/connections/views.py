"""The gateway's client metadata documents: what an authorization server that identifies clients by
such a document (draft-ietf-oauth-client-id-metadata-document) fetches to know the gateway as the
client of a per-person backend. Public by design: it holds no secret."""

from __future__ import annotations

from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from apps.connections.services import client_document


@require_GET
def client_document_view(request: HttpRequest, tenant: str, backend_id: int) -> JsonResponse:
    document = client_document(tenant_slug=tenant, backend_id=backend_id)
    if document is None:
        raise Http404("no client metadata document here")
    return JsonResponse(document, headers={"Cache-Control": "public, max-age=300"})
